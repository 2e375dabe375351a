"""What a machine measured: the ceilings a probe found, which estimates use instead of datasheet peaks."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from trainrig.specs.base import MAX_FIGURE, MAX_GPUS, FrozenSpec

__all__ = ["HardwareProfile"]


class HardwareProfile(FrozenSpec):
    """Measured figures for one node; every field is optional (null = not measured)."""

    gpu_name: str | None = None
    """The GPU as the driver names it."""
    gpu_catalog_id: str | None = None
    """The catalog entry the GPU was matched to."""
    measured_at: str | None = None
    """ISO-8601 time of the probe."""
    gemm_tflops: dict[str, Annotated[float, Field(gt=0, le=MAX_FIGURE)]] = Field(default_factory=dict)
    """Best dense GEMM rate per precision (`bf16`, `fp16`, `tf32`, `fp32`, `fp8`) in TFLOP/s."""
    gemm_expected_tflops: dict[str, Annotated[float, Field(gt=0, le=MAX_FIGURE)]] = Field(default_factory=dict)
    """What a healthy GPU of the matched catalog type reaches in the same sweep, per precision
    (the probe's health check: peak × best-shape fraction, × the sustained share where the board's
    default power limit held the clock). With it the estimate keeps the catalog's rates and scales
    them by `gemm_tflops / gemm_expected_tflops`: a healthy GPU changes nothing, a capped or slow
    one slows the estimate by what it measured. Without it (older profiles) the measured rate
    replaces the peak."""
    memory_bandwidth_gbs: float | None = Field(default=None, gt=0, le=MAX_FIGURE)
    """Device-to-device copy, bytes read plus written per second, GB/s."""
    pcie_h2d_gbs: float | None = Field(default=None, gt=0, le=MAX_FIGURE)
    """Pinned host-to-device copy rate per GPU, GB/s."""
    pcie_d2h_gbs: float | None = Field(default=None, gt=0, le=MAX_FIGURE)
    """Pinned device-to-host copy rate per GPU, GB/s."""
    intra_node_busbw_gbs: float | None = Field(default=None, gt=0, le=MAX_FIGURE)
    """All-reduce bus bandwidth among the node's GPUs at large message sizes, GB/s."""
    inter_node_busbw_gbs: float | None = Field(default=None, gt=0, le=MAX_FIGURE)
    """All-reduce bus bandwidth across nodes at large message sizes, GB/s."""
    host_memory_bandwidth_gbs: float | None = Field(default=None, gt=0, le=MAX_FIGURE)
    """Host STREAM-like copy bandwidth for the whole node, GB/s."""
    storage_read_gbs: float | None = Field(default=None, gt=0, le=MAX_FIGURE)
    """Sequential dataset read rate with the page cache bypassed, GB/s."""
    storage_write_gbs: float | None = Field(default=None, gt=0, le=MAX_FIGURE)
    """Checkpoint-like write rate with fsync, GB/s."""
    tokenize_tokens_per_s_per_core: float | None = Field(default=None, gt=0, le=MAX_FIGURE)
    """Tokenization rate of one CPU core, tokens/s."""
    collate_tokens_per_s_per_core: float | None = Field(default=None, gt=0, le=MAX_FIGURE)
    """Collation rate of pre-tokenized samples on one core, tokens/s."""
    cpu_cores: int | None = Field(default=None, gt=0, le=MAX_GPUS)
    """Physical CPU cores of the node."""
    n_gpus: int | None = Field(default=None, ge=0, le=MAX_GPUS)
    """GPUs the probe found on the node (per-GPU figures above are the slowest GPU's)."""
    host_ram_gib: float | None = Field(default=None, gt=0, le=MAX_FIGURE)
    """Host memory of the node (or the container's limit), GiB."""
    p2p_gbs: float | None = Field(default=None, gt=0, le=MAX_FIGURE)
    """GPU-to-GPU copy rate of the slowest measured pair, one direction, GB/s."""
    tokenize_tokens_per_s_all_cores: float | None = Field(default=None, gt=0, le=MAX_FIGURE)
    """Tokenization rate of every usable core at once, tokens/s."""
    quick: bool | None = None
    """Measured with `trainrig probe --quick` (shorter runs, fewer shapes and sizes)."""
