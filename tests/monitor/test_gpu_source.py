"""GPU sampling against the fake NVML backend: healthy, throttled, unsupported, lost, unavailable."""

from __future__ import annotations

import time

import pytest

import trainrig
from trainrig.monitor.gpu import KIB, GpuSource
from trainrig.monitor.schema import GPU_COLUMNS, column_names
from trainrig.probe import nvml as nvml_module

from .conftest import answer, fake


def _wait_for_gpm(source: GpuSource, index: int, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while source._gpm.latest(index) is None:
        assert time.monotonic() < deadline, "GPM poller produced nothing"
        time.sleep(0.01)


def test_healthy_h100_rows_carry_every_column_with_recorded_values():
    source = GpuSource.open(fake("h100_sxm_healthy"), gpm_window_s=0.01)
    source.start()
    try:
        _wait_for_gpm(source, 0)
        rows = source.read()
    finally:
        source.close()
    assert [r["gpu"] for r in rows] == [0, 1]
    row = rows[0]
    assert set(column_names(GPU_COLUMNS)) <= row.keys()
    memory = answer("h100_sxm_healthy", 0, "nvmlDeviceGetMemoryInfo")
    assert row["memory_used_bytes"] == memory["used"] and row["memory_total_bytes"] == memory["total"]
    assert row["power_w"] == pytest.approx(answer("h100_sxm_healthy", 0, "nvmlDeviceGetPowerUsage") / 1000)
    assert row["sm_clock_mhz"] == answer("h100_sxm_healthy", 0, "nvmlDeviceGetClockInfo")["1"]
    gpm = answer("h100_sxm_healthy", 0, "nvmlGpmMetricsGet")
    assert row["sm_active_pct"] == pytest.approx(gpm["2"])
    assert row["tensor_active_pct"] == pytest.approx(gpm["5"])
    assert row["dram_active_pct"] == pytest.approx(gpm["10"])
    assert row["nvlink_tx_gbs"] is None  # a rate needs two counter readings


def test_gpus_are_matched_to_the_catalog_for_peaks_and_link_rates():
    source = GpuSource.open(fake("h100_sxm_healthy"))
    info = source.infos[0]
    source.close()
    spec = trainrig.get_gpu("H100-SXM5-80GB")
    assert info.catalog_id == spec.id
    assert info.peak_tflops["bf16"] == spec.peak("bf16")
    assert info.nvlink_gbs == spec.scale_up_gbs and info.nvlink_links == 18
    assert info.gpm_supported is True


def test_unsupported_metrics_are_none_not_errors():
    source = GpuSource.open(fake("rtx2080_not_supported"))
    source.start()
    rows = source.read()
    source.close()
    row = rows[0]
    for name in ("sm_active_pct", "tensor_active_pct", "dram_active_pct", "nvlink_tx_gbs",
                 "nvlink_rx_gbs"):
        assert row[name] is None
    assert row["utilization_gpu_pct"] == 0 and row["clock_event_mask"] == 4
    assert source.infos[0].gpm_supported is None  # NotSupported → N/A, not False


def test_a_gpu_lost_mid_run_gives_none_and_sampling_goes_on():
    backend = fake("a100_sxm_throttling")
    source = GpuSource.open(backend)
    first = source.read()[0]
    backend.devices[0]["nvmlDeviceGetUtilizationRates"] = {"nvml_error": "GPUIsLost"}
    backend.devices[0]["nvmlDeviceGetPowerUsage"] = {"nvml_error": "NoPermission"}
    second = source.read()[0]
    source.close()
    assert first["utilization_gpu_pct"] == 100
    assert second["utilization_gpu_pct"] is None and second["power_w"] is None
    assert second["sm_clock_mhz"] == first["sm_clock_mhz"]


def test_nvml_that_cannot_start_means_no_gpus_with_the_reason():
    backend = fake("h100_sxm_healthy")
    backend.system["nvmlInit"] = {"nvml_error": "DriverNotLoaded"}
    source = GpuSource.open(backend)
    assert source.infos == [] and source.read() == []
    assert "driver not loaded" in source.unavailable_reason


def test_only_the_chosen_gpus_are_sampled():
    source = GpuSource.open(fake("h100_sxm_healthy"), gpus=[1, 7])
    assert [r["gpu"] for r in source.read()] == [1]
    source.close()


def test_nvlink_rates_come_from_counter_deltas(monkeypatch):
    backend = fake("h100_sxm_healthy")
    clock = iter([100.0, 100.5])
    monkeypatch.setattr(nvml_module.time, "time", lambda: next(clock))
    source = GpuSource.open(backend, gpus=[0])
    base = answer("h100_sxm_healthy", 0, "nvmlDeviceGetFieldValues")
    source.read()
    backend.devices[0]["nvmlDeviceGetFieldValues"] = {"138": base["138"] + 100_000_000,
                                                      "139": base["139"] + 50_000_000}
    row = source.read()[0]
    source.close()
    assert row["nvlink_tx_gbs"] == pytest.approx(100_000_000 * KIB / 0.5 / 1e9)
    assert row["nvlink_rx_gbs"] == pytest.approx(50_000_000 * KIB / 0.5 / 1e9)
