"""The step beyond the micro-batches: the optimizer step (on the GPU, or ZeRO-Offload's CPU-Adam),
offload traffic, batch copies and data loading, checkpoint writes, and the host RAM a node needs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trainrig.estimate import host_issue, ops
from trainrig.estimate.inputs import Inputs
from trainrig.estimate.memory import (
    activation_bytes_per_layer,
    in_flight_layers,
    local_parameter_counts,
    trainable_parameter_counts,
)
from trainrig.estimate.params import ModelParameters

__all__ = ["optimizer_s", "offload_exposed_s", "host_transfer_exposed_s", "data_loading_exposed_s", "checkpoint_s",
           "host_ram_gb", "TOKEN_BATCH_BYTES"]

TOKEN_BATCH_BYTES = 16  # int64 input ids + int64 labels per token, copied host → device


def optimizer_s(x: Inputs, p: ModelParameters):
    """The optimizer step streams its states through HBM (fused Adam: grads, fp32 master, m, v in,
    master, m, v and 16-bit weights out) — or, with ZeRO-Offload, runs on the host (`_cpu_adam_s`),
    after the gradients go down and the weights come back over PCIe (Ren et al. 2021 §4)."""
    trainable = sum(trainable_parameter_counts(x))
    shard = ops.where(x.zero >= 1, x.zero_shard, 1.0)
    local = trainable / shard
    step_bytes = x.optimizer_rw_bytes + ops.where(x.zero >= 3, x.zero3_step_extra_bytes, 0.0)
    on_gpu = local * step_bytes / (x.hbm_bandwidth_gbs * 1e9)
    offloaded = x.optimizer_offloaded
    if not ops.any(offloaded):  # every row steps on the GPU: no host step, no PCIe copies
        return on_gpu, 0.0
    transfers = local * (x.grad_bytes + x.weight_bytes) / (x.pcie_bandwidth_gbs * 1e9)
    return ops.where(offloaded, _cpu_adam_s(x, p, local), on_gpu), ops.where(offloaded, transfers, 0.0)


def _cpu_adam_s(x: Inputs, p: ModelParameters, local):
    """CPU-Adam over this GPU's `local` parameters, its process's share of the node (1 / GPUs per node)
    of the host's memory bandwidth and cores, all ranks stepping at once: the slower of streaming the
    states through host memory and the arithmetic at `cpu_adam_params_per_s_per_core` (Ren et al.
    2021 §5.1: vectorized, one OpenMP thread per core). Unknown bandwidth: 50 GB/s per GPU; unknown
    cores: the arithmetic is not modelled."""
    host_share = x.host_memory_bandwidth_gbs / x.gpus_per_node
    stream = local * x.optimizer_rw_bytes / (ops.nan_to_num(host_share, nan=50.0) * 1e9)
    cores = x.cpu_cores_per_node / x.gpus_per_node
    arithmetic = ops.nan_to_num(local / (cores * p.cpu_adam_params_per_s_per_core), nan=0.0)
    return ops.maximum(stream, arithmetic)


def offload_exposed_s(x: Inputs, p: ModelParameters, micro) -> Any:
    """Traffic to host memory (or NVMe) that outlasts the compute it overlaps with, per step.

    Offloaded parameters are fetched for forward and again for backward (ZeRO-Infinity, FSDP
    cpu_offload), prefetched a layer ahead; offloaded activations go out during forward and come
    back during backward on a side stream (torchtune activation offloading)."""
    if not ops.any(x.parameters_offloaded | (x.activation_offload > 0)):
        return 0.0
    dense, experts = local_parameter_counts(x)
    shard = ops.where(x.zero >= 3, x.zero_shard, 1.0)
    link_gbs = ops.where(x.offload_nvme > 0, ops.fmin(x.pcie_bandwidth_gbs, x.storage_read_gbs), x.pcie_bandwidth_gbs)
    params_s = 2 * (dense + experts) * x.weight_bytes / shard / (link_gbs * 1e9)  # this GPU's shard, twice
    params_s = ops.where(x.parameters_offloaded, params_s, 0.0)
    saved, _ = activation_bytes_per_layer(x)
    out_and_back = 2 * saved * in_flight_layers(x) * x.offloaded_layer_share
    activations_s = ops.where(x.activation_offload > 0, out_and_back / (x.pcie_bandwidth_gbs * 1e9), 0.0)
    window = micro["forward"] + micro["backward"]
    return x.micro_batches * ops.maximum(params_s + activations_s - window, 0.0)


def host_transfer_exposed_s(x: Inputs, gpu_busy):
    """Batches are copied from pinned memory ahead of use; only a copy longer than the step shows."""
    tokens = x.micro_batch_tokens
    copies = x.micro_batches * tokens * TOKEN_BATCH_BYTES / (x.pcie_bandwidth_gbs * 1e9)
    return ops.maximum(copies - gpu_busy, 0.0)


def _loading_nodes(x: Inputs):
    """Nodes that feed data: those hosting the first pipeline stage."""
    return ops.maximum(x.n_nodes / x.pp, 1.0)


def data_loading_exposed_s(x: Inputs, p: ModelParameters, gpu_busy, host_issue_s):
    """What preparing the next batches adds to the step.

    With loader workers (PyTorch DataLoader `num_workers` > 0) they prepare batches while the
    GPUs work, and only what they cannot finish in a step shows. Without workers each training
    process loads its own share in its own loop, before the step: all of it shows. CPU: tokens
    over the cores that load × the per-core rate (`_loader_cores`); storage: the bytes of those
    tokens over the node's read rate. Unknown cores or storage are not modelled (NaN → 0)."""
    cores, storage = x.cpu_cores_per_node, x.storage_read_gbs
    if not ops.any((cores == cores) | (storage == storage)):
        return 0.0  # neither cores nor storage known (NaN) in any row: every term below is NaN → 0
    tokens_per_node = x.global_batch * x.seq_len / _loading_nodes(x)
    rate = ops.where(x.pretokenized > 0, x.collate_rate_per_core, x.tokenize_rate_per_core)
    read_s = ops.nan_to_num(tokens_per_node * p.bytes_per_token_on_disk / (x.storage_read_gbs * 1e9), nan=0.0)

    def with_workers():
        background_s = ops.nan_to_num(tokens_per_node / (_loader_cores(x, gpu_busy, host_issue_s) * rate), nan=0.0)
        return ops.maximum(ops.maximum(background_s, read_s) - gpu_busy, 0.0)

    def in_process():
        cores = ops.minimum(x.gpus_per_node, x.cpu_cores_per_node)
        return ops.maximum(ops.nan_to_num(tokens_per_node / (cores * rate), nan=0.0), read_s)

    workers = x.loader_workers_per_gpu
    if type(workers) is not np.ndarray:  # one loader setting: only its branch is computed
        return with_workers() if workers > 0 else in_process()
    return ops.where(workers > 0, with_workers(), in_process())


def _loader_cores(x: Inputs, gpu_busy, host_issue_s):
    """Cores a node's loader workers get: one each at most, out of what the training processes
    leave. A training process keeps a core busy only while it issues kernels (its share of the
    step, `host_issue_s / gpu_busy`); the rest of the time it waits on the GPU or the data queue.
    Fewer cores or fewer workers never load faster. Sizing rule: gpus × (workers + 1) cores and a
    few for the system (ml-engineering, compute/cpu)."""
    workers = x.loader_workers_per_gpu * x.gpus_per_node
    busy = host_issue.issuing_share(host_issue_s, gpu_busy)
    left = x.cpu_cores_per_node - x.gpus_per_node * busy
    # with fewer cores than busy processes, the scheduler time-slices: workers get their fair share
    fair_share = x.cpu_cores_per_node * workers / (x.gpus_per_node * busy + workers)
    return ops.minimum(workers, ops.maximum(left, fair_share))


def checkpoint_s(x: Inputs):
    """A full checkpoint (16-bit weights + optimizer states), written in parallel by every node,
    amortized over the checkpoint interval; zero when storage or the interval is unknown."""
    per_node = x.checkpoint_bytes / x.n_nodes
    write_s = ops.nan_to_num(per_node / (x.storage_write_gbs * 1e9), nan=0.0)
    return write_s / x.checkpoint_interval_steps


def host_ram_gb(x: Inputs, p: ModelParameters):
    """Host RAM a node needs: one training process and its loader workers per GPU, what is
    offloaded (optimizer states, weight shards, activations; NVMe offload still stages through
    pinned host buffers, counted as a tenth), and a staging copy of the node's checkpoint shard."""
    per_gpu = p.host_ram_per_gpu_process_gb + x.loader_workers_per_gpu * p.host_ram_per_loader_worker_gb
    processes = x.gpus_per_node * per_gpu
    dense, experts = local_parameter_counts(x)
    trainable = sum(trainable_parameter_counts(x))
    shard_states = ops.where(x.zero >= 1, x.zero_shard, 1.0)
    shard_weights = ops.where(x.zero >= 3, x.zero_shard, 1.0)
    states = ops.where(x.optimizer_offloaded, trainable / shard_states * x.optimizer_bytes, 0.0)
    weights = ops.where(x.parameters_offloaded, (dense + experts) / shard_weights * x.weight_bytes, 0.0)
    activations = 0.0
    if ops.any(x.activation_offload > 0):
        saved, _ = activation_bytes_per_layer(x)
        activations = ops.where(x.activation_offload > 0, saved * in_flight_layers(x) * x.offloaded_layer_share, 0.0)
    offloaded = (ops.where(x.offload_nvme > 0, 0.1, 1.0) * (states + weights) + activations) * x.gpus_per_node / 1e9
    # a LoRA checkpoint holds the adapters only; the frozen base is read from the hub's files
    saved_params = ops.where(x.method == 0, x.params_total, trainable * x.pp * x.tp)
    staging = saved_params * x.weight_bytes / x.n_nodes / 1e9
    return processes + offloaded + staging
