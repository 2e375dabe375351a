"""Data-parallel bench ranks: one process per GPU of this node (or per CPU process, to exercise the
code), started with torch.multiprocessing's spawn and joined through a local TCP rendezvous, as
`torchrun --nproc-per-node N` would start them.

Each rank builds the same scaled model (seed 0), wraps it the way the job's ZeRO stage is run in
PyTorch — DDP for ZeRO 0, FSDP (`fully_shard` per block, then the whole model) for ZeRO 1–3, keeping
the gathered parameters after the forward for ZeRO 1–2 and resharding them for ZeRO 3 — trains on
its own random tokens, and writes what it measured to a file the parent reads. NCCL on CUDA, gloo
on the CPU. An out-of-memory on any rank is the bench's result; the other ranks then fail their next
collective at the process-group timeout and are reported as such, never left hanging.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path
from typing import Any

from trainrig.bench.model import import_torch, precision_plan
from trainrig.bench.result import RankRun, StepTimes
from trainrig.errors import TrainrigError
from trainrig.specs import Job

__all__ = ["run_ranks", "COLLECTIVE_TIMEOUT_S"]

COLLECTIVE_TIMEOUT_S = 120.0
"""How long a rank waits in a collective for a peer that died (out of memory) before it gives up:
long enough for a slow first step (kernel selection, the allocator growing), short enough that a
failed bench ends within minutes."""


def run_ranks(job: Job, n_gpus: int, device: str, steps: int, warmup: int, budget_gib: float | None,
              progress: Any = None) -> list[RankRun] | None:
    """Every rank's run, in rank order, or None when a rank ran out of memory. `progress` (a
    module-level function: it crosses into the rank processes) is called by rank 0 only."""
    torch = import_torch()
    with tempfile.TemporaryDirectory(prefix="trainrig-bench-") as folder:
        arguments = (n_gpus, _free_port(), job, device, steps, warmup, budget_gib, progress, folder)
        try:
            torch.multiprocessing.start_processes(_rank_main, args=arguments, nprocs=n_gpus, join=True,
                                                  start_method="spawn")
        except torch.multiprocessing.ProcessRaisedException as error:
            raise TrainrigError("--gpus", f"a bench rank failed: {_last_line(str(error))}") from None
        except torch.multiprocessing.ProcessExitedException as error:
            raise TrainrigError("--gpus", f"a bench rank exited with code {error.exit_code}.") from None
        answers = [json.loads(Path(folder, f"rank{rank}.json").read_text()) for rank in range(n_gpus)]
    if any(answer.get("oom") for answer in answers):
        return None
    for rank, answer in enumerate(answers):
        if "error" in answer:
            raise TrainrigError("--gpus", f"bench rank {rank} failed: {answer['error']}")
    return [_rank_run(answer) for answer in answers]


def _rank_main(rank: int, n_gpus: int, port: int, job: Job, device: str, steps: int, warmup: int,
               budget_gib: float | None, progress: Any, folder: str) -> None:
    """One rank: join the group, measure, write `rank<N>.json` (the run, `oom`, or the error)."""
    from trainrig.bench.run import make_clock, measure_rank, memory_cap

    torch = import_torch()
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if device == "cuda":
        torch.cuda.set_device(rank)
    backend = "nccl" if device == "cuda" else "gloo"
    torch.distributed.init_process_group(backend, rank=rank, world_size=n_gpus,
                                         timeout=timedelta(seconds=COLLECTIVE_TIMEOUT_S))
    answer: dict[str, Any]
    try:
        with memory_cap(torch, device, budget_gib):
            run = measure_rank(torch, job, device, make_clock(torch, device), steps, warmup,
                               progress if rank == 0 else None, wrap=_wrapper(torch, job, device), seed=rank)
        answer = asdict(run)
    except (torch.OutOfMemoryError, MemoryError):
        answer = {"oom": True}
    except Exception as error:  # a peer's death surfaces here as a collective error: report it, do not hang
        answer = {"error": _last_line(str(error)) or type(error).__name__}
    Path(folder, f"rank{rank}.json").write_text(json.dumps(answer))
    if "oom" not in answer and "error" not in answer:
        torch.distributed.destroy_process_group()


def _wrapper(torch: Any, job: Job, device: str) -> Any:
    """The function that makes a built model data-parallel, as the job's ZeRO stage runs in PyTorch."""
    training = job.training
    if training.zero == 0:
        def ddp(model: Any) -> Any:
            # routed experts no token chose get no gradient in a step: DDP must not wait for them
            unused = job.model.is_moe
            ids = [torch.cuda.current_device()] if device == "cuda" else None
            return torch.nn.parallel.DistributedDataParallel(model, device_ids=ids, find_unused_parameters=unused)
        return ddp
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    plan = precision_plan(training, device)
    # gather 16-bit parameters and reduce gradients in fp32, as torchtitan's FSDP defaults do
    policy = (MixedPrecisionPolicy(param_dtype=getattr(torch, plan.autocast_dtype), reduce_dtype=torch.float32)
              if plan.autocast_dtype else MixedPrecisionPolicy())
    reshard = training.zero >= 3

    def fsdp(model: Any) -> Any:
        for block in model.blocks:
            fully_shard(block, reshard_after_forward=reshard, mp_policy=policy)
        fully_shard(model, reshard_after_forward=reshard, mp_policy=policy)
        return model
    return fsdp


def _rank_run(answer: dict[str, Any]) -> RankRun:
    return RankRun(**{**answer, "times": [StepTimes(**t) for t in answer["times"]]})


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""
