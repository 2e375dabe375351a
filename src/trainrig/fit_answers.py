"""`trainrig fit`: the answers people ask first about a job, for the CLI, the JSON and Python alike.

The largest micro-batch and the longest sequence that fit (everything else as in the job), the
fewest GPUs of the job's type on which it fits (growing dp only), and the cheapest catalog GPU type
on which it fits. The searches themselves are pure and vectorized (`estimate.max_fit`); this module
builds the jobs they need from the catalog (other GPU types, other GPU counts) and prices them with
the cheapest catalog offer of each type, the rule `trainrig estimate` uses.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from trainrig.answers import cheapest_offer
from trainrig.catalog import load_catalog
from trainrig.catalog.job_file import job_to_mapping, load_job
from trainrig.errors import TrainrigError
from trainrig.estimate.inputs import Inputs, inputs_from_job, stack_inputs
from trainrig.estimate.max_fit import (
    MICRO_BATCH_LIMIT,
    SEQ_LEN_LIMIT,
    Sweep,
    adjusted_global_batch,
    cheapest_order,
    first_fitting,
    gpu_counts,
    largest_micro_batch,
    longest_seq_len,
    price_rows,
)
from trainrig.estimate.memory import memory_fit
from trainrig.estimate.params import DEFAULT_PARAMETERS, ModelParameters
from trainrig.specs import Job
from trainrig.units import GIB

__all__ = ["fit", "fit_answer", "FitResult", "FitAnswer", "GpuTypeFit", "CheapestGpuAnswer", "MAX_GPUS", "TOP_GPUS"]

MAX_GPUS = 4096
"""Most GPUs tried when growing data parallelism."""
TOP_GPUS = 5
"""GPU types listed in the cheapest-GPU answer."""
FIRST_WINDOW = 8
"""GPU counts per type tried in the first round; each later round doubles the window."""
# What a job's hardware section says about its own GPU; another GPU type takes its catalog defaults.
GPU_BOUND_HARDWARE = ("intra_node", "host_link", "pcie", "gpus_per_pcie_switch", "inter_node", "profile")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class FitAnswer(_Frozen):
    """One limit of the job: the largest (or fewest) value of one setting that fits."""

    setting: Literal["micro_batch", "seq_len", "n_gpus"]
    value: int | None
    """The answer; null when no value in the range searched fits."""
    job_value: int
    """The job's own value of the setting."""
    memory_per_gpu_gib: float | None
    """Peak memory per GPU at the answer (at the smallest value tried when nothing fits)."""
    memory_capacity_gib: float
    """What the fit rule compares memory with."""
    global_batch: int | None
    """Global batch at the answer (sequences per step); see notes when it differs from the job's."""
    grad_accum: int | None
    """Micro-batches per optimizer step at the answer."""
    dp: int | None
    """Data-parallel degree at the answer."""
    searched: str
    """The values tried, in words."""
    notes: list[str]


class GpuTypeFit(_Frozen):
    """The fewest GPUs of one type on which the job fits, with what running them costs."""

    gpu: str
    n_gpus: int
    n_nodes: int
    dp: int
    global_batch: int
    memory_per_gpu_gib: float
    memory_capacity_gib: float
    usd_per_gpu_hour: float | None
    """The cheapest catalog offer's on-demand price; null where no offer has one."""
    offer: str | None
    """`provider instance` of that offer."""
    price_date: str | None
    """The day the offer's price was read."""
    usd_per_hour: float | None
    """n_gpus × usd_per_gpu_hour."""
    tokens_per_s: float | None
    total_time_s: float | None
    """Time to train `training.tokens` (null without tokens)."""
    cost_usd: float | None
    """The run's cost (null without tokens or without a price)."""
    is_job_gpu: bool
    """The job's own GPU type, with the job's own links and host."""


class CheapestGpuAnswer(_Frozen):
    """Over every catalog GPU type, the fewest GPUs that fit, cheapest first."""

    gpu: str | None
    """The chosen type (first of `ranked`); null when the job fits on no priced type."""
    ranked_by: Literal["cost_usd", "usd_per_hour"]
    """The run's cost when the job gives training.tokens, else $/hour for the GPUs."""
    ranked: list[GpuTypeFit]
    """The cheapest few priced types, the chosen one first."""
    unpriced: list[GpuTypeFit]
    """Types on which the job fits but no catalog offer has a price."""
    fits_nowhere: list[str]
    """Types on which the job fits on no GPU count up to max_gpus."""
    unsupported: list[str]
    """Types without the job's precision, or on which the job's layout is invalid."""
    notes: list[str]


class FitResult(_Frozen):
    """The answer of `trainrig fit`; `to_dict()` is its JSON."""

    model: str
    gpu: str
    n_gpus: int
    config: dict[str, Any]
    """The job's layout: tp, pp, cp, ep, dp, zero, recompute, precision, micro_batch, seq_len, global_batch."""
    fits: bool
    """Whether the job as given fits."""
    memory_per_gpu_gib: float
    memory_capacity_gib: float
    micro_batch: FitAnswer
    seq_len: FitAnswer
    n_gpus_needed: FitAnswer
    cheapest_gpu: CheapestGpuAnswer
    max_gpus: int
    n_configurations_evaluated: int
    """Rows that went through the fit rule across every search."""
    notes: list[str]


def fit_answer(mapping: Mapping[str, Any], max_gpus: int = MAX_GPUS, top: int = TOP_GPUS,
               extra_dirs: tuple[str, ...] = ()) -> FitResult:
    """What `trainrig fit` (and its `--json`, via `.to_dict()`) answers for a job mapping."""
    return fit(load_job(mapping, tuple(extra_dirs)), max_gpus, top, tuple(extra_dirs))


def fit(job: Job | Mapping[str, Any] | str | Path, max_gpus: int = MAX_GPUS, top: int = TOP_GPUS,
        extra_dirs: tuple[str, ...] = (), params: ModelParameters = DEFAULT_PARAMETERS) -> FitResult:
    """The largest micro-batch, the longest sequence, the fewest GPUs and the cheapest GPU type on
    which `job` (a Job, a job mapping or a job file's path) fits."""
    extra = tuple(extra_dirs)
    if not isinstance(job, Job):
        job = load_job(job, extra)
    _check_positive("max_gpus", max_gpus)
    _check_positive("top", top)
    if max_gpus < job.training.model_parallel:
        raise TrainrigError("max_gpus", f"{max_gpus} is fewer than the tp·pp·cp = {job.training.model_parallel}"
                                        " GPUs one replica of the job spans.")
    memory, capacity, fits = (float(np.asarray(v)) for v in memory_fit(inputs_from_job(job, params), params))
    micro = largest_micro_batch(job, params)
    seq_limit, seq_notes = _seq_len_limit(job)
    seq = longest_seq_len(job, params, seq_limit)
    search = _GpuSearch.create(job, max_gpus, extra, params)
    found = search.run()
    t = job.training
    return FitResult(
        model=job.model.name, gpu=job.hardware.gpu.id, n_gpus=job.hardware.n_gpus, config=_config(job),
        fits=bool(fits), memory_per_gpu_gib=memory / GIB, memory_capacity_gib=capacity / GIB,
        micro_batch=_micro_batch_answer(job, micro, capacity / GIB),
        seq_len=_seq_len_answer(job, seq, seq_notes, capacity / GIB),
        n_gpus_needed=search.fewest_answer(found, capacity),
        cheapest_gpu=search.cheapest_answer(found, top),
        max_gpus=max_gpus,
        n_configurations_evaluated=micro.n_evaluated + seq.n_evaluated + search.n_rows,
        notes=list(job.notes) + ([] if t.tokens else ["give training.tokens to rank GPU types by the run's cost"]),
    )


# ---- micro-batch and sequence length ------------------------------------------------------------


def _micro_batch_answer(job: Job, sweep: Sweep, capacity_gib: float) -> FitAnswer:
    t = job.training
    notes = []
    i = sweep.best
    if not len(sweep.values):
        notes.append("no micro-batch makes a valid job with the other settings")
    elif i is None:
        notes.append(f"even micro_batch 1 does not fit ({sweep.memory_bytes[0] / GIB:.1f} GiB per GPU)")
    else:
        notes += _batch_notes(t.global_batch, int(sweep.global_batch[i]), int(sweep.values[i]) * t.dp_degree)
        if sweep.at_limit:
            notes.append(f"the largest micro-batch tried ({MICRO_BATCH_LIMIT}) fits; larger ones were not tried")
    return _answer("micro_batch", t.micro_batch, sweep, t.dp_degree, f"1–{MICRO_BATCH_LIMIT}", notes,
                   capacity_gib, micro_batch_of=lambda k: int(sweep.values[k]))


def _seq_len_answer(job: Job, sweep: Sweep, limit_notes: list[str], capacity_gib: float) -> FitAnswer:
    t = job.training
    notes = list(limit_notes)
    i = sweep.best
    if not len(sweep.values):
        return _answer("seq_len", t.seq_len, sweep, t.dp_degree, "none",
                       notes + ["no sequence length makes a valid job with the other settings"], capacity_gib,
                       micro_batch_of=lambda _: t.micro_batch)
    if i is None:
        notes.append(f"not even seq_len {int(sweep.values[0])} fits: weights and optimizer states alone need"
                     f" about {sweep.memory_bytes[0] / GIB:.1f} GiB per GPU")
    else:
        if t.cp > 1:
            notes.append(f"lengths tried are multiples of cp = {t.cp}")
        if sweep.at_limit:
            notes.append(f"the longest sequence tried ({int(sweep.values[-1]):,}) fits")
        if int(sweep.values[i]) != t.seq_len:
            notes.append(f"tokens per step change: global_batch stays {t.global_batch} sequences")
    searched = f"{int(sweep.values[0])}–{int(sweep.values[-1]):,} (multiples of 256, then every length between)"
    return _answer("seq_len", t.seq_len, sweep, t.dp_degree, searched, notes, capacity_gib,
                   micro_batch_of=lambda _: t.micro_batch)


def _answer(setting: str, job_value: int, sweep: Sweep, dp: int, searched: str, notes: list[str],
            capacity_gib: float, micro_batch_of: Callable[[int], int]) -> FitAnswer:
    """The sweep's best value with its memory; without one, the memory of the smallest value tried."""
    i = sweep.best
    tried = len(sweep.values) > 0
    at = 0 if i is None else i
    global_batch = int(sweep.global_batch[at]) if tried else None
    return FitAnswer(
        setting=setting, value=None if i is None else int(sweep.values[i]), job_value=job_value,
        memory_per_gpu_gib=float(sweep.memory_bytes[at]) / GIB if tried else None,
        memory_capacity_gib=float(sweep.capacity_bytes[at]) / GIB if tried else capacity_gib,
        global_batch=None if i is None else global_batch,
        grad_accum=None if i is None else global_batch // (micro_batch_of(i) * dp),
        dp=dp, searched=searched, notes=notes)


def _seq_len_limit(job: Job) -> tuple[int, list[str]]:
    """The longest sequence worth trying: 1M tokens, the job's own if longer, and never past the
    positions a learned position embedding has."""
    limit = max(SEQ_LEN_LIMIT, job.training.seq_len)
    m = job.model
    if m.position_embedding == "learned" and m.max_positions:
        return m.max_positions, [f"learned position embeddings stop at max_positions = {m.max_positions:,}"]
    return limit, []


def _batch_notes(job_global_batch: int, global_batch: int, sequences_per_micro_step: int) -> list[str]:
    if global_batch == job_global_batch:
        return []
    return [f"global_batch would change from {job_global_batch} to {global_batch}: micro_batch·dp ="
            f" {sequences_per_micro_step} does not divide {job_global_batch}"]


# ---- GPU counts and GPU types ------------------------------------------------------------------


@dataclass(frozen=True)
class _Group:
    """One GPU type: its job-file hardware section and the GPU counts the job's layout allows on it."""

    gpu: str
    hardware: dict[str, Any]
    counts: np.ndarray
    is_job_gpu: bool


@dataclass(frozen=True)
class _Row:
    group: int
    n_gpus: int
    dp: int
    global_batch: int
    inputs: Inputs


@dataclass(frozen=True)
class _Found:
    row: _Row
    memory_bytes: float
    capacity_bytes: float


@dataclass
class _GpuSearch:
    """Fewest fitting GPU count per GPU type, in rounds of growing windows of counts.

    Round one tries each type's first FIRST_WINDOW counts and its largest; each later round the next,
    twice as wide, window of the types still open. Every count below a type's answer is tried, so the
    answer is the fewest; a type that does not fit on its largest count is closed at once, because more
    data parallelism never adds memory per GPU beyond the step from one GPU to two (ZeRO shards shrink,
    fewer micro-batches are in flight, the communication buffers stay)."""

    job: Job
    mapping: dict[str, Any]
    groups: list[_Group]
    unsupported: list[str]
    max_gpus: int
    extra_dirs: tuple[str, ...]
    params: ModelParameters
    n_rows: int = 0
    valid_groups: set[int] = field(default_factory=set)
    """Types with at least one count on which the job's layout is valid."""

    @classmethod
    def create(cls, job: Job, max_gpus: int, extra_dirs: tuple[str, ...], params: ModelParameters) -> _GpuSearch:
        mapping = job_to_mapping(job)
        t, hw = job.training, job.hardware
        own = dict(mapping["hardware"])
        groups = [_Group(hw.gpu.id, own, _counts(job, hw.gpus_per_node, max_gpus), True)]
        unsupported = []
        for gpu in load_catalog(extra_dirs).gpus:
            if gpu.id == hw.gpu.id:
                continue
            if gpu.peak(t.precision) is None:
                unsupported.append(gpu.id)
                continue
            hardware = {k: v for k, v in own.items() if k not in GPU_BOUND_HARDWARE} | {"gpu": gpu.id}
            groups.append(_Group(gpu.id, hardware, _counts(job, hw.gpus_per_node, max_gpus), False))
        return cls(job, mapping, groups, unsupported, max_gpus, extra_dirs, params)

    def run(self) -> dict[int, _Found]:
        found: dict[int, _Found] = {}
        open_groups = [g for g, group in enumerate(self.groups) if len(group.counts)]
        start, stop = 0, FIRST_WINDOW
        first_round = True
        while open_groups:
            rows = [row for g in open_groups for n in self.groups[g].counts[start:stop] if (row := self._row(g, n))]
            # the largest count of each type, checked once under its own group number so it cannot
            # pass for the fewest
            largest = [row for g in open_groups if first_round and len(self.groups[g].counts) > stop
                       and (row := self._row(g, self.groups[g].counts[-1]))]
            closed = set()
            if rows or largest:
                everything = rows + largest
                offset = len(self.groups)
                numbers = [r.group for r in rows] + [r.group + offset for r in largest]
                result = first_fitting(stack_inputs([r.inputs for r in everything]), np.array(numbers), self.params)
                self.n_rows += len(everything)
                first = np.concatenate([result.first_row, np.full(2 * offset - len(result.first_row), -1)])
                for g in open_groups:
                    if first[g] >= 0:
                        k = int(first[g])
                        found[g] = _Found(everything[k], float(result.memory_bytes[k]),
                                          float(result.capacity_bytes[k]))
                        closed.add(g)
                for r in largest:
                    if r.group not in closed and first[r.group + offset] < 0:
                        closed.add(r.group)
            start, stop, first_round = stop, 2 * stop, False
            open_groups = [g for g in open_groups if g not in closed and start < len(self.groups[g].counts)]
        return found

    def _row(self, group: int, n_gpus) -> _Row | None:
        """The job on `n_gpus` of the group's GPU, or None where that job is invalid."""
        t = self.job.training
        n_gpus = int(n_gpus)
        dp = n_gpus // t.model_parallel
        global_batch = int(adjusted_global_batch(t.global_batch, t.micro_batch, dp))
        training = {k: v for k, v in self.mapping["training"].items() if k != "grad_accum"}
        training |= {"dp": dp, "global_batch": global_batch}
        hardware = self.groups[group].hardware | {"n_gpus": n_gpus}
        try:
            job = load_job({"model": self.mapping["model"], "hardware": hardware, "training": training},
                           self.extra_dirs)
        except TrainrigError:
            return None
        self.valid_groups.add(group)
        return _Row(group, n_gpus, dp, global_batch, inputs_from_job(job, self.params))

    # ---- the answers ----------------------------------------------------------------------------

    def fewest_answer(self, found: dict[int, _Found], capacity_bytes: float) -> FitAnswer:
        hw, t = self.job.hardware, self.job.training
        counts = self.groups[0].counts
        searched = f"{int(counts[0])}–{int(counts[-1])} GPUs, dp growing" if len(counts) else "none"
        capacity = capacity_bytes / GIB
        hit = found.get(0)
        if hit is None:
            notes = [f"does not fit on up to {self.max_gpus} × {hw.gpu.id} with tp {t.tp}, pp {t.pp}, cp {t.cp},"
                     f" ZeRO {t.zero}; change the layout or the GPU"]
            return FitAnswer(setting="n_gpus", value=None, job_value=hw.n_gpus, memory_per_gpu_gib=None,
                             memory_capacity_gib=capacity, global_batch=None, grad_accum=None, dp=None,
                             searched=searched, notes=notes)
        row = hit.row
        notes = []
        if row.n_gpus < hw.n_gpus:
            notes.append(f"fits on {row.n_gpus} GPUs, fewer than the job's {hw.n_gpus}")
        elif row.n_gpus > hw.n_gpus:
            notes.append(f"needs {row.n_gpus} GPUs, more than the job's {hw.n_gpus}")
        notes += _batch_notes(t.global_batch, row.global_batch, t.micro_batch * row.dp)
        return FitAnswer(setting="n_gpus", value=row.n_gpus, job_value=hw.n_gpus,
                         memory_per_gpu_gib=hit.memory_bytes / GIB, memory_capacity_gib=hit.capacity_bytes / GIB,
                         global_batch=row.global_batch, grad_accum=row.global_batch // (t.micro_batch * row.dp),
                         dp=row.dp, searched=searched, notes=notes)

    def cheapest_answer(self, found: dict[int, _Found], top: int) -> CheapestGpuAnswer:
        tokens = self.job.training.tokens
        ranked_by = "cost_usd" if tokens else "usd_per_hour"
        groups = sorted(found)
        fits_nowhere = [group.gpu for g, group in enumerate(self.groups) if g not in found and g in self.valid_groups]
        unsupported = self.unsupported + [group.gpu for g, group in enumerate(self.groups)
                                          if g not in self.valid_groups]
        notes = [f"each type keeps the job's layout (tp {self.job.training.tp}, pp {self.job.training.pp},"
                 f" cp {self.job.training.cp}, ZeRO {self.job.training.zero}) and grows dp up to"
                 f" {self.max_gpus} GPUs; other types take their catalog links",
                 "priced at the cheapest catalog offer of each type (on-demand $/GPU-hour)"]
        if not groups:
            notes.insert(0, f"the job fits on no catalog GPU type with up to {self.max_gpus} GPUs")
            return CheapestGpuAnswer(gpu=None, ranked_by=ranked_by, ranked=[], unpriced=[],
                                     fits_nowhere=fits_nowhere, unsupported=unsupported, notes=notes)
        offers = {g: cheapest_offer(self.groups[g].gpu, self.extra_dirs, found[g].row.n_gpus) for g in groups}
        price = np.array([offers[g].usd_per_gpu_hour if offers[g] else np.nan for g in groups], dtype=float)
        n_gpus = np.array([found[g].row.n_gpus for g in groups], dtype=float)
        priced = price_rows(stack_inputs([found[g].row.inputs for g in groups]), n_gpus, price, tokens, self.params)
        self.n_rows += len(groups)
        rows = [self._type_fit(g, found[g], offers[g], priced, i) for i, g in enumerate(groups)]
        order = cheapest_order(priced, n_gpus, by_total_cost=bool(tokens))
        ranked = [rows[i] for i in order[:top]]
        unpriced = sorted((r for r in rows if r.usd_per_gpu_hour is None), key=lambda r: (r.n_gpus, r.gpu))
        if not ranked:
            notes.insert(0, "the job fits only on GPU types without a catalog price")
        return CheapestGpuAnswer(gpu=ranked[0].gpu if ranked else None, ranked_by=ranked_by, ranked=ranked,
                                 unpriced=unpriced, fits_nowhere=fits_nowhere, unsupported=unsupported, notes=notes)

    def _type_fit(self, g: int, hit: _Found, offer, priced, i: int) -> GpuTypeFit:
        group, row = self.groups[g], hit.row
        gpus_per_node = self.job.hardware.gpus_per_node
        known = lambda v: float(v) if np.isfinite(v) else None  # noqa: E731
        return GpuTypeFit(
            gpu=group.gpu, n_gpus=row.n_gpus, n_nodes=-(-row.n_gpus // gpus_per_node), dp=row.dp,
            global_batch=row.global_batch, memory_per_gpu_gib=hit.memory_bytes / GIB,
            memory_capacity_gib=hit.capacity_bytes / GIB,
            usd_per_gpu_hour=offer.usd_per_gpu_hour if offer else None,
            offer=f"{offer.provider} {offer.instance}" if offer else None,
            price_date=offer.price_date.isoformat() if offer else None,
            usd_per_hour=known(priced.usd_per_hour[i]), tokens_per_s=known(priced.tokens_per_s[i]),
            total_time_s=known(priced.total_time_s[i]), cost_usd=known(priced.cost_usd[i]),
            is_job_gpu=group.is_job_gpu)


def _counts(job: Job, gpus_per_node: int, max_gpus: int) -> np.ndarray:
    t = job.training
    return gpu_counts(t.model_parallel, t.cp, t.ep, gpus_per_node, max_gpus, tp=t.tp, expert_tp=t.expert_tp)


def _config(job: Job) -> dict[str, Any]:
    t = job.training
    return {"tp": t.tp, "pp": t.pp, "cp": t.cp, "ep": t.ep, "dp": t.dp_degree, "zero": t.zero,
            "recompute": t.recompute, "precision": t.precision, "micro_batch": t.micro_batch,
            "seq_len": t.seq_len, "global_batch": t.global_batch, "grad_accum": t.micro_batches,
            "tokens": t.tokens, "gpus_per_node": job.hardware.gpus_per_node, "method": t.method,
            "framework": t.framework}


def _check_positive(field: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise TrainrigError(field, f"must be a positive whole number (got {value!r}).")
