"""From recorded rows to the one result object: `RunReport`.

`analyze(RunData)` computes the step statistics (step time, tokens/s, live MFU), the comparison
with an estimate, per-GPU and host summaries, the time series for plots and the diagnosis. The rich
view, `--json` and the HTML report all render this object; none of them computes a number.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainrig.monitor.diagnose import diagnose, measured_steps, rows_by_gpu
from trainrig.monitor.findings import FINDING_KINDS, Check, Finding
from trainrig.monitor.gpu import GpuInfo
from trainrig.monitor.store import RunData, RunRow
from trainrig.units import GIB

__all__ = ["RunReport", "StepStats", "Comparison", "analyze", "step_stats", "compare",
           "merged_workload", "MAX_SERIES_POINTS", "SAME_AS_ESTIMATE"]

MAX_SERIES_POINTS = 2000
SAME_AS_ESTIMATE = 0.05
"""Within ±5% of the estimate reads "as estimated"."""


@dataclass(frozen=True)
class StepStats:
    """Step timing over the measured steps (after warm-up); None where not measurable."""

    steps: int
    measured_steps: int
    warmup_steps: int
    ranks: list[int]
    step_time_s: dict[str, float] | None
    data_wait_share: float | None
    tokens_per_s: float | None
    model_tflops_per_device: float | None
    mfu: float | None
    devices: int
    flops_per_token: float | None
    peak_tflops_per_device: float | None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Comparison:
    """Measured against the estimate of the job file."""

    measured_step_time_s: float | None
    estimated_step_time_s: float | None
    ratio: float | None
    message: str
    measured_tokens_per_s_per_device: float | None
    estimated_tokens_per_s_per_device: float | None
    measured_mfu: float | None
    estimated_mfu: float | None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class RunReport:
    run: RunRow
    duration_s: float | None
    gpus: list[GpuInfo]
    nvml_reason: str | None
    host: dict[str, Any]
    workload: dict[str, Any]
    steps: StepStats
    comparison: Comparison | None
    gpu_summaries: list[dict[str, Any]]
    host_summary: dict[str, Any]
    findings: list[Finding]
    checks: list[Check]
    samples: dict[str, int]
    sampler: dict[str, Any]
    series: dict[str, Any] = field(default_factory=dict)
    storage: dict[str, Any] = field(default_factory=dict)
    """Empty unless the disk refused writes during the run (`Store.storage_state()`)."""

    @property
    def diagnosis(self) -> str:
        """One sentence on what the rules found, and how much they could see to find it."""
        return diagnosis_summary(self.findings, self.checks, self.steps.steps)

    def to_dict(self, series: bool = False) -> dict[str, Any]:
        data = {
            "run": {**self.run.to_dict(), "duration_s": self.duration_s},
            "diagnosis": self.diagnosis,
            "steps": self.steps.to_dict(),
            "vs_estimate": self.comparison.to_dict() if self.comparison else None,
            "findings": [f.to_dict() for f in self.findings],
            "checks": [c.to_dict() for c in self.checks],
            "finding_kinds": list(FINDING_KINDS),
            "gpus": [{**g.to_dict(), **s} for g, s in _paired(self.gpus, self.gpu_summaries)],
            "nvml_unavailable": self.nvml_reason,
            "host": {**self.host, **self.host_summary},
            "workload": self.workload,
            "samples": self.samples,
            "sampler": self.sampler,
            "storage": self.storage,
        }
        if series:
            data["series"] = self.series
        return data


def diagnosis_summary(findings: list[Finding], checks: list[Check], steps: int) -> str:
    """What the diagnosis amounts to. "Nothing holds this job back" only where the rules could
    look: without a step signal, or with no rule able to run, it says what was missing instead."""
    ran = [c.kind for c in checks if c.status != "not_evaluated"]
    skipped = [c.kind for c in checks if c.status == "not_evaluated"]
    if findings:
        return f"{len(findings)} finding(s): {', '.join(f.kind for f in findings)}."
    if steps == 0:
        return ("no step signal, so step time, throughput and data waits were not observed (the job did not "
                "report steps: `trainrig.monitor` in the script, or its Hugging Face / Lightning callback); "
                f"{len(ran)} of {len(ran) + len(skipped)} rules could run and found nothing.")
    if not ran:
        return (f"too little was observed to diagnose this job: none of the {len(skipped)} rules could run"
                " (each says what it needs below).")
    unseen = f"; {len(skipped)} could not run ({', '.join(skipped)})" if skipped else ""
    return f"nothing holds this job back that the rules which ran can see ({', '.join(ran)}){unseen}."


def analyze(data: RunData, warmup_steps: int | None = None) -> RunReport:
    """The report of one run."""
    warmup = int(data.meta.get("warmup_steps", 1)) if warmup_steps is None else warmup_steps
    gpus = [GpuInfo.from_dict(g) for g in data.meta.get("gpus", [])]
    workload = merged_workload(data.meta, gpus)
    stats = step_stats(data.steps, workload, warmup)
    findings, checks = diagnose(data, warmup)
    return RunReport(
        run=data.run, duration_s=_duration(data.run), gpus=gpus,
        nvml_reason=data.meta.get("nvml", {}).get("reason"), host=data.meta.get("host", {}),
        workload=workload, steps=stats, comparison=compare(stats, data.meta.get("estimate")),
        gpu_summaries=[gpu_summary(rows) for rows in _rows_for(gpus, data)],
        host_summary=host_summary(data.host_samples), findings=findings, checks=checks,
        samples={"gpu": len(data.gpu_samples), "host": len(data.host_samples),
                 "steps": len(data.steps)},
        sampler=data.meta.get("sampler", {}), series=series(data),
        storage=storage_state(data.meta),
    )


def storage_state(meta: dict[str, Any]) -> dict[str, Any]:
    """What the disk refused, from the wrapper (`storage`) or a job's own monitor
    (`storage:rankN`); a state with rows still unwritten wins over one that recovered."""
    states = [v for k, v in sorted(meta.items()) if k.split(":")[0] == "storage" and v]
    return max(states, key=lambda v: (bool(v.get("full_now")), v.get("dropped_rows") or 0),
               default={})


def merged_workload(meta: dict[str, Any], gpus: Sequence[GpuInfo]) -> dict[str, Any]:
    """The wrapper's workload, overlaid by what the job's own monitor (lowest rank) said; the peak
    from the catalog entry of the first GPU when nobody gave one."""
    merged = dict(meta.get("workload") or {})
    ranks = sorted(k for k in meta if k.startswith("workload:rank"))
    if ranks:
        merged.update({k: v for k, v in meta[ranks[0]].items() if v is not None})
    precision = merged.get("precision") or "bf16"
    if not merged.get("peak_tflops_per_device") and gpus and gpus[0].peak_tflops.get(precision):
        merged["peak_tflops_per_device"] = gpus[0].peak_tflops[precision]
        merged["peak_source"] = f"catalog {gpus[0].catalog_id} {precision}"
    return merged


def step_stats(steps: Sequence[dict[str, Any]], workload: dict[str, Any], warmup: int) -> StepStats:
    measured = measured_steps(steps, warmup)
    ranks = sorted({s["rank"] for s in steps})
    lead = [s for s in measured if ranks and s["rank"] == ranks[0]]
    total_s = sum(s["step_s"] for s in measured)
    devices = int(workload.get("devices") or max(1, len(ranks)))
    tokens_per_s = _tokens_per_s(measured, ranks)
    flops, peak = workload.get("flops_per_token"), workload.get("peak_tflops_per_device")
    tflops = tokens_per_s * flops / devices / 1e12 if tokens_per_s and flops else None
    return StepStats(
        steps=len(steps), measured_steps=len(measured), warmup_steps=warmup, ranks=ranks,
        step_time_s=_distribution([s["step_s"] for s in lead]) if lead else None,
        data_wait_share=(sum(s["data_wait_s"] or 0 for s in measured) / total_s
                         if total_s > 0 else None),
        tokens_per_s=tokens_per_s, model_tflops_per_device=tflops,
        mfu=tflops / peak if tflops is not None and peak else None, devices=devices,
        flops_per_token=flops, peak_tflops_per_device=peak,
    )


def _tokens_per_s(steps: Sequence[dict[str, Any]], ranks: list[int]) -> float | None:
    """Each rank's tokens over its time, summed over ranks; None where no step counted tokens."""
    total, known = 0.0, False
    for rank in ranks:
        rows = [s for s in steps if s["rank"] == rank and s["tokens"] is not None]
        seconds = sum(s["step_s"] for s in rows)
        if rows and seconds > 0:
            total, known = total + sum(s["tokens"] for s in rows) / seconds, True
    return total if known else None


def _distribution(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"median": statistics.median(ordered), "mean": statistics.fmean(ordered),
            "p10": _quantile(ordered, 0.1), "p90": _quantile(ordered, 0.9),
            "min": ordered[0], "max": ordered[-1], "last": values[-1]}


def _quantile(ordered: Sequence[float], q: float) -> float:
    index = q * (len(ordered) - 1)
    low = int(index)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (index - low)


def compare(stats: StepStats, estimate: dict[str, Any] | None) -> Comparison | None:
    """"measured 0.84 s/step, estimated 0.61 s — 38% slower"."""
    if not estimate:
        return None
    measured = stats.step_time_s["median"] if stats.step_time_s else None
    expected = estimate.get("step_time_s")
    ratio = measured / expected if measured and expected else None
    n_gpus = estimate.get("n_gpus") or 1
    return Comparison(
        measured_step_time_s=measured, estimated_step_time_s=expected, ratio=ratio,
        message=comparison_text(measured, expected),
        measured_tokens_per_s_per_device=(stats.tokens_per_s / stats.devices
                                          if stats.tokens_per_s else None),
        estimated_tokens_per_s_per_device=(estimate["tokens_per_s"] / n_gpus
                                           if estimate.get("tokens_per_s") else None),
        measured_mfu=stats.mfu, estimated_mfu=estimate.get("mfu"))


def comparison_text(measured: float | None, expected: float | None) -> str:
    if measured is None or expected is None:
        return (f"estimated {expected:.3g} s/step; no measured steps" if expected is not None
                else "no estimate of the step time")
    ratio = measured / expected
    head = f"measured {measured:.3g} s/step, estimated {expected:.3g} s"
    if abs(ratio - 1) <= SAME_AS_ESTIMATE:
        return f"{head} — as estimated"
    if ratio > 1:
        return f"{head} — {ratio - 1:.0%} slower"
    return f"{head} — {1 - ratio:.0%} faster"


# -- summaries and series -----------------------------------------------------------------------------
def gpu_summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    def col(name: str) -> list[float]:
        return [r[name] for r in rows if r.get(name) is not None]

    used = col("memory_used_bytes")
    return {"samples": len(rows), "utilization_gpu_pct_median": _median(col("utilization_gpu_pct")),
            "memory_used_gib_max": max(used) / GIB if used else None,
            "power_w_mean": _mean(col("power_w")), "power_w_max": _max(col("power_w")),
            "sm_clock_mhz_median": _median(col("sm_clock_mhz")),
            "temperature_c_max": _max(col("temperature_c")),
            "sm_active_pct_median": _median(col("sm_active_pct")),
            "tensor_active_pct_median": _median(col("tensor_active_pct")),
            "pcie_rx_kbs_median": _median(col("pcie_rx_kbs")),
            "pcie_tx_kbs_median": _median(col("pcie_tx_kbs"))}


def host_summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    def col(name: str) -> list[float]:
        return [r[name] for r in rows if r.get(name) is not None]

    rss, ram = col("job_rss_bytes"), col("ram_used_bytes")
    return {"cpu_pct_mean": _mean(col("cpu_pct")), "iowait_pct_mean": _mean(col("iowait_pct")),
            "ram_used_gib_max": max(ram) / GIB if ram else None,
            "job_rss_gib_max": max(rss) / GIB if rss else None,
            "job_cpu_pct_mean": _mean(col("job_cpu_pct")),
            "workers_median": _median(col("workers")),
            "disk_read_bps_mean": _mean(col("disk_read_bps")),
            "disk_write_bps_mean": _mean(col("disk_write_bps")),
            "net_rx_bps_mean": _mean(col("net_rx_bps")), "net_tx_bps_mean": _mean(col("net_tx_bps"))}


def series(data: RunData) -> dict[str, Any]:
    """Downsampled time series for plots, times in seconds since the run started."""
    start = data.run.started_at
    gpus = {}
    for gpu, rows in rows_by_gpu(data.gpu_samples).items():
        rows = _thin(rows)
        gpus[str(gpu)] = {"t": [r["t"] - start for r in rows],
                          "utilization_gpu_pct": [r["utilization_gpu_pct"] for r in rows],
                          "memory_used_gib": [_gib(r["memory_used_bytes"]) for r in rows],
                          "power_w": [r["power_w"] for r in rows],
                          "sm_clock_mhz": [r["sm_clock_mhz"] for r in rows],
                          "sm_active_pct": [r["sm_active_pct"] for r in rows]}
    host = _thin(data.host_samples)
    steps = _thin(data.steps)
    return {"gpus": gpus,
            "host": {"t": [r["t"] - start for r in host], "cpu_pct": [r["cpu_pct"] for r in host],
                     "ram_used_gib": [_gib(r["ram_used_bytes"]) for r in host],
                     "job_rss_gib": [_gib(r["job_rss_bytes"]) for r in host]},
            "steps": {"t": [r["t_end"] - start for r in steps], "rank": [r["rank"] for r in steps],
                      "step_s": [r["step_s"] for r in steps],
                      "data_wait_s": [r["data_wait_s"] for r in steps]}}


def _rows_for(gpus: Sequence[GpuInfo], data: RunData) -> list[list[dict[str, Any]]]:
    by_gpu = rows_by_gpu(data.gpu_samples)
    return [by_gpu.get(g.index, []) for g in gpus]


def _paired(gpus: Sequence[GpuInfo], summaries: Sequence[dict[str, Any]]) -> Iterable[tuple]:
    return zip(gpus, summaries, strict=True)


def _thin(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    step = max(1, -(-len(rows) // MAX_SERIES_POINTS))
    return list(rows[::step])


def _gib(value: float | None) -> float | None:
    return None if value is None else value / GIB


def _duration(run: RunRow) -> float | None:
    return run.ended_at - run.started_at if run.ended_at else None


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _max(values: list[float]) -> float | None:
    return max(values) if values else None
