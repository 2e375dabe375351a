"""`estimate(job)`: one configuration → an Estimate, with its bottleneck, what-ifs and fit advice."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from trainrig.estimate.core import MEMORY_PARTS, STEP_PARTS, Outputs, evaluate
from trainrig.estimate.host_issue import MOE_KERNELS
from trainrig.estimate.inputs import Inputs, inputs_from_job
from trainrig.estimate.job_fields import (
    ALIGNED_ELEMENTS,
    ASSUMED_VOCAB_PADDING,
    head_is_unaligned,
    head_vocab_per_rank,
    scale_up_domain,
)
from trainrig.estimate.memory import GIB, PEAK_PHASES
from trainrig.estimate.params import DEFAULT_PARAMETERS, ModelParameters
from trainrig.estimate.result import RESOURCES, Estimate
from trainrig.specs import Job
from trainrig.specs.job import (
    expert_tp_degree,
    peft_casts_unquantized_to_fp32,
    resolve_attention_kernel,
    resolve_fp8_recipe,
)

__all__ = ["estimate", "doubled_resource_inputs"]


def estimate(
    job: Job,
    params: ModelParameters = DEFAULT_PARAMETERS,
    price_usd_per_gpu_hour: float | None = None,
    advise_fit: bool = True,
) -> Estimate:
    """Memory, step time, throughput, MFU, bottleneck and (with `training.tokens`) total time and cost."""
    base, out = _evaluate_with_what_ifs(job, params)
    row = _row(out, 0)
    speedups = {name: float(row["step_time_s"] / out.step_time_s[i + 1]) for i, name in enumerate(RESOURCES)}
    fits = bool(row["fits"])
    if fits:
        fit_message, fit_fixes = None, []
    elif advise_fit:
        fit_message, fit_fixes = _fit_message(job, row, params)
    else:
        fit_message, fit_fixes = _overflow_text(job, row, params), []
    tokens = job.training.tokens
    total_s = tokens / row["tokens_per_s"] if tokens else None
    gpu_hours = total_s * job.hardware.n_gpus / 3600 if total_s is not None else None
    cost = gpu_hours * price_usd_per_gpu_hour if gpu_hours is not None and price_usd_per_gpu_hour else None
    bottleneck, message = _bottleneck(row, speedups, job)
    # built from the model's own numbers, each already of its field's type: validation would only re-check them
    # (tests/estimate/test_scalar_path.py validates what this builds)
    return Estimate.model_construct(
        fits=fits,
        fit_message=fit_message,
        fit_fixes=fit_fixes,
        memory_per_gpu_gib=row["memory_bytes"] / GIB,
        memory_capacity_gib=float(job.hardware.gpu.memory_gib),
        memory_allocated_gib=row["memory_allocated_bytes"] / GIB,
        memory_reserved_gib=row["memory_reserved_bytes"] / GIB,
        memory_peak_phase=PEAK_PHASES[int(row["memory_peak_phase"])],
        memory_limit_gib=job.hardware.gpu.memory_gib * (1 - params.fit_headroom_fraction),
        memory_paged_gib=row["memory_paged_bytes"] / GIB,
        assumptions=_assumptions(job, params),
        memory_breakdown_gib={k: row["memory"][k] / GIB for k in MEMORY_PARTS},
        step_time_s=row["step_time_s"],
        step_breakdown_s={k: row["step"][k] for k in STEP_PARTS},
        tokens_per_s=row["tokens_per_s"],
        tokens_per_s_per_gpu=row["tokens_per_s"] / job.hardware.n_gpus,
        model_tflops_per_gpu=row["model_tflops_per_gpu"],
        hardware_tflops_per_gpu=row["hardware_tflops_per_gpu"],
        mfu=row["mfu"],
        mfu_peak=f"{job.training.precision} dense",
        mfu_peak_tflops=float(base.mfu_peak_tflops),  # the training precision's dense peak (job_fields.gpu_fields)
        bottleneck=bottleneck,
        bottleneck_message=message,
        speedup_if_2x=speedups,
        total_time_s=total_s,
        gpu_hours=gpu_hours,
        cost_usd=cost,
        price_usd_per_gpu_hour=None if price_usd_per_gpu_hour is None else float(price_usd_per_gpu_hour),
        host_ram_gb_per_node=row["host_ram_gb_per_node"],
        config=_config(job, int(base.params_total)),
        warnings=_warnings(job, row, params),
        notes=list(job.notes) + _pipeline_split_notes(job) + _aligned_head_note(job, base, row, params)
        + _unmodelled(job),
    )


def _evaluate_with_what_ifs(job: Job, params: ModelParameters) -> tuple[Inputs, Outputs]:
    """The job's Inputs, and the base and one variant per resource at twice its speed evaluated in
    one vectorized call. On Python floats first (ops.py); where those divide by zero, again on
    np.float64, which give the same numbers and inf or NaN there."""
    try:
        base = inputs_from_job(job, params, python_floats=True)
        return base, evaluate(doubled_resource_inputs(base), params)
    except (ZeroDivisionError, OverflowError):
        base = inputs_from_job(job, params)
        return base, evaluate(doubled_resource_inputs(base), params)


# field: (the resource whose row changes it, by what factor)
_TWICE = {
    "gemm_peak_tflops": ("compute", 2.0),
    "head_gemm_peak_tflops": ("compute", 2.0),
    "attention_peak_tflops": ("compute", 2.0),
    "hbm_bandwidth_gbs": ("hbm_bandwidth", 2.0),
    "intra_bandwidth_gbs": ("intra_node", 2.0),
    "inter_node_bandwidth_gbs": ("inter_node", 2.0),
    "pcie_bandwidth_gbs": ("pcie", 2.0),
    "pcie_peer_gbs": ("pcie", 2.0),
    "cpu_cores_per_node": ("cpu", 2.0),
    "kernel_launch_us": ("cpu", 0.5),
    "host_memory_bandwidth_gbs": ("cpu", 2.0),
    "storage_read_gbs": ("storage", 2.0),
    "storage_write_gbs": ("storage", 2.0),
}
# each field's factor in each row (row 0 the base, then RESOURCES in order): one multiplication
# makes every column
_TWICE_FACTORS = np.ones((len(_TWICE), len(RESOURCES) + 1))
for _i, (_resource, _factor) in enumerate(_TWICE.values()):
    _TWICE_FACTORS[_i, list(RESOURCES).index(_resource) + 1] = _factor


def doubled_resource_inputs(base: Inputs) -> Inputs:
    """Rows: the base, then each of RESOURCES at twice its speed (same order)."""
    values = [getattr(base, name) for name in _TWICE]
    scaled = np.array(values, dtype=float)[:, None] * _TWICE_FACTORS
    # unknown (NaN), unlimited or zero: twice is the same, one number serves every row
    columns = {name: scaled[i] for i, (name, value) in enumerate(zip(_TWICE, values, strict=True))
               if value != 0 and math.isfinite(value)}
    return base.with_values(**columns)


def _row(out: Outputs, i: int) -> dict[str, Any]:
    def pick(value) -> float:
        return float(value[i]) if type(value) is np.ndarray and value.ndim else float(value)

    return {
        "step": {k: pick(v) for k, v in out.step_parts_s.items()},
        "memory": {k: pick(v) for k, v in out.memory_parts_bytes.items()},
        "step_time_s": pick(out.step_time_s),
        "memory_bytes": pick(out.memory_bytes),
        "fits": bool(pick(out.fits)),
        "tokens_per_s": pick(out.tokens_per_s),
        "model_tflops_per_gpu": pick(out.model_tflops_per_gpu),
        "hardware_tflops_per_gpu": pick(out.hardware_tflops_per_gpu),
        "mfu": pick(out.mfu),
        "host_ram_gb_per_node": pick(out.host_ram_gb_per_node),
        "launch_bound_fraction": pick(out.launch_bound_fraction),
        **{name: pick(getattr(out, name)) for name in (
            "memory_allocated_bytes", "memory_reserved_bytes", "memory_paged_bytes", "memory_peak_phase",
            "memory_releasable_bytes")},
    }


def _bottleneck(row: dict[str, Any], speedups: dict[str, float], job: Job) -> tuple[str, str]:
    resource = max(speedups, key=speedups.get)
    gain = speedups[resource]
    bubble_share = row["step"]["pp_bubble"] / row["step_time_s"]
    if gain < 1 + bubble_share / 2 and bubble_share > 0.1:
        return "pipeline_bubble", (
            f"the pipeline bubble is {bubble_share:.0%} of the step; more micro-batches per step"
            " or interleaving (vpp) shrink it")
    share = {k: v / row["step_time_s"] for k, v in row["step"].items()}
    return resource, (f"{RESOURCES[resource]} binds: {_BINDING_DETAIL[resource](row, share)}; 2× faster would"
                      f" speed the step {gain:.2f}×")


# what each resource's binding looks like in the step (only the binding one is formatted)
_BINDING_DETAIL = {
    "compute": lambda row, share: (f"GEMMs and attention take {share['compute']:.0%} of the step at"
                                   f" {row['mfu']:.0%} MFU"),
    "hbm_bandwidth": lambda row, share: "memory-bound kernels (norms, activations, optimizer) weigh on the step",
    "intra_node": lambda row, share: ("intra-node traffic is exposed "
                                      f"(TP {share['tp_comm']:.0%}, DP {share['dp_comm']:.0%} of the step)"),
    "inter_node": lambda row, share: f"the network between nodes carries exposed traffic (DP {share['dp_comm']:.0%}"
                                     " of the step)",
    "pcie": lambda row, share: f"host↔GPU copies over PCIe are exposed ({share['host_transfer']:.0%} of the step)",
    "cpu": lambda row, share: _cpu_detail(row, share),
    "storage": lambda row, share: ("dataset reads or checkpoint writes show "
                                   f"({share['data_loading'] + share['checkpoint']:.0%} of the step)"),
}


def _cpu_detail(row: dict[str, Any], share: dict[str, float]) -> str:
    """What the CPU holds back: kernel launches, the offloaded optimizer step or data loading,
    whichever shows most in the step."""
    shown = {"launch": share["launch_overhead"] if row["launch_bound_fraction"] > 0 else 0.0,
             "optimizer": share["cpu_optimizer"], "loading": share["data_loading"]}
    largest = max(shown, key=shown.get)
    return {"launch": f"the GPU waits on kernel launches ({shown['launch']:.0%} of the step)",
            "optimizer": f"the optimizer step runs on the CPU (offload) and takes {shown['optimizer']:.0%} of the step",
            "loading": f"data loading on the CPU shows ({shown['loading']:.0%} of the step)"}[largest]


def _fit_message(job: Job, row: dict[str, Any], params: ModelParameters) -> tuple[str, list[dict[str, Any]]]:
    """Why it does not fit with the smallest change that would, and every fix (`fit_fixes`)."""
    from trainrig.estimate.fit_advice import fit_advice

    change, fixes = fit_advice(job, params)
    return _overflow_text(job, row, params) + (f"; smallest change that fits: {change}" if change else
                                        "; no single change fits — use more GPUs or a GPU with more memory"), fixes


def _overflow_text(job: Job, row: dict[str, Any], params: ModelParameters) -> str:
    """The peak against what fits: the capacity less the headroom a caching allocator needs."""
    largest = max(row["memory"], key=row["memory"].get)
    gpu = job.hardware.gpu
    limit_gib = gpu.memory_gib * (1 - params.fit_headroom_fraction)
    return (f"needs {row['memory_bytes'] / GIB:.1f} GiB per GPU, over the {limit_gib:.1f} GiB that fit on"
            f" {gpu.id}'s {gpu.memory_gib:g} GiB ({params.fit_headroom_fraction:.0%} kept free for the"
            f" allocator; {largest} {row['memory'][largest] / GIB:.1f} GiB)")


def _config(job: Job, n_params: int) -> dict[str, Any]:
    t, hw = job.training, job.hardware
    return {
        "model": job.model.name, "n_params": n_params, "gpu": hw.gpu.id, "n_gpus": hw.n_gpus,
        "n_nodes": hw.n_nodes, "gpus_per_node": hw.gpus_per_node, "intra_node": hw.intra_node.id,
        "inter_node": hw.inter_node.link.id if hw.inter_node else None,
        "tp": t.tp, "pp": t.pp, "cp": t.cp, "ep": t.ep, "expert_tp": expert_tp_degree(t), "dp": t.dp_degree,
        "vpp": t.vpp, "pipeline_layers": list(t.pipeline_layers) if t.pipeline_layers else None, "zero": t.zero,
        "recompute": t.recompute, "recompute_modules": t.recompute_modules, "micro_batch": t.micro_batch,
        "global_batch": t.global_batch, "grad_accum": t.micro_batches, "seq_len": t.seq_len,
        "precision": t.precision, "method": t.method, "framework": t.framework,
        "master_weights": t.master_weights, "quantization": t.base_quantization, "optimizer": t.optimizer,
        "optimizer_moment_dtype": t.optimizer_moment_dtype,
        "grad_reduce_dtype": t.grad_reduce_dtype,
        "moe_dispatcher": t.moe_dispatcher or "alltoall", "moe_a2a_overlap": t.moe_a2a_overlap,
        "cuda_graph_scope": t.cuda_graph_scope,
        "loss": t.loss, "packing": t.packing,
        "attention_kernel": resolve_attention_kernel(t, hw.gpu)[1], "fp8_recipe": resolve_fp8_recipe(t),
    }


def _warnings(job: Job, row: dict[str, Any], params: ModelParameters) -> list[str]:
    t, hw = job.training, job.hardware
    warnings = []
    used = row["memory_bytes"] / GIB / hw.gpu.memory_gib
    limit = 1 - params.fit_headroom_fraction
    if row["fits"] and used > limit:
        warnings.append(f"the reserved peak ({row['memory_bytes'] / GIB:.1f} GiB) is over the card's "
                        f"{limit:.0%}; it fits because PyTorch's caching allocator releases "
                        f"{row['memory_releasable_bytes'] / GIB:.1f} GiB of cached free blocks and retries"
                        " (num_alloc_retries), which synchronizes the GPU and slows those steps")
    elif row["fits"] and used > 0.9:
        warnings.append(f"memory is {used:.0%} full: fragmentation may push it over; leave ~10% headroom")
    warnings.extend(_framework_warnings(job))
    if t.tp > max(hw.gpus_per_node, scale_up_domain(hw) or 0):  # an NVL72 rack's NVLink spans its trays
        warnings.append(f"tp={t.tp} spans nodes: every layer's all-reduces cross the network")
    if t.zero >= 2 and t.pp > 1:
        warnings.append("ZeRO-2/3 with pipeline parallelism is unsupported by DeepSpeed and Megatron")
    if hw.ram_gb_per_node and row["host_ram_gb_per_node"] > hw.ram_gb_per_node:
        needed = row["host_ram_gb_per_node"]
        warnings.append(f"host RAM: a node needs ~{needed:.0f} GB but has {hw.ram_gb_per_node:g} GB")
    if row["launch_bound_fraction"] > 0.2:
        warnings.append(f"{row['launch_bound_fraction']:.0%} of compute waits on kernel launches: larger"
                        " micro-batches, CUDA graphs or torch.compile would help")
    if t.sequence_parallel and t.tp == 1:
        warnings.append("sequence_parallel has no effect with tp=1")
    if t.tp_comm_overlap and t.tp == 1:
        warnings.append("tp_comm_overlap has no effect with tp=1")
    if t.cp_kind != "ring" and t.cp == 1 and "cp_kind" in t.model_fields_set:  # (not a framework's default)
        warnings.append(f"cp_kind: {t.cp_kind} has no effect with cp=1")
    if t.moe_dispatcher is not None and (t.ep == 1 or not job.model.is_moe):
        warnings.append(f"moe_dispatcher: {t.moe_dispatcher} has no effect without experts spread over ranks (ep > 1)")
    warnings.extend(_hardware_warnings(job))
    return warnings


def _hardware_warnings(job: Job) -> list[str]:
    """What the GPU cannot do that the job asks for, and the fallback the estimate used instead."""
    t, gpu = job.training, job.hardware.gpu
    said = []
    asked, modelled = resolve_attention_kernel(t, gpu)
    if asked != modelled and asked != "sdpa":
        fallback = ("PyTorch SDPA's memory-efficient kernel, at FlashAttention-1-class speed" if modelled == "fa1"
                    else "unfused attention (s×s scores in memory), PyTorch's fallback")
        said.append(f"{gpu.id} ({gpu.architecture}) cannot run {ATTENTION_KERNEL_NAMES[asked]}; "
                    f"modelled with {fallback}")
    if not gpu.peer_to_peer and job.hardware.gpus_in_node > 1:
        said.append(f"{gpu.id} has no GPU peer-to-peer: NCCL stages GPU-to-GPU traffic through host memory, "
                    "modelled at each GPU's PCIe rate")
    return said


def _framework_warnings(job: Job) -> list[str]:
    """Layouts the job's framework cannot run (the estimate is still made: another stack might)."""
    t, fw = job.training, job.framework
    missing = [what for what, needed, supported in (
        ("tensor parallelism", t.tp > 1, fw.tensor_parallel), ("pipeline parallelism", t.pp > 1, fw.pipeline_parallel),
        ("QLoRA", t.method == "qlora", fw.quantized_lora),
        ("TP communication overlap", t.tp_comm_overlap and t.tp > 1, fw.tp_comm_overlap)) if needed and not supported]
    return [f"{fw.name} does not support {what}" for what in missing]


def _assumptions(job: Job, params: ModelParameters = DEFAULT_PARAMETERS) -> list[str]:
    """What the estimate assumed that the job file did not state."""
    t = job.training
    given = t.model_fields_set
    said = []
    if t.fused_kernels is None:
        fused = t.kernels_fused(job.framework.fused_kernels)
        said.append("fused norm/activation kernels (fused_kernels: true)" if fused
                    else f"eager PyTorch kernels, {job.framework.name}'s default (fused_kernels: false)")
    if job.framework.tp_dtensor and t.tp > 1 and t.compile is None \
            and not t.compiled(job.framework.tp_overlap_micro_pipeline):
        said.append("not compiled: each sharded linear and adapter pays DTensor's host dispatch"
                    " (compile: false; dtensor_*_host_us)")
    if t.attention_kernel is None and t.flash_attention and t.flash_attention_version == 2:
        asked, modelled = resolve_attention_kernel(t, job.hardware.gpu)
        why = f", {job.framework.name}'s choice on {job.hardware.gpu.architecture}" if asked != "fa2" else ""
        said.append(f"{ATTENTION_KERNEL_NAMES[modelled]} attention (attention_kernel: {modelled}{why})")
    recipe = resolve_fp8_recipe(t)
    if recipe is not None and t.fp8_recipe is None:
        said.append(f"fp8 {FP8_RECIPE_NAMES[recipe]} on the linear layers, attention and output head in bf16"
                    f" (fp8_recipe: {recipe})")
    if t.packing and "packing" in given and t.packed_sample_len is None:
        said.append("packed samples attend across their boundaries, causal over seq_len (packed_sample_len"
                    " unset: no document mask)")
    if "framework" not in given:
        said.append("no framework-specific behaviour (framework: custom)")
    if t.method == "full" and t.precision != "fp32" and "master_weights" not in given and not t.master_weights:
        said.append(f"{t.precision} weights, gradients and optimizer states with no fp32 master copy,"
                    f" {job.framework.name}'s recipes' default (master_weights: false)")
    elif t.method == "full" and t.precision != "fp32" and "master_weights" not in given:
        grads = "gradients" if t.grad_reduce_dtype in (None, "fp32") else f"{t.grad_reduce_dtype} gradients"
        said.append(f"mixed precision with fp32 master weights and {grads}" if grads == "gradients"
                    else f"mixed precision with fp32 master weights, {grads} (grad_reduce_dtype)")
    if t.optimizer_in_backward is False and t.optimizer in ("adamw", "adam8bit", "sgd"):
        said.append("a fused or per-tensor optimizer step (no temporaries beyond the states)")
    framework = job.framework
    said.extend(_projection_assumptions(job))
    if peft_casts_unquantized_to_fp32(t, framework):
        said.append("the quantized base prepared by PEFT's prepare_model_for_kbit_training: embedding, output head"
                    f" and norms in fp32 ({framework.name}'s QLoRA recipes)")
    if t.loss == "full" and framework.loss_bytes_per_logit:
        said.append(f"{framework.name}'s own cross-entropy: an fp32 softmax saved and turned into the gradient in"
                    f" place, {framework.loss_bytes_per_logit:g} bytes per logit at its peak (loss: full; `fused`"
                    " for Transformer Engine's in-place kernel)")
    if "loss" not in given and framework.default_loss:
        said.append(f"{framework.name}'s recipes' cross-entropy (loss: {t.loss})")
    said.extend(_head_alignment_assumptions(job, params))
    if "optimizer" not in given and framework.default_optimizer:
        said.append(f"optimizer: {t.optimizer}, {framework.name}'s recipes' default (training.optimizer)")
    if framework.default_recompute and not {"recompute", "activation_offload"} & given:
        offload = " with the saved activations in host RAM (activation_offload: true)" if t.activation_offload else ""
        said.append(f"recompute: {t.recompute}{offload}, {framework.name}'s default activation checkpointing"
                    " (training.recompute)")
    if "zero" not in given and job.framework.default_zero:
        said.append(f"ZeRO {t.zero}, {job.framework.name}'s recipes' default (distributed optimizer; training.zero)")
    if job.model.is_moe and t.expert_tp is None and expert_tp_degree(t) != t.tp:
        said.append(f"experts at tensor parallelism {expert_tp_degree(t)}: ep {t.ep} spans the tensor-parallel ranks"
                    " (Megatron-Core's MoE parallel folding, the only layout that runs it; training.expert_tp)")
    said.extend(_selective_recompute_assumptions(job))
    said.extend(_hybrid_assumptions(job))
    if t.account_for_embedding_in_pipeline_split and "account_for_embedding_in_pipeline_split" not in given:
        n = job.model.n_layers
        said.append(f"the embedding and the loss counted as pipeline slots ({n} + 2 = {n + 2} over pp·vpp"
                    f" {t.pp * t.vpp}, the even split {framework.name} runs where the layers alone do not divide;"
                    " training.account_for_embedding_in_pipeline_split, account_for_loss_in_pipeline_split)")
    if t.pp > 1 and "pp_schedule" not in given:
        said.append("1F1B pipeline schedule" + (", interleaved" if t.vpp > 1 else "") + " (pp_schedule: 1f1b)")
    said.append(f"{framework.name} keeps a persistent gradient buffer" if framework.persistent_grad_buffer
                else "gradients freed between steps (zero_grad(set_to_none=True))")
    said.extend(_overlap_assumptions(job, given))
    said.extend(_cuda_graph_assumptions(job))
    gpu = job.hardware.gpu
    # the peaks are the datasheet's, at the board's default power limit and boost clocks; the clock drop
    # of sustained full-power GEMMs is inside sustained_matmul_fraction (params.py), not a per-job derate
    said.append(f"{gpu.id} at its default power limit ({gpu.tdp_w:g} W) and clocks: datasheet peaks, the clock drop"
                " under sustained load in sustained_matmul_fraction; a lower power cap is not modelled")
    if t.precision == "fp4":
        said.append("NVFP4 on the linear layers (E4M3 scale per 16 elements, fp32 per tensor, Transformer"
                    " Engine's NVFP4BlockScaling), attention and output head in bf16; fp4 GEMMs at fp8's"
                    " efficiency relative to bf16 (fp8_matmul_ratio: no fp4 GEMM measurement)")
    if t.precision in ("fp8", "fp4"):
        said.append(f"MFU against the {t.precision} dense peak (sources that quote {t.precision} runs against"
                    " bf16's peak give a multiple of this)")
    return said


def _hybrid_assumptions(job: Job) -> list[str]:
    """What a hybrid model's Mamba-2 layers are taken to run (estimate/mamba.py)."""
    model, t = job.model, job.training
    if not model.n_mamba_layers:
        return []
    said = ["Mamba-2 layers run Megatron-Core's memory-efficient path (mamba_ssm's fused conv1d + SSD scan in"
            " Triton kernels; the backward recomputes the convolution and the chunk states)"]
    if t.cp > 1:
        said.append("context parallelism's exchange in the Mamba layers is not counted (attention layers' only)")
    if t.method != "full":
        said.append("adapters on the attention and MLP linears only, none on the Mamba projections")
    if t.recompute == "selective" or t.recompute_modules:
        said.append("selective recompute redoes the attention layers' core only")
    return said


def _head_alignment_assumptions(job: Job, params: ModelParameters) -> list[str]:
    """The head's vocabulary as padded, where padding decides whether its GEMMs are aligned."""
    vocab, t = job.model.vocab, job.training
    per_rank = head_vocab_per_rank(job)
    if head_is_unaligned(job):
        return [f"the output head's GEMMs on cuBLAS's unaligned kernels at {params.misaligned_gemm_fraction:.0%}"
                " of the aligned rate (measured on an H200; other generations unmeasured):"
                f" {per_rank} vocabulary rows per rank are not a multiple of {ALIGNED_ELEMENTS}"
                " (training.vocab_padding_multiple pads them)"]
    if t.vocab_padding_multiple is None and per_rank * t.tp != vocab:
        return [f"the vocabulary of {vocab} padded to {per_rank * t.tp} ({per_rank} per rank, a multiple of"
                f" {ASSUMED_VOCAB_PADDING}) as pretraining codebases pad it; training.vocab_padding_multiple: 1 if"
                " the model runs it unpadded (its head GEMMs then run on unaligned kernels)"]
    return []


# the padding the note suggests: 64 as nanoGPT and llm.c pad GPT-2's 50257 and Netflix's post-training
# stack pads every vocabulary (a multiple of 8 is enough for alignment; 64 also fills whole tiles)
SUGGESTED_VOCAB_PADDING = 64


def _aligned_head_note(job: Job, base: Inputs, row: dict[str, Any], params: ModelParameters) -> list[str]:
    """Where the head runs unaligned: the step with its vocabulary padded (the head's GEMMs at the
    aligned rate; the padded rows' FLOPs, at most 63·tp, are not counted, as elsewhere)."""
    if not head_is_unaligned(job):
        return []
    aligned = {"head_matmul_efficiency": base.head_matmul_efficiency / params.misaligned_gemm_fraction}
    try:
        padded_s = evaluate(base.with_values(**aligned), params, with_memory=False).step_time_s
    except (ZeroDivisionError, OverflowError):  # as _evaluate_with_what_ifs: again on np.float64
        padded_s = evaluate(inputs_from_job(job, params).with_values(**aligned), params, with_memory=False).step_time_s
    padded_s, step_s = float(np.asarray(padded_s).reshape(-1)[0]), float(row["step_time_s"])
    padded = head_vocab_per_rank(job, SUGGESTED_VOCAB_PADDING) * job.training.tp
    return [f"the output head's {head_vocab_per_rank(job)} vocabulary rows per rank are not a multiple of"
            f" {ALIGNED_ELEMENTS}, so its GEMMs run on unaligned kernels: padded to {padded}"
            f" (training.vocab_padding_multiple: {SUGGESTED_VOCAB_PADDING}; with Hugging Face,"
            f" model.resize_token_embeddings(len(tokenizer), pad_to_multiple_of={SUGGESTED_VOCAB_PADDING}))"
            f" the step would take {padded_s:.3g} s instead of {step_s:.3g} s ({padded_s / step_s - 1:+.0%})"]


def _projection_assumptions(job: Job) -> list[str]:
    """How the layer's q/k/v and gate/up linears are laid out, where the model did not say."""
    m, framework = job.model, job.framework
    if m.fused_qkv is not None and (m.fused_gate_up is not None or not m.gated_mlp):
        return []
    qkv, gate_up = job.projections_fused()
    parts = ["q, k and v in one linear" if qkv else "q, k and v in 3 linears"]
    if m.is_mla:
        parts = ["latent attention's down and up projections as linears of their own"]
    if m.gated_mlp:
        parts.append("gate and up in one" if gate_up else "gate and up in 2")
    whose = f"{framework.name}'s model code" if framework.fused_qkv is not None else "fused, no framework model code"
    return [f"{', '.join(parts)} ({whose}; model.fused_qkv, model.fused_gate_up)"]


def _selective_recompute_assumptions(job: Job) -> list[str]:
    """What `recompute: selective` redoes, where flash attention leaves no scores to drop."""
    t = job.training
    if t.recompute != "selective" or not t.flash_attention or t.recompute_modules is not None:
        return []  # (a module list says what it redoes)
    if job.framework.selective_recompute == "attention":
        return [f"selective recompute redoes the attention kernel's forward ({job.framework.name}'s"
                " core-attention checkpoint); everything else is kept"]
    return [f"selective recompute as an op-level policy ({job.framework.name}; torchtitan's"
            " selective_ac_option: op): every other matmul's output and the attention output kept,"
            " the rest redone in the backward"]


# How assumptions and warnings name the attention kernels and fp8 recipes.
ATTENTION_KERNEL_NAMES = {"eager": "unfused (eager)", "sdpa": "PyTorch SDPA", "fa1": "FlashAttention-1-class",
                          "fa2": "FlashAttention-2-class", "fa3": "FlashAttention-3", "cudnn": "cuDNN fused"}
FP8_RECIPE_NAMES = {"delayed": "delayed per-tensor scaling", "tensorwise": "current per-tensor scaling",
                    "blockwise": "1×128/128×128 block scaling", "mxfp8": "MXFP8 (32-element blocks)"}


def _overlap_assumptions(job: Job, given: set[str]) -> list[str]:
    """How tensor-, context- and data-parallel traffic overlaps compute (core.py)."""
    t = job.training
    said = []
    if t.tp > 1 and not t.tp_comm_overlap:
        said.append("TP collectives exposed, not overlapped with the GEMMs (tp_comm_overlap: false)")
    elif t.tp > 1 and job.framework.tp_overlap_micro_pipeline:
        said.append("TP overlap as PyTorch's async (micro-pipeline) TP runs it: each all-gather fused into the"
                    " matmuls that consume it, each reduce-scatter into the one matmul it scatters, in pieces"
                    " costed as Transformer Engine's (tp_overlap_rs_splits, tp_overlap_comm_sms); the input-gradient"
                    " reduce-scatter after separate q/k/v or gate/up linears runs exposed (tp_comm_overlap: true)")
    elif t.tp > 1:
        said.append("TP overlap as Transformer Engine userbuffers run it: ring-exchange all-gathers, reduce-scatters"
                    " pipelined in pieces beside GEMMs that lose SMs to them (tp_comm_overlap: true;"
                    " tp_overlap_rs_splits, tp_overlap_comm_sms)")
    if t.pp > 1 and t.vpp > 1 and t.pp_comm_overlap is None and job.framework.pp_p2p_overlap:
        said.append("interleaved pipeline sends beside the next chunk's compute, fill and drain exposed"
                    f" ({job.framework.name}'s overlap_p2p_comm; pp_comm_overlap: true)")
    if t.cp > 1:
        kind = {"ring": "ring attention, the K/V exchange hidden under attention",
                "all-gather": "an all-gather of K/V per layer, hidden under the local block only",
                "ulysses": "Ulysses all-to-alls, exposed"}[t.cp_kind]
        default = "" if "cp_kind" in given else (f", {job.framework.name}'s default" if job.framework.default_cp_kind
                                                 else ", the default")
        said.append(f"context parallelism as {kind} (cp_kind: {t.cp_kind}{default})")
    if job.model.is_moe and t.ep > 1:
        said.append(_expert_parallel_assumption(t, given))
    if job.model.is_moe:
        said.append(_moe_host_assumption(job))
    if t.dp_degree * t.cp > 1:
        said.append(_data_parallel_assumption(job))
    return said


def _data_parallel_assumption(job: Job) -> str:
    """How the data-parallel traffic is cut and what of it hides (traffic.data_parallel_exposed_s)."""
    t, fw = job.training, job.framework
    if t.zero >= 3:
        units = "one layer per gather and reduce-scatter"
    elif fw.dp_bucket_elements_per_rank:
        units = (f"{fw.name}'s buckets of max({fw.dp_bucket_elements:.3g}, {fw.dp_bucket_elements_per_rank:.3g}"
                 " × dp·cp) elements")
    elif fw.dp_bucket_elements:
        units = f"{fw.name}'s buckets of {fw.dp_bucket_elements:.3g} elements"
    else:
        units = "gradient buckets of dp_bucket_mb"
    gather = ""
    if t.zero in (1, 2):
        gather = ("; the weight all-gather beside the next forward (overlap_param_gather)" if fw.dp_param_gather_overlap
                  else "; the weight all-gather after the optimizer step, exposed")
    return (f"data-parallel traffic in {units} behind the compute, paying NCCL's ring latency over the"
            f" group; the first gather and the last reduction are exposed{gather}")


def _cuda_graph_assumptions(job: Job) -> list[str]:
    """What CUDA graphs change in the estimate (host_issue.py), or that none is assumed where the
    framework's recipes may run them."""
    scope = job.training.cuda_graph_scope
    if not scope:
        if job.training.framework in ("megatron", "nemo", "torchtitan"):
            return ["every kernel launched from the host, no CUDA graphs (cuda_graph_scope unset)"]
        return []
    return [f"CUDA graphs capture {', '.join(scope)}: one launch per graph and pass replaces its kernels'"
            " launches; the graphs' memory pool, capture time and GPU-side launch gaps not modelled"]


MOE_DISPATCHER_NAMES = {"alltoall": "by all-to-all, a copy per routed expert",
                        "allgather": "by all-gathering every rank's tokens, reduce-scattered back",
                        "deepep": "once per destination node and GPU (DeepEP), routing taken as uniform",
                        "hybridep": "once per destination node and GPU (HybridEP), routing taken as uniform"}


def _moe_host_assumption(job: Job) -> str:
    """What an MoE layer costs the host beyond its kernels (host_issue._moe_small_ops)."""
    fw, t = job.framework, job.training
    fixed_fwd, fixed_bwd = (a + b for a, b in zip(fw.moe_router_host_ops, fw.moe_layer_host_ops, strict=True))
    expert_fwd, expert_bwd = fw.moe_expert_host_ops
    if not (fixed_fwd or fixed_bwd or expert_fwd or expert_bwd):
        return (f"each MoE layer's host work as its {MOE_KERNELS:.0f} kernels (router, top-k, permutes, grouped"
                f" GEMMs); {fw.name}'s router and dispatcher ops not counted")
    counts = f"{fixed_fwd:.0f} small host ops forward and {fixed_bwd:.0f} backward"
    if expert_fwd or expert_bwd:
        local = max(job.model.n_experts // t.ep, 1)
        counts = (f"{fixed_fwd:.0f} + {expert_fwd:.0f}·E small host ops forward and {fixed_bwd:.0f}"
                  f" + {expert_bwd:.0f}·E backward, E = {local} local experts (per-expert GEMM launches, and"
                  " under fp8 casts)")
    return (f"each MoE layer issues {counts} beside its kernels ({fw.name}'s MoE code); host-device"
            " syncs inside the layer not modelled")


def _expert_parallel_assumption(t, given: set[str]) -> str:
    """How MoE tokens move and whether the exchanges hide (traffic.expert_parallel_s)."""
    name = t.moe_dispatcher or "alltoall"
    default = "" if "moe_dispatcher" in given else ", the default"
    if not t.moe_a2a_overlap:
        overlap = "every dispatch and combine exposed (moe_a2a_overlap: false)"
    else:
        overlap = ("each paired with the other micro-batch's attention and expert compute, which loses"
                   " ep_overlap_comm_sms SMs to it; the first forward, the last backward and the pipeline's"
                   " warm-up and cool-down unpaired (moe_a2a_overlap: true)")
    return f"MoE tokens dispatched {MOE_DISPATCHER_NAMES[name]} (moe_dispatcher: {name}{default}); {overlap}"


def _pipeline_split_notes(job: Job) -> list[str]:
    """Name a pipeline split that is not n_layers / pp on every stage (see Inputs.layers_per_stage)."""
    t, n = job.training, job.model.n_layers
    if t.pp == 1:
        return []
    if t.pipeline_layers:
        stages = t.pipeline_layers
        return [f"{n} layers on pp {t.pp} as given ({_runs(stages)} per stage): the fullest stages hold"
                f" {max(stages)} layers and pace the step and peak memory; the first holds the embedding and the"
                " last the output head"]
    slots = int(t.account_for_embedding_in_pipeline_split) + int(t.account_for_loss_in_pipeline_split)
    chunks = t.pp * t.vpp
    largest = -(-(n + slots) // chunks) * t.vpp
    if not slots and n % chunks == 0:
        return []
    counted = f" + {slots} embedding/loss slot{'s' if slots > 1 else ''}" if slots else ""
    chunked = f" × vpp {t.vpp}" if t.vpp > 1 else ""
    even = "evenly" if (n + slots) % chunks == 0 else "unevenly"
    return [f"{n} layers{counted} on pp {t.pp}{chunked} split {even}: the fullest stages hold {largest}"
            " layers and pace the step and peak memory"]


def _runs(counts: tuple[int, ...]) -> str:
    """Per-stage counts with repeats folded: (1, 2, 2, 2, 1) -> '1, 2×3, 1'."""
    runs: list[list[int]] = []
    for count in counts:
        if runs and runs[-1][0] == count:
            runs[-1][1] += 1
        else:
            runs.append([count, 1])
    return ", ".join(f"{value}×{times}" if times > 1 else f"{value}" for value, times in runs)


def _unmodelled(job: Job) -> list[str]:
    hw = job.hardware
    notes = []
    if hw.cpu_cores_per_node is None and not (hw.profile and hw.profile.cpu_cores):
        notes.append("CPU cores per node not given: data-loading throughput not modelled")
    if hw.storage is None and not (hw.profile and hw.profile.storage_read_gbs):
        notes.append("storage not given: dataset reads and checkpoint writes not modelled")
    if job.training.mtp_layers:
        notes.append("multi-token prediction: each module timed as the stage's average layer, its projection and"
                     " the head again; its TP/EP traffic and kernel launches not modelled")
    return notes
