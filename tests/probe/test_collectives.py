"""Collectives: nccl-tests bus bandwidth factors, and a real 2-process gloo run."""

from __future__ import annotations

import pytest

from trainrig.probe import collectives
from trainrig.probe.collectives import (
    bus_factor,
    busbw_gbs,
    collective_sizes,
    parse_worker_output,
    torchrun_command,
)


def test_bus_factors_follow_nccl_tests():
    assert bus_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    assert bus_factor("all_gather", 8) == pytest.approx(7 / 8)
    assert bus_factor("reduce_scatter", 4) == pytest.approx(3 / 4)
    assert bus_factor("broadcast", 8) == 1.0
    assert bus_factor("all_reduce", 1) == 0.0
    with pytest.raises(ValueError):
        bus_factor("gossip", 2)


def test_busbw_from_size_and_time():
    algbw, busbw = busbw_gbs("all_reduce", 1 << 30, 0.01, 8)
    assert algbw == pytest.approx(107.374, rel=1e-3) and busbw == pytest.approx(algbw * 1.75)


def test_sizes_and_command():
    assert collective_sizes(True, False) == [1 << 16, 1 << 18, 1 << 20, 1 << 22]
    assert collective_sizes(False, True)[-1] == 1 << 30
    command = torchrun_command(2, "out.json", [1024])
    assert command[1:4] == ["-m", "torch.distributed.run", "--nproc-per-node"]
    assert "--standalone" in command and "trainrig.probe.collectives_worker" in command
    multi = torchrun_command(8, "out.json", [1024], nnodes=2, rdzv_endpoint="node0:29500")
    assert "--rdzv-endpoint" in multi and "node0:29500" in multi
    with pytest.raises(ValueError):
        torchrun_command(8, "out.json", [1024], nnodes=2)


def test_parse_recomputes_busbw():
    data = {"backend": "nccl", "world_size": 4, "local_world_size": 4, "nnodes": 1,
            "device": "cuda", "ops": {
                "all_reduce": {"points": [{"size_bytes": 1 << 20, "time_s": 1e-4},
                                          {"size_bytes": 1 << 24, "time_s": 1e-3}]},
                "reduce_scatter": {"points": [], "error": "not supported"}}}
    result = parse_worker_output(data, "cmd")
    ar = result.ops[0]
    assert ar.points[1].busbw_gbs == pytest.approx((1 << 24) / 1e-3 / 1e9 * 1.5)
    assert ar.peak_busbw_gbs == max(p.busbw_gbs for p in ar.points)
    assert result.ops[1].error == "not supported" and result.ops[1].peak_busbw_gbs is None


def test_gloo_with_two_processes_gives_positive_busbw():
    pytest.importorskip("torch")
    result = collectives.run_collectives(2, [1 << 16, 1 << 20], backend="gloo", timeout_s=90)
    assert result.backend == "gloo" and result.world_size == 2 and result.device == "cpu"
    assert {op.op for op in result.ops} == set(collectives.OPS)
    for op in result.ops:
        assert op.error is None, op.error
        assert op.points and all(p.busbw_gbs > 0 and p.time_s > 0 for p in op.points)
    all_reduce = next(op for op in result.ops if op.op == "all_reduce")
    assert all_reduce.points[0].busbw_gbs == pytest.approx(all_reduce.points[0].algbw_gbs)  # n=2


def test_a_failed_launch_is_a_collectives_error(monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setattr(collectives, "torchrun_command",
                        lambda *a, **k: ["python3", "-c", "import sys; sys.exit(3)"])
    with pytest.raises(collectives.CollectivesError, match="exited 3 without a result"):
        collectives.run_collectives(2, [1024], timeout_s=20)
