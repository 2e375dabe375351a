"""The NVML watcher summarises what GPUs showed under load."""

from __future__ import annotations

import time

from trainrig.probe.nvml import Nvml
from trainrig.probe.nvml_fake import FakeNvml
from trainrig.probe.watch import NvmlWatcher, summarize_load


def test_watcher_sees_throttling_under_load():
    watcher = NvmlWatcher(Nvml.open(FakeNvml.from_recording("a100_sxm_throttling")), [0],
                          interval_s=0.01).start()
    assert watcher.link(0) == (4, 16)
    time.sleep(0.1)
    load = watcher.stop()[0]
    assert load.samples >= 2 and load.utilization_gpu_pct_max == 100
    assert load.sm_clock_mhz_min == 1095 and load.temperature_c_max == 88
    assert load.slowdown_reasons == ["sw_power_cap", "hw_slowdown", "sw_thermal_slowdown",
                                     "hw_thermal_slowdown"]


def test_idle_samples_are_used_when_none_is_busy():
    nvml = Nvml.open(FakeNvml.from_recording("rtx2080_not_supported"))
    load = summarize_load([nvml.sample(0), nvml.sample(0)])
    assert load.samples == 2 and load.pcie_gen_max_seen == 1 and load.power_w_max == 18.31
