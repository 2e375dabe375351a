"""Collective bus bandwidth: launch `torchrun … -m trainrig.probe.collectives_worker`, parse its JSON.

Bus bandwidth follows nccl-tests doc/PERFORMANCE.md: algbw = S / t with S the full buffer (for
all-gather and reduce-scatter the gathered / unscattered size, i.e. per-rank count × ranks), and
busbw = algbw × 2(n−1)/n for all-reduce, × (n−1)/n for all-gather and reduce-scatter. busbw is then
comparable with one link's rate whatever the number of ranks.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from trainrig.probe.results import CollectiveOp, CollectivePoint, CollectivesResult

__all__ = ["OPS", "bus_factor", "busbw_gbs", "collective_sizes", "torchrun_command",
           "run_collectives", "parse_worker_output", "CollectivesError"]

OPS = ("all_reduce", "all_gather", "reduce_scatter")


class CollectivesError(RuntimeError):
    """The torchrun launch failed or gave no result."""


def bus_factor(op: str, ranks: int) -> float:
    """nccl-tests' correction from algorithm to bus bandwidth (doc/PERFORMANCE.md, "Summary")."""
    if ranks < 1:
        raise ValueError("ranks must be positive")
    if op == "all_reduce":
        return 2 * (ranks - 1) / ranks
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (ranks - 1) / ranks
    if op in ("broadcast", "reduce"):
        return 1.0
    raise ValueError(f"unknown collective {op!r}")


def busbw_gbs(op: str, size_bytes: int, time_s: float, ranks: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s for one operation on a buffer of `size_bytes` taking `time_s`."""
    algbw = size_bytes / time_s / 1e9
    return algbw, algbw * bus_factor(op, ranks)


def collective_sizes(quick: bool, on_gpu: bool) -> list[int]:
    """Message sizes in bytes: ×4 steps when quick, ×2 otherwise."""
    low, high = (1 << 20, 1 << 30) if on_gpu else (1 << 16, 1 << 24)
    if quick:
        high = min(high, 1 << 26 if on_gpu else 1 << 22)
    step = 4 if quick else 2
    sizes, size = [], low
    while size <= high:
        sizes.append(size)
        size *= step
    return sizes


def torchrun_command(nproc: int, out: Path, sizes: list[int], *, backend: str = "auto",
                     nnodes: int = 1, rdzv_endpoint: str | None = None, time_budget_s: float = 30,
                     ops: tuple[str, ...] = OPS) -> list[str]:
    """`python -m torch.distributed.run` (the module behind `torchrun`) with this interpreter."""
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc)]
    if nnodes > 1:
        if not rdzv_endpoint:
            raise ValueError("several nodes need a rendezvous endpoint")
        command += ["--nnodes", str(nnodes), "--rdzv-backend", "c10d", "--rdzv-endpoint",
                    rdzv_endpoint, "--rdzv-id", "trainrig-probe"]
    else:
        command += ["--standalone"]
    command += ["-m", "trainrig.probe.collectives_worker", "--out", str(out), "--backend", backend,
                "--sizes", ",".join(str(s) for s in sizes), "--ops", ",".join(ops),
                "--time-budget", f"{time_budget_s:g}"]
    return command


def run_collectives(nproc: int, sizes: list[int], *, backend: str = "auto", nnodes: int = 1,
                    rdzv_endpoint: str | None = None, timeout_s: float = 120) -> CollectivesResult:
    """Launch the worker on `nproc` processes per node; the result rank 0 wrote."""
    with tempfile.TemporaryDirectory(prefix="trainrig-collectives-") as tmp:
        out = Path(tmp) / "result.json"
        command = torchrun_command(nproc, out, sizes, backend=backend, nnodes=nnodes,
                                   rdzv_endpoint=rdzv_endpoint,
                                   time_budget_s=max(5.0, 0.7 * timeout_s))
        completed = _run(command, timeout_s)
        if not out.exists():
            tail = "\n".join((completed.stdout or "").strip().splitlines()[-8:])
            where = "" if nnodes == 1 else " (only the node of rank 0 writes the result)"
            raise CollectivesError(f"torchrun exited {completed.returncode} without a result"
                                   f"{where}:\n{tail}")
        return parse_worker_output(json.loads(out.read_text()), shlex.join(command))


def _run(command: list[str], timeout_s: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, env=env, start_new_session=True)
    try:
        stdout, _ = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            stdout, _ = process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            stdout, _ = process.communicate()
        raise CollectivesError(f"torchrun did not finish within {timeout_s:.0f} s") from None
    return subprocess.CompletedProcess(command, process.returncode, stdout, None)


def parse_worker_output(data: dict[str, Any], command: str) -> CollectivesResult:
    """The worker's JSON as a typed result; busbw recomputed here from sizes and times."""
    ranks = int(data["world_size"])
    ops = []
    for op, entry in data["ops"].items():
        points = [
            CollectivePoint(size_bytes=int(p["size_bytes"]), time_s=float(p["time_s"]),
                            **dict(zip(("algbw_gbs", "busbw_gbs"),
                                       busbw_gbs(op, int(p["size_bytes"]), float(p["time_s"]),
                                                 ranks), strict=True)))
            for p in entry.get("points", [])
        ]
        peak = max((p.busbw_gbs for p in points), default=None)
        ops.append(CollectiveOp(op=op, points=points, peak_busbw_gbs=peak,
                                error=entry.get("error")))
    return CollectivesResult(
        backend=data["backend"], world_size=ranks, nnodes=int(data.get("nnodes", 1)),
        local_world_size=int(data.get("local_world_size", ranks)), device=data["device"],
        ops=ops, command=command,
        method=(
            f"torch.distributed {data['backend']} over {ranks} ranks; per size: warm-up, then "
            "enough iterations for ~50 ms, time = the slowest rank's mean (all-reduce MAX of the "
            "per-rank times); algbw = S/t and busbw per nccl-tests doc/PERFORMANCE.md "
            "(all-reduce ×2(n−1)/n, all-gather and reduce-scatter ×(n−1)/n)"
        ),
    )
