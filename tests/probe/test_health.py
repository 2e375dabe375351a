"""Health verdicts on probe results with planted faults (and one healthy machine)."""

from __future__ import annotations

import pytest

from trainrig.catalog import load_catalog
from trainrig.probe import health
from trainrig.probe.health import (
    Specs,
    check_clocks,
    check_collective,
    check_cpu_cores,
    check_ecc,
    check_gemm,
    check_host_ram,
    check_memory_bandwidth,
    check_nic,
    check_nvlink,
    check_pcie,
    check_pcie_link,
    check_power_limit,
    check_storage,
    check_temperature,
    evaluate,
    pcie_expected_gbs,
    pcie_theoretical_gbs,
    verdict_for,
)
from trainrig.probe.results import (
    Benchmarks,
    CollectiveOp,
    CollectivePoint,
    CollectivesResult,
    DeviceCopyResult,
    GemmPrecision,
    GemmResult,
    LoadObservation,
    MemoryInfo,
    NicInfo,
    PcieResult,
    StorageResult,
)
from trainrig.specs import Storage

from .conftest import GIB, gpu_info, gpu_spec, nvlink4, probe_result


def no_link(_: str):
    return None


def catalog_link(name: str):
    try:
        return load_catalog().links.get(name).entry
    except Exception:
        return None


def pcie(gpu_index=0, h2d=52.0, d2h=53.0, gen=5, width=16) -> PcieResult:
    return PcieResult(gpu_index=gpu_index, h2d_pinned_gbs=h2d, d2h_pinned_gbs=d2h,
                      size_bytes=1 << 28, link_gen_during=gen, link_width_during=width, method="t")


# -- thresholds and arithmetic -------------------------------------------------------------------
def test_verdict_thresholds():
    assert verdict_for(90, 100) == "OK" and verdict_for(89.9, 100) == "LOW"
    assert verdict_for(60, 100) == "LOW" and verdict_for(59.9, 100) == "FAIL"


def test_pcie_rates_per_pci_sig_and_modeling():
    assert pcie_theoretical_gbs(4, 16) == pytest.approx(31.51, abs=0.01)
    assert pcie_theoretical_gbs(5, 16) == pytest.approx(63.02, abs=0.01)
    assert pcie_theoretical_gbs(3, 8) == pytest.approx(7.88, abs=0.01)
    # without a catalog link, MODELING.md's pinned x16 figures scaled by lanes
    assert pcie_expected_gbs(4, 16, no_link) == 25.0 and pcie_expected_gbs(3, 8, no_link) == 6.0
    assert pcie_expected_gbs(6, 16, no_link) == pytest.approx(0.8 * pcie_theoretical_gbs(6, 16))


# -- planted faults, one check at a time -----------------------------------------------------------
def test_pcie_trained_at_gen3_x8_fails_with_cause_and_action():
    gpu = gpu_info(name="NVIDIA A100 80GB PCIe", pcie_gen_current=3, pcie_width_current=8,
                   pcie_gen_max=4, pcie_gen_gpu_max=4, pcie_width_max=16)
    spec = gpu_spec(id="A100-PCIE-80GB", pcie_gen=4, form_factor="pcie")
    check = check_pcie(gpu, "host→device", 6.9, spec, pcie(h2d=6.9, gen=3, width=8), no_link)
    assert check.verdict == "FAIL" and check.expected == 25.0
    assert "PCIe link trained at Gen3 x8: 6.9 GB/s measured, ~25 expected for Gen4 x16" in check.cause
    assert "slot" in check.action and "BIOS" in check.action
    link = check_pcie_link(gpu, spec, None)
    assert link.verdict == "FAIL" and "Gen3 x8 of Gen4 x16" in link.cause


def test_gen4_gpu_in_a_gen3_slot_points_at_the_slot():
    gpu = gpu_info(pcie_gen_current=3, pcie_width_current=16, pcie_gen_max=3, pcie_gen_gpu_max=4)
    spec = gpu_spec(pcie_gen=4)
    check = check_pcie(gpu, "host→device", 11.5, spec, pcie(h2d=11.5, gen=3), no_link)
    assert check.verdict == "FAIL" and "allows only Gen3" in check.action


def test_full_link_but_slow_copies_points_at_numa():
    gpu = gpu_info(numa_node=1)
    check = check_pcie(gpu, "host→device", 20.0, gpu_spec(), pcie(h2d=20.0), no_link)
    assert check.verdict == "FAIL" and "NUMA node 1" in check.cause
    assert "numactl --cpunodebind=1" in check.action


def test_healthy_pcie_gen5_is_ok_against_the_catalog_link():
    check = check_pcie(gpu_info(), "host→device", 52.0, gpu_spec(), pcie(), catalog_link)
    assert check.verdict == "OK" and check.cause is None
    assert check.spec == pytest.approx(63.02, abs=0.01)


def test_idle_link_at_lower_generation_is_only_info():
    gpu = gpu_info(pcie_gen_current=1, utilization_gpu_pct=0, performance_state=8)
    check = check_pcie_link(gpu, gpu_spec(), None)
    assert check.verdict == "INFO" and "idle" in check.cause


def test_gemm_low_because_of_a_power_cap():
    gpu = gpu_info(power_limit_w=400.0, clock_event_reasons=["sw_power_cap"],
                   under_load=LoadObservation(samples=10, utilization_gpu_pct_max=100,
                                              sm_clock_mhz_median=1410,
                                              slowdown_reasons=["sw_power_cap"]))
    check = check_gemm(gpu, "bf16", 440.0, gpu_spec())
    assert check.expected == pytest.approx(989.4 * 0.803)
    assert check.verdict == "FAIL" and "power capped at 400 of 700 W" in check.cause
    assert "nvidia-smi -pl 700" in check.action
    assert check_power_limit(gpu, gpu_spec()).verdict == "LOW"


def test_gemm_held_by_the_default_power_limit_is_judged_against_the_sustained_rate():
    # the H200 of docs/measurements.md: 686.8 TFLOP/s, SM clock 1485 of 1980 MHz, SwPowerCap at 700 W
    gpu = gpu_info(clock_event_reasons=["sw_power_cap"],
                   under_load=LoadObservation(samples=10, utilization_gpu_pct_max=100, sm_clock_mhz_median=1485,
                                              slowdown_reasons=["sw_power_cap"]))
    check = check_gemm(gpu, "bf16", 686.8, gpu_spec())
    assert check.expected == pytest.approx(989.4 * 0.803 * 0.864) and check.verdict == "OK"
    assert "default power limit" in check.source
    # a GPU that is slow for another reason is still low, and a lowered limit is judged as before
    assert check_gemm(gpu, "bf16", 500.0, gpu_spec()).verdict == "LOW"
    capped = gpu_info(power_limit_w=400.0, clock_event_reasons=["sw_power_cap"])
    assert check_gemm(capped, "bf16", 686.8, gpu_spec()).expected == pytest.approx(989.4 * 0.803)
    hot = gpu_info(clock_event_reasons=["sw_power_cap", "sw_thermal_slowdown"])
    assert check_gemm(hot, "bf16", 686.8, gpu_spec()).verdict == "LOW"


def test_gemm_low_because_of_heat():
    gpu = gpu_info(under_load=LoadObservation(samples=5, utilization_gpu_pct_max=100,
                                              sm_clock_mhz_median=1300, temperature_c_max=88,
                                              slowdown_reasons=["sw_thermal_slowdown"]))
    check = check_gemm(gpu, "bf16", 650.0, gpu_spec())
    assert check.verdict == "LOW" and "heat" in check.cause and "1300 of 1980 MHz" in check.cause
    assert check_clocks(gpu).verdict == "LOW"
    assert check_temperature(gpu).verdict == "LOW"


def test_gemm_ok_fp8_uses_its_own_fraction_and_fp32_is_not_judged():
    assert check_gemm(gpu_info(), "bf16", 780.0, gpu_spec()).verdict == "OK"
    fp8 = check_gemm(gpu_info(), "fp8", 1300.0, gpu_spec())
    assert fp8.expected == pytest.approx(1978.9 * 0.71) and fp8.verdict == "OK"
    assert check_gemm(gpu_info(), "fp32", 50.0, gpu_spec()).verdict == "INFO"
    assert check_gemm(gpu_info(catalog_id=None), "bf16", 700.0, None).verdict == "INFO"


def test_hbm_copy_against_85_percent_of_spec():
    assert check_memory_bandwidth(gpu_info(), 2900.0, gpu_spec()).verdict == "OK"
    low = check_memory_bandwidth(gpu_info(), 2000.0, gpu_spec())
    assert low.verdict == "LOW" and low.expected == pytest.approx(3350 * 0.85)
    amd = gpu_spec(vendor="amd", memory_bandwidth_gbs=5300)
    assert check_memory_bandwidth(gpu_info(), 4000.0, amd).expected == pytest.approx(5300 * 0.75)


def test_hardware_slowdown_fails():
    gpu = gpu_info(clock_event_reasons=["sw_power_cap", "hw_slowdown", "hw_thermal_slowdown"])
    check = check_clocks(gpu)
    assert check.verdict == "FAIL" and "hw_thermal_slowdown" in check.cause


def test_power_reason_alone_at_full_limit_is_ok():
    check = check_clocks(gpu_info(clock_event_reasons=["sw_power_cap"]))
    assert check.verdict == "OK"


def test_ecc_and_row_remapping():
    assert check_ecc(gpu_info()).verdict == "OK"
    assert check_ecc(gpu_info(ecc_uncorrected_volatile=2)).verdict == "FAIL"
    assert check_ecc(gpu_info(remapped_rows_failure=True)).verdict == "FAIL"
    assert check_ecc(gpu_info(remapped_rows_pending=True)).verdict == "LOW"
    assert check_ecc(gpu_info(ecc_uncorrected_volatile=None, remapped_rows_pending=None)) is None


def test_nvlinks_down():
    assert check_nvlink(gpu_info(), 8).verdict == "OK"
    partial = check_nvlink(gpu_info(nvlink_active_links=12), 8)
    assert partial.verdict == "LOW" and "6 of 18 NVLinks down" in partial.cause
    assert check_nvlink(gpu_info(nvlink_active_links=0), 8).verdict == "FAIL"
    assert check_nvlink(gpu_info(nvlink_links=0, nvlink_active_links=None), 1) is None


def test_collective_busbw_against_nvlink():
    result = CollectivesResult(
        backend="nccl", world_size=8, nnodes=1, local_world_size=8, device="cuda", method="t",
        command="t",
        ops=[CollectiveOp(op="all_reduce", peak_busbw_gbs=360.0,
                          points=[CollectivePoint(size_bytes=1 << 30, time_s=0.0052,
                                                  algbw_gbs=206.0, busbw_gbs=360.0)])])
    link = {"nvlink4": nvlink4()}.get
    ok = check_collective(result, "all_reduce", gpu_spec(), link, [])
    assert ok.verdict == "OK" and ok.expected == pytest.approx(450 * 0.82)
    slow = result.model_copy(update={"ops": [result.ops[0].model_copy(
        update={"peak_busbw_gbs": 120.0})]})
    assert check_collective(slow, "all_reduce", gpu_spec(), link, []).verdict == "FAIL"
    gloo = result.model_copy(update={"backend": "gloo", "device": "cpu"})
    assert check_collective(gloo, "all_reduce", None, link, []).verdict == "INFO"


def test_inter_node_collectives_against_nic_line_rate():
    result = CollectivesResult(
        backend="nccl", world_size=16, nnodes=2, local_world_size=8, device="cuda", method="t",
        command="t", ops=[CollectiveOp(op="all_reduce", peak_busbw_gbs=10.0)])
    nics = [NicInfo(name=f"mlx5_{i}/1", kind="infiniband", is_up=True, speed_mbps=400000)
            for i in range(8)]
    check = check_collective(result, "all_reduce", gpu_spec(), no_link, nics)
    assert check.expected == pytest.approx(50 * 0.73) and check.verdict == "FAIL"


def test_host_sizing_rules():
    gpus = [gpu_info(index=i) for i in range(8)]
    cpu = probe_result(gpus, cores=16).system.cpu
    low = check_cpu_cores(cpu, 8)
    assert low.verdict == "LOW" and "~28 needed" in low.cause
    assert check_cpu_cores(probe_result(gpus, cores=96).system.cpu, 8).verdict == "OK"
    ram = check_host_ram(MemoryInfo(total_bytes=256 * GIB, available_bytes=256 * GIB), gpus)
    assert ram.verdict == "LOW" and ram.expected == pytest.approx(8 * 79.6)
    assert check_cpu_cores(cpu, 0) is None


def test_nic_linked_below_its_speed():
    check = check_nic(NicInfo(name="eth0", kind="ethernet", is_up=True, speed_mbps=10000,
                              max_speed_mbps=100000))
    assert check.verdict == "LOW" and "10 Gb/s of 100" in check.cause
    assert check_nic(NicInfo(name="veth0", kind="virtual", is_up=True)) is None


def test_storage_against_its_class():
    nvme = Storage.model_validate({"id": "nvme-gen4", "name": "NVMe Gen4", "sources": ["t"],
                                   "kind": "nvme", "seq_read_gbs": 7.0, "seq_write_gbs": 5.0,
                                   "latency_ms": 0.1})
    result = StorageResult(path="/data", device_kind="nvme", files=4, file_bytes=1 << 26,
                           read_gbs=0.9, write_gbs=4.5, read_method="O_DIRECT", write_method="t")
    read, write = check_storage(result, {"nvme-gen4": nvme}.get)
    assert read.verdict == "LOW" and "nvme-gen4" in read.cause and write.verdict == "INFO"
    unknown = check_storage(result.model_copy(update={"device_kind": "virtual"}), no_link)
    assert all(c.verdict == "INFO" for c in unknown)


# -- whole results -----------------------------------------------------------------------------------
def _benchmarks(bf16: float, copy_gbs: float, h2d: float, gen: int = 5, width: int = 16):
    return Benchmarks(
        gemm=[GemmResult(device="cuda:0", gpu_index=0, method="t", precisions=[
            GemmPrecision(precision="bf16", best_tflops=bf16, peak_tflops=989.4)])],
        memory=[DeviceCopyResult(device="cuda:0", gpu_index=0, copy_gbs=copy_gbs,
                                 buffer_bytes=1 << 30, method="t")],
        pcie=[pcie(h2d=h2d, d2h=h2d, gen=gen, width=width)],
    )


def test_healthy_machine_has_no_fault():
    result = probe_result([gpu_info()], benchmarks=_benchmarks(790.0, 2950.0, 53.0))
    checks = evaluate(result, Specs(gpus={0: gpu_spec()}, link=catalog_link))
    assert checks and not [c for c in checks if c.verdict in ("LOW", "FAIL")]
    assert {c.name for c in checks} >= {"bf16 GEMM (best shape)", "memory copy (read+write)",
                                       "PCIe host→device pinned", "NVLinks active"}


def test_planted_faults_are_found_and_sorted_worst_first():
    gpu = gpu_info(pcie_gen_current=3, pcie_width_current=8, power_limit_w=450.0,
                   nvlink_active_links=16, ecc_uncorrected_volatile=1)
    result = probe_result([gpu], cores=4, ram_gib=64,
                          benchmarks=_benchmarks(450.0, 2950.0, 6.9, gen=3, width=8))
    checks = evaluate(result, Specs(gpus={0: gpu_spec()}, link=catalog_link))
    bad = {(c.name, c.verdict) for c in checks if c.verdict in ("LOW", "FAIL")}
    assert ("PCIe host→device pinned", "FAIL") in bad and ("memory errors", "FAIL") in bad
    assert ("power limit", "LOW") in bad and ("NVLinks active", "LOW") in bad
    assert ("bf16 GEMM (best shape)", "FAIL") in bad
    assert ("cores for data loading", "LOW") in bad and ("host RAM vs GPU memory", "LOW") in bad
    order = [health.VERDICT_ORDER[c.verdict] for c in checks]
    assert order == sorted(order)


def test_unmatched_gpu_is_info_not_a_crash():
    result = probe_result([gpu_info(name="Mystery GPU", catalog_id=None,
                                    catalog_note="not in the catalog")],
                          benchmarks=_benchmarks(100.0, 500.0, 10.0))
    checks = evaluate(result, Specs())
    match = next(c for c in checks if c.name == "catalog match")
    assert match.verdict == "INFO"
    assert next(c for c in checks if c.name.startswith("bf16")).verdict == "INFO"
