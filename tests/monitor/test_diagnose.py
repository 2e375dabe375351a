"""Diagnosis rules: each finding kind from planted samples (fake NVML sequences built from the
recordings' values, or synthetic rows), the evidence names the triggering rows, and healthy runs
raise nothing."""

from __future__ import annotations

import pytest

from trainrig.monitor.diagnose import DATA_WAIT_SHARE, diagnose
from trainrig.monitor.findings import FINDING_KINDS, Finding

from .conftest import (
    GIB,
    answer,
    fake,
    host_row,
    record_frames,
    run_data,
    set_answer,
    steps_rows,
    unchanged,
)


def kinds(data, warmup=1):
    findings, checks = diagnose(data, warmup)
    return {f.kind: f for f in findings}, {c.kind: c for c in checks}


def test_every_rule_reports_a_check_and_a_healthy_h100_has_no_finding(store):
    data = record_frames(store, fake("h100_sxm_healthy"), [unchanged] * 5)
    findings, checks = kinds(data)
    assert findings == {}
    assert set(checks) == set(FINDING_KINDS)
    for check in checks.values():
        assert check.status in ("ok", "not_evaluated")
        assert (check.reason is not None) == (check.status == "not_evaluated")


def test_unknown_finding_kind_is_rejected():
    with pytest.raises(ValueError):
        Finding(kind="gremlins", message="", advice=(), evidence=())


# -- data loading / storage ------------------------------------------------------------------------
def test_data_wait_above_the_threshold_is_data_loading_with_the_slow_steps_as_evidence():
    steps = steps_rows([(0.1, 0.0)] + [(0.1, 0.06)] * 6 + [(0.1, 0.01)] * 2)
    found, _ = kinds(run_data(steps=steps, host=[host_row(i) for i in range(5)]))
    finding = found["data_loading"]
    wait = finding.evidence[0]
    assert wait.table == "steps" and wait.metric == "data_wait_share"
    assert wait.ids == tuple(range(2, 8))  # the six slow steps after the warm-up step
    assert wait.value == pytest.approx(0.38 / 0.8)
    assert "num_workers" in " ".join(finding.advice)


def test_below_the_threshold_or_too_few_steps_is_not_data_loading():
    fine = steps_rows([(0.1, 0.1 * DATA_WAIT_SHARE * 0.5)] * 8)
    found, checks = kinds(run_data(steps=fine))
    assert "data_loading" not in found and checks["data_loading"].status == "ok"
    few = steps_rows([(0.1, 0.09)] * 3)
    found, checks = kinds(run_data(steps=few))
    assert checks["data_loading"].status == "not_evaluated"
    assert "steps" in checks["data_loading"].reason


def test_saturated_workers_get_worker_advice():
    steps = steps_rows([(0.1, 0.07)] * 8)
    host = [host_row(i, cpu_pct=40.0, workers=2, workers_cpu_pct=[99.0, 97.0]) for i in range(6)]
    finding = kinds(run_data(steps=steps, host=host))[0]["data_loading"]
    assert "raise num_workers" in finding.advice[0]
    worker_evidence = [e for e in finding.evidence if e.metric == "workers_cpu_pct"][0]
    assert worker_evidence.value == pytest.approx(98.0) and worker_evidence.n_samples == 6


def test_waiting_on_io_is_storage_not_data_loading():
    steps = steps_rows([(0.1, 0.07)] * 8)
    host = [host_row(i, iowait_pct=35.0, workers=4, workers_cpu_pct=[20.0] * 4) for i in range(6)]
    found, _ = kinds(run_data(steps=steps, host=host))
    assert "storage" in found and "data_loading" not in found
    assert any(e.metric == "iowait_pct" and e.value == 35.0 for e in found["storage"].evidence)


# -- memory -------------------------------------------------------------------------------------------
def test_gpu_memory_near_its_limit_over_time(store):
    total = answer("h100_sxm_healthy", 0, "nvmlDeviceGetMemoryInfo")["total"]
    full = {"total": total, "used": int(total * 0.97), "free": total - int(total * 0.97)}
    frames = [unchanged] * 3 + [set_answer(0, "nvmlDeviceGetMemoryInfo", full)] + [unchanged] * 2
    data = record_frames(store, fake("h100_sxm_healthy"), frames)
    finding = kinds(data)[0]["memory_pressure"]
    assert finding.gpus == (0,)
    evidence = finding.evidence[0]
    near_ids = [r["id"] for r in data.gpu_samples if r["gpu"] == 0][3:]
    assert list(evidence.ids) == near_ids and evidence.value == pytest.approx(0.97, abs=1e-3)


def test_host_memory_near_the_jobs_limit():
    limit = 4 * GIB
    host = [host_row(i, job_rss_bytes=int(limit * share)) for i, share in enumerate([0.5, 0.92, 0.95])]
    data = run_data(host=host, meta={"host": {"memory_limit_bytes": limit, "ram_total_bytes": 64 * GIB,
                                              "memory_limit_source": "declared memory limit"}})
    finding = kinds(data)[0]["memory_pressure"]
    assert finding.evidence[0].ids == (2, 3) and "4.00 GiB declared memory limit" in finding.message
    calm = run_data(host=[host_row(i, job_rss_bytes=GIB) for i in range(3)],
                    meta={"host": {"memory_limit_bytes": limit, "ram_total_bytes": 64 * GIB}})
    assert "memory_pressure" not in kinds(calm)[0]


# -- throttling and below spec ------------------------------------------------------------------------
def test_throttling_appearing_over_time_names_only_the_throttled_samples(store):
    backend = fake("a100_sxm_throttling")
    healthy = [set_answer(0, "nvmlDeviceGetCurrentClocksEventReasons", 0),
               set_answer(0, "nvmlDeviceGetClockInfo", {"1": 1410, "2": 1593}),
               set_answer(0, "nvmlDeviceGetEnforcedPowerLimit", 400000)]
    throttled = [set_answer(0, name, answer("a100_sxm_throttling", 0, name))
                 for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetClockInfo")]

    def apply(frames):
        return lambda b: [f(b) for f in frames]

    data = record_frames(store, backend, [apply(healthy)] * 4 + [apply(throttled)] * 4)
    found, _ = kinds(data)
    finding = found["throttling"]
    ids = [r["id"] for r in data.gpu_samples]
    assert list(finding.evidence[0].ids) == ids[4:]
    assert "sw_power_cap" in finding.message and "sw_thermal_slowdown" in finding.message
    assert "1095 of 1410 MHz" in finding.message
    temperature = [e for e in finding.evidence if e.metric == "temperature_c"]
    assert temperature and temperature[0].value == 88
    advice = " ".join(finding.advice)
    assert "Thermal" in advice and "Power" in advice
    assert "below_spec" not in found  # the limit was the default (400 W) in this sequence


def test_recorded_power_cap_and_degraded_pcie_are_below_spec(store):
    capped = kinds(record_frames(store, fake("a100_sxm_throttling"), [unchanged] * 3))[0]
    assert "power limited to 300 of 400 W" in capped["below_spec"].message
    link = kinds(record_frames(store, fake("a100_pcie_gen3x8"), [unchanged] * 3))[0]
    assert "Gen3 x8 under load, capable of Gen4 x16" in link["below_spec"].message
    assert "host_transfer" in link  # ~6 GB/s on a link that reaches about that much


def test_idle_link_downshift_is_not_below_spec(store):
    idle = {"gpu": 0, "memory": 0}
    frames = [set_answer(0, "nvmlDeviceGetUtilizationRates", idle)] * 3
    found = kinds(record_frames(store, fake("a100_pcie_gen3x8"), frames))[0]
    assert "below_spec" not in found


# -- SM activity --------------------------------------------------------------------------------------
def test_low_sm_activity_with_a_small_micro_batch():
    rows = [_gpu_row(i, sm_active_pct=31.0) for i in range(5)]
    data = run_data(gpu=rows, meta={"workload": {"micro_batch": 1}})
    finding = kinds(data)[0]["low_sm_activity"]
    assert finding.evidence[0].value == 31.0 and "micro-batch (1)" in finding.advice[0]
    busy = run_data(gpu=[_gpu_row(i, sm_active_pct=92.0) for i in range(5)])
    assert kinds(busy)[1]["low_sm_activity"].status == "ok"


def test_sm_activity_is_not_evaluated_without_gpm(store):
    checks = kinds(record_frames(store, fake("a100_sxm_throttling"), [unchanged] * 3))[1]
    assert checks["low_sm_activity"].status == "not_evaluated"
    assert "GPM" in checks["low_sm_activity"].reason


# -- communication and stragglers ---------------------------------------------------------------------
def test_busy_nvlink_and_busy_nic_are_communication():
    rows = [_gpu_row(i, nvlink_tx_gbs=330.0, nvlink_rx_gbs=330.0) for i in range(5)]
    meta = {"gpus": [_info(0, nvlink_gbs=900.0)]}
    finding = kinds(run_data(gpu=rows, meta=meta))[0]["communication"]
    assert finding.evidence[0].metric == "nvlink_gbs" and finding.evidence[0].value == 660.0
    nic = [host_row(i, net_util_pct=85.0) for i in range(5)]
    finding = kinds(run_data(host=nic))[0]["communication"]
    assert finding.evidence[0].metric == "net_util_pct"
    quiet = [host_row(i, net_util_pct=10.0) for i in range(5)]
    assert kinds(run_data(host=quiet))[1]["communication"].status == "ok"


def test_a_slower_gpu_is_a_straggler(store):
    slow = set_answer(1, "nvmlDeviceGetClockInfo", {"1": 1500, "2": 2619})
    data = record_frames(store, fake("h100_sxm_healthy"), [slow] * 4)
    finding = kinds(data)[0]["straggler"]
    assert finding.gpus == (1,) and "1500 MHz" in finding.message


def test_a_rank_waiting_longer_for_data_is_a_straggler():
    steps = steps_rows([(0.1, 0.005)] * 6, rank=0) + steps_rows([(0.1, 0.045)] * 6, rank=1, start_id=7)
    finding = kinds(run_data(steps=steps))[0]["straggler"]
    assert "rank 1" in finding.message and set(finding.evidence[0].ids) == set(range(8, 13))


def test_gpu_rules_on_an_idle_or_missing_gpu_say_why(store):
    idle = kinds(record_frames(store, fake("rtx2080_not_supported"), [unchanged] * 3))[1]
    assert "no GPU was used" in idle["throttling"].reason
    none = kinds(run_data(meta={"nvml": {"reason": "NVML could not start: driver not loaded"}}))[1]
    assert "driver not loaded" in none["below_spec"].reason


def _gpu_row(i: int, **values):
    row = {"id": i + 1, "run_id": 1, "t": 1000.0 + i, "gpu": 0, "utilization_gpu_pct": 100.0,
           "utilization_memory_pct": 30.0, "memory_used_bytes": 20 * GIB, "memory_total_bytes": 80 * GIB,
           "power_w": 500.0, "power_limit_w": 700.0, "sm_clock_mhz": 1980, "mem_clock_mhz": 2619,
           "temperature_c": 60, "clock_event_mask": 0, "pcie_tx_kbs": 1000, "pcie_rx_kbs": 1000,
           "pcie_gen_current": 5, "pcie_width_current": 16, "nvlink_tx_gbs": None,
           "nvlink_rx_gbs": None, "sm_active_pct": None, "tensor_active_pct": None,
           "dram_active_pct": None}
    row.update(values)
    return row


def _info(index: int, **values):
    info = {"index": index, "name": "NVIDIA H100 80GB HBM3", "uuid": None, "pci_bus_id": None,
            "memory_total_bytes": 80 * GIB, "sm_clock_max_mhz": 1980, "mem_clock_max_mhz": 2619,
            "power_limit_default_w": 700.0, "pcie_gen_max": 5, "pcie_width_max": 16,
            "pcie_gen_gpu_max": 5, "temperature_slowdown_c": 89, "nvlink_links": 18,
            "gpm_supported": True}
    info.update(values)
    return info


def test_a_saturated_host_cpu_is_a_finding_with_its_samples_as_evidence():
    from trainrig.monitor.diagnose import HOST_CPU_SATURATED_PCT, host_cpu_rule

    from .conftest import run_data

    def data(cpu_pcts):
        return run_data(host=[{"id": i, "t": float(i), "cpu_pct": pct, "iowait_pct": 0.0}
                              for i, pct in enumerate(cpu_pcts)])

    busy = host_cpu_rule(data([99.0, 98.5, 97.0, 60.0]), 1)
    assert isinstance(busy, Finding) and busy.kind == "host_cpu"
    assert busy.evidence[0].n_samples == 3 and busy.evidence[0].threshold == HOST_CPU_SATURATED_PCT
    assert host_cpu_rule(data([99.0, 40.0, 50.0, 60.0]), 1) is None  # one busy sample in four is not saturation
    assert isinstance(host_cpu_rule(data([]), 1), str)  # not evaluated: says what it needs
