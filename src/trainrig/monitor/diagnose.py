"""Diagnosis: rules from recorded samples and steps to findings with advice and evidence.

Pure functions over a `RunData` (no I/O, no clock). Each rule returns a `Check` (did it run, and
why not) and at most one `Finding`. Thresholds are module constants; docs/monitor.md lists them
with their sources (MODELING.md "Host side" and the probe's health thresholds) or marks them as
heuristics.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from trainrig.monitor.findings import MAX_EVIDENCE_IDS, Check, Evidence, Finding
from trainrig.monitor.gpu import GpuInfo
from trainrig.monitor.store import RunData
from trainrig.probe.health import POWER_CAP_RATIO, THERMAL_MARGIN_C
from trainrig.probe.nvml import POWER_REASONS, SLOWDOWN_REASONS, THERMAL_REASONS, decode_clock_event_reasons
from trainrig.probe.watch import BUSY_UTILIZATION_PCT
from trainrig.units import GIB

__all__ = ["diagnose", "RULES", "DATA_WAIT_SHARE", "MEMORY_NEAR_LIMIT", "HOST_MEMORY_NEAR_LIMIT",
           "SM_ACTIVE_LOW_PCT", "THROTTLED_SHARE", "WORKER_SATURATED_PCT", "measured_steps",
           "used_gpus", "rows_by_gpu", "STORAGE_IOWAIT_PCT", "PCIE_BUSY_SHARE", "LINK_BUSY_SHARE",
           "NIC_BUSY_PCT", "STRAGGLER_CLOCK_RATIO", "CLOCK_BELOW_SPEC_RATIO", "MIN_STEPS"]

# -- thresholds (docs/monitor.md gives each one's source) ----------------------------------------
DATA_WAIT_SHARE = 0.3
"""A data-wait share of the step above ~0.3 means data-loading bound (MODELING.md, Host side;
deeplearning4j#8130)."""
MIN_STEPS = 3
"""Steps needed (after warm-up) before step-based rules judge."""
WORKER_SATURATED_PCT = 90.0
"""A loader worker above 90% of one core is CPU-bound (heuristic)."""
STORAGE_IOWAIT_PCT = 10.0
"""CPU time in iowait above 10% while the job waits for data points at storage (heuristic)."""
STORAGE_READ_BPS = 50e6
"""The job reading ≥ 50 MB/s from storage while its workers are not CPU-bound (heuristic)."""
MEMORY_NEAR_LIMIT = 0.95
"""GPU memory in use ≥ 95% of the device: one larger batch or fragmentation from OOM (heuristic;
nvidia-smi's figure includes the caching allocator's reserve, unslothai/unsloth#1840)."""
HOST_MEMORY_NEAR_LIMIT = 0.90
"""The job's RSS ≥ 90% of its memory limit, or < 5% of host RAM available (heuristic)."""
SWAP_GROWTH_BYTES = 2**30
"""Swap growing by ≥ 1 GiB during the run means the host is paging (heuristic)."""
THROTTLED_SHARE = 0.10
"""A slowdown reason (nvml.h clock event bits: power cap, thermal, HW slowdown, MODELING.md) in
≥ 10% of a GPU's busy samples is throttling (heuristic share)."""
SM_ACTIVE_LOW_PCT = 50.0
"""DCGM SM activity < 0.5 is likely ineffective use; ≥ 0.8 is needed (MODELING.md, DCGM
profiling metrics guide)."""
PCIE_BUSY_FRACTION = 0.5
"""PCIe traffic ≥ 50% of what pinned copies reach on the link counts as a busy link (heuristic;
the pinned rates are MODELING.md's, via the probe's `pcie_expected_gbs`)."""
PCIE_BUSY_SHARE = 0.25
"""…in ≥ 25% of the GPU's samples is host-transfer bound (heuristic)."""
NVLINK_BUSY_FRACTION = 0.5
NIC_BUSY_PCT = 70.0
"""A NIC above 70% of its line rate (≈ what collectives reach across nodes, ~73%: MODELING.md)."""
LINK_BUSY_SHARE = 0.25
STRAGGLER_CLOCK_RATIO = 0.90
"""A GPU whose busy SM clock median is < 90% of the others' is a straggler (heuristic, as the
probe's OK ratio)."""
STRAGGLER_WAIT_GAP = 0.10
CLOCK_BELOW_SPEC_RATIO = 0.90
"""Busy SM clock < 90% of the maximum with no slowdown reason: clocks set below spec (heuristic)."""
BELOW_SPEC_SHARE = 0.5
HOST_CPU_SATURATED_PCT = 95.0
"""Every core of the host ≥ 95% busy on average: nothing is left for the loader or for launching
kernels (heuristic)."""
HOST_CPU_SATURATED_SHARE = 0.5
"""…in at least half of the host samples."""
MIN_SAMPLES = 2


def diagnose(data: RunData, warmup_steps: int = 1) -> tuple[list[Finding], list[Check]]:
    """Every rule over one run: the findings, and a check per rule saying whether it ran."""
    findings, checks = [], []
    for kind, rule in RULES:
        result = rule(data, warmup_steps)
        if isinstance(result, Finding):
            findings.append(result)
            checks.append(Check(kind=result.kind, status="finding"))
        elif isinstance(result, str):
            checks.append(Check(kind=kind, status="not_evaluated", reason=result))
        else:
            checks.append(Check(kind=kind, status="ok"))
    return findings, checks


# -- shared helpers ----------------------------------------------------------------------------
def measured_steps(steps: Sequence[dict[str, Any]], warmup_steps: int) -> list[dict[str, Any]]:
    """Steps after each rank's first `warmup_steps` (all of them when nothing would be left)."""
    kept = [s for s in steps if s["step"] >= warmup_steps]
    return kept or list(steps)


def gpu_infos(data: RunData) -> dict[int, GpuInfo]:
    return {g["index"]: GpuInfo.from_dict(g) for g in data.meta.get("gpus", [])}


def rows_by_gpu(rows: Iterable[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        out.setdefault(row["gpu"], []).append(row)
    return out


def used_gpus(data: RunData) -> dict[int, list[dict[str, Any]]]:
    """GPUs the job used: some kernel activity or memory in use (an idle spare GPU is left out)."""
    out = {}
    for gpu, rows in rows_by_gpu(data.gpu_samples).items():
        busy = any((r["utilization_gpu_pct"] or 0) >= 5 for r in rows)
        memory = any(_share(r["memory_used_bytes"], r["memory_total_bytes"]) >= 0.05 for r in rows)
        if busy or memory:
            out[gpu] = rows
    return out


def _no_gpu_reason(data: RunData) -> str:
    if data.gpu_samples:
        return "no GPU was used by the job (no kernel activity, no memory in use)"
    reason = data.meta.get("nvml", {}).get("reason")
    return f"needs GPU samples (NVML: {reason})" if reason else "needs GPU samples (NVML)"


def _busy(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if (r["utilization_gpu_pct"] or 0) >= BUSY_UTILIZATION_PCT]


def _share(part: float | None, whole: float | None) -> float:
    return part / whole if part is not None and whole else 0.0


def _median(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _evidence(metric: str, rows: Sequence[dict[str, Any]], table: str, value: float | None,
              threshold: float | None, unit: str, gpu: int | None = None,
              note: str | None = None) -> Evidence:
    times = [r.get("t", r.get("t_end")) for r in rows]
    times = [t for t in times if t is not None]
    ids = tuple(r["id"] for r in rows[:MAX_EVIDENCE_IDS] if r.get("id") is not None)
    return Evidence(metric=metric, value=_round(value), threshold=threshold, unit=unit,
                    table=table, ids=ids, n_samples=len(rows), gpu=gpu,
                    t_from=min(times) if times else None, t_to=max(times) if times else None,
                    note=note)


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 4)


def _wait_share(steps: Sequence[dict[str, Any]]) -> float | None:
    total = sum(s["step_s"] for s in steps)
    return sum(s["data_wait_s"] or 0.0 for s in steps) / total if total > 0 else None


# -- data loading and storage --------------------------------------------------------------------
def _loader_state(data: RunData) -> dict[str, Any]:
    """What the host says about the input pipeline while the job ran."""
    rows = [r for r in data.host_samples if r.get("workers") is not None]
    worker_loads = [v for r in rows for v in (r.get("workers_cpu_pct") or [])]
    cores = data.meta.get("host", {}).get("cpu_count")
    return {
        "rows": rows,
        "workers": _median(r["workers"] for r in rows),
        "worker_cpu": _median(worker_loads),
        "saturated": bool(worker_loads) and _median(worker_loads) >= WORKER_SATURATED_PCT,
        "cpu_pct": _median(r.get("cpu_pct") for r in data.host_samples),
        "iowait_pct": _median(r.get("iowait_pct") for r in data.host_samples),
        "read_bps": _median(r.get("job_read_bps") for r in data.host_samples),
        "cores": cores,
    }


def _slow_steps(data: RunData, warmup_steps: int) -> tuple[list[dict[str, Any]], float] | str:
    steps = measured_steps(data.steps, warmup_steps)
    if len(steps) < MIN_STEPS:
        return (f"needs {MIN_STEPS} timed steps (the in-process API: m.data(loader), m.step()); "
                f"got {len(steps)}")
    share = _wait_share(steps)
    if share is None:
        return "steps have no duration"
    return steps, share


def _storage_bound(loader: dict[str, Any]) -> bool:
    if loader["saturated"]:
        return False
    iowait, read = loader["iowait_pct"], loader["read_bps"]
    return (iowait is not None and iowait >= STORAGE_IOWAIT_PCT) or (
        read is not None and read >= STORAGE_READ_BPS)


def data_loading_rule(data: RunData, warmup_steps: int) -> Finding | str | None:
    slow = _slow_steps(data, warmup_steps)
    if isinstance(slow, str):
        return slow
    steps, share = slow
    loader = _loader_state(data)
    if share < DATA_WAIT_SHARE or _storage_bound(loader):
        return None
    evidence = [_data_wait_evidence(steps, share), *_gpu_idle_evidence(data)]
    if loader["rows"]:
        evidence.append(_evidence("workers_cpu_pct", loader["rows"], "host_samples",
                                  loader["worker_cpu"], WORKER_SATURATED_PCT, "% of one core",
                                  note=f"median {_fmt(loader['workers'])} loader workers"))
    return Finding(kind="data_loading",
                   message=f"data-loading bound: {share:.0%} of each step waits for the next batch "
                           f"(threshold {DATA_WAIT_SHARE:.0%})",
                   advice=_loader_advice(loader, bool(data.gpu_samples)), evidence=tuple(evidence))


def storage_rule(data: RunData, warmup_steps: int) -> Finding | str | None:
    slow = _slow_steps(data, warmup_steps)
    if isinstance(slow, str):
        return slow
    steps, share = slow
    loader = _loader_state(data)
    if loader["iowait_pct"] is None and loader["read_bps"] is None:
        return "needs host I/O samples (iowait, the job's reads)"
    if share < DATA_WAIT_SHARE or not _storage_bound(loader):
        return None
    rows = data.host_samples
    evidence = [_data_wait_evidence(steps, share),
                _evidence("iowait_pct", rows, "host_samples", loader["iowait_pct"],
                          STORAGE_IOWAIT_PCT, "%"),
                _evidence("job_read_bps", rows, "host_samples", loader["read_bps"],
                          STORAGE_READ_BPS, "B/s")]
    return Finding(kind="storage",
                   message=f"storage-bound reads: {share:.0%} of each step waits for data while the "
                           f"CPUs wait on I/O ({_fmt(loader['iowait_pct'])}% iowait) and the loader "
                           f"is not CPU-bound",
                   advice=("Copy the dataset to local NVMe (or RAM) before training instead of "
                           "reading it from network or slow storage.",
                           "Store it as large sequential shards (e.g. WebDataset, MosaicML "
                           "streaming, memory-mapped token files) instead of many small files.",
                           "Raise num_workers and prefetch_factor so more reads are in flight."),
                   evidence=tuple(evidence))


def _data_wait_evidence(steps: Sequence[dict[str, Any]], share: float) -> Evidence:
    slow = [s for s in steps if s["step_s"] > 0 and (s["data_wait_s"] or 0) / s["step_s"]
            >= DATA_WAIT_SHARE]
    return _evidence("data_wait_share", slow or steps, "steps", share, DATA_WAIT_SHARE, "ratio",
                     note=f"{len(slow)} of {len(steps)} steps waited ≥ {DATA_WAIT_SHARE:.0%}")


def _gpu_idle_evidence(data: RunData) -> list[Evidence]:
    out = []
    for gpu, rows in used_gpus(data).items():
        idle = [r for r in rows if (r["utilization_gpu_pct"] or 0) < BUSY_UTILIZATION_PCT]
        if idle:
            out.append(_evidence("utilization_gpu_pct", idle, "gpu_samples",
                                 _median(r["utilization_gpu_pct"] for r in rows),
                                 BUSY_UTILIZATION_PCT, "%", gpu,
                                 note=f"GPU idle in {len(idle)} of {len(rows)} samples"))
    return out


def _loader_advice(loader: dict[str, Any], has_gpu: bool) -> tuple[str, ...]:
    workers, cores, cpu = loader["workers"], loader["cores"], loader["cpu_pct"]
    advice = []
    if not workers:
        advice.append("The batches are prepared in the training process: use "
                      "DataLoader(num_workers=N, persistent_workers=True) with N ≈ 2–4 per GPU.")
    elif loader["saturated"] and (cpu is None or cpu < 80):
        advice.append(f"The {workers:.0f} loader workers saturate their cores while other cores "
                      f"are free: raise num_workers (this host has {cores or 'N/A'} cores).")
    elif loader["saturated"]:
        advice.append("Loader workers saturate the CPUs: move the work out of the loop — "
                      "pre-tokenize/pre-process the dataset offline, cheapen augmentations, or use "
                      "a host with more cores.")
    else:
        advice.append("Loader workers are not CPU-bound: they wait on something (I/O, locks, a "
                      "remote service); raise num_workers and prefetch_factor to overlap it.")
    advice.append("Pre-tokenize the data (memory-mapped token arrays) so workers only slice it.")
    if has_gpu:
        advice.append("Use pin_memory=True and .to(device, non_blocking=True) so copies overlap "
                      "compute.")
    return tuple(advice)


# -- GPU memory and host memory -------------------------------------------------------------------
def memory_rule(data: RunData, warmup_steps: int) -> Finding | str | None:
    evidence, gpus, parts = [], [], []
    for gpu, rows in rows_by_gpu(data.gpu_samples).items():
        near = [r for r in rows if _share(r["memory_used_bytes"], r["memory_total_bytes"])
                >= MEMORY_NEAR_LIMIT]
        if len(near) >= MIN_SAMPLES:
            peak = max(_share(r["memory_used_bytes"], r["memory_total_bytes"]) for r in near)
            evidence.append(_evidence("memory_used_share", near, "gpu_samples", peak,
                                      MEMORY_NEAR_LIMIT, "ratio", gpu))
            gpus.append(gpu)
            parts.append(f"GPU {gpu} at {peak:.0%} of its memory")
    host = _host_memory_evidence(data)
    evidence += [e for e, _ in host]
    parts += [p for _, p in host]
    if not data.gpu_samples and not data.host_samples:
        return "needs GPU or host memory samples"
    if not evidence:
        return None
    return Finding(kind="memory_pressure", message="memory near its limit: " + "; ".join(parts),
                   advice=_memory_advice(bool(gpus), bool(host)), evidence=tuple(evidence),
                   gpus=tuple(gpus))


def _host_memory_evidence(data: RunData) -> list[tuple[Evidence, str]]:
    host = data.meta.get("host", {})
    limit, total = host.get("memory_limit_bytes"), host.get("ram_total_bytes")
    rows, out = data.host_samples, []
    near = [r for r in rows if _share(r.get("job_rss_bytes"), limit) >= HOST_MEMORY_NEAR_LIMIT]
    if len(near) >= MIN_SAMPLES:
        peak = max(_share(r["job_rss_bytes"], limit) for r in near)
        source = host.get("memory_limit_source", "limit")
        out.append((_evidence("job_rss_share", near, "host_samples", peak, HOST_MEMORY_NEAR_LIMIT,
                              "ratio", note=f"of {limit / GIB:.2f} GiB ({source})"),
                    f"the job uses {peak:.0%} of its {limit / GIB:.2f} GiB {source}"))
    low = [r for r in rows if total and r.get("ram_available_bytes") is not None
           and r["ram_available_bytes"] / total <= 1 - MEMORY_NEAR_LIMIT]
    if len(low) >= MIN_SAMPLES:
        out.append((_evidence("ram_available_share", low, "host_samples",
                              min(r["ram_available_bytes"] / total for r in low),
                              round(1 - MEMORY_NEAR_LIMIT, 2), "ratio"),
                    "host RAM almost exhausted"))
    swap = [r["swap_used_bytes"] for r in rows if r.get("swap_used_bytes") is not None]
    if swap and max(swap) - swap[0] >= SWAP_GROWTH_BYTES:
        out.append((_evidence("swap_used_bytes", rows, "host_samples", max(swap) - swap[0],
                              SWAP_GROWTH_BYTES, "B", note="growth during the run"),
                    "the host is swapping"))
    return out


def _memory_advice(gpu: bool, host: bool) -> tuple[str, ...]:
    advice = []
    if gpu:
        advice += ["Lower the micro-batch (keep the global batch with gradient accumulation) or "
                   "recompute activations (activation checkpointing).",
                   "Shard optimizer state and gradients (ZeRO-2/3, FSDP) or use a smaller-state "
                   "optimizer; `trainrig estimate` shows what each option saves.",
                   "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation."]
    if host:
        advice += ["Host memory: fewer or lighter loader workers (each holds a copy of what the "
                   "dataset object keeps), memory-mapped datasets instead of in-RAM ones, or a "
                   "host with more RAM (at least the node's total GPU memory)."]
    return tuple(advice)


# -- throttling and below spec --------------------------------------------------------------------
def _slowdowns(row: dict[str, Any]) -> set[str]:
    mask = row.get("clock_event_mask")
    if mask is None:
        return set()
    return set(decode_clock_event_reasons(int(mask))) & SLOWDOWN_REASONS


def throttling_rule(data: RunData, warmup_steps: int) -> Finding | str | None:
    gpus = used_gpus(data)
    if not gpus:
        return _no_gpu_reason(data)
    if all(r["clock_event_mask"] is None for rows in gpus.values() for r in rows):
        return "clock event reasons are N/A on these GPUs"
    infos, evidence, parts, reasons = gpu_infos(data), [], [], set()
    for gpu, rows in gpus.items():
        busy = _busy(rows) or rows
        hit = [r for r in busy if _slowdowns(r)]
        if len(hit) < MIN_SAMPLES or len(hit) / len(busy) < THROTTLED_SHARE:
            continue
        names = sorted(set().union(*(_slowdowns(r) for r in hit)))
        reasons |= set(names)
        clock = _median(r["sm_clock_mhz"] for r in hit)
        top = infos[gpu].sm_clock_max_mhz if gpu in infos else None
        evidence.append(_evidence("clock_event_reasons", hit, "gpu_samples", len(hit) / len(busy),
                                  THROTTLED_SHARE, "share of busy samples", gpu,
                                  note=", ".join(names)))
        evidence += _temperature_evidence(gpu, hit, infos.get(gpu))
        parts.append(f"GPU {gpu} in {len(hit) / len(busy):.0%} of busy samples ({', '.join(names)}), "
                     f"SM clock {_fmt(clock)} of {_fmt(top)} MHz")
    if not evidence:
        return None
    return Finding(kind="throttling", message="throttled: " + "; ".join(parts),
                   advice=_throttle_advice(reasons), evidence=tuple(evidence),
                   gpus=tuple(e.gpu for e in evidence if e.metric == "clock_event_reasons"))


def _temperature_evidence(gpu: int, rows: list[dict[str, Any]], info: GpuInfo | None) -> list[Evidence]:
    slowdown = info.temperature_slowdown_c if info else None
    if slowdown is None:
        return []
    hot = [r for r in rows if r["temperature_c"] is not None
           and r["temperature_c"] >= slowdown - THERMAL_MARGIN_C]
    if not hot:
        return []
    return [_evidence("temperature_c", hot, "gpu_samples", max(r["temperature_c"] for r in hot),
                      slowdown - THERMAL_MARGIN_C, "°C", gpu,
                      note=f"slowdown threshold {slowdown} °C")]


def _throttle_advice(reasons: set[str]) -> tuple[str, ...]:
    advice = []
    if reasons & THERMAL_REASONS:
        advice.append("Thermal: check fans, airflow and inlet temperature, and that the heat sink "
                      "is seated; `nvidia-smi -q -d TEMPERATURE,PERFORMANCE` shows the margins.")
    if reasons & POWER_REASONS:
        advice.append("Power: compare the enforced limit with the default (`nvidia-smi -q -d "
                      "POWER`); lift an administrator cap (`nvidia-smi -pl`) or check the PSU/"
                      "rack power budget.")
    if "hw_slowdown" in reasons:
        advice.append("HW slowdown: the board slowed itself (power brake, over-temperature, or a "
                      "faulty PSU/cable); ask the operator to check the node.")
    return tuple(advice)


def below_spec_rule(data: RunData, warmup_steps: int) -> Finding | str | None:
    gpus = used_gpus(data)
    if not gpus:
        return _no_gpu_reason(data)
    infos, evidence, parts = gpu_infos(data), [], []
    for gpu, rows in gpus.items():
        info = infos.get(gpu)
        if info is None:
            continue
        for check in (_pcie_below, _clock_below, _power_capped):
            found = check(gpu, _busy(rows), info)
            if found is not None:
                evidence.append(found[0])
                parts.append(found[1])
    if not evidence:
        return None
    return Finding(kind="below_spec", message="below spec: " + "; ".join(parts),
                   advice=("PCIe link: reseat the card or riser, check the slot's BIOS setting "
                           "(Gen/ASPM) and the riser; `trainrig probe` measures the link.",
                           "Clocks: reset application clocks (`nvidia-smi -rac`, `-rgc`) unless "
                           "they were locked on purpose.",
                           "Power cap: restore the default limit (`nvidia-smi -pl`) if the cap "
                           "is not deliberate."),
                   evidence=tuple(evidence), gpus=tuple(sorted({e.gpu for e in evidence})))


def _pcie_below(gpu: int, busy: list[dict[str, Any]], info: GpuInfo) -> tuple[Evidence, str] | None:
    gen_max, width_max = info.pcie_gen_max, info.pcie_width_max
    if not busy or gen_max is None or width_max is None:
        return None
    low = [r for r in busy if (r["pcie_gen_current"] or gen_max) < gen_max
           or (r["pcie_width_current"] or width_max) < width_max]
    if len(low) < MIN_SAMPLES or len(low) / len(busy) < BELOW_SPEC_SHARE:
        return None
    gen, width = low[0]["pcie_gen_current"], low[0]["pcie_width_current"]
    text = f"GPU {gpu} PCIe link at Gen{gen} x{width} under load, capable of Gen{gen_max} x{width_max}"
    return _evidence("pcie_link", low, "gpu_samples", len(low) / len(busy), BELOW_SPEC_SHARE,
                     "share of busy samples", gpu, note=text), text


def _clock_below(gpu: int, busy: list[dict[str, Any]], info: GpuInfo) -> tuple[Evidence, str] | None:
    top = info.sm_clock_max_mhz
    if not busy or top is None:
        return None
    low = [r for r in busy if r["sm_clock_mhz"] is not None and r["clock_event_mask"] is not None
           and r["sm_clock_mhz"] < CLOCK_BELOW_SPEC_RATIO * top and not _slowdowns(r)]
    if len(low) < MIN_SAMPLES or len(low) / len(busy) < BELOW_SPEC_SHARE:
        return None
    clock = _median(r["sm_clock_mhz"] for r in low)
    text = f"GPU {gpu} SM clock {clock:.0f} of {top} MHz under load with no slowdown reason"
    return _evidence("sm_clock_mhz", low, "gpu_samples", clock, CLOCK_BELOW_SPEC_RATIO * top,
                     "MHz", gpu), text


def _power_capped(gpu: int, busy: list[dict[str, Any]], info: GpuInfo) -> tuple[Evidence, str] | None:
    default = info.power_limit_default_w
    rows = [r for r in busy if r["power_limit_w"] is not None]
    if not rows or default is None:
        return None
    limit = _median(r["power_limit_w"] for r in rows)
    if limit is None or limit >= POWER_CAP_RATIO * default:
        return None
    text = f"GPU {gpu} power limited to {limit:.0f} of {default:.0f} W"
    return _evidence("power_limit_w", rows, "gpu_samples", limit, POWER_CAP_RATIO * default, "W",
                     gpu), text


# -- SM activity ---------------------------------------------------------------------------------
def low_sm_activity_rule(data: RunData, warmup_steps: int) -> Finding | str | None:
    gpus = used_gpus(data)
    if not gpus:
        return _no_gpu_reason(data)
    evidence, parts = [], []
    measured = False
    for gpu, rows in gpus.items():
        busy = [r for r in (_busy(rows) or rows) if r["sm_active_pct"] is not None]
        if len(busy) < MIN_SAMPLES:
            continue
        measured = True
        active = _median(r["sm_active_pct"] for r in busy)
        if active is not None and active < SM_ACTIVE_LOW_PCT:
            evidence.append(_evidence("sm_active_pct", busy, "gpu_samples", active,
                                      SM_ACTIVE_LOW_PCT, "%", gpu))
            parts.append(f"GPU {gpu} SMs active {active:.0f}% of the time")
    if not measured:
        return "SM activity is N/A (NVML GPM needs a Hopper or newer GPU)"
    if not evidence:
        return None
    micro = data.meta.get("workload", {}).get("micro_batch")
    first = (f"The micro-batch ({micro}) is small for this GPU: raise it (use the memory headroom) "
             "and lower gradient accumulation to keep the global batch." if micro
             else "If the micro-batch is small, raise it and lower gradient accumulation.")
    return Finding(kind="low_sm_activity",
                   message="low SM activity: " + "; ".join(parts)
                           + f" (below {SM_ACTIVE_LOW_PCT:.0f}%; ≥ 80% is needed for good use)",
                   advice=(first, "Cut per-kernel overhead: torch.compile or fused kernels, CUDA "
                                  "graphs; avoid .item()/.cpu() synchronizations in the loop."),
                   evidence=tuple(evidence), gpus=tuple(e.gpu for e in evidence))


# -- host transfer and communication --------------------------------------------------------------
def _pcie_expected_gbs(gen: int | None, width: int | None) -> float | None:
    if not gen or not width:
        return None
    from trainrig.probe.health import pcie_expected_gbs

    return pcie_expected_gbs(int(gen), int(width), _catalog_link)


def _catalog_link(name: str) -> Any:
    from trainrig.catalog import load_catalog
    from trainrig.errors import TrainrigError

    try:
        return load_catalog().links.get(name).entry
    except TrainrigError:
        return None


def host_transfer_rule(data: RunData, warmup_steps: int) -> Finding | str | None:
    gpus = used_gpus(data)
    if not gpus:
        return _no_gpu_reason(data)
    if all(r["pcie_rx_kbs"] is None and r["pcie_tx_kbs"] is None
           for rows in gpus.values() for r in rows):
        return "PCIe throughput is N/A on these GPUs"
    evidence, parts = [], []
    for gpu, rows in gpus.items():
        hit, expected = _pcie_busy_rows(rows)
        if expected is None or len(hit) < MIN_SAMPLES or len(hit) / len(rows) < PCIE_BUSY_SHARE:
            continue
        rate = _median(_pcie_gbs(r) for r in hit)
        evidence.append(_evidence("pcie_gbs", hit, "gpu_samples", rate,
                                  round(PCIE_BUSY_FRACTION * expected, 2), "GB/s", gpu,
                                  note=f"pinned copies reach ≈ {expected:.1f} GB/s on this link"))
        parts.append(f"GPU {gpu} moves {rate:.1f} GB/s over PCIe in {len(hit) / len(rows):.0%} "
                     f"of samples (≈ {expected:.1f} GB/s reachable)")
    if not evidence:
        return None
    return Finding(kind="host_transfer", message="host-transfer bound: " + "; ".join(parts),
                   advice=("Keep data and state on the GPU: avoid per-step CPU offload of optimizer "
                           "state or activations unless memory forces it.",
                           "Copy from pinned memory with non_blocking=True and prefetch the next "
                           "batch so copies overlap compute; send compact dtypes (token ids, "
                           "uint8 images) and convert on the GPU.",
                           "Check the link runs at its spec (see below_spec) and that each GPU "
                           "uses the CPU socket/NUMA node it is attached to."),
                   evidence=tuple(evidence), gpus=tuple(e.gpu for e in evidence))


def _pcie_gbs(row: dict[str, Any]) -> float | None:
    values = [v for v in (row["pcie_rx_kbs"], row["pcie_tx_kbs"]) if v is not None]
    return max(values) * 1e3 / 1e9 if values else None  # NVML: KB/s


def _pcie_busy_rows(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], float | None]:
    hit, expected_any = [], None
    for row in rows:
        expected = _pcie_expected_gbs(row["pcie_gen_current"], row["pcie_width_current"])
        rate = _pcie_gbs(row)
        if expected is None or rate is None:
            continue
        expected_any = expected
        if rate >= PCIE_BUSY_FRACTION * expected:
            hit.append(row)
    return hit, expected_any


def communication_rule(data: RunData, warmup_steps: int) -> Finding | str | None:
    infos = gpu_infos(data)
    nvlink = _nvlink_evidence(used_gpus(data), infos)
    network = _network_evidence(data)
    if nvlink is None and network is None:
        return "needs NVLink counters with a catalog link rate, or a NIC of known speed"
    evidence = [e for e in (nvlink or []) + (network or [])]
    if not evidence:
        return None
    parts = [e.note for e in evidence if e.note]
    return Finding(kind="communication", message="communication-bound: " + "; ".join(parts),
                   advice=("Overlap communication with compute (DDP/FSDP bucket sizes, prefetch of "
                           "the next all-gather) and communicate less often (larger micro-batch × "
                           "gradient accumulation).",
                           "Keep tensor parallelism inside a node (NVLink) and data parallelism "
                           "across nodes; a lower ZeRO stage moves fewer bytes per step.",
                           "Across nodes: RDMA (InfiniBand/RoCE, GPUDirect) instead of TCP, and "
                           "the NIC nearest each GPU; `trainrig probe` measures collectives."),
                   evidence=tuple(evidence), gpus=tuple(e.gpu for e in evidence if e.gpu is not None))


def _nvlink_evidence(gpus: dict[int, list[dict[str, Any]]],
                     infos: dict[int, GpuInfo]) -> list[Evidence] | None:
    out, measured = [], False
    for gpu, rows in gpus.items():
        rate_gbs = infos[gpu].nvlink_gbs if gpu in infos else None
        known = [r for r in rows if r["nvlink_tx_gbs"] is not None and r["nvlink_rx_gbs"] is not None]
        if not rate_gbs or not known:
            continue
        measured = True
        hit = [r for r in known if r["nvlink_tx_gbs"] + r["nvlink_rx_gbs"]
               >= NVLINK_BUSY_FRACTION * rate_gbs]
        if len(hit) >= MIN_SAMPLES and len(hit) / len(known) >= LINK_BUSY_SHARE:
            rate = _median(r["nvlink_tx_gbs"] + r["nvlink_rx_gbs"] for r in hit)
            out.append(_evidence("nvlink_gbs", hit, "gpu_samples", rate,
                                 NVLINK_BUSY_FRACTION * rate_gbs, "GB/s", gpu,
                                 note=f"GPU {gpu} NVLink at {rate:.0f} of {rate_gbs:.0f} GB/s in "
                                      f"{len(hit) / len(known):.0%} of samples"))
    return out if measured else None


def _network_evidence(data: RunData) -> list[Evidence] | None:
    known = [r for r in data.host_samples if r.get("net_util_pct") is not None]
    if not known:
        return None
    hit = [r for r in known if r["net_util_pct"] >= NIC_BUSY_PCT]
    if len(hit) < MIN_SAMPLES or len(hit) / len(known) < LINK_BUSY_SHARE:
        return []
    util = _median(r["net_util_pct"] for r in hit)
    return [_evidence("net_util_pct", hit, "host_samples", util, NIC_BUSY_PCT, "%",
                      note=f"the busiest NIC at {util:.0f}% of line rate in "
                           f"{len(hit) / len(known):.0%} of samples")]


# -- stragglers -------------------------------------------------------------------------------------
def straggler_rule(data: RunData, warmup_steps: int) -> Finding | str | None:
    gpus = {g: _busy(rows) for g, rows in used_gpus(data).items()}
    gpus = {g: rows for g, rows in gpus.items() if len(rows) >= MIN_SAMPLES}
    steps = measured_steps(data.steps, warmup_steps)
    ranks = sorted({s["rank"] for s in steps})
    if len(gpus) < 2 and len(ranks) < 2:
        return "needs two or more busy GPUs or reporting ranks"
    evidence = _clock_stragglers(gpus) + _rank_stragglers(steps, ranks)
    if not evidence:
        return None
    return Finding(kind="straggler", message="straggler: " + "; ".join(e.note or "" for e in evidence),
                   advice=("Synchronous training runs at the pace of the slowest GPU: fix its cause "
                           "(throttling, PCIe link, a busier loader) or exclude the node.",
                           "A rank that waits longer for data needs its loader checked (shard sizes, "
                           "storage locality, CPU affinity of its workers)."),
                   evidence=tuple(evidence), gpus=tuple(e.gpu for e in evidence if e.gpu is not None))


def _clock_stragglers(gpus: dict[int, list[dict[str, Any]]]) -> list[Evidence]:
    medians = {g: _median(r["sm_clock_mhz"] for r in rows) for g, rows in gpus.items()}
    medians = {g: m for g, m in medians.items() if m is not None}
    out = []
    for gpu, clock in medians.items():
        others = _median(m for g, m in medians.items() if g != gpu)
        if others and clock < STRAGGLER_CLOCK_RATIO * others:
            out.append(_evidence("sm_clock_mhz", gpus[gpu], "gpu_samples", clock,
                                 STRAGGLER_CLOCK_RATIO * others, "MHz", gpu,
                                 note=f"GPU {gpu} runs at {clock:.0f} MHz, the others at "
                                      f"{others:.0f} MHz"))
    return out


def _rank_stragglers(steps: list[dict[str, Any]], ranks: list[int]) -> list[Evidence]:
    if len(ranks) < 2:
        return []
    by_rank = {r: [s for s in steps if s["rank"] == r] for r in ranks}
    shares = {r: _wait_share(rows) for r, rows in by_rank.items()}
    out = []
    for rank, share in shares.items():
        others = _median(v for r, v in shares.items() if r != rank)
        if share is None or others is None:
            continue
        if share >= others + STRAGGLER_WAIT_GAP and share >= 2 * others:
            out.append(_evidence("data_wait_share", by_rank[rank], "steps", share,
                                 others + STRAGGLER_WAIT_GAP, "ratio",
                                 note=f"rank {rank} waits {share:.0%} of its steps for data, the "
                                      f"others {others:.0%}"))
    return out


def host_cpu_rule(data: RunData, warmup_steps: int) -> Finding | str | None:
    """The host's cores all busy most of the time: the training processes, their loader workers and
    anything else on the machine compete for CPU, and whichever loses makes the GPUs wait."""
    rows = [r for r in data.host_samples if r.get("cpu_pct") is not None]
    if len(rows) < MIN_SAMPLES:
        return "needs host CPU samples"
    saturated = [r for r in rows if r["cpu_pct"] >= HOST_CPU_SATURATED_PCT]
    if len(saturated) < max(MIN_SAMPLES, HOST_CPU_SATURATED_SHARE * len(rows)):
        return None
    busiest = max(r["cpu_pct"] for r in saturated)
    evidence = [_evidence("cpu_pct", saturated, "host_samples", busiest, HOST_CPU_SATURATED_PCT, "%",
                          note=f"{len(saturated)} of {len(rows)} host samples")]
    waiting = [r for r in saturated if (r.get("iowait_pct") or 0.0) >= STORAGE_IOWAIT_PCT]
    if waiting:
        evidence.append(_evidence("iowait_pct", waiting, "host_samples", max(r["iowait_pct"] for r in waiting),
                                  STORAGE_IOWAIT_PCT, "%"))
    return Finding(kind="host_cpu", message=f"every host core busy ({busiest:.0f}% at most) in {len(saturated)} of "
                                            f"{len(rows)} samples: the CPU is saturated",
                   advice=("More cores per GPU (gpus × (loader workers + 1) and a few for the system), or"
                           " less CPU work per batch: pre-tokenize, lighter transforms, fewer workers per GPU.",
                           "Look for other processes on the host competing for the cores."),
                   evidence=tuple(evidence))


def _fmt(value: float | None) -> str:
    return "N/A" if value is None else f"{value:.0f}"


RULES: tuple[tuple[str, Callable[[RunData, int], Finding | str | None]], ...] = (
    ("data_loading", data_loading_rule),
    ("storage", storage_rule),
    ("host_transfer", host_transfer_rule),
    ("memory_pressure", memory_rule),
    ("throttling", throttling_rule),
    ("low_sm_activity", low_sm_activity_rule),
    ("communication", communication_rule),
    ("straggler", straggler_rule),
    ("below_spec", below_spec_rule),
    ("host_cpu", host_cpu_rule),
)
