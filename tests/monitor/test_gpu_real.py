"""The monitor on real GPUs (skipped without NVML and a GPU): real NVML rows, GPM on Hopper+, a
CUDA training loop monitored in process, and the Prometheus scrape. Run by the GPU check:

    python -m pytest tests/monitor/test_gpu_real.py -q -rs
"""

from __future__ import annotations

import itertools
import time
import urllib.request

import pytest

import trainrig
from trainrig.monitor.gpu import GpuSource
from trainrig.probe.nvml import Nvml, NvmlUnavailable


def _gpu_count() -> int:
    try:
        with Nvml.open() as nvml:
            return nvml.device_count()
    except NvmlUnavailable:
        return 0


pytestmark = pytest.mark.skipif(_gpu_count() == 0, reason="needs NVML and an NVIDIA GPU")


def test_real_rows_have_the_core_metrics():
    source = GpuSource.open()
    try:
        rows = source.read()
        time.sleep(0.2)
        rows = source.read()
    finally:
        source.close()
    assert rows and source.infos[0].name
    for row in rows:
        for name in ("utilization_gpu_pct", "memory_used_bytes", "memory_total_bytes",
                     "sm_clock_mhz", "temperature_c", "clock_event_mask"):
            assert row[name] is not None, name
        assert 0 <= row["utilization_gpu_pct"] <= 100


def test_gpm_activity_on_hopper_or_newer():
    source = GpuSource.open(gpm_window_s=0.1)
    if not source.infos[0].gpm_supported:
        source.close()
        pytest.skip("GPM needs a Hopper or newer GPU")
    source.start()
    try:
        deadline = time.monotonic() + 5
        while source._gpm.latest(0) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        row = source.read()[0]
    finally:
        source.close()
    assert row["sm_active_pct"] is not None and 0 <= row["sm_active_pct"] <= 100


def test_a_cuda_loop_monitored_in_process_with_prometheus():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    # 20 products of 4096² matrices per step, a "token" being one of the 4096 rows: 20·2·4096² each
    with trainrig.monitor(hz=10, gpus=[0], prometheus_port=0, flops_per_token=20 * 2 * 4096 * 4096,
                          precision="bf16") as m:
        # at least 60 steps and 1.5 s: 60 steps took 0.3 s on an H200, 3 samples at 10 Hz
        steps, started_s = 0, time.perf_counter()
        for _ in m.data(itertools.count()):
            for _ in range(20):
                b = a @ a
            torch.cuda.synchronize()
            m.step(tokens=4096)
            steps += 1
            if steps >= 60 and time.perf_counter() - started_s > 1.5:
                break
        with urllib.request.urlopen(f"http://127.0.0.1:{m._exporter.port}/metrics", timeout=10) as r:
            scrape = r.read().decode()
        report = m.report()
    del b
    assert "DCGM_FI_DEV_GPU_UTIL{" in scrape and "DCGM_FI_DEV_FB_USED{" in scrape
    summary = report.gpu_summaries[0]
    assert report.samples["gpu"] >= 5 and summary["utilization_gpu_pct_median"] > 50
    assert report.steps.steps == steps and report.steps.tokens_per_s > 0
    if report.gpus[0].catalog_id:
        assert report.steps.mfu is not None and 0 < report.steps.mfu < 1.2
    kinds = {f.kind for f in report.findings}
    assert "memory_pressure" not in kinds and "data_loading" not in kinds
