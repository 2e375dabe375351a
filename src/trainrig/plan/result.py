"""What `plan` and `compare` answer, as objects that feed the tables, the JSON and the plots alike."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from trainrig.estimate.result import Estimate

__all__ = ["NodeAdvice", "OfferRef", "ScalingPoint", "Plan", "FrontPoint", "PlanResult", "Comparison", "CompareResult"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class NodeAdvice(_Frozen):
    """The node around the GPUs, derived from the job; each choice with a one-line reason."""

    cpu_cores: int
    """Physical cores per node."""
    ram_gb: int
    """Host RAM per node, GB."""
    storage: str
    """Storage catalog id: the slowest kind that keeps reads hidden and checkpoint writes small."""
    storage_tb: float
    """Capacity for the dataset and the checkpoints kept, TB (whole job)."""
    network: str | None
    """Network between nodes, as `ports × link`; null for a single node."""
    network_gbps_per_node: float | None
    """That network's line rate per node, Gb/s."""
    reasons: dict[str, str]
    """One sentence per choice: cpu, ram, storage, network."""


class OfferRef(_Frozen):
    """The cloud offer a plan rents, as the catalog states it."""

    id: str
    provider: str
    instance: str
    usd_per_gpu_hour: float | None
    price_date: str
    region: str | None
    sources: list[str]


class ScalingPoint(_Frozen):
    """A plan's layout at another GPU count on the same node kind (more or less data parallelism):
    a row of its own before the planner collapsed "same layout, more GPUs" into the plan."""

    n_gpus: int
    n_nodes: int
    total_time_s: float
    cost_usd: float | None
    """Null where no price is known (as the plan's)."""
    speedup: float
    """The plan's total time over this one's (> 1: faster than the plan)."""
    cost_ratio: float | None
    """This one's cost over the plan's (null without a price)."""
    meets_constraints: bool


class Plan(_Frozen):
    """One recommended configuration: the job it describes, its estimate and the node around it."""

    rank: int
    """1 = best by the objective (or, when nothing meets the constraints, closest to them)."""
    gpu: str
    n_gpus: int
    n_nodes: int
    gpus_per_node: int
    offer: OfferRef | None
    """The rented instance type, or null for catalog nodes without a known price."""
    layout: dict[str, Any]
    """tp, pp, dp, cp, ep, vpp, zero, micro_batch, global_batch, grad_accum, recompute, sequence_parallel."""
    meets_constraints: bool
    misses: list[str]
    """Which constraints it misses (empty when it meets them)."""
    memory_headroom_gib: float
    """GPU memory left per GPU (negative when it does not fit)."""
    estimate: Estimate
    """The single-configuration estimate of `job` (what `trainrig estimate` prints for it)."""
    node: NodeAdvice | None
    """CPU, RAM, storage and network for the node (null when the configuration does not fit)."""
    job: dict[str, Any]
    """The job file (`trainrig estimate` re-runs it; cost with `--price`)."""
    scaling: list[ScalingPoint] = []
    """The same layout on the same node kind at other GPU counts, fewest first, collapsed into this row."""
    scaling_note: str | None = None
    """`also 16→64 GPUs: 3.1× faster, 1.2× the cost`: the farthest of `scaling` each way (null when empty)."""
    no_price_reason: str | None = None
    """Why this row has no price (no offer in the catalog for this GPU or node count; an offer without a
    published price); null when priced. Such rows are shown after the priced ones, never ranked among them."""


class FrontPoint(_Frozen):
    """A point of the time–cost plane: the best configuration of one node kind and GPU count."""

    total_time_s: float
    cost_usd: float
    gpu: str
    n_gpus: int
    offer: str | None
    on_front: bool
    """Whether no other configuration is both faster and cheaper."""
    meets_constraints: bool


class PlanResult(_Frozen):
    """The answer of `trainrig plan`; `to_dict()` is its JSON."""

    plans: list[Plan]
    """Best first; when nothing meets the constraints, the closest ones."""
    feasible: bool
    """Whether any configuration meets every constraint."""
    message: str | None
    """Why nothing meets the constraints and what comes closest (null when something does)."""
    objective: str
    constraints: dict[str, Any]
    n_configurations_evaluated: int
    """Configurations whose memory the model evaluated (every valid layout on every node kind and count)."""
    n_configurations_fitting: int
    """Of those, the ones that fit in GPU memory and went through the full model (time, throughput, cost)."""
    n_configurations_feasible: int
    """Of those, the ones that meet the deadline and budget."""
    search_time_s: float | None
    """Wall time of the search, measured by the caller (the CLI); null when not measured."""
    points: list[FrontPoint]
    """For the time–cost plot: the best point of each node kind and GPU count with a known cost."""
    notes: list[str]


class Comparison(_Frozen):
    """One GPU type's best configuration for the job, or why it has none."""

    gpu: str
    plan: Plan | None
    reason: str | None
    """Why no configuration fits or meets the constraints on this GPU (null when plan meets them)."""


class CompareResult(_Frozen):
    """The answer of `trainrig compare`: the best configuration on each GPU type, side by side."""

    rows: list[Comparison]
    objective: str
    constraints: dict[str, Any]
    n_configurations_evaluated: int
    n_configurations_fitting: int
    search_time_s: float | None
    notes: list[str]
