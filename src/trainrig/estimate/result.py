"""The Estimate: what `trainrig estimate` answers, as one object for tables, JSON and the web page."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Estimate", "RESOURCES"]

# Resources whose doubling the what-if analysis tries, with the words used in messages.
RESOURCES = {
    "compute": "GPU compute (peak FLOP/s)",
    "hbm_bandwidth": "GPU memory bandwidth",
    "intra_node": "intra-node GPU link",
    "inter_node": "inter-node network",
    "pcie": "PCIe host link",
    "cpu": "CPU (cores and per-core speed)",
    "storage": "storage",
}


class Estimate(BaseModel):
    """Memory, time and cost of one configuration, with what binds it. Keys follow DESIGN.md."""

    model_config = ConfigDict(frozen=True)

    fits: bool
    """Whether memory_per_gpu_gib stays under memory_limit_gib (the capacity less the headroom)."""
    fit_message: str | None
    """Why it does not fit and the smallest change that would (null when it fits)."""
    fit_fixes: list[dict[str, Any]] = Field(default_factory=list)
    """When it does not fit: each change that makes it fit on its own, least costly in speed first (at
    most six; or the one combination that fits when none does alone), as `{what_if: "recompute=full",
    changes: {recompute: full}, memory_per_gpu_gib}`; empty when it fits."""
    memory_per_gpu_gib: float
    """Peak memory per GPU as the device holds it: the allocator's reserved pool at the peak, the
    CUDA context and NCCL buffers, GiB (nvidia-smi's view; the breakdown sums to it)."""
    memory_capacity_gib: float
    """The GPU's memory, GiB."""
    memory_allocated_gib: float = 0.0
    """Peak of the tensors PyTorch's allocator hands out (`torch.cuda.max_memory_allocated`; the
    `active` peak is the same within rounding), GiB."""
    memory_reserved_gib: float = 0.0
    """Peak the caching allocator holds from the driver (`torch.cuda.max_memory_reserved`, what
    nvidia-smi shows less the CUDA context and NCCL), GiB."""
    memory_peak_phase: str = "backward"
    """When the allocated peak happens: `forward` (end of forward, start of backward), `backward`
    (its end, every gradient alive) or `optimizer` (the step and its temporaries)."""
    memory_limit_gib: float = 0.0
    """What `fits` compares memory_per_gpu_gib with: capacity less the headroom real runs need."""
    memory_paged_gib: float = 0.0
    """Paged optimizer states in CUDA unified memory: resident on the GPU while there is room,
    paged to host memory under pressure; not in memory_per_gpu_gib nor in the fit."""
    assumptions: list[str] = []
    """What the estimate assumed that the job did not say (kernels, overlap, framework defaults)."""
    memory_breakdown_gib: dict[str, float]
    """weights, gradients, optimizer, activations, other (GiB)."""
    step_time_s: float
    """One optimizer step."""
    step_breakdown_s: dict[str, float]
    """The exposed (non-overlapped) time of each part of a step; they sum to step_time_s."""
    tokens_per_s: float
    """Whole job."""
    tokens_per_s_per_gpu: float
    """tokens_per_s / n_gpus."""
    model_tflops_per_gpu: float
    """Model FLOPs (no recompute) per GPU per second, TFLOP/s."""
    hardware_tflops_per_gpu: float
    """FLOPs executed including recompute, per GPU per second, TFLOP/s."""
    mfu: float
    """model_tflops_per_gpu over the dense peak of the training precision (fp8's for fp8), so at most 1."""
    mfu_peak: str = "bf16 dense"
    """Which datasheet peak `mfu` is against: the training precision's dense rate, e.g. `fp8 dense`."""
    mfu_peak_tflops: float = 0.0
    """That peak per GPU, TFLOP/s (the datasheet's, not a probe's measurement)."""
    bottleneck: str
    """The binding resource: one of RESOURCES' keys, or `pipeline_bubble`."""
    bottleneck_message: str
    """One sentence on what binds and by how much."""
    speedup_if_2x: dict[str, float]
    """For each resource, the whole step's speedup if it alone were twice as fast."""
    total_time_s: float | None
    """Time to train `tokens` (null without tokens)."""
    gpu_hours: float | None
    """total_time × n_gpus / 3600 (null without tokens)."""
    cost_usd: float | None
    """gpu_hours × price (null where no price is known)."""
    price_usd_per_gpu_hour: float | None
    """The price the cost uses, when known."""
    host_ram_gb_per_node: float
    """Host RAM a node needs (processes, loader workers, offloaded states, checkpoint staging)."""
    config: dict[str, Any]
    """The configuration this estimate is for (GPU, counts, parallelism, batch)."""
    warnings: list[str]
    """Things the user should look at."""
    notes: list[str]
    """What the loader decided and what the model leaves out for this job."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract of DESIGN.md (plus extra keys)."""
        return self.model_dump(mode="json")
