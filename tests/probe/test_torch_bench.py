"""torch benchmarks run here on the CPU device: the same code as on cuda:N, timed by perf_counter."""

from __future__ import annotations

import pytest

from trainrig.probe import torch_bench

torch = pytest.importorskip("torch")  # the optional extra trainrig[torch]; installed for tests


def test_time_per_call_is_a_positive_median():
    x = torch.randn(64, 64)
    calls = []
    seconds = torch_bench.time_per_call(torch, "cpu", lambda: calls.append(x @ x), min_time_s=0.01, repeats=3)
    assert seconds > 0 and len(calls) > 3  # no speed bound: this machine is shared and noisy


def test_time_per_call_grows_the_loop_to_the_minimum_time_and_returns_the_per_call_median(monkeypatch):
    loops = []  # calls per timed loop; each call "takes" 1e-4 s, one loop in five is slowed by the machine

    def fake_loop(torch_module, device, fn, calls, sync):
        loops.append(calls)
        return calls * 1e-4 * (3.0 if len(loops) % 5 == 0 else 1.0)

    monkeypatch.setattr(torch_bench, "_timed_loop", fake_loop)
    seconds = torch_bench.time_per_call(torch, "cpu", lambda: None, min_time_s=0.01, repeats=3, warmup=0)
    assert seconds == pytest.approx(1e-4)  # the median ignores the slowed loop
    assert loops[-1] * 1e-4 >= 0.01 and len(set(loops[-3:])) == 1  # timed loops all ran ≥ min_time_s


def test_gemm_sweep_on_cpu():
    steps = []
    result = torch_bench.gemm_bench(torch, torch.device("cpu"), ("fp32", "bf16", "fp8"),
                                    [(64, 64, 64), (128, 128, 128), (256, 128, 64)],
                                    min_time_s=0.005, repeats=2, peaks={"fp32": 1.0},
                                    advance=lambda: steps.append(1))
    fp32, bf16, fp8 = result.precisions
    assert fp32.best_tflops and fp32.best_tflops > 0 and len(fp32.points) == 3
    assert max(p.fraction_of_best for p in fp32.points) == pytest.approx(1.0)
    assert all(p.tflops == pytest.approx(2 * p.m * p.n * p.k / p.time_s / 1e12)
               for p in fp32.points)
    assert fp32.best_shape in {"64x64x64", "128x128x128", "256x128x64"}
    assert fp32.points[0].fraction_of_peak is not None and bf16.points[0].fraction_of_peak is None
    assert bf16.best_tflops and bf16.best_tflops > 0
    assert fp8.best_tflops is None and "CUDA" in fp8.skipped
    assert result.gpu_index is None and "perf_counter" in result.method and len(steps) == 6


def test_shapes_that_do_not_fit_are_skipped(monkeypatch):
    monkeypatch.setattr(torch_bench, "gpu_budget_bytes", lambda *_: 200_000)
    result = torch_bench.gemm_bench(torch, "cpu", ("fp32",), [(64, 64, 64), (512, 512, 512)],
                                    min_time_s=0.002, repeats=1)
    (fp32,) = result.precisions
    assert [p.m for p in fp32.points] == [64] and "exceeds free memory" in fp32.skipped


def test_time_limit_stops_the_sweep():
    result = torch_bench.gemm_bench(torch, "cpu", ("fp32",), [(64, 64, 64)] * 3,
                                    min_time_s=0.002, repeats=1, should_stop=lambda: True)
    assert result.precisions[0].best_tflops is None and "time limit" in result.precisions[0].skipped


def test_tf32_setting_is_restored():
    before = torch.get_float32_matmul_precision()
    torch_bench.gemm_bench(torch, "cpu", ("tf32",), [(32, 32, 32)], min_time_s=0.002, repeats=1)
    assert torch.get_float32_matmul_precision() == before


def test_quick_shapes_include_large_squares():
    assert (8192, 8192, 8192) in torch_bench.gemm_shapes(True)
    full = torch_bench.gemm_shapes(False)
    assert (16384, 16384, 16384) in full and len(full) > len(torch_bench.gemm_shapes(True))


def test_device_copy_on_cpu_counts_read_plus_write():
    result = torch_bench.device_copy_bench(torch, "cpu", 8 * 2**20, min_time_s=0.01, repeats=2)
    assert result.copy_gbs > 0.1 and result.buffer_bytes == 8 * 2**20
    assert "read plus written" in result.method


def test_torch_info_without_cuda():
    info = torch_bench.torch_info(torch, None)
    assert info.available and info.version == torch.__version__
    if not torch.cuda.is_available():
        assert info.device_count == 0 and "no CUDA" in info.reason
    missing = torch_bench.torch_info(None, "torch is not installed")
    assert not missing.available and missing.reason == "torch is not installed"
