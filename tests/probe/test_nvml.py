"""The NVML layer against recorded responses: healthy, degraded PCIe, throttling, not supported."""

from __future__ import annotations

import copy
import json
import pickle

import pytest

from trainrig.errors import TrainrigError
from trainrig.probe.nvml import (
    NA,
    NotAvailable,
    Nvml,
    NvmlUnavailable,
    decode_clock_event_reasons,
    is_na,
    na_to_none,
    topology_label,
)
from trainrig.probe.nvml_fake import FakeNvml, load_recording, recording_names
from trainrig.probe.nvml_record import record_nvml
from trainrig.report.format import na

SHIPPED = ["a100_pcie_gen3x8", "a100_sxm_throttling", "h100_sxm_healthy", "rtx2080_not_supported"]


def _no_sleep(_: float) -> None:
    return None


# -- the N/A value ---------------------------------------------------------------------------------
def test_na_is_one_falsy_value_that_renders_as_na():
    assert NotAvailable() is NA
    assert copy.deepcopy(NA) is NA and pickle.loads(pickle.dumps(NA)) is NA
    assert not NA and str(NA) == "N/A" and f"{NA:.1f}" == "N/A" and repr(NA) == "N/A"
    assert NA != 0 and NA != -1 and NA is not None
    assert is_na(NA) and not is_na(0) and na_to_none(NA) is None and na_to_none(0) == 0
    assert na(na_to_none(NA)) == "N/A"


def test_clock_event_bits_decode_per_nvml_header():
    assert decode_clock_event_reasons(0) == ()
    assert decode_clock_event_reasons(0x4 | 0x20) == ("sw_power_cap", "sw_thermal_slowdown")
    assert decode_clock_event_reasons(0x8 | 0x40 | 0x80) == (
        "hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
    assert decode_clock_event_reasons(0x1 | 0x400) == ("gpu_idle", "unknown_0x400")
    assert decode_clock_event_reasons(NA) is NA


def test_topology_labels_follow_nvidia_smi():
    assert [topology_label(v) for v in (10, 20, 30, 40, 50)] == ["PIX", "PXB", "PHB", "NODE", "SYS"]
    assert topology_label(NA) == "N/A"


def test_every_shipped_recording_is_listed_and_says_where_its_values_come_from():
    assert recording_names() == SHIPPED
    for name in SHIPPED:
        recording = load_recording(name)
        assert recording["format"] == "trainrig-nvml-recording/1"
        assert len(recording["source"]) > 80 and recording["devices"]


# -- the four recordings --------------------------------------------------------------------------
def test_healthy_h100(open_fake):
    nvml = open_fake("h100_sxm_healthy")
    assert nvml.device_count() == 2
    assert nvml.driver_version() == "550.54.15" and nvml.cuda_driver_version() == "12.4"
    static, sample = nvml.static(0), nvml.sample(0)
    assert static.name == "NVIDIA H100 80GB HBM3" and static.architecture == "Hopper"
    assert static.cuda_capability == "9.0" and static.memory_total_bytes == 81559 * 2**20
    assert (static.sm_clock_max_mhz, static.mem_clock_max_mhz) == (1980, 2619)
    assert static.power_limit_default_w == 700.0 and static.ecc_enabled is True
    assert static.nvlink_links == tuple(range(18)) and static.gpm_supported is True
    assert (sample.pcie_gen_current, sample.pcie_width_current) == (5, 16)
    assert sample.power_w == pytest.approx(541.23) and sample.power_limit_w == 700.0
    assert sample.clock_event_reasons == () and sample.slowdown_reasons == ()
    assert sample.nvlink_active_links == 18 and sample.nvlink_tx_kib_total > 0
    assert sample.ecc_uncorrected_volatile == 0 and sample.remapped_rows_pending is False
    assert sample.unavailable == {} and static.unavailable == {}
    gpm = nvml.gpm(0, 0.01, sleep=_no_sleep)
    assert (gpm.sm_active_pct, gpm.tensor_active_pct, gpm.dram_active_pct) == (97.6, 71.3, 38.9)
    assert nvml.topology() == [["X", "NV18"], ["NV18", "X"]]
    links = nvml.nvlinks(0)
    assert len(links) == 18 and all(link.active is True and link.version == 4 for link in links)


def test_degraded_pcie_a100(open_fake):
    nvml = open_fake("a100_pcie_gen3x8")
    static, sample = nvml.static(0), nvml.sample(0)
    assert (static.pcie_gen_max, static.pcie_gen_gpu_max, static.pcie_width_max) == (4, 4, 16)
    assert (sample.pcie_gen_current, sample.pcie_width_current) == (3, 8)
    assert sample.pcie_replay_count == 37
    assert sample.pcie_rx_kbs == 5980000 and sample.pcie_tx_kbs == 3215000
    assert static.nvlink_links == () and sample.nvlink_active_links is NA
    assert sample.nvlink_tx_kib_total is NA
    assert sample.unavailable["nvlink_tx_kib_total"] == "not supported"
    assert nvml.gpm(0).sm_active_pct is NA  # Ampere: no GPM


def test_throttling_a100(open_fake):
    nvml = open_fake("a100_sxm_throttling")
    sample = nvml.sample(0)
    assert sample.clock_event_mask == 0x6C
    assert sample.clock_event_reasons == (
        "sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown")
    assert sample.slowdown_reasons == sample.clock_event_reasons
    assert sample.power_limit_w == 300.0 and nvml.static(0).power_limit_default_w == 400.0
    assert sample.sm_clock_mhz == 1095 and sample.sm_clock_max_mhz == 1410
    assert sample.temperature_c == 88 and nvml.static(0).temperature_slowdown_c == 89


def test_not_supported_metrics_become_na_with_reasons(open_fake):
    nvml = open_fake("rtx2080_not_supported")
    static, sample = nvml.static(0), nvml.sample(0)
    assert static.ecc_enabled is NA and static.gpm_supported is NA
    assert static.unavailable == {"ecc_enabled": "not supported", "gpm_supported": "not supported"}
    for name in ("ecc_corrected_volatile", "ecc_uncorrected_volatile", "remapped_rows_pending",
                 "remapped_rows_failure", "nvlink_tx_kib_total", "nvlink_active_links"):
        assert getattr(sample, name) is NA, name
        assert sample.unavailable[name], name
    assert sample.power_w == pytest.approx(18.31)  # supported values still come through
    assert sample.clock_event_reasons == ("sw_power_cap",)
    assert nvml.gpm(0).unavailable["sm_active_pct"] == "GPM unavailable"
    assert nvml.topology() == [["X"]]


# -- errors other than "not supported" -------------------------------------------------------------
def _one_gpu(**calls) -> dict:
    return {"format": "trainrig-nvml-recording/1", "label": "t", "source": "test",
            "system": {}, "devices": [{"nvmlDeviceGetName": "Test GPU", **calls}]}


def test_no_permission_and_gpu_lost_are_na_not_crashes(open_fake):
    nvml = open_fake(_one_gpu(
        nvmlDeviceGetPowerUsage={"nvml_error": "NoPermission"},
        nvmlDeviceGetTemperature={"0": {"nvml_error": "GPUIsLost"}},
        nvmlDeviceGetClockInfo={"1": {"nvml_error": 999}},
    ))
    sample = nvml.sample(0)
    assert sample.power_w is NA and sample.unavailable["power_w"] == "no permission"
    assert sample.temperature_c is NA and sample.unavailable["temperature_c"] == "GPU is lost"
    assert sample.sm_clock_mhz is NA and sample.unavailable["sm_clock_mhz"] == "unknown NVML error"
    assert 0 in nvml.lost
    assert sample.memory_total_bytes is NA  # not recorded → function not found → N/A
    assert "not found" in sample.unavailable["memory_total_bytes"]


def test_call_wraps_every_error_and_missing_function(open_fake):
    nvml = open_fake(_one_gpu())
    assert nvml.call("nvmlDeviceGetNoSuchThing", nvml.handle(0)) is NA
    assert nvml.call("notAnNvmlFunction") is NA
    assert nvml.last_reason == "function not in this NVML binding"
    assert nvml.call("nvmlDeviceGetName", NA) is NA  # a missing handle never reaches the driver
    assert nvml.handle(5) is NA and 5 in nvml.lost
    sample = nvml.sample(5)
    assert sample.power_w is NA and sample.unavailable["power_w"] == "GPU handle unavailable"


def test_older_drivers_fall_back_to_the_throttle_reasons_call(open_fake):
    nvml = open_fake(_one_gpu(
        nvmlDeviceGetCurrentClocksEventReasons={"nvml_error": "FunctionNotFound"},
        nvmlDeviceGetCurrentClocksThrottleReasons=0x20,
    ))
    assert nvml.sample(0).clock_event_reasons == ("sw_thermal_slowdown",)


def test_init_failure_is_nvml_unavailable():
    broken = _one_gpu()
    broken["system"]["nvmlInit"] = {"nvml_error": "DriverNotLoaded"}
    with pytest.raises(NvmlUnavailable, match="driver not loaded"):
        Nvml.open(FakeNvml(broken))


def test_real_backend_opens_or_says_why():
    try:
        nvml = Nvml.open()
    except NvmlUnavailable as error:
        assert "NVML" in str(error) or "nvidia-ml-py" in str(error)
    else:
        with nvml:
            assert nvml.device_count() >= 0


def test_unknown_recording_is_one_sentence_error(tmp_path):
    with pytest.raises(TrainrigError, match="no recording 'nope'"):
        load_recording("nope")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(TrainrigError, match="not valid JSON"):
        load_recording(bad)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(TrainrigError, match="not a trainrig-nvml-recording/1"):
        FakeNvml.from_recording(other)


# -- the recorder writes what the fake replays -------------------------------------------------------
@pytest.mark.parametrize("name", SHIPPED)
def test_recorder_round_trip(tmp_path, name, open_fake):
    path = tmp_path / f"{name}.json"
    record_nvml(path, label=name, inner=FakeNvml.from_recording(name), gpm_interval_s=0)
    recorded = json.loads(path.read_text())
    assert recorded["format"] == "trainrig-nvml-recording/1" and recorded["label"] == name
    original, replay = open_fake(name), open_fake(recorded)
    assert replay.device_count() == original.device_count()
    for index in range(original.device_count()):
        assert replay.static(index) == original.static(index)
        a, b = replay.sample(index), original.sample(index)
        assert {**vars(a), "timestamp_s": 0} == {**vars(b), "timestamp_s": 0}
        assert replay.gpm(index, 0, _no_sleep) == original.gpm(index, 0, _no_sleep)
    assert replay.topology() == original.topology()
