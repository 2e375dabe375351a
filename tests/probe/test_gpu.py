"""GPU tests: run by scripts/gpu_check.sh on a CUDA machine; skipped where there is no GPU."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

from trainrig.probe import torch_bench  # noqa: E402
from trainrig.probe.health import pcie_theoretical_gbs  # noqa: E402
from trainrig.probe.nvml import Nvml  # noqa: E402
from trainrig.probe.nvml_fake import FakeNvml  # noqa: E402
from trainrig.probe.nvml_record import record_nvml  # noqa: E402
from trainrig.probe.watch import NvmlWatcher  # noqa: E402


def test_bf16_gemm_on_gpu_is_fast_and_frees_memory():
    # cuBLAS takes its workspace (32 MiB on an H200) from the caching allocator at the first product
    # and keeps it: make it before counting, so only what the bench itself leaves behind is counted
    torch.mm(*torch.ones(2, 64, 64, device="cuda:0", dtype=torch.bfloat16))
    torch.cuda.synchronize(0)
    before = torch.cuda.memory_allocated(0)
    result = torch_bench.gemm_bench(torch, torch.device("cuda:0"), ("bf16",), [(4096,) * 3],
                                    min_time_s=0.02, repeats=3)
    assert result.gpu_index == 0 and result.precisions[0].best_tflops > 10
    assert "CUDA events" in result.method
    assert torch.cuda.memory_allocated(0) == before


def test_fp8_runs_where_the_gpu_supports_it():
    reason = torch_bench.fp8_support(torch, torch.device("cuda:0"))
    if torch.cuda.get_device_capability(0) >= (8, 9):
        assert reason is None
        result = torch_bench.gemm_bench(torch, torch.device("cuda:0"), ("fp8",), [(4096,) * 3],
                                        min_time_s=0.02, repeats=2)
        assert result.precisions[0].best_tflops > 10
    else:
        assert reason


def test_device_copy_and_pcie_rates_are_plausible():
    copy = torch_bench.device_copy_bench(torch, torch.device("cuda:0"), 256 << 20, 0.02, 3)
    assert copy.copy_gbs > 100
    pcie = torch_bench.pcie_bench(torch, 0, 128 << 20, 0.02, 3)
    assert 1 < pcie.h2d_pinned_gbs < pcie_theoretical_gbs(6, 16)
    assert pcie.bidirectional_pinned_gbs > 0 and pcie.h2d_pageable_gbs > 0


def test_real_nvml_sees_the_gpu_and_the_watcher_reads_the_link():
    with Nvml.open() as nvml:
        assert nvml.device_count() >= torch.cuda.device_count()
        static = nvml.static(0)
        assert static.name and static.memory_total_bytes
    watcher = NvmlWatcher(Nvml.open(), [0], interval_s=0.05).start()
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(200):
        a @ a
    gen, width = watcher.link(0)
    torch.cuda.synchronize()
    load = watcher.stop()[0]
    assert gen and width and load.samples >= 1 and load.utilization_gpu_pct_max is not None


def test_a_real_recording_replays_to_the_same_facts(tmp_path):
    path = tmp_path / "gpu.json"
    record_nvml(path, label="test")
    assert json.loads(path.read_text())["devices"]
    with Nvml.open() as real, Nvml.open(FakeNvml.from_recording(path)) as fake:
        assert fake.static(0).name == real.static(0).name
        assert fake.static(0).memory_total_bytes == real.static(0).memory_total_bytes
        assert fake.static(0).nvlink_links == real.static(0).nvlink_links
