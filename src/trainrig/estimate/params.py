"""The named efficiency parameters of the performance model: few, physical, and each with its source.

Everything else in the model is arithmetic on datasheet figures (or a probe's measurements). These
are the only numbers that say how far real software gets from the hardware's limits. They are the
same for every case; `trainrig validate` scores them against published runs (docs/accuracy.md).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

__all__ = ["ModelParameters", "DEFAULT_PARAMETERS"]


@dataclass(frozen=True)
class ModelParameters:
    """Efficiency parameters; see each field's comment for meaning and source."""

    # --- GPU arithmetic -------------------------------------------------------------------------
    default_matmul_efficiency: float = 0.75
    """Best-shape GEMM fraction of dense peak for GPUs without a MAMF measurement in the catalog
    (median of the measured entries in stas00/ml-engineering's MAMF table: 0.52–0.97)."""
    fp8_matmul_ratio: float = 0.88
    """fp8 best-shape GEMM efficiency relative to bf16's: H100 70.9% vs 80.3% (MAMF table)."""
    sustained_matmul_fraction: float = 0.75
    """Share of the isolated best-shape GEMM rate that GEMMs sustain inside a training step: clocks
    drop under sustained full-board power, caches are cold, communication kernels share the SMs.
    Fitted on the bundled measured runs (docs/accuracy.md)."""
    misaligned_gemm_fraction: float = 0.23
    """Rate of a GEMM with a dimension that is not a multiple of 16 bytes (8 16-bit elements) over
    the aligned rate: cuBLAS then runs unaligned kernels (seen: CUTLASS sm75 `align1` on an H200),
    as the vocabulary of a head that is not padded (GPT-2's 50257). Measured on an H200 with
    torch 2.11 / CUDA 13.0 (docs/measurements.md, 2026-12-04): bf16 8191³ 151.8 TFLOP/s against
    669.7 for 8192³ (0.227), and GPT-3 1.3B's three 50257-wide head GEMMs at 107–144 TFLOP/s in a
    step whose aligned GEMMs ran near 660 (0.16–0.22). Netflix's post-training report (2026) saw
    the fallback triple the LM head's time (0.33)."""
    gemm_k_overhead: float = 150.0
    """Reduction depth's worth of fixed work per output tile (pipeline fill, epilogue writing C):
    a GEMM of depth K runs at K/(K + this) of the large-K rate (CUTLASS's multistage mainloop)."""
    tile_saturation_intensity: float = 64.0
    """FLOP per operand byte a GEMM tile needs to keep the matrix units busy: a 128×128 tile
    (intensity 128·128/(128+128)=64 in 16-bit elements) reaches the MAMF rate, smaller tiles a
    proportional fraction. Chosen so 128×128 and larger tiles are compute-bound as in CUTLASS's
    default configurations (NVIDIA CUTLASS docs, 'efficient GEMM')."""
    default_attention_efficiency: float = 0.5
    """FlashAttention forward+backward rate as a fraction of the dense peak, for GPUs whose catalog
    entry has no measured `attention_efficiency` (FlashAttention-2: 73% on A100, 34% on H100;
    Dao 2023 §4.1)."""
    flash1_relative_speed: float = 0.55
    """FlashAttention-1-class kernels' rate relative to FlashAttention-2's on the same GPU. Dao 2023
    §4.1 measures FlashAttention-2 1.3–2.5× faster than FlashAttention in Triton (geometric mean
    1.8) and 1.7–3.0× faster than FlashAttention-1 in CUDA, which the Triton port's docstring puts
    slightly ahead of itself forward+backward (flash_attn/flash_attn_triton.py)."""
    attention_head_dim_overhead: float = 30.0
    """Head-dim's worth of fixed work per attention tile (the online softmax, rescaling and masking
    of each score block, done once whatever the width): a head of width d runs at d/(d + this) of
    the rate, relative to width 128, where the kernels are measured. From the FlashAttention-3
    paper's H100 figures, head dim 64 vs 128 at 16k (Shah et al. 2024, Fig. 5–6): FA2 forward
    324/370 → 20, backward 291/322 → 15; FA3 497/648 → 54, 474/561 → 29; cuDNN 413/595 → 101,
    433/516 → 31; median ≈ 30. (A GEMM's K-loop overhead, `gemm_k_overhead`, would give 150.)"""
    attention_key_overhead: float = 0.0
    """Fixed work of a fused attention kernel per query block, in keys' worth of streamed K/V
    (loading Q, the rescaled output and log-sum-exp, the masked diagonal block): the rate over k
    keys is k/(k + this) of the long-sequence rate. Fitted to H100 head-dim-128 curves at 512–16k
    tokens: FlashAttention-3 forward (pytorch/benchmark#2391, tritonbench: 430 → 621 TFLOP/s) ≈ 240,
    and the FlashAttention-3 paper's Fig. 5–6 (FA2/FA3 forward and backward) 105–420; 0 = flat."""

    # --- memory-bound work ----------------------------------------------------------------------
    memory_efficiency: float = 0.85
    """Fraction of datasheet HBM bandwidth that elementwise kernels reach (RRZE-HPC gpu-stream:
    85–92% for copy/triad on A100/H100; MODELING.md)."""
    elementwise_traffic_factor: float = 1.0
    """Memory traffic of real elementwise kernels over the minimum (each tensor read and written
    once per op), for fused kernels."""
    eager_elementwise_factor: float = 3.0
    """How many times more kernels, and HBM traffic, eager PyTorch spends on the elementwise work
    than fused kernels: an eager RMSNorm is pow, mean, rsqrt-multiply and weight-multiply, four
    kernels reading 4 and writing 3 activations where the fused one reads 1 and writes 1 (3.5×);
    SwiGLU as silu then multiply reads 3 and writes 2 where fused reads 2 and writes 1 (1.7×);
    rotary through complex views and a multiply ~3×. Counted from torchtitan's eager modules."""

    # --- fixed costs ----------------------------------------------------------------------------
    kernel_launch_us: float = 66.67
    """Host time per GPU kernel in an eager framework: Python, dispatcher, autograd and module
    hooks plus the CUDA launch itself (~5 µs of it). When the GPU work of a kernel is shorter, the
    step waits on the CPU. Fitted on the small-model runs of the bundled set, with
    `host_gpu_overlap_exponent`."""
    eager_op_host_us: float = 10.0
    """Host time of one small eager op inside a module's forward or backward (the extra elementwise
    ops of eager code, LoRA's adapter GEMMs, dropout and add): ~5 µs of dispatch and autograd
    recording, measured with tiny tensors on the CPU here (`python benchmarks/eager_op_host_time.py`:
    5.0 µs per forward op), plus a few µs for the CUDA launch itself (MODELING.md)."""
    dtensor_linear_host_us: float = 300.0
    """Host time one linear with DTensor weights adds to a layer's forward in eager tensor
    parallelism (FrameworkSpec.tp_dtensor), over the same linear on plain tensors: DTensor's Python
    dispatch and sharding propagation, the module's input and output hooks and the redistribute
    calls; its backward adds `DTENSOR_LINEAR_BACKWARD_PER_FORWARD` times as much (host_issue.py). Measured
    with torch 2.13 on the CPU here, collectives on a fake process group (`python
    benchmarks/dtensor_host_time.py`: 286–307 µs forward and 418–463 backward per linear, tp 2).
    pytorch/pytorch#107305 saw 0.34 ms for one DTensor `aten.addmm` in 2023."""
    dtensor_adapter_host_us: float = 440.0
    """The same for a LoRA adapter on a sharded linear, beside its linear's own: its two small
    linears, the scaled add and the gather of A's output on DTensors, with AutoModel's adapter
    placements (`python benchmarks/dtensor_host_time.py`: 709–754 µs forward per adapted linear,
    less the linear's 293: 416–461)."""
    dtensor_sequence_parallel_host_us: float = 700.0
    """What sequence parallelism adds to that per layer and forward, the norms run on sequence-sharded
    DTensors and each block's input gathered (torchtitan's and torchtune's plan: SequenceParallel
    norms, PrepareModuleInput, row-parallel outputs as Shard(1)); measured the same way (`python
    benchmarks/dtensor_host_time.py`: 645–738 µs forward, 1215–1345 backward, over tp 2 without it)."""
    host_gpu_overlap_exponent: float = 3.209
    """How well the host's kernel issue overlaps the GPU's execution within a pass: the pass takes
    the k-norm (host^k + gpu^k)^(1/k) of the two totals; k = ∞ would be the slower side alone.
    A layer alternates runs of short kernels, where the host is the slower side, with long GEMMs,
    where the GPU is; the launch queue lets one side run ahead only between synchronizations, so
    the pass outlasts the slower total, most when the two are equal (+24% there, +3% at a 2:1
    ratio). Fitted on the bundled small-model runs with `kernel_launch_us` (docs/accuracy.md)."""
    collective_overhead_us: float = 5.0
    """Fixed cost of one NCCL collective beyond the link latencies (launch, proxy, sync), the
    ~10–20 µs floor of small all-reduces in nccl-tests within one NVLink node."""
    step_overhead_s: float = 0.0
    """Per optimizer step: loss scaling / inf checks, grad-norm, scheduler, logging, Python glue."""

    # --- overlap --------------------------------------------------------------------------------
    dp_overlap_fraction: float = 1.0
    """Fraction of the backward (and, for ZeRO-3, forward) compute window that bucketed
    data-parallel traffic can hide under (PyTorch DDP / FSDP prefetch; Li et al. 2020 VLDB). What
    cannot hide at scale comes from the units themselves (traffic.data_parallel_exposed_s: bucket and
    layer units, the ring's latency over the group, the first gather and last reduction), not from
    this share."""
    tp_overlap_rs_splits: float = 4.0
    """Pieces a GEMM is cut into when its output is reduce-scattered piece by piece beside the next
    piece (Transformer Engine userbuffers' pipelined overlap, `num_splits`: 4 in TE's defaults and
    in every Megatron-Bridge / NeMo `userbuffers_*` preset for proj_fprop and fc2_fprop)."""
    tp_overlap_comm_sms: float = 16.0
    """SMs the overlapped TP communication kernels take from the GEMMs beside them (TE userbuffers
    `num_sm`: 16 by default; 2–24 in the Megatron-Bridge presets, e.g. 24 for GPT-3 175B's proj_fprop
    on H100 with `set_sm_margin`, 4 for its bulk weight-gradient overlaps). The ring-exchange
    all-gathers move data with copy engines and take none."""
    ep_overlap_comm_sms: float = 20.0
    """SMs the expert-parallel dispatch and combine kernels take from the compute they run beside
    under `moe_a2a_overlap` (Megatron-Core TransformerConfig `moe_deepep_num_sms`: 20, HybridEP's
    16; DeepSeek-V3 §3.2.2: 20 SMs suffice to saturate IB and NVLink)."""
    dp_bucket_mb: float = 25.0
    """Gradient bucket of ZeRO-0/1/2 data parallelism, MiB: each bucket is one collective that pays
    the ring's latency, and the last one of the backward never hides. PyTorch DDP's default
    `bucket_cap_mb=25` (torch.nn.parallel.DistributedDataParallel; Li et al. 2020 VLDB §3.2.3)."""

    # --- memory overheads -----------------------------------------------------------------------
    cuda_context_gib: float = 0.6
    """CUDA context and cuBLAS/cuDNN workspaces per GPU (0.3–2 GiB; MODELING.md)."""
    comm_buffers_gib: float = 0.5
    """NCCL buffers per GPU when it talks to others (invisible to PyTorch's allocator)."""
    logits_bytes_per_element: float = 12.0
    """Peak bytes per logit (token × vocabulary entry / tp) with a full cross-entropy, at the start
    of the backward: PyTorch's loss saves the fp32 log-softmax (4), the backward allocates the
    gradient of that output (4) and then of its input (4) while it is still alive; the 16-bit logits
    and their fp32 upcast of the forward are freed by then (torchtitan and torchtune `del` them)."""
    allocator_overhead_fraction: float = 0.08
    """Caching-allocator fragmentation and rounding, as a fraction of activation memory: what the
    allocator reserves beyond what it hands out (reserved − allocated)."""
    fit_headroom_fraction: float = 0.05
    """Share of GPU memory a job must leave free to count as fitting. A caching allocator needs
    contiguous free blocks, so a run whose peak is within a few percent of the capacity fails with
    an out-of-memory error once fragmentation grows; the published fine-tuning runs that ran
    reached at most ~92% of their GPU (LitGPT's Llama 2 13B LoRA on an A100 40GB, 38.1 GB)."""

    # --- host side ------------------------------------------------------------------------------
    collate_tokens_per_s_per_core: float = 5.0e6
    """Pre-tokenized samples read from a memory-mapped array and collated, per CPU core."""
    tokenize_tokens_per_s_per_core: float = 0.5e6
    """On-the-fly BPE tokenization per core (HF tokenizers; tiktoken's README reports 3–6× that)."""
    cpu_adam_params_per_s_per_core: float = 30e6
    """Parameters one host core updates per second in DeepSpeed's CPU-Adam (AVX-512, fp32 states; the
    ZeRO-Offload optimizer step, Ren et al. 2021 §5.1). DeepSpeed PR #735 (R. Yazdani Aminabadi,
    2021-02): 8.2 s per step for an 11.6B-parameter GPT-2 (56 s with torch.optim.Adam; the 5.1–6.5×
    of DeepSpeed's feature docs for 1–10B), on the 48 cores of a DGX-2 host (2 × 24-core Xeon Platinum
    8168, the testbed of Ren et al. §6.1; the PR does not state its cores): 11.6e9 / 8.2 / 48 ≈ 30e6.
    Below the host memory stream of that machine, so arithmetic, not bandwidth, set that step."""
    bytes_per_token_on_disk: float = 4.0
    """Dataset bytes read per token: uint32 ids pre-tokenized, or ~4 bytes of UTF-8 text per token."""
    host_ram_per_gpu_process_gb: float = 6.0
    """Host RAM of one training process: CUDA/driver mappings, libraries, Python, pinned pools."""
    host_ram_per_loader_worker_gb: float = 1.5
    """Host RAM of one data-loader worker process (copy-on-write of the parent grows with use)."""

    def with_overrides(self, **changes: float) -> ModelParameters:
        """A copy with some parameters changed (for sensitivity studies and calibration)."""
        return replace(self, **changes)

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]


DEFAULT_PARAMETERS = ModelParameters()
