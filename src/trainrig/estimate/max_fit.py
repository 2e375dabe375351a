"""The limits of a job that fits: the largest micro-batch, the longest sequence, the fewest GPUs.

Pure and vectorized: the candidate values of a setting are the rows of one `Inputs`, which goes
through the one fit rule (`memory.memory_fit`) in one call; no Python loop runs over estimates.
The sweeps take a Job and vary its training fields (`sweep_inputs` keeps that exact however the
job is flattened into Inputs); the GPU-count search takes Inputs rows already built from jobs,
since other GPU types and counts need the catalog (`trainrig.fit_answers` builds them).

The global batch is treated as adjustable: a candidate whose micro_batch·dp does not divide the job's
global batch gets the nearest multiple of it, with at least one micro-batch per step, so every
candidate stays a job the loader would accept.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from trainrig.errors import TrainrigError
from trainrig.estimate.core import evaluate
from trainrig.estimate.inputs import Inputs, inputs_from_job, stack_inputs
from trainrig.estimate.memory import memory_fit
from trainrig.estimate.params import ModelParameters
from trainrig.specs import Job

__all__ = ["MICRO_BATCH_LIMIT", "SEQ_LEN_LIMIT", "SEQ_LEN_GRID_STEP", "Sweep", "GroupFit", "Priced",
           "adjusted_global_batch", "largest_micro_batch", "longest_seq_len", "seq_len_grid", "sweep_inputs",
           "gpu_counts", "first_fitting", "price_rows", "cheapest_order"]

MICRO_BATCH_LIMIT = 4096
"""Largest micro-batch tried: beyond it per-GPU batches are not a practical question."""
SEQ_LEN_LIMIT = 2**20
"""Longest sequence tried (1M tokens), unless the job's own is longer."""
SEQ_LEN_GRID_STEP = 256
"""The coarse grid of sequence lengths; the answer is then refined to every length in between."""
FALLBACK_WINDOW = 8
"""Candidates in the first window of the one-job-per-candidate path (`sweep_inputs`)."""


@dataclass(frozen=True)
class Sweep:
    """One setting swept over candidate values, everything else as in the job."""

    values: np.ndarray
    """The candidate values, ascending."""
    memory_bytes: np.ndarray
    """Peak memory per GPU at each value."""
    capacity_bytes: np.ndarray
    """What the fit rule compares memory with, at each value."""
    fits: np.ndarray
    global_batch: np.ndarray
    """The global batch each value needs (the job's where micro_batch·dp divides it)."""
    best: int | None
    """Index of the largest value that fits; None when none does."""
    n_evaluated: int = 0
    """Rows that went through the fit rule (a refined sweep counts both of its passes)."""

    @property
    def best_value(self) -> int | None:
        return None if self.best is None else int(self.values[self.best])

    @property
    def at_limit(self) -> bool:
        """The largest candidate fits, so a larger value might too."""
        return self.best is not None and self.best == len(self.values) - 1


@dataclass(frozen=True)
class GroupFit:
    """Per group (e.g. a GPU type), the first of its rows that fits."""

    first_row: np.ndarray
    """Row index of the group's first fitting row, or -1 where none of its rows fits."""
    memory_bytes: np.ndarray
    """Per row: peak memory per GPU."""
    capacity_bytes: np.ndarray
    fits: np.ndarray


@dataclass(frozen=True)
class Priced:
    """Per row: throughput, time and cost of the whole job; NaN where no price or no tokens are known."""

    tokens_per_s: np.ndarray
    memory_bytes: np.ndarray
    capacity_bytes: np.ndarray
    fits: np.ndarray
    usd_per_hour: np.ndarray
    total_time_s: np.ndarray
    cost_usd: np.ndarray


def adjusted_global_batch(global_batch, micro_batch, dp) -> np.ndarray:
    """The multiple of micro_batch·dp nearest `global_batch`, never below one micro-batch per replica.

    Equal to `global_batch` wherever micro_batch·dp divides it."""
    per_step = np.asarray(micro_batch, dtype=float) * np.asarray(dp, dtype=float)
    accumulation = np.maximum(1.0, np.round(np.asarray(global_batch, dtype=float) / per_step))
    return per_step * accumulation


def largest_micro_batch(job: Job, params: ModelParameters, limit: int = MICRO_BATCH_LIMIT) -> Sweep:
    """Micro-batches 1..limit as one array through the fit rule; the largest that fits."""
    t = job.training
    values = np.arange(1, int(limit) + 1, dtype=float)
    global_batch = adjusted_global_batch(t.global_batch, values, t.dp_degree)
    x, keep = sweep_inputs(job, params, {"micro_batch": values, "global_batch": global_batch})
    return _sweep(x, values[keep], global_batch[keep], params)


def seq_len_grid(limit: int, step: int = 1) -> np.ndarray:
    """Powers of two below the grid step, then every multiple of SEQ_LEN_GRID_STEP up to `limit`,
    keeping only lengths that are multiples of `step` (context parallelism splits the sequence)."""
    small = [2**k for k in range(SEQ_LEN_GRID_STEP.bit_length()) if 2**k < SEQ_LEN_GRID_STEP]
    grid = np.unique(np.concatenate([np.array(small, dtype=float),
                                     np.arange(SEQ_LEN_GRID_STEP, int(limit) + 1, SEQ_LEN_GRID_STEP, dtype=float),
                                     [float(limit)]]))
    return grid[(grid % step == 0) & (grid <= limit)]


def longest_seq_len(job: Job, params: ModelParameters, limit: int = SEQ_LEN_LIMIT) -> Sweep:
    """The longest seq_len (a multiple of cp, at most `limit`) that fits at the job's micro-batch.

    Two calls of the fit rule: a coarse grid, then every valid length between the longest grid point
    that fits and the next one (memory grows with the sequence, so the answer lies in that gap)."""
    step = job.training.cp
    coarse = _seq_len_sweep(job, params, seq_len_grid(limit, step))
    if coarse.best is None or coarse.at_limit:
        return coarse
    low, high = coarse.values[coarse.best], coarse.values[coarse.best + 1]
    fine = _seq_len_sweep(job, params, np.arange(low, high + 1, step, dtype=float))  # grid points are multiples
    if fine.best is None:  # the fine sweep disagrees with the coarse one at `low`: keep the coarse answer
        return coarse
    keep = coarse.values < low
    return Sweep(values=np.concatenate([coarse.values[keep], fine.values]),
                 memory_bytes=np.concatenate([coarse.memory_bytes[keep], fine.memory_bytes]),
                 capacity_bytes=np.concatenate([coarse.capacity_bytes[keep], fine.capacity_bytes]),
                 fits=np.concatenate([coarse.fits[keep], fine.fits]),
                 global_batch=np.concatenate([coarse.global_batch[keep], fine.global_batch]),
                 best=int(np.count_nonzero(keep)) + fine.best, n_evaluated=coarse.n_evaluated + fine.n_evaluated)


def sweep_inputs(job: Job, params: ModelParameters, changes: dict[str, np.ndarray]) -> tuple[Inputs, np.ndarray]:
    """One Inputs whose row i is `job` with each training field `k` set to `changes[k][i]`, and the
    indices of the candidates that make valid jobs (the rows, in order).

    Fast path: the job is built at a few probe candidates (the first, the middle, the last); an
    Inputs field equal at every probe stays the job's scalar, one equal to a changed field at every
    probe takes that field's array, and `Inputs.with_values` does the rest. Any other dependence
    (a field derived non-trivially from the changed ones, such as the padded length of unpacked
    samples) or a probe that makes an invalid job falls back to one real row per candidate, built
    in growing windows until a window fits nowhere: slower, but exact whatever the job-to-Inputs
    flattening derives."""
    n_candidates = len(next(iter(changes.values())))
    base = inputs_from_job(job, params)
    if not n_candidates:
        return base, np.zeros(0, dtype=np.int64)
    probes = sorted({0, n_candidates // 2, n_candidates - 1})
    try:
        probed = [(inputs_from_job(_job_with(job, {k: v[i] for k, v in changes.items()}), params), i)
                  for i in probes]
    except TrainrigError:
        return _one_row_per_candidate(job, params, changes)
    own = {k: float(getattr(job.training, k)) for k in changes}
    arrays = {}
    for f in fields(Inputs):
        seen = np.array([float(getattr(base, f.name))] + [float(getattr(x, f.name)) for x, _ in probed])
        if _same(seen, np.full(len(seen), seen[0])):
            continue
        # prefer the changed field of the same name, should two of them agree at every probe
        tracked = [k for k in sorted(changes, key=lambda k: k != f.name)
                   if _same(seen, np.array([own[k]] + [float(changes[k][i]) for _, i in probed]))]
        if not tracked:
            return _one_row_per_candidate(job, params, changes)
        arrays[f.name] = np.asarray(changes[tracked[0]], dtype=float)
    return base.with_values(**arrays), np.arange(n_candidates)


def gpu_counts(model_parallel: int, cp: int, ep: int, gpus_per_node: int, max_gpus: int, tp: int = 1,
               expert_tp: int | None = None) -> np.ndarray:
    """GPU counts a job of this layout can run on, growing only dp: model_parallel·dp GPUs that fill
    part of one node or whole nodes, with ep dividing dp·cp (ep·expert_tp dividing tp·dp·cp when the
    experts' tensor parallelism is set apart), up to `max_gpus`."""
    dp = np.arange(1, max(int(max_gpus) // int(model_parallel), 0) + 1)
    n_gpus = dp * model_parallel
    # unset expert_tp: ep within dp·cp, or spanning the TP ranks too (folded, specs.job.expert_tp_degree)
    experts_fit = ((dp * cp) % ep == 0) | ((dp * cp * tp) % ep == 0) if expert_tp is None else (
        (dp * cp * tp) % (ep * expert_tp) == 0)
    valid = ((n_gpus <= gpus_per_node) | (n_gpus % gpus_per_node == 0)) & experts_fit
    return n_gpus[valid]


def first_fitting(x: Inputs, group: np.ndarray, params: ModelParameters) -> GroupFit:
    """For rows ordered within each group (e.g. by GPU count), each group's first row that fits.

    `group`: per row, a group number in 0..n_groups-1 (rows of one group need not be adjacent)."""
    group = np.asarray(group, dtype=np.int64)
    n_rows = len(group)
    memory, capacity, fits = (_rows(v, n_rows) for v in memory_fit(x, params))
    fits = fits.astype(bool)
    first = np.full(int(group.max()) + 1 if n_rows else 0, -1, dtype=np.int64)
    fitting = np.flatnonzero(fits)
    groups, at = np.unique(group[fitting], return_index=True)  # rows in order: the first index per group
    first[groups] = fitting[at]
    return GroupFit(first_row=first, memory_bytes=memory, capacity_bytes=capacity, fits=fits)


def price_rows(x: Inputs, n_gpus, usd_per_gpu_hour, tokens: float | None, params: ModelParameters) -> Priced:
    """Every row through the full model in one call: $/hour for its GPUs and, with `tokens`, the run's cost."""
    out = evaluate(x, params)
    _, capacity, _ = memory_fit(x, params)  # the fit rule's limit, which Outputs does not carry
    n_gpus = np.asarray(n_gpus, dtype=float)
    n_rows = len(n_gpus)
    tokens_per_s = _rows(out.tokens_per_s, n_rows).astype(float)
    usd_per_hour = n_gpus * np.asarray(usd_per_gpu_hour, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        total_s = np.full(n_rows, np.nan) if tokens is None else float(tokens) / tokens_per_s
    total_s = np.where(np.isfinite(total_s), total_s, np.nan)
    return Priced(tokens_per_s=tokens_per_s, memory_bytes=_rows(out.memory_bytes, n_rows).astype(float),
                  capacity_bytes=_rows(capacity, n_rows).astype(float),
                  fits=_rows(out.fits, n_rows).astype(bool), usd_per_hour=usd_per_hour, total_time_s=total_s,
                  cost_usd=total_s / 3600.0 * usd_per_hour)


def cheapest_order(priced: Priced, n_gpus, by_total_cost: bool) -> np.ndarray:
    """Rows that fit and have a price, cheapest first (by the run's cost, or by $/hour); ties go to
    fewer GPUs. Rows whose cost the model could not give (non-finite) come after the rest."""
    key = priced.cost_usd if by_total_cost else priced.usd_per_hour
    rows = np.flatnonzero(priced.fits & np.isfinite(priced.usd_per_hour))
    known = np.isfinite(key[rows])
    order = np.lexsort((np.asarray(n_gpus, dtype=float)[rows], np.where(known, key[rows], np.inf), ~known))
    return rows[order]


# ---- helpers --------------------------------------------------------------------------------------


def _sweep(x: Inputs, values: np.ndarray, global_batch: np.ndarray, params: ModelParameters) -> Sweep:
    n_rows = len(values)
    memory, capacity, fits = (_rows(v, n_rows) for v in memory_fit(x, params))
    fits = fits.astype(bool)
    fitting = np.flatnonzero(fits)
    return Sweep(values=values, memory_bytes=memory.astype(float), capacity_bytes=capacity.astype(float),
                 fits=fits, global_batch=np.asarray(global_batch, dtype=float),
                 best=int(fitting[-1]) if len(fitting) else None, n_evaluated=n_rows)


def _seq_len_sweep(job: Job, params: ModelParameters, values: np.ndarray) -> Sweep:
    x, keep = sweep_inputs(job, params, {"seq_len": values})
    return _sweep(x, values[keep], np.full(len(keep), float(job.training.global_batch)), params)


def _job_with(job: Job, training_changes: dict) -> Job:
    """`job` with some training fields changed, validated again (grad_accum re-derived)."""
    training = job.training.model_copy(update={**_plain(training_changes), "grad_accum": None})
    return Job(**{name: getattr(job, name) for name in Job.model_fields} | {"training": training})


def _plain(changes: dict) -> dict:
    """numpy numbers as the ints the training fields are (every swept field is a whole number)."""
    return {k: int(v) for k, v in changes.items()}


def _one_row_per_candidate(job: Job, params: ModelParameters,
                           changes: dict[str, np.ndarray]) -> tuple[Inputs, np.ndarray]:
    """Real rows, built in windows of candidates that double in size (8, 8, 16, 32 …).

    Memory grows with every swept setting (more sequences or tokens per micro-batch), so once a whole
    window of valid candidates fails to fit, the larger ones are not built: they are left out of the
    sweep as not tried. That keeps this path near twice the answer's rows, not all of them."""
    n_candidates = len(next(iter(changes.values())))
    rows: list[Inputs] = []
    keep: list[int] = []
    start, stop = 0, FALLBACK_WINDOW
    while start < n_candidates:
        window_rows, window_keep = [], []
        for i in range(start, min(stop, n_candidates)):
            try:
                candidate = _job_with(job, {k: v[i] for k, v in changes.items()})
            except TrainrigError:
                continue  # not a job the loader would accept (e.g. more samples than seq_len allows)
            window_rows.append(inputs_from_job(candidate, params))
            window_keep.append(i)
        rows += window_rows
        keep += window_keep
        if window_rows and not np.any(memory_fit(stack_inputs(window_rows), params)[2]):
            break
        start, stop = stop, 2 * stop
    if not rows:
        return inputs_from_job(job, params).with_values(), np.zeros(0, dtype=np.int64)
    return stack_inputs(rows), np.array(keep, dtype=np.int64)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))


def _rows(value, n_rows: int) -> np.ndarray:
    """A per-row array from a value that may be a scalar (the same for every row)."""
    return np.broadcast_to(np.asarray(value), (n_rows,)).copy()


