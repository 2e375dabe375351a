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
           "cheapest_offer_price", "cheapest_offer"]


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
        price, note = cheapest_offer_price(job.hardware.gpu.id, extra)
        est = run_estimate(job, price_usd_per_gpu_hour=price)
        return est.model_copy(update={"notes": [*est.notes, note]}) if note else est

    base = priced(mapping)
    variants = [(change, priced(apply_change(mapping, change))) for change in what_if]
    return base, variants


def cheapest_offer(gpu_id: str, extra_dirs: tuple[str, ...] = ()) -> Offer | None:
    """The catalog offer of a GPU type with the lowest on-demand $/GPU-hour (None where none has a price)."""
    offers = [o for o in load_catalog(tuple(extra_dirs)).offers if o.gpu == gpu_id and o.usd_per_gpu_hour]
    return min(offers, key=lambda o: o.usd_per_gpu_hour) if offers else None


def cheapest_offer_price(gpu_id: str, extra_dirs: tuple[str, ...] = ()) -> tuple[float | None, str | None]:
    """The lowest on-demand $/GPU-hour among the catalog's offers of a GPU type, and a note citing it."""
    best = cheapest_offer(gpu_id, extra_dirs)
    if best is None:
        return None, None
    return best.usd_per_gpu_hour, (f"cost at ${best.usd_per_gpu_hour:g}/GPU-h, the cheapest catalog offer for "
                                   f"{gpu_id} ({best.provider} {best.instance}, price read {best.price_date});"
                                   " --price to change")


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
