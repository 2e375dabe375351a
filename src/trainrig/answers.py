"""The answers `--json` prints and the web API returns, built in one place so the two never differ.

Each function takes what a verb was asked (already parsed: mappings, names, numbers) and returns plain
JSON data. The CLI prints it, `trainrig serve` sends it. Timing (`search_time_s`) is measured here,
at the edge, because the planner itself never reads the clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from typing import Any

from trainrig.catalog import load_catalog
from trainrig.catalog.job_file import apply_change, load_job
from trainrig.estimate import Estimate
from trainrig.estimate import estimate as run_estimate
from trainrig.specs import Offer

__all__ = ["gpus_answer", "models_answer", "catalog_answer", "catalog_sections_answer",
           "preset_json", "estimate_with_variants", "estimate_json", "timed",
           "cheapest_offer_price", "cheapest_offer", "rents"]


def gpus_answer(extra_dirs: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """`trainrig gpus --json`: every catalog GPU with its figures."""
    return [gpu.model_dump(mode="json") for gpu in load_catalog(tuple(extra_dirs)).gpus]


def models_answer(extra_dirs: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """`trainrig models --json`: every model preset with its parameter counts."""
    return [preset_json(preset) for preset in load_catalog(tuple(extra_dirs)).models]


def catalog_answer(section: str, extra_dirs: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """`trainrig catalog SECTION --json`: every entry of one catalog section (`host_memory`, …)."""
    entries = getattr(load_catalog(tuple(extra_dirs)), section)
    if section == "models":
        return [preset_json(preset) for preset in entries]
    return [entry.model_dump(mode="json") for entry in entries]


def catalog_sections_answer(extra_dirs: tuple[str, ...] = ()) -> dict[str, int]:
    """`trainrig catalog --json`: how many entries each section holds."""
    catalog = load_catalog(tuple(extra_dirs))
    return {f.name: len(list(getattr(catalog, f.name))) for f in fields(catalog)}


def preset_json(preset) -> dict[str, Any]:
    data = preset.model_dump(mode="json")
    data["n_params"] = preset.spec.n_params
    data["n_active_params"] = preset.spec.n_active_params
    return data


def estimate_with_variants(mapping: Mapping[str, Any], what_if: Sequence[str] = (),
                           price_usd_per_gpu_hour: float | None = None,
                           extra_dirs: tuple[str, ...] = ()) -> tuple[Estimate, list[tuple[str, Estimate]]]:
    """The estimate of a job mapping, and one per `key=value` change applied to it.

    Without a price, each job is priced at the cheapest catalog offer for its GPU (said in its
    notes); where no offer has a price, the cost stays null."""
    extra = tuple(extra_dirs)

    def priced(job_mapping: Mapping[str, Any]) -> Estimate:
        job = load_job(job_mapping, extra)
        if price_usd_per_gpu_hour is not None:
            return run_estimate(job, price_usd_per_gpu_hour=price_usd_per_gpu_hour)
        price, note = cheapest_offer_price(job.hardware.gpu.id, extra, job.hardware.n_gpus)
        est = run_estimate(job, price_usd_per_gpu_hour=price)
        return est.model_copy(update={"notes": [*est.notes, note]}) if note else est

    base = priced(mapping)
    variants = [(change, priced(apply_change(mapping, change))) for change in what_if]
    return base, variants


def rents(offer: Offer, n_gpus: int) -> bool:
    """Whether `offer` can host a job of `n_gpus`: within one instance (from its smallest size up
    to a full node), or on whole nodes where its nodes cluster over a network. The planner's
    node kinds offer exactly these GPU counts (plan/hardware.py `HardwareOption.gpu_counts`)."""
    if n_gpus <= offer.gpus_per_node:
        return n_gpus >= offer.smallest_gpus
    return offer.clusters and n_gpus % offer.gpus_per_node == 0


def cheapest_offer(gpu_id: str, extra_dirs: tuple[str, ...] = (), n_gpus: int | None = None) -> Offer | None:
    """The priced catalog offer of a GPU type with the lowest on-demand $/GPU-hour — among those
    that can host `n_gpus` when given (None where none can)."""
    offers = [o for o in load_catalog(tuple(extra_dirs)).offers if o.gpu == gpu_id and o.usd_per_gpu_hour
              and (n_gpus is None or rents(o, n_gpus))]
    return min(offers, key=lambda o: o.usd_per_gpu_hour) if offers else None


def cheapest_offer_price(gpu_id: str, extra_dirs: tuple[str, ...] = (),
                         n_gpus: int | None = None) -> tuple[float | None, str | None]:
    """The $/GPU-hour of `cheapest_offer` and a note that names the offer and why it was chosen."""
    best = cheapest_offer(gpu_id, extra_dirs, n_gpus)
    cheapest_any = cheapest_offer(gpu_id, extra_dirs)
    size = f"{n_gpus} × {gpu_id}" if n_gpus else gpu_id
    if best is None:
        if cheapest_any is None:
            return None, None
        return None, (f"no catalog offer of {gpu_id} rents {n_gpus} GPUs ({_why_not(cheapest_any, n_gpus)}), so the"
                      " cost is unknown; --price to set one")
    note = (f"cost at ${best.usd_per_gpu_hour:g}/GPU-h: {best.provider} {best.instance}, the cheapest catalog offer"
            f" for {size} (price read {best.price_date})")
    if cheapest_any is not best and n_gpus:
        note += (f"; the cheaper {cheapest_any.provider} {cheapest_any.instance} at ${cheapest_any.usd_per_gpu_hour:g}"
                 f" cannot host it: {_why_not(cheapest_any, n_gpus)}")
    return best.usd_per_gpu_hour, note + "; --price to change"


def _why_not(offer: Offer, n_gpus: int | None) -> str:
    if n_gpus is not None and n_gpus > offer.gpus_per_node:
        if not offer.clusters:
            return "its nodes do not cluster (no network between them), and the job spans nodes"
        return f"its nodes hold {offer.gpus_per_node} GPUs, which {n_gpus} is not a multiple of"
    return f"its smallest instance holds {offer.smallest_gpus} GPUs"


def estimate_json(base: Estimate, variants: Sequence[tuple[str, Estimate]]) -> dict[str, Any]:
    """`trainrig estimate --json`: the estimate, plus `what_if` when variants were asked for."""
    data = base.to_dict()
    if variants:
        data["what_if"] = [{"change": change, "estimate": variant.to_dict()} for change, variant in variants]
    return data


def timed(search: Callable[..., Any], **arguments: Any) -> Any:
    """`plan(...)` or `compare(...)` with `search_time_s` filled in from the wall clock."""
    started_s = time.perf_counter()
    result = search(**arguments)
    return result.model_copy(update={"search_time_s": time.perf_counter() - started_s})
