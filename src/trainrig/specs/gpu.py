"""What a GPU (or other accelerator) is: the datasheet figures the performance model starts from."""

from __future__ import annotations

import functools
from typing import Literal

from pydantic import Field

from trainrig.specs.base import MAX_FIGURE, MAX_GPUS, CatalogEntry, FrozenSpec

__all__ = ["GPU", "PeakTflops", "Precision", "MemoryType"]

Precision = Literal["fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "fp4", "int8"]
MemoryType = Literal["HBM2", "HBM2e", "HBM3", "HBM3e", "GDDR6", "GDDR6X", "GDDR7"]


class PeakTflops(FrozenSpec):
    """Dense peak rates in TFLOP/s (int8 in TOPS) at boost clock; null where the chip lacks the format.

    Never the 2:4 structured-sparsity figure that datasheets print beside the dense one.
    """

    fp64: float | None = Field(default=None, gt=0, le=MAX_FIGURE)
    """FP64; the tensor-core rate where the chip has FP64 matrix units, else the vector rate."""
    fp32: float | None = Field(default=None, gt=0, le=MAX_FIGURE)
    """FP32 on the vector units (CUDA cores / stream processors), not TF32."""
    tf32: float | None = Field(default=None, gt=0, le=MAX_FIGURE)
    """TF32 (or AMD XF32) on the matrix units, dense."""
    fp16: float | None = Field(default=None, gt=0, le=MAX_FIGURE)
    """FP16 on the matrix units with FP32 accumulate, dense."""
    bf16: float | None = Field(default=None, gt=0, le=MAX_FIGURE)
    """BF16 on the matrix units with FP32 accumulate, dense."""
    fp8: float | None = Field(default=None, gt=0, le=MAX_FIGURE)
    """FP8 (E4M3/E5M2) on the matrix units, dense."""
    fp4: float | None = Field(default=None, gt=0, le=MAX_FIGURE)
    """FP4 (NVFP4/MXFP4 E2M1 with block scales) on the matrix units, dense: Blackwell's fifth-generation
    Tensor Cores."""
    int8: float | None = Field(default=None, gt=0, le=MAX_FIGURE)
    """INT8 on the matrix units, dense, in TOPS."""


class GPU(CatalogEntry):
    """One accelerator model, as its vendor's datasheet describes it."""

    vendor: Literal["nvidia", "amd", "intel"]
    """Who makes it."""
    architecture: str
    """Micro-architecture, e.g. `Hopper`, `CDNA3`, `Gaudi2`."""
    form_factor: Literal["sxm", "pcie", "oam", "nvl", "hgx"]
    """Board form factor; decides the default scale-up link and power envelope."""
    memory_gib: float = Field(gt=0, le=MAX_FIGURE)
    """Device memory as marketed (HBM and GDDR capacities are binary, so GB on the box ≈ GiB)."""
    memory_type: MemoryType
    """DRAM technology."""
    memory_bandwidth_gbs: float = Field(gt=0, le=MAX_FIGURE)
    """Peak device-memory bandwidth in GB/s (10^9 bytes/s)."""
    memory_bus_width_bits: int = Field(gt=0, le=MAX_GPUS)
    """Memory interface width in bits."""
    peak_tflops: PeakTflops
    """Dense peak arithmetic rates per precision."""
    compute_units: int = Field(gt=0, le=MAX_GPUS)
    """SMs (NVIDIA), CUs (AMD) or matrix engines + TPCs (Gaudi): the units a GEMM's tiles spread over."""
    matrix_cores: int | None = Field(default=None, gt=0, le=MAX_GPUS)
    """Tensor Cores (NVIDIA), Matrix Cores (AMD) or MMEs (Gaudi); null where not published."""
    boost_clock_mhz: float = Field(gt=0, le=MAX_FIGURE)
    """The clock the peak rates assume."""
    tdp_w: float = Field(gt=0, le=MAX_FIGURE)
    """Board power (TDP / TBP) in watts."""
    pcie_gen: int = Field(ge=3, le=6)
    """Host interface PCIe generation."""
    pcie_lanes: int = Field(ge=1, le=16)
    """Host interface PCIe lanes."""
    host_link: str | None = None
    """Link catalog id of the host interface where it is not the PCIe slot `pcie_gen` and `pcie_lanes`
    describe (NVLink-C2C on Grace superchips: `nvlink-c2c-gb`); null = that PCIe link."""
    scale_up: str | None = None
    """Scale-up link catalog id (`nvlink4`, `infinity-fabric-3`, `gaudi2-roce` …); null for PCIe-only cards."""
    scale_up_domain: int | None = Field(default=None, gt=0, le=MAX_GPUS)
    """GPUs one scale-up fabric joins (2 for NVLink-bridged pairs, 4 for an MI100 hive); null = the
    whole node (NVSwitch/HGX baseboards). Larger groups fall back to PCIe between the domains. More
    than a node holds: the fabric joins whole nodes (GB200/GB300 NVL72: 72 GPUs, 18 trays of 4,
    through NVLink switch trays), and groups inside it stay on the scale-up link."""
    scale_up_gbs: float | None = Field(default=None, gt=0, le=MAX_FIGURE)
    """Scale-up bandwidth per GPU, total of both directions, in GB/s as vendors quote it."""
    year: int = Field(ge=2015, le=2030)
    """Year of release."""
    matmul_efficiency: float | None = Field(default=None, gt=0, le=1)
    """Measured best-shape bf16 GEMM rate as a fraction of the dense peak (MAMF); null if unmeasured."""
    peer_to_peer: bool = True
    """Whether GPUs of this model in one host can read each other's memory directly (CUDA peer
    access over PCIe or NVLink); GeForce Ada and Blackwell cards have it disabled in the driver."""
    attention_efficiency: float | None = Field(default=None, gt=0, le=1)
    """Measured FlashAttention-2-class forward+backward rate (causal, head dim 128, long sequences) as a
    fraction of the dense bf16 peak; faster kernels (cuDNN, FlashAttention-3 on Hopper) run at their
    measured multiple of it (ATTENTION_KERNEL_SPEED); null if unmeasured."""

    def peak(self, precision: Precision) -> float | None:
        """Dense peak TFLOP/s for a precision, or None where the chip lacks it."""
        return getattr(self.peak_tflops, precision)

    @property
    def flash_attention_support(self) -> int:
        """The best fused-attention class this architecture runs: 2 (FlashAttention-2 or an equal
        vendor kernel), 1 (FlashAttention-1 / PyTorch SDPA's memory-efficient kernel), 0 (none)."""
        return FLASH_ATTENTION_BY_ARCHITECTURE.get(self.architecture, 2)

    @property
    def attention_kernels(self) -> tuple[str, ...]:
        """The `training.attention_kernel` values this GPU runs (see ATTENTION_KERNEL_ARCHITECTURES)."""
        return _attention_kernels(self.architecture)

    def sdpa_backend(self) -> str:
        """The kernel PyTorch's scaled_dot_product_attention dispatches to here for causal training:
        its flash backend (FlashAttention-2) where FlashAttention-2 runs, else its memory-efficient
        (xformers/CUTLASS, FlashAttention-1-class) kernel, else the unfused math path (PyTorch
        sdp_utils: flash needs sm80+, mem-efficient sm50+; cuDNN is opt-in on Hopper since 2.5.1)."""
        return {2: "fa2", 1: "fa1"}.get(self.flash_attention_support, "eager")

    def attention_kernel_speed(self, kernel: str) -> tuple[float, float]:
        """(forward, backward) rate of a fused attention kernel relative to this GPU's
        FlashAttention-2-class rate (`attention_efficiency`); 1 where no faster kernel is measured."""
        return ATTENTION_KERNEL_SPEED.get((kernel, self.architecture), (1.0, 1.0))

    @property
    def fp8_recipes(self) -> tuple[str, ...]:
        """The `training.fp8_recipe` values this GPU runs: per-tensor and 128-block scaling wherever
        it has fp8 matrix units; MXFP8 (32-element blocks with E8M0 scales, applied by the tensor
        cores themselves) only on Blackwell (OCP MX spec v1.0; Transformer Engine 2.x MXFP8BlockScaling
        needs sm100+)."""
        if self.peak("fp8") is None:
            return ()
        return ("tensorwise", "delayed", "blockwise") + (("mxfp8",) if self.architecture in MXFP8_ARCHITECTURES else ())


# FlashAttention-2 runs on Ampere, Ada and Hopper (and newer) with CUDA, and on MI200/MI300 (CDNA2/3)
# with ROCm; Turing and Volta do not run it (Dao-AILab/flash-attention README, "NVIDIA CUDA Support",
# "AMD ROCm Support"). Turing runs FlashAttention-1; Volta runs PyTorch SDPA's memory-efficient
# (xformers/CUTLASS) kernel, flash-like in memory, FlashAttention-1-class in speed. CDNA1 (MI100) has
# neither, so PyTorch falls back to the unfused math path.
FLASH_ATTENTION_BY_ARCHITECTURE = {"Volta": 1, "Turing": 1, "CDNA": 0}

ATTENTION_KERNELS = ("eager", "sdpa", "fa1", "fa2", "fa3", "cudnn")
# Kernels beyond the FlashAttention classes above, by the architectures that run them.
# FlashAttention-3 is Hopper-only (Dao-AILab/flash-attention README, "FlashAttention-3 beta release":
# H100/H800, CUDA >= 12.3; Shah et al. 2024). cuDNN's fused flash attention (cudnn-frontend SDPA,
# what Transformer Engine's FusedAttention and PyTorch's cuDNN SDPA backend call) needs sm80+
# (NVIDIA cuDNN frontend docs, "Scaled Dot Product Attention": Ampere and newer).
ATTENTION_KERNEL_ARCHITECTURES = {
    "fa3": ("Hopper",),
    "cudnn": ("Ampere", "Ada Lovelace", "Hopper", "Blackwell"),
}
# (forward, backward) speed relative to FlashAttention-2 on the same GPU, head dim 128, causal
# forward / backward at 16k tokens, bf16, H100 SXM5 (Shah et al. 2024, FlashAttention-3, Fig. 5-6):
# forward FA2 335, cuDNN 539, FA3 616 TFLOP/s; backward FA2 322, cuDNN 516, FA3 561 TFLOP/s.
# Elsewhere no faster kernel than FlashAttention-2 is published for training; cuDNN counts as equal.
ATTENTION_KERNEL_SPEED = {
    ("fa3", "Hopper"): (616 / 335, 561 / 322),
    ("cudnn", "Hopper"): (539 / 335, 516 / 322),
}
MXFP8_ARCHITECTURES = ("Blackwell",)


@functools.cache  # a handful of architectures; every estimate asks a few times
def _attention_kernels(architecture: str) -> tuple[str, ...]:
    support = FLASH_ATTENTION_BY_ARCHITECTURE.get(architecture, 2)
    runs = {"eager", "sdpa"} | ({"fa1"} if support >= 1 else set()) | ({"fa2"} if support >= 2 else set())
    runs |= {k for k, archs in ATTENTION_KERNEL_ARCHITECTURES.items() if architecture in archs}
    return tuple(k for k in ATTENTION_KERNELS if k in runs)
