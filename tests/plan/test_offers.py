"""The packaged cloud offers: they resolve against the catalog, carry their source and date, and the
user can add their own."""

from __future__ import annotations

import datetime as dt
import textwrap

import pytest

from trainrig.catalog import load_catalog
from trainrig.errors import TrainrigError
from trainrig.plan import plan

from .conftest import SMALL_MODEL, offer

REQUIRED_GPUS = {"H100-SXM5-80GB", "A100-SXM4-40GB", "A100-SXM4-80GB", "H200-SXM5-141GB", "L40S", "L4", "A10",
                 "A100-PCIE-80GB", "MI300X", "RTX-4090"}


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def test_offers_cover_the_gpus_people_rent(catalog):
    gpus = {catalog.gpus.get(o.gpu).entry.id for o in catalog.offers}
    assert gpus >= REQUIRED_GPUS


def test_every_offer_resolves_and_states_source_and_date(catalog):
    for o in catalog.offers:
        catalog.gpus.get(o.gpu)
        for link in (o.interconnect, o.network):
            if link is not None:
                catalog.links.get(link)
        assert o.sources and all(len(s) > 20 for s in o.sources)
        assert dt.date(2024, 1, 1) <= o.price_date <= dt.date(2030, 1, 1)
        assert o.usd_per_gpu_hour is None or 0.05 < o.usd_per_gpu_hour < 50
        assert o.smallest_gpus <= o.gpus_per_node


def test_at_least_one_offer_has_no_price(catalog):
    assert any(o.usd_per_gpu_hour is None for o in catalog.offers)


def test_offers_without_a_stated_network_stay_on_one_node(catalog):
    for o in catalog.offers:
        assert o.clusters == (o.network is not None)


def test_min_gpus_above_the_node_is_rejected():
    with pytest.raises(TrainrigError) as error:
        offer(min_gpus=16)
    assert error.value.field == "offers.min_gpus"


def test_an_offer_on_an_unknown_gpu_names_the_offer():
    with pytest.raises(TrainrigError) as error:
        plan(SMALL_MODEL, 1e9, offers=[offer(id="mine", gpu="H1000")], gpu_types=["h100"], max_gpus=8)
    assert error.value.field == "offers.mine.gpu"


def test_a_user_catalog_directory_adds_offers(tmp_path):
    (tmp_path / "my_offers.yaml").write_text(textwrap.dedent("""
        offers:
        - id: my-h100-quote
          name: A negotiated H100 quote
          provider: mycloud
          instance: 8x H100
          gpu: H100-SXM5-80GB
          gpus_per_node: 8
          interconnect: nvlink4
          network: ib-ndr
          usd_per_gpu_hour: 0.5
          price_date: 2026-11-01
          sources: ["quote from our account manager, 2026-11-01"]
    """))
    result = plan(SMALL_MODEL, 1e10, seq_len=2048, global_batch=256, gpu_types=["h100"], max_gpus=64,
                  catalog_dirs=(str(tmp_path),), priced_only=True, top_k=1)
    assert result.plans[0].offer.id == "my-h100-quote"
    assert result.plans[0].estimate.price_usd_per_gpu_hour == 0.5
