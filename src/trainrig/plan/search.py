"""Every configuration through the performance model at once: arrays in, arrays out.

For each node kind and GPU count, one representative job (built by `load_job`, so its hardware is
exactly what a job file gives) is flattened once into scalar `Inputs`; the layouts of that group
replace the layout fields as arrays. Groups are stacked field by field (a field equal in every group
stays a scalar). Memory is computed for every configuration; those that fit then go through the full
model (`estimate.core.evaluate`) in chunks. No Python loop runs per configuration.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from trainrig.catalog.job_file import load_job
from trainrig.estimate.core import evaluate
from trainrig.estimate.inputs import Inputs, inputs_from_job
from trainrig.estimate.memory import memory_fit
from trainrig.estimate.params import ModelParameters
from trainrig.plan.hardware import HardwareOption
from trainrig.plan.request import PlanRequest
from trainrig.plan.space import Layouts, enumerate_layouts
from trainrig.specs import Job

__all__ = ["Candidates", "SearchResult", "SearchProgress", "search", "count_configurations", "job_mapping",
           "CHUNK_ROWS"]

CHUNK_ROWS = 32768
"""Configurations per call of the model core: large enough that the per-call cost of a few thousand
NumPy calls is spread thin, small enough that each temporary (256 KiB) stays in cache-sized memory."""
CLOSEST_KEPT = 64
"""Configurations that do not fit kept for "what comes closest" when nothing fits."""

SearchProgress = Callable[[int, int], None]
"""Told `(configurations evaluated so far, configurations in the whole search)` once before the first node
kind and after each one; the caller decides what to do with it (the web server writes it to its page)."""


@dataclass(frozen=True)
class Candidates:
    """Configurations as parallel arrays: which node kind (index into the options), how many GPUs,
    the layout, and what the model predicts. Cost is NaN where no price is known."""

    option: np.ndarray
    n_gpus: np.ndarray
    layouts: Layouts
    memory_bytes: np.ndarray
    capacity_bytes: np.ndarray
    step_time_s: np.ndarray
    tokens_per_s: np.ndarray
    mfu: np.ndarray
    total_time_s: np.ndarray
    gpu_hours: np.ndarray
    price_usd_per_gpu_hour: np.ndarray
    cost_usd: np.ndarray

    def __len__(self) -> int:
        return len(self.option)

    def take(self, index) -> Candidates:
        values = {f.name: getattr(self, f.name)[index] for f in fields(self) if f.name != "layouts"}
        return Candidates(layouts=self.layouts.take(index), **values)


@dataclass(frozen=True)
class SearchResult:
    """The configurations that fit, the closest ones that do not, and how many were looked at."""

    fitting: Candidates
    closest_overflow: Candidates
    n_enumerated: int
    n_not_finite: int = 0
    """Configurations that fit but for which the model gave no finite step time (left out)."""


def job_mapping(request: PlanRequest, option: HardwareOption, n_gpus: int,
                layout: dict[str, Any] | None = None) -> dict[str, Any]:
    """The job file for `n_gpus` of `option` with `layout` (a trivially valid one when None)."""
    training = {**request.training, "seq_len": request.seq_len, "precision": request.precision,
                "method": request.method, "tokens": request.tokens}
    training.update(layout or {"global_batch": n_gpus, "micro_batch": 1})
    _drop_inapplicable(training)
    model = request.model.model_dump(mode="json", exclude_defaults=True)
    model.setdefault("name", request.model.name)
    return {"model": model, "hardware": option.hardware_mapping(n_gpus), "training": training}


def _drop_inapplicable(training: dict[str, Any]) -> None:
    """Turn off the job's settings that Megatron-Core refuses on this layout, as the model core does
    for the search's rows (traffic.expert_parallel_s, host_issue._layer_graphs): micro-batch pairing
    without experts spread over ranks, under full recompute, or with pp > 1 and no interleaving;
    per-layer CUDA graphs under full recompute."""
    full = training.get("recompute") == "full"
    unpaired = training.get("ep", 1) == 1 or full or (training.get("pp", 1) > 1 and training.get("vpp", 1) == 1)
    if training.get("moe_a2a_overlap") and unpaired:
        training["moe_a2a_overlap"] = False
    if training.get("cuda_graph_scope") and full and training["cuda_graph_scope"] != ["full_iteration"]:
        training["cuda_graph_scope"] = None


def count_configurations(request: PlanRequest, options: list[HardwareOption]) -> int:
    """How many configurations `search` will evaluate: the layouts of every option and GPU count.
    Cheap: the layouts are cached (space.py), so the search that follows reuses what this enumerates."""
    return sum(len(enumerate_layouts(request.model, n_gpus, option.gpus_per_node, request.seq_len,
                                     request.global_batches, request.space))
               for option in options for n_gpus in option.gpu_counts(request.max_gpus, request.max_nodes))


def search(request: PlanRequest, options: list[HardwareOption], params: ModelParameters,
           catalog_dirs: tuple[str, ...] = (), progress: SearchProgress | None = None) -> SearchResult:
    """Enumerate, check memory, and evaluate what fits, over every option and GPU count.

    What fits is evaluated as soon as CHUNK_ROWS of it are pending, so memory holds one option's
    configurations and one chunk's inputs at a time, not every configuration's. `progress`, when given,
    hears the count evaluated after each option; what it counts lags the model's work by at most one chunk."""
    pending, evaluated, overflow, n_enumerated = [], [], [], 0
    total = count_configurations(request, options) if progress is not None else 0
    if progress is not None:
        progress(0, total)
    for index, option in enumerate(options):
        groups = _groups(request, option, params, catalog_dirs)
        if not groups:
            continue
        x, n_rows, layouts, n_gpus = _stack_groups(groups)
        n_enumerated += n_rows
        memory, capacity, fits = (_rows(v, n_rows) for v in memory_fit(x, params))
        rows = np.flatnonzero(fits)  # indices once, rather than a boolean mask scanned per array
        pending.append((_take_inputs(x, n_rows, rows), index, n_gpus[rows], layouts.take(rows), memory[rows],
                        capacity[rows]))
        overflow.append(_lowest_overflow(index, n_gpus, layouts, memory, capacity, fits))
        if sum(len(part[2]) for part in pending) >= CHUNK_ROWS:
            evaluated.append(_evaluate_fitting(pending, request, options, params))
            pending = []
        if progress is not None:
            progress(n_enumerated, total)
    evaluated.append(_evaluate_fitting(pending, request, options, params))
    evaluated = _concat_candidates(evaluated)
    finite = np.isfinite(evaluated.step_time_s) & np.isfinite(evaluated.tokens_per_s)
    kept = evaluated if np.all(finite) else evaluated.take(finite)
    return SearchResult(kept, _merge_overflow(overflow), n_enumerated, int(np.sum(~finite)))


# ---- building the inputs ------------------------------------------------------------------------


def _groups(request: PlanRequest, option: HardwareOption, params: ModelParameters,
            catalog_dirs: tuple[str, ...]) -> list[tuple[int, Inputs, Layouts]]:
    groups = []
    for n_gpus in option.gpu_counts(request.max_gpus, request.max_nodes):
        layouts = enumerate_layouts(request.model, n_gpus, option.gpus_per_node, request.seq_len,
                                    request.global_batches, request.space)
        if len(layouts):
            job = _representative_job(request, option, n_gpus, catalog_dirs)
            x = inputs_from_job(job, params)
            # the representative layout (ep 1) cannot pair micro-batches; the rows that can keep the job's flag
            x = x.with_values(moe_a2a_overlap=float(bool(request.training.get("moe_a2a_overlap"))))
            groups.append((n_gpus, x, layouts))
    return groups


def _representative_job(request: PlanRequest, option: HardwareOption, n_gpus: int,
                        catalog_dirs: tuple[str, ...]) -> Job:
    return load_job(job_mapping(request, option, n_gpus), catalog_dirs)


def _stack_groups(groups: list[tuple[int, Inputs, Layouts]]) -> tuple[Inputs, int, Layouts, np.ndarray]:
    """One Inputs over every layout of every group; fields equal across groups stay scalars."""
    counts = [len(layouts) for _, _, layouts in groups]
    values = {}
    for f in fields(Inputs):
        per_group = [getattr(x, f.name) for _, x, _ in groups]
        values[f.name] = per_group[0] if _all_equal(per_group) else np.repeat(np.array(per_group, dtype=float), counts)
    layouts = Layouts.concatenate([layouts for _, _, layouts in groups])
    n_gpus = np.repeat(np.array([n for n, _, _ in groups], dtype=np.int64), counts)
    return Inputs(**values).with_values(**layouts.as_floats()), sum(counts), layouts, n_gpus


def _all_equal(values: list[float]) -> bool:
    """Every value equal to the first (NaN equal to NaN); plain Python: the lists are short."""
    first = values[0]
    return all(v == first or (v != v and first != first) for v in values)


def _take_inputs(x: Inputs, n_rows: int, index) -> Inputs:
    """The rows `index` of an Inputs whose array fields have `n_rows` rows (scalars stay)."""
    return Inputs(**{f.name: _take(getattr(x, f.name), n_rows, index) for f in fields(Inputs)})


def _take(value: Any, n_rows: int, index) -> Any:
    return value[index] if np.ndim(value) and len(value) == n_rows else value


def _concat_inputs(parts: list[tuple[Inputs, int]]) -> Inputs:
    """Inputs of several blocks one after another; a field scalar and equal in all blocks stays scalar."""
    values = {}
    for f in fields(Inputs):
        column = [getattr(x, f.name) for x, _ in parts]
        if all(np.ndim(v) == 0 for v in column) and _all_equal(column):
            values[f.name] = column[0]
        else:
            values[f.name] = np.concatenate([np.broadcast_to(np.asarray(v, dtype=float), (n,)) for v, (_, n)
                                             in zip(column, parts, strict=True)])
    return Inputs(**values)


def _slice_inputs(x: Inputs, n_rows: int, start: int, stop: int) -> Inputs:
    return _take_inputs(x, n_rows, slice(start, stop))


# ---- memory, then the full model -----------------------------------------------------------------


def _rows(value, n_rows: int) -> np.ndarray:
    """A per-configuration array from a value that may be a scalar or broadcast."""
    return np.broadcast_to(np.asarray(value), (n_rows,)).copy()


def _evaluate_fitting(parts: list, request: PlanRequest, options: list[HardwareOption],
                      params: ModelParameters) -> Candidates:
    parts = [p for p in parts if len(p[2])]
    if not parts:
        return _empty_candidates()
    x = _concat_inputs([(p[0], len(p[2])) for p in parts])
    n_rows = sum(len(p[2]) for p in parts)
    step, tokens_per_s, mfu = _evaluate_chunks(x, n_rows, params)
    option = np.concatenate([np.full(len(p[2]), p[1], dtype=np.int64) for p in parts])
    n_gpus = np.concatenate([p[2] for p in parts])
    price = np.array([_nan_if_none(o.price_usd_per_gpu_hour) for o in options], dtype=float)[option]
    total_s = request.tokens / tokens_per_s
    gpu_hours = total_s * n_gpus / 3600.0
    return Candidates(
        option=option, n_gpus=n_gpus, layouts=Layouts.concatenate([p[3] for p in parts]),
        memory_bytes=np.concatenate([p[4] for p in parts]), capacity_bytes=np.concatenate([p[5] for p in parts]),
        step_time_s=step, tokens_per_s=tokens_per_s, mfu=mfu, total_time_s=total_s, gpu_hours=gpu_hours,
        price_usd_per_gpu_hour=price, cost_usd=gpu_hours * price)


def _evaluate_chunks(x: Inputs, n_rows: int, params: ModelParameters) -> tuple[np.ndarray, ...]:
    outputs = []
    for start in range(0, n_rows, CHUNK_ROWS):
        stop = min(start + CHUNK_ROWS, n_rows)
        out = evaluate(_slice_inputs(x, n_rows, start, stop), params, with_memory=False)  # memory: done
        outputs.append([np.broadcast_to(np.asarray(v, dtype=float), (stop - start,))
                        for v in (out.step_time_s, out.tokens_per_s, out.mfu)])
    return tuple(np.concatenate(column) for column in zip(*outputs, strict=True))


def _nan_if_none(value: float | None) -> float:
    return float("nan") if value is None else value


# ---- the closest of what does not fit ------------------------------------------------------------


def _lowest_overflow(index: int, n_gpus: np.ndarray, layouts: Layouts, memory: np.ndarray,
                     capacity: np.ndarray, fits: np.ndarray) -> Candidates:
    keep = _closest(np.flatnonzero(~fits), memory, capacity)
    nan = np.full(len(keep), np.nan)
    return Candidates(option=np.full(len(keep), index, dtype=np.int64), n_gpus=n_gpus[keep],
                      layouts=layouts.take(keep), memory_bytes=memory[keep], capacity_bytes=capacity[keep],
                      step_time_s=nan, tokens_per_s=nan, mfu=nan, total_time_s=nan, gpu_hours=nan,
                      price_usd_per_gpu_hour=nan, cost_usd=nan)


def _closest(over: np.ndarray, memory: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """The CLOSEST_KEPT rows of `over` with the lowest memory/capacity, in that order (ties by row):
    a partition first, so only those few are sorted."""
    ratio = memory[over] / capacity[over]
    if len(over) > CLOSEST_KEPT:
        threshold = np.partition(ratio, CLOSEST_KEPT - 1)[CLOSEST_KEPT - 1]
        if not np.isnan(threshold):  # NaN sorts last: with fewer finite ratios, keep them all
            over, ratio = over[ratio <= threshold], ratio[ratio <= threshold]
    return over[np.argsort(ratio, kind="stable")[:CLOSEST_KEPT]]


def _merge_overflow(parts: list[Candidates]) -> Candidates:
    if not parts:
        return _empty_candidates()
    merged = _concat_candidates(parts)
    order = np.argsort(merged.memory_bytes / merged.capacity_bytes, kind="stable")[:CLOSEST_KEPT]
    return merged.take(order)


def _concat_candidates(parts: list[Candidates]) -> Candidates:
    values = {f.name: np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(Candidates)
              if f.name != "layouts"}
    return Candidates(layouts=Layouts.concatenate([p.layouts for p in parts]), **values)


def _empty_candidates() -> Candidates:
    empty_int, empty = np.zeros(0, dtype=np.int64), np.zeros(0)
    layouts = Layouts(**{f.name: empty_int for f in fields(Layouts)})
    return Candidates(option=empty_int, n_gpus=empty_int, layouts=layouts, memory_bytes=empty,
                      capacity_bytes=empty, step_time_s=empty, tokens_per_s=empty, mfu=empty,
                      total_time_s=empty, gpu_hours=empty, price_usd_per_gpu_hour=empty, cost_usd=empty)
