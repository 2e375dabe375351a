"""The node around the GPUs, derived from the job: CPU cores, host RAM, storage and network.

Each choice runs the chosen configuration through the same model core with the candidate part in
place (arrays of core counts, storage kinds, networks) and keeps the smallest that does the job,
with the rule of thumb from MODELING.md as a floor where there is one.
"""

from __future__ import annotations

import numpy as np

from trainrig.catalog import Catalog
from trainrig.catalog.job_file import job_to_mapping, load_job
from trainrig.estimate.core import evaluate
from trainrig.estimate.inputs import Inputs, inputs_from_job, stack_inputs
from trainrig.estimate.memory import GIB
from trainrig.estimate.params import ModelParameters
from trainrig.estimate.result import Estimate
from trainrig.plan.result import NodeAdvice
from trainrig.specs import Job

__all__ = ["node_advice", "SYSTEM_CORES", "NETWORK_STEP_SHARE", "CHECKPOINTS_KEPT", "CHECKPOINT_EVERY_S"]

SYSTEM_CORES = 4
"""Cores for the OS, the launcher and monitoring beside the training processes and loader workers
(MODELING.md, after ml-engineering compute/cpu: gpus × (workers + 1) + a few)."""
CORE_STEPS = (8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384)
RAM_STEPS_GB = (32, 64, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192)
NETWORK_STEP_SHARE = 0.05
"""The network may add at most this share to the step over the fastest network considered."""
CHECKPOINTS_KEPT = 3
CHECKPOINT_EVERY_S = 3600.0
"""Checkpoints are sized as written every hour of training, and may cost at most 1% of the step."""
CHECKPOINT_STEP_SHARE = 0.01
NETWORK_PORTS = (1, 2, 4, 8)


def node_advice(job: Job, est: Estimate, catalog: Catalog, params: ModelParameters,
                catalog_dirs: tuple[str, ...] = ()) -> NodeAdvice:
    """CPU cores, RAM, storage and network for `job`, each with its reason."""
    x = inputs_from_job(job, params)
    cores, cpu_reason = _cpu(job, est, x, params)
    ram, ram_reason = _ram(job, est)
    storage, tb, storage_reason = _storage(job, est, x, catalog, params)
    network, gbps, network_reason = _network(job, est, catalog, params, catalog_dirs)
    return NodeAdvice(cpu_cores=cores, ram_gb=ram, storage=storage, storage_tb=tb, network=network,
                      network_gbps_per_node=gbps,
                      reasons={"cpu": cpu_reason, "ram": ram_reason, "storage": storage_reason,
                               "network": network_reason})


def _cpu(job: Job, est: Estimate, x: Inputs, params: ModelParameters) -> tuple[int, str]:
    gpus = job.hardware.gpus_in_node
    workers = job.training.loader_workers_per_gpu
    rule = gpus * (workers + 1) + SYSTEM_CORES
    candidates = np.array([c for c in CORE_STEPS if c > gpus], dtype=float)
    out = evaluate(x.with_values(cpu_cores_per_node=candidates, storage_read_gbs=np.nan), params)
    hidden = np.asarray(out.step_parts_s["data_loading"]) <= 0
    need = int(candidates[np.argmax(hidden)]) if hidden.any() else None
    per_node = est.tokens_per_s / job.hardware.n_nodes
    source = "tokenizing text" if job.training.data_format == "text" else "collating pre-tokenized samples"
    feed = (f"{source} at {per_node:,.0f} tokens/s per node stays hidden from {need} cores" if need
            else f"even {int(candidates[-1])} cores cannot keep up with {per_node:,.0f} tokens/s per node")
    cores = max(rule, need or int(candidates[-1]))
    return cores, (f"{cores} cores: {gpus} training processes + {workers} loader workers per GPU + {SYSTEM_CORES}"
                   f" for the system (ml-engineering compute/cpu); {feed}.")


def _ram(job: Job, est: Estimate) -> tuple[int, str]:
    gpus, gpu = job.hardware.gpus_in_node, job.hardware.gpu
    floor_gb = gpus * gpu.memory_gib * GIB / 1e9
    need_gb = est.host_ram_gb_per_node
    ram = next((s for s in RAM_STEPS_GB if s >= max(need_gb, floor_gb)), int(np.ceil(max(need_gb, floor_gb))))
    return ram, (f"{ram} GB: the job needs ~{need_gb:,.0f} GB (training processes, loader workers, offloaded states,"
                 f" checkpoint staging); floor = the node's {gpus} × {gpu.memory_gib:g} GiB of GPU memory"
                 f" ({floor_gb:,.0f} GB) for pinned buffers (ml-engineering compute/cpu-memory).")


def _storage(job: Job, est: Estimate, x: Inputs, catalog: Catalog,
             params: ModelParameters) -> tuple[str, float, str]:
    kinds = sorted(catalog.storage, key=lambda s: (s.seq_read_gbs, s.seq_write_gbs))
    steps_per_hour = max(CHECKPOINT_EVERY_S / est.step_time_s, 1.0)
    out = evaluate(x.with_values(
        storage_read_gbs=np.array([s.seq_read_gbs for s in kinds]), cpu_cores_per_node=np.nan,
        storage_write_gbs=np.array([s.seq_write_gbs for s in kinds]), checkpoint_interval_steps=steps_per_hour), params)
    step = np.asarray(out.step_time_s)
    loading = np.asarray(out.step_parts_s["data_loading"])
    checkpoint_share = np.asarray(out.step_parts_s["checkpoint"]) / step
    good = (loading <= 0) & (checkpoint_share <= CHECKPOINT_STEP_SHARE)
    pick = int(np.argmax(good)) if good.any() else len(kinds) - 1
    dataset_tb = job.training.tokens * params.bytes_per_token_on_disk / 1e12
    checkpoint_tb = float(x.checkpoint_bytes) / 1e12
    tb = dataset_tb + CHECKPOINTS_KEPT * checkpoint_tb
    read_gbs = est.tokens_per_s * params.bytes_per_token_on_disk / 1e9
    verdict = ("" if good.any() else "; no storage kind in the catalog keeps checkpoints under 1% of the step —"
               " checkpoint less often")
    return kinds[pick].id, round(tb, 2), (
        f"{kinds[pick].id}, {tb:,.1f} TB: dataset {dataset_tb:,.1f} TB ({_count(job.training.tokens)} tokens ×"
        f" {params.bytes_per_token_on_disk:g} B) + {CHECKPOINTS_KEPT} checkpoints × {checkpoint_tb:,.2f} TB; the job"
        f" reads {_rate(read_gbs)} in all, and hourly checkpoints cost {checkpoint_share[pick]:.1%} of the step"
        f" at {kinds[pick].seq_write_gbs:g} GB/s per node{verdict}.")


def _count(n: float) -> str:
    """2e12 → `2T`, 3.5e11 → `350B`."""
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6)):
        if n >= scale:
            return f"{n / scale:.3g}{unit}"
    return f"{n:,.0f}"


def _rate(gbs: float) -> str:
    return f"{gbs:,.2f} GB/s" if gbs >= 1 else f"{gbs * 1e3:,.1f} MB/s"


def _network(job: Job, est: Estimate, catalog: Catalog, params: ModelParameters,
             catalog_dirs: tuple[str, ...]) -> tuple[str | None, float | None, str]:
    if job.hardware.n_nodes == 1:
        return None, None, "single node: no network between nodes is needed for training."
    mapping = job_to_mapping(job)
    options = _network_options(catalog, job.hardware.gpus_per_node)
    jobs = [load_job(_with_network(mapping, link.id, ports), catalog_dirs) for link, ports in options]
    out = evaluate(stack_inputs([inputs_from_job(j, params) for j in jobs]), params)
    step = np.asarray(out.step_time_s)
    best = min(step.min(), est.step_time_s)
    ok = step <= best * (1 + NETWORK_STEP_SHARE)
    pick = int(np.argmax(ok))
    link, ports = options[pick]
    gbps = link.line_rate_gbps * ports
    slowest = f"{options[0][1]} × {options[0][0].id} would make the step {step[0] / step[pick]:.1f}× slower"
    current = job.hardware.inter_node
    have = (f"; this plan's {current.ports_per_node} × {current.link.id} puts the step at"
            f" {est.step_time_s / best:.2f}× the best network's") if current else ""
    return f"{ports} × {link.id}", gbps, (
        f"{ports} × {link.id} ({gbps:,.0f} Gb/s per node) keeps the network within {NETWORK_STEP_SHARE:.0%} of the"
        f" step of the fastest network considered; {slowest}{have}.")


def _network_options(catalog: Catalog, gpus_per_node: int) -> list[tuple]:
    """(link, ports) for every network link and port count, slowest node bandwidth first."""
    links = [link for link in catalog.links if link.kind in ("infiniband", "ethernet") and link.line_rate_gbps]
    pairs = {(link.id, ports): (link, ports) for link in links
             for ports in sorted(set(NETWORK_PORTS) | {gpus_per_node}) if ports <= gpus_per_node}
    return sorted(pairs.values(), key=lambda lp: (lp[0].line_rate_gbps * lp[1], lp[0].latency_us, lp[0].id))


def _with_network(mapping: dict, link: str, ports: int) -> dict:
    hardware = {**mapping["hardware"], "inter_node": {"link": link, "ports_per_node": ports}}
    return {**mapping, "hardware": hardware}
