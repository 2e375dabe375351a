"""The job the bench actually runs, as a job: the model cut to the built layers, on one GPU (or N
data-parallel processes on this node), one micro-batch per step, and every feature the bench does
not run turned off — so that `estimate()` of this job is the prediction for exactly what was
measured."""

from __future__ import annotations

from typing import Any

from trainrig.catalog.job_file import job_to_mapping, load_job
from trainrig.specs import Job

__all__ = ["scaled_job", "scaled_mapping"]

# training field → (what the bench runs, why it differs when the job asks otherwise)
BENCH_TRAINING = {
    "tp": (1, "one GPU"), "pp": (1, "one GPU"), "cp": (1, "one GPU"), "ep": (1, "one GPU"), "dp": (1, "one GPU"),
    "vpp": (1, "one GPU"), "zero": (0, "one GPU, nothing to shard"), "sequence_parallel": (False, "one GPU"),
    "grad_accum": (1, "one micro-batch per step"), "offload": ("none", "the bench does not offload"),
    "activation_offload": (False, "the bench does not offload activations"),
    "optimizer_in_backward": (False, "the bench steps after the backward"),
    "loss": ("full", "the bench runs PyTorch's cross-entropy"),
    "fused_kernels": (False, "the bench runs eager PyTorch modules"),
    "flash_attention": (True, "the bench runs SDPA attention"), "flash_attention_version": (2, "SDPA attention"),
    "attention_kernel": ("sdpa", "the bench runs SDPA attention"),
    "framework": ("custom", "the bench is its own eager PyTorch loop"),
    "packing": (True, "the bench feeds full sequences"),
    "vocab_padding_multiple": (1, "the bench builds the head as nn.Linear(hidden, vocab), unpadded"),
}


def scaled_mapping(job: Job, n_layers: int, n_gpus: int = 1) -> tuple[dict[str, Any], list[str]]:
    """The job-file mapping of the benched job on `n_gpus` data-parallel processes of one node, and a
    note for each setting changed from the job."""
    mapping = job_to_mapping(job)
    notes: list[str] = []
    mapping["model"]["n_layers"] = n_layers
    for field in ("fused_qkv", "fused_gate_up"):  # the bench builds q, k, v and gate, up as separate linears
        if mapping["model"].get(field):
            notes.append(f"model.{field} true → false: the bench builds separate linears")
        mapping["model"][field] = False
    dense = job.model.n_dense_layers
    if job.model.is_moe and dense and dense >= n_layers:
        # the bench builds the model's first layers; keep one MoE layer so the experts are measured
        mapping["model"]["n_dense_layers"] = n_layers - 1
        notes.append(f"n_dense_layers {dense} → {n_layers - 1}: at least one of the {n_layers} built layers is MoE")
    hardware = mapping["hardware"]
    hardware.update(n_gpus=n_gpus, gpus_per_node=n_gpus)
    hardware.pop("inter_node", None)
    training = mapping["training"]
    for field, (value, why) in _bench_training(training, n_gpus).items():
        asked = training.get(field)  # None: the job left it unset (absent from the mapping)
        if asked is not None and asked != value:
            notes.append(f"{field} {asked} → {value}: {why}")
        training[field] = value
    if training.get("recompute") == "selective":
        # SDPA never stores the attention scores, so selective recompute has nothing left to redo
        training["recompute"] = "none"
        notes.append("recompute selective → none: SDPA already keeps no attention scores to recompute")
    training["global_batch"] = training["micro_batch"] * n_gpus
    for field in ("tokens", "mean_seq_len", "checkpoint_interval_steps"):
        training.pop(field, None)
    return mapping, notes


def _bench_training(training: dict[str, Any], n_gpus: int) -> dict[str, tuple[Any, str]]:
    """What the bench runs for each training field: on one process as BENCH_TRAINING; on several,
    data parallelism over them with the job's ZeRO stage run by FSDP, which shards the gradients
    with the optimizer states, so ZeRO-1 runs (and is estimated) as ZeRO-2."""
    if n_gpus == 1:
        return BENCH_TRAINING
    where = f"{n_gpus} data-parallel processes on this node"
    zero = training.get("zero") or 0
    ran = (2, "FSDP shards the gradients with the optimizer states") if zero == 1 else (zero, "")
    return {**BENCH_TRAINING, "dp": (n_gpus, where), "zero": ran, "tp": (1, where), "pp": (1, where),
            "cp": (1, where), "ep": (1, where), "vpp": (1, where), "sequence_parallel": (False, where)}


def scaled_job(job: Job, n_layers: int, n_gpus: int = 1) -> tuple[Job, list[str]]:
    """The benched job as a Job (for `estimate`), and the notes of what was changed."""
    mapping, notes = scaled_mapping(job, n_layers, n_gpus)
    return load_job(mapping), notes
