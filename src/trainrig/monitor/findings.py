"""What a diagnosis says: findings of a documented set of kinds, each with advice and evidence.

Evidence names the rows that triggered a finding (`table` and row `ids` in the run's database), the
statistic computed over them and the threshold it crossed, so a reader can check every claim.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = ["FINDING_KINDS", "Evidence", "Finding", "Check", "MAX_EVIDENCE_IDS"]

FINDING_KINDS: Final[dict[str, str]] = {
    "data_loading": "the GPUs wait for the next batch: the input pipeline is slower than the step",
    "host_transfer": "host↔GPU copies over PCIe hold the step back",
    "memory_pressure": "GPU or host memory is near its limit",
    "throttling": "clocks held down by power or thermal limits",
    "low_sm_activity": "kernels keep few SMs busy (small micro-batch, launch overhead)",
    "communication": "the interconnect (NVLink, network) is the busiest resource",
    "straggler": "one GPU or rank is slower than the others and the rest wait for it",
    "storage": "the input pipeline waits on storage reads",
    "below_spec": "a GPU runs below its PCIe, clock or power spec",
    "host_cpu": "every host core is busy: training processes and loaders compete for CPU",
}
MAX_EVIDENCE_IDS: Final = 20
"""Evidence lists at most this many row ids (the first ones); `n_samples` says how many matched."""


@dataclass(frozen=True)
class Evidence:
    """One statistic over named rows that crossed a threshold."""

    metric: str
    value: float | None
    threshold: float | None
    unit: str
    table: Literal["gpu_samples", "host_samples", "steps"]
    ids: tuple[int, ...]
    n_samples: int
    gpu: int | None = None
    t_from: float | None = None
    t_to: float | None = None
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "value": self.value, "threshold": self.threshold,
                "unit": self.unit, "table": self.table, "ids": list(self.ids),
                "n_samples": self.n_samples, "gpu": self.gpu, "t_from": self.t_from,
                "t_to": self.t_to, "note": self.note}


@dataclass(frozen=True)
class Finding:
    kind: str
    message: str
    advice: tuple[str, ...]
    evidence: tuple[Evidence, ...]
    gpus: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in FINDING_KINDS:
            raise ValueError(f"unknown finding kind {self.kind!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "advice": list(self.advice),
                "evidence": [e.to_dict() for e in self.evidence], "gpus": list(self.gpus)}


@dataclass(frozen=True)
class Check:
    """Whether a rule ran: `finding`, `ok` (ran, nothing found) or `not_evaluated` (and why)."""

    kind: str
    status: Literal["finding", "ok", "not_evaluated"]
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "status": self.status, "reason": self.reason}
