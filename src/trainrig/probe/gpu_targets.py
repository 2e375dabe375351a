"""Helpers of `scripts/gpu_check.sh`: NVML recording under load, tables, and the GPU targets.

    python -m trainrig.probe.gpu_targets record-under-load nvml_load.json
    python -m trainrig.probe.gpu_targets tables probe.json
    python -m trainrig.probe.gpu_targets targets probe.json --out targets.json

Targets (issue "Probe", GPU checks): the GEMM sweep's best bf16 rate ≥ 95% of the best rate plain
torch.mm reaches with large squares; device copy ≥ 85% of the datasheet memory bandwidth; pinned
PCIe ≥ 80% of the link's theoretical rate.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from trainrig.probe.health import pcie_theoretical_gbs
from trainrig.probe.results import ProbeResult

__all__ = ["Target", "evaluate_targets", "reference_bf16_tflops", "record_under_load", "main",
           "GEMM_GOAL", "COPY_GOAL", "PCIE_GOAL"]

GEMM_GOAL = 0.95
COPY_GOAL = 0.85
PCIE_GOAL = 0.80


@dataclass(frozen=True)
class Target:
    name: str
    measured: float | None
    reference: float | None
    goal: float
    note: str

    @property
    def ratio(self) -> float | None:
        if self.measured is None or not self.reference:
            return None
        return self.measured / self.reference

    @property
    def passed(self) -> bool | None:
        return None if self.ratio is None else self.ratio >= self.goal


def reference_bf16_tflops(torch: Any, device: Any = "cuda:0", sizes: tuple[int, ...] = (8192, 16384),
                          seconds_per_size: float = 2.0) -> float:
    """The best bf16 rate plain torch.mm reaches on large random squares, CUDA-event timed."""
    best = 0.0
    for size in sizes:
        a = torch.randn(size, size, device=device, dtype=torch.bfloat16)
        b = torch.randn(size, size, device=device, dtype=torch.bfloat16)
        for _ in range(3):
            torch.mm(a, b)
        torch.cuda.synchronize(device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        calls, begin = 0, time.perf_counter()
        start.record()
        while time.perf_counter() - begin < seconds_per_size:
            for _ in range(10):
                torch.mm(a, b)
            calls += 10
            torch.cuda.synchronize(device)
        end.record()
        end.synchronize()
        seconds = start.elapsed_time(end) / 1e3 / calls
        best = max(best, 2 * size**3 / seconds / 1e12)
        del a, b
        torch.cuda.empty_cache()
    return best


def evaluate_targets(result: ProbeResult, reference_tflops: float | None,
                     memory_spec_gbs: float | None) -> list[Target]:
    """The three GPU targets for GPU 0 of a probe result."""
    gemm = next((g for g in result.benchmarks.gemm if g.gpu_index in (0, None)), None)
    copy = next((c for c in result.benchmarks.memory), None)
    pcie = next((p for p in result.benchmarks.pcie), None)
    gpu = result.gpus[0] if result.gpus else None
    gen = (gpu.pcie_gen_gpu_max or gpu.pcie_gen_max) if gpu else None
    width = gpu.pcie_width_max if gpu else None
    link = pcie_theoretical_gbs(gen, width) if gen and width else None
    pinned = max(filter(None, (pcie.h2d_pinned_gbs, pcie.d2h_pinned_gbs)), default=None) \
        if pcie else None
    return [
        Target("bf16 GEMM sweep best vs torch.mm large squares", gemm.best("bf16") if gemm
               else None, reference_tflops, GEMM_GOAL, "TFLOP/s"),
        Target("device copy vs datasheet memory bandwidth", copy.copy_gbs if copy else None,
               memory_spec_gbs, COPY_GOAL, "GB/s read+write"),
        Target(f"pinned PCIe vs Gen{gen} x{width} line rate", pinned, link, PCIE_GOAL,
               "GB/s, best direction"),
    ]


def record_under_load(path: str | Path, seconds: float = 3.0) -> None:
    """Record NVML while a bf16 GEMM loop keeps GPU 0 busy (clocks, power and link under load)."""
    import torch

    from trainrig.probe.nvml_record import record_nvml

    stop = threading.Event()

    def load() -> None:
        a = torch.randn(8192, 8192, device="cuda:0", dtype=torch.bfloat16)
        while not stop.is_set():
            for _ in range(20):
                a @ a
            torch.cuda.synchronize()

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    time.sleep(seconds)
    try:
        record_nvml(path, label="under bf16 GEMM load", gpm_interval_s=0.5)
    finally:
        stop.set()
        worker.join(timeout=30)


def _tables(path: Path) -> None:
    from rich.console import Console

    from trainrig.report.probe_report import probe_renderables

    console = Console(width=180, force_terminal=False)
    for part in probe_renderables(ProbeResult.model_validate_json(path.read_text())):
        console.print(part)


def _memory_spec(result: ProbeResult, override: float | None) -> float | None:
    if override:
        return override
    gpu = result.gpus[0] if result.gpus else None
    if gpu is None or not gpu.catalog_id:
        return None
    from trainrig.catalog import load_catalog

    return load_catalog().gpus.get(gpu.catalog_id).entry.memory_bandwidth_gbs


def _targets(path: Path, out: Path | None, memory_spec_gbs: float | None, tests_rc: int | None,
             ) -> int:
    import torch

    result = ProbeResult.model_validate_json(path.read_text())
    reference = reference_bf16_tflops(torch) if torch.cuda.is_available() else None
    targets = evaluate_targets(result, reference, _memory_spec(result, memory_spec_gbs))
    if out is not None:
        out.write_text(json.dumps([{**asdict(t), "ratio": t.ratio, "passed": t.passed}
                                   for t in targets], indent=1) + "\n")
    _print_summary(result, targets, tests_rc)
    failed = [t for t in targets if t.passed is False]
    return 1 if failed or (tests_rc not in (None, 0)) else 0


def _print_summary(result: ProbeResult, targets: list[Target], tests_rc: int | None) -> None:
    gpu = result.gpus[0].name if result.gpus else "no GPU"
    bad = [c for c in result.checks if c.verdict in ("LOW", "FAIL")]
    print(f"\n== gpu_check summary: {gpu}; probe {result.duration_s:.0f} s; "
          f"{len(bad)} LOW/FAIL check(s); GPU tests rc={tests_rc}")
    print(f"{'target':<52} {'measured':>10} {'reference':>10} {'ratio':>7} {'goal':>6}  result")
    for t in targets:
        ratio = "N/A" if t.ratio is None else f"{t.ratio:.1%}"
        verdict = {True: "PASS", False: "FAIL", None: "N/A"}[t.passed]
        print(f"{t.name:<52} {_num(t.measured):>10} {_num(t.reference):>10} {ratio:>7} "
              f"{t.goal:>6.0%}  {verdict}")
    for check in bad[:8]:
        print(f"  {check.verdict:<4} {check.component} {check.name}: {check.cause or ''}")


def _num(value: float | None) -> str:
    return "N/A" if value is None else f"{value:,.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainrig.probe.gpu_targets")
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record-under-load")
    rec.add_argument("path", type=Path)
    rec.add_argument("--seconds", type=float, default=3.0)
    tab = sub.add_parser("tables")
    tab.add_argument("probe_json", type=Path)
    tgt = sub.add_parser("targets")
    tgt.add_argument("probe_json", type=Path)
    tgt.add_argument("--out", type=Path)
    tgt.add_argument("--memory-spec-gbs", type=float)
    tgt.add_argument("--tests-rc", type=int)
    args = parser.parse_args(argv)
    if args.command == "record-under-load":
        record_under_load(args.path, args.seconds)
        return 0
    if args.command == "tables":
        _tables(args.probe_json)
        return 0
    return _targets(args.probe_json, args.out, args.memory_spec_gbs, args.tests_rc)


if __name__ == "__main__":
    sys.exit(main())
