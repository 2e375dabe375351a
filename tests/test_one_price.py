"""One price rule (issue 15): an estimate is priced at the cheapest catalog offer that can host its
GPU count, the same offers the planner's node kinds provide for that count, and says which and why."""

from __future__ import annotations

from trainrig.answers import cheapest_offer, estimate_with_variants, rents
from trainrig.catalog import load_catalog
from trainrig.plan.hardware import hardware_options

H100 = "H100-SXM5-80GB"


def _job(n_gpus: int) -> dict:
    return {"model": "llama3-8b", "hardware": {"gpu": H100, "n_gpus": n_gpus},
            "training": {"zero": 3, "global_batch": 256, "tokens": 1e11}}


def test_a_multi_node_job_is_priced_by_an_offer_whose_nodes_cluster_and_says_why_not_the_cheapest():
    est, _ = estimate_with_variants(_job(64))
    offer = cheapest_offer(H100, n_gpus=64)
    assert offer.clusters and est.price_usd_per_gpu_hour == offer.usd_per_gpu_hour
    cheapest = cheapest_offer(H100)
    assert cheapest.usd_per_gpu_hour < offer.usd_per_gpu_hour and not cheapest.clusters  # the case the rule is for
    note = next(n for n in est.notes if n.startswith("cost at"))
    assert offer.provider in note and cheapest.provider in note and "do not cluster" in note


def test_a_single_node_job_takes_the_cheapest_offer_that_rents_that_many_gpus():
    est, _ = estimate_with_variants(_job(8))
    assert est.price_usd_per_gpu_hour == min(o.usd_per_gpu_hour for o in load_catalog().offers
                                             if o.gpu == H100 and o.usd_per_gpu_hour and rents(o, 8))


def test_the_estimate_and_the_planner_rent_from_the_same_offers_for_each_gpu_count():
    catalog = load_catalog()
    options, _ = hardware_options(catalog, [catalog.gpus.get(H100).entry], catalog.offers, "bf16")
    options = [o for o in options if o.offer is not None]
    for n_gpus in (1, 2, 4, 8, 16, 64, 512):
        planner_offers = {o.offer.id for o in options if n_gpus in o.gpu_counts(4096, None)}
        rented = {o.id for o in catalog.offers if o.gpu == H100 and rents(o, n_gpus)}
        assert planner_offers <= rented, n_gpus  # every planner row's offer passes the estimate's rule


def test_no_offer_that_can_host_the_job_leaves_the_cost_unknown_and_says_so():
    job = {"model": "llama3-8b", "hardware": {"gpu": "RTX-4090", "n_gpus": 16},
           "training": {"zero": 3, "global_batch": 256, "tokens": 1e11}}
    assert cheapest_offer("RTX-4090") is not None and cheapest_offer("RTX-4090", n_gpus=16) is None  # no network
    est, _ = estimate_with_variants(job)
    assert est.cost_usd is None
    assert any("rents 16 GPUs" in n and "do not cluster" in n for n in est.notes)


def test_price_overrides_every_offer():
    est, _ = estimate_with_variants(_job(64), price_usd_per_gpu_hour=1.5)
    assert est.price_usd_per_gpu_hour == 1.5 and not any(n.startswith("cost at") for n in est.notes)
