"""What the parts around the GPU are: links, CPUs, host memory and storage."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from trainrig.specs.base import MAX_FIGURE, MAX_GPUS, CatalogEntry

__all__ = ["Link", "CPU", "HostMemory", "Storage", "LinkKind"]

LinkKind = Literal["pcie", "nvlink", "infinity-fabric", "gaudi-roce", "infiniband", "ethernet"]


class Link(CatalogEntry):
    """A data path: a GPU's host interface, its scale-up fabric, or a node's network port."""

    kind: LinkKind
    """Family of the link; scale-up kinds (nvlink, infinity-fabric, gaudi-roce) join GPUs in a node."""
    bandwidth_gbs: float = Field(gt=0, le=MAX_FIGURE)
    """Usable rate per direction in GB/s after line encoding: per GPU for PCIe and scale-up links
    (all of a GPU's NVLinks together), per port for network links."""
    latency_us: float = Field(ge=0, le=MAX_FIGURE)
    """One-way small-message latency of one hop in microseconds (software stack included)."""
    efficiency: float = Field(gt=0, le=1)
    """Fraction of `bandwidth_gbs` that large transfers or NCCL collectives reach in practice."""
    line_rate_gbps: float | None = Field(default=None, gt=0, le=MAX_FIGURE)
    """Network links: the signalling rate in Gb/s as quoted (e.g. 400 for NDR)."""
    pcie_gen: int | None = Field(default=None, ge=1, le=7)
    """PCIe links: the generation."""
    lanes: int | None = Field(default=None, ge=1, le=16)
    """PCIe links: the lane count."""
    default_ports_per_node: int | None = Field(default=None, ge=1, le=MAX_GPUS)
    """Network links: ports a node usually has; null means one per GPU (rail-optimized clusters)."""


class CPU(CatalogEntry):
    """A server CPU model (one socket)."""

    vendor: Literal["intel", "amd", "nvidia", "ampere"]
    """Who makes it."""
    generation: str
    """Product generation, e.g. `Sapphire Rapids`, `Genoa`."""
    cores: int = Field(gt=0, le=MAX_GPUS)
    """Physical cores per socket."""
    threads: int = Field(gt=0, le=MAX_GPUS)
    """Hardware threads per socket."""
    base_clock_ghz: float = Field(gt=0, le=MAX_FIGURE)
    """Base clock."""
    boost_clock_ghz: float = Field(gt=0, le=MAX_FIGURE)
    """Maximum single-core boost clock."""
    memory_channels: int = Field(gt=0, le=MAX_GPUS)
    """DDR channels per socket."""
    memory: str
    """Host memory catalog id of the fastest supported DIMMs, e.g. `ddr5-4800`."""
    pcie_gen: int = Field(ge=3, le=6)
    """PCIe generation of the CPU's lanes."""
    pcie_lanes: int = Field(gt=0, le=MAX_GPUS)
    """PCIe lanes per socket."""
    year: int = Field(ge=2015, le=2030)
    """Year of release."""


class HostMemory(CatalogEntry):
    """A DDR memory speed grade."""

    ddr_type: Literal["DDR4", "DDR5", "LPDDR5X"]
    """Generation."""
    transfer_rate_mts: int = Field(gt=0, le=MAX_GPUS)
    """Mega-transfers per second."""
    per_channel_gbs: float = Field(gt=0, le=MAX_FIGURE)
    """Peak bandwidth of one 64-bit channel in GB/s (MT/s × 8 bytes)."""
    efficiency: float = Field(gt=0, le=1)
    """Fraction of peak a STREAM-like copy reaches on a full socket."""


class Storage(CatalogEntry):
    """A class of storage a node reads its dataset from and writes checkpoints to."""

    kind: Literal["hdd", "sata-ssd", "nvme", "network", "parallel-fs"]
    """Medium."""
    seq_read_gbs: float = Field(gt=0, le=MAX_FIGURE)
    """Sequential read rate per device (local) or per client node (network) in GB/s."""
    seq_write_gbs: float = Field(gt=0, le=MAX_FIGURE)
    """Sequential write rate, same unit."""
    random_read_iops: float | None = Field(default=None, gt=0, le=MAX_FIGURE)
    """4 KiB random-read IOPS, where meaningful."""
    latency_ms: float = Field(ge=0, le=MAX_FIGURE)
    """Typical access latency in milliseconds."""
