"""One rank of the collectives benchmark; run under torchrun:

    torchrun --nproc-per-node 8 -m trainrig.probe.collectives_worker --out result.json

NCCL on GPUs (one GPU per local rank), gloo on CPU. Rank 0 writes the JSON result to `--out`.
Sizes are full-buffer sizes S as nccl-tests counts them: an all-gather gathers S bytes in total
(S/n from each rank), a reduce-scatter reduces S bytes into S/n per rank.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

ELEMENT_BYTES = 4  # float32
TARGET_TIME_S = 0.05
MAX_ITERS = 200


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    import torch
    import torch.distributed as dist

    backend = args.backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device(f"cuda:{local_rank}" if backend == "nccl" else "cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend=backend)
    try:
        result = _run_all(torch, dist, device, args)
        if dist.get_rank() == 0:
            Path(args.out).write_text(json.dumps({"backend": backend, **result}))
    finally:
        dist.destroy_process_group()


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="trainrig.probe.collectives_worker")
    parser.add_argument("--out", required=True)
    parser.add_argument("--backend", default="auto", choices=("auto", "nccl", "gloo"))
    parser.add_argument("--sizes", default=",".join(str(1 << p) for p in range(20, 27, 2)))
    parser.add_argument("--ops", default="all_reduce,all_gather,reduce_scatter")
    parser.add_argument("--time-budget", type=float, default=60.0)
    return parser.parse_args(argv)


def _run_all(torch: Any, dist: Any, device: Any, args: argparse.Namespace) -> dict[str, Any]:
    world = dist.get_world_size()
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    sizes = [int(s) for s in args.sizes.split(",")]
    ops = [op for op in args.ops.split(",") if op]
    deadline = time.perf_counter() + args.time_budget
    results: dict[str, Any] = {}
    for op in ops:
        try:
            results[op] = {"points": _run_op(torch, dist, device, op, sizes, world, deadline)}
        except (RuntimeError, ValueError) as error:  # e.g. an op the backend lacks
            results[op] = {"points": [], "error": str(error).splitlines()[0][:200]}
    return {"world_size": world, "local_world_size": local_world,
            "nnodes": max(1, world // max(1, local_world)), "device": device.type, "ops": results}


def _run_op(torch: Any, dist: Any, device: Any, op: str, sizes: list[int], world: int,
            deadline: float) -> list[dict[str, float]]:
    points = []
    for size in sizes:
        if _stop(torch, dist, device, deadline):
            break
        call = _operation(torch, dist, device, op, size, world)
        seconds = _time(torch, dist, device, call)
        points.append({"size_bytes": _effective_size(size, world), "time_s": seconds})
        del call
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return points


def _effective_size(size: int, world: int) -> int:
    """The full buffer actually moved: a multiple of ranks × element size."""
    unit = world * ELEMENT_BYTES
    return max(unit, size // unit * unit)


def _operation(torch: Any, dist: Any, device: Any, op: str, size: int, world: int) -> Any:
    count = _effective_size(size, world) // ELEMENT_BYTES
    full = torch.rand(count, device=device)
    part = torch.rand(count // world, device=device)
    if op == "all_reduce":
        return lambda: dist.all_reduce(full)
    if op == "all_gather":
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        return lambda: gather(full, part)
    if op == "reduce_scatter":
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        return lambda: scatter(part, full)
    raise ValueError(f"unknown collective {op}")


def _sync(torch: Any, device: Any) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _elapsed(torch: Any, dist: Any, device: Any, call: Any, iters: int) -> float:
    """The slowest rank's seconds per call for `iters` calls."""
    dist.barrier()
    _sync(torch, device)
    start = time.perf_counter()
    for _ in range(iters):
        call()
    _sync(torch, device)
    mine = torch.tensor([(time.perf_counter() - start) / iters], device=device)
    dist.all_reduce(mine, op=dist.ReduceOp.MAX)
    return float(mine.item())


def _time(torch: Any, dist: Any, device: Any, call: Any) -> float:
    for _ in range(2):  # warm-up: NCCL sets up channels on first use
        call()
    probe = _elapsed(torch, dist, device, call, 1)
    iters = int(min(MAX_ITERS, max(2, TARGET_TIME_S / max(probe, 1e-6))))
    return _elapsed(torch, dist, device, call, iters)


def _stop(torch: Any, dist: Any, device: Any, deadline: float) -> bool:
    """Every rank stops at the same size: rank decisions are combined with MAX."""
    flag = torch.tensor([1.0 if time.perf_counter() > deadline else 0.0], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item() > 0)


if __name__ == "__main__":
    main()
