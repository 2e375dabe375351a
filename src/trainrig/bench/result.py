"""What a bench measured, the estimate of the same scaled job beside it, and the full-size projection.

Errors follow `trainrig validate`: (estimated − measured) / measured × 100, so +20% means the
estimate is 20% high. The projection is the full job's estimate multiplied, figure by figure, by
measured / estimated of the scaled job: the estimate corrected by the measured ratio, not a
measurement.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["StepTimes", "RankRun", "Measurement", "BenchResult", "median_times", "combine_ranks", "compare",
           "PROJECTION_LABEL", "COMPARED"]

PROJECTION_LABEL = "full-size job: its estimate corrected by the measured ratio (not a measurement)"
# measured figure → the Estimate attribute it is compared with
COMPARED = {
    "step_time_s": "step_time_s",
    "tokens_per_s": "tokens_per_s",
    "peak_allocated_gib": "memory_allocated_gib",
    "peak_reserved_gib": "memory_reserved_gib",
}


@dataclass(frozen=True)
class StepTimes:
    """One timed step, split at the end of the forward (loss included) and of the backward."""

    forward_s: float
    backward_s: float
    optimizer_s: float

    @property
    def step_s(self) -> float:
        return self.forward_s + self.backward_s + self.optimizer_s


@dataclass(frozen=True)
class RankRun:
    """What one process measured, before the ranks are combined."""

    times: list[StepTimes]
    """Each timed step, in order."""
    peak_allocated_gib: float | None
    peak_reserved_gib: float | None
    loss_first: float
    loss_last: float
    params_built: int
    trainable_params: int
    parameter_checksum: float
    """Sum of this rank's parameter storage after the last step, in float64. Data-parallel replicas
    (DDP) hold the same weights after every step, so their checksums agree exactly; ranks that trained
    apart would not."""


@dataclass(frozen=True)
class Measurement:
    """Medians over the timed steps, and the peaks over them."""

    step_time_s: float
    forward_s: float
    backward_s: float
    optimizer_s: float
    tokens_per_s: float
    peak_allocated_gib: float | None
    """torch.cuda.max_memory_allocated after a reset past the warm-up; None on the CPU."""
    peak_reserved_gib: float | None
    """torch.cuda.max_memory_reserved likewise; None on the CPU."""
    loss_first: float
    loss_last: float


def median_times(steps: list[StepTimes], tokens_per_step: int) -> dict[str, float]:
    """Median of each part and of the whole step (the step's median is not the sum of the parts')."""
    step = statistics.median(s.step_s for s in steps)
    return {
        "step_time_s": step,
        "forward_s": statistics.median(s.forward_s for s in steps),
        "backward_s": statistics.median(s.backward_s for s in steps),
        "optimizer_s": statistics.median(s.optimizer_s for s in steps),
        "tokens_per_s": tokens_per_step / step,
    }


def combine_ranks(runs: list[RankRun], tokens_per_step: int) -> Measurement:
    """One measurement from every rank's: each step lasts as long as its slowest rank (the ranks meet
    in every gradient reduction), the peak is the fullest rank's, the loss the mean over ranks (the
    loss of the whole global batch, as the ranks' batches are the same size)."""
    slowest = [max(step, key=lambda t: t.step_s) for step in zip(*(r.times for r in runs), strict=True)]
    peaks = [r.peak_allocated_gib for r in runs], [r.peak_reserved_gib for r in runs]
    allocated, reserved = (None if None in values else max(values) for values in peaks)
    return Measurement(**median_times(slowest, tokens_per_step), peak_allocated_gib=allocated,
                       peak_reserved_gib=reserved, loss_first=statistics.fmean(r.loss_first for r in runs),
                       loss_last=statistics.fmean(r.loss_last for r in runs))


@dataclass
class BenchResult:
    """One bench: what ran, what it measured (None after an out-of-memory), and the comparison."""

    model: str
    device: str
    """cpu or cuda."""
    device_name: str
    """The CPU's or GPU's name, as torch reports it."""
    estimated_gpu: str
    """The GPU the job file names: what the estimate is for."""
    n_layers: int
    """Layers built."""
    n_layers_full: int
    micro_batch: int
    seq_len: int
    dtype: str
    """The precision that ran, in words."""
    steps: int
    warmup: int
    torch_version: str
    n_gpus: int
    """Processes that ran, one per GPU (or CPU process), data-parallel when more than one."""
    parallel: str
    """How the processes shared the work, in words (`one process`, DDP, FSDP ...)."""
    params_built: int
    """Parameters of the built model without adapters; equals the scaled spec's n_params."""
    trainable_params: int
    measured: Measurement | None
    estimated: dict[str, float]
    """Estimate of the scaled job, keyed like the measured figures."""
    error_pct: dict[str, float | None] = field(default_factory=dict)
    projection: dict[str, float | None] = field(default_factory=dict)
    full_estimate: dict[str, float] = field(default_factory=dict)
    oom_message: str | None = None
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def oom(self) -> bool:
        return self.oom_message is not None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["oom"] = self.oom
        data["projection_label"] = PROJECTION_LABEL
        return data

    def measured_run(self, scaled_mapping: dict[str, Any], date: str) -> dict[str, Any]:
        """The measured-run format `trainrig validate` reads (docs/job-file.md, Measured runs)."""
        gpus = f"-{self.n_gpus}gpu" if self.n_gpus > 1 else ""
        run = {"id": f"bench-{self.model}-{self.n_layers}l-mb{self.micro_batch}-s{self.seq_len}{gpus}",
               "source": f"trainrig bench on {self.device_name} ({self.device}), torch {self.torch_version}, {date}",
               "note": "; ".join([f"ran {self.dtype}", *self.notes, *self.warnings]),
               **scaled_mapping}
        run["measured"] = {"oom": True} if self.measured is None else _measured_keys(self.measured, self.n_gpus)
        return run


def _measured_keys(m: Measurement, n_gpus: int) -> dict[str, float]:
    """tokens/s is the whole job's, so per GPU divides by the processes; memory only where measured."""
    keys = {"step_time_s": m.step_time_s, "tokens_per_s_per_gpu": m.tokens_per_s / n_gpus}
    if m.peak_allocated_gib:
        keys["memory_gib"] = m.peak_allocated_gib
    if m.peak_reserved_gib:
        keys["memory_reserved_gib"] = m.peak_reserved_gib
    return keys


def estimate_figures(est: Any) -> dict[str, float]:
    """The compared figures of an Estimate, keyed like the measured ones."""
    return {key: float(getattr(est, attribute)) for key, attribute in COMPARED.items()}


def compare(measured: Measurement, estimated: dict[str, float], full: dict[str, float]
            ) -> tuple[dict[str, float | None], dict[str, float | None]]:
    """(error % of each figure, the full job's figures corrected by measured / estimated)."""
    errors: dict[str, float | None] = {}
    projection: dict[str, float | None] = {}
    for key in COMPARED:
        value = getattr(measured, key)
        if value is None or not value or not estimated[key]:
            errors[key], projection[key] = None, None
            continue
        errors[key] = (estimated[key] - value) / value * 100
        projection[key] = full[key] * value / estimated[key]
    return errors, projection
