"""Shared builders for probe tests: GPU specs, GPU facts and probe results with planted faults."""

from __future__ import annotations

from typing import Any

import pytest

from trainrig.probe.nvml import Nvml
from trainrig.probe.nvml_fake import FakeNvml
from trainrig.probe.results import (
    CpuInfo,
    GpuInfo,
    MemoryInfo,
    NvmlInfo,
    ProbeResult,
    SystemInfo,
    TorchInfo,
)
from trainrig.specs import GPU, Link

GIB = 2**30


def gpu_spec(**overrides: Any) -> GPU:
    """An H100 SXM-like catalog entry (datasheet figures), fields overridable."""
    data: dict[str, Any] = {
        "id": "H100-SXM5-80GB", "name": "NVIDIA H100 SXM5 80GB",
        "aliases": ["h100", "NVIDIA H100 80GB HBM3"], "sources": ["test"], "vendor": "nvidia",
        "architecture": "Hopper", "form_factor": "sxm", "memory_gib": 80, "memory_type": "HBM3",
        "memory_bandwidth_gbs": 3350, "memory_bus_width_bits": 5120,
        "peak_tflops": {"fp32": 67, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4, "fp8": 1978.9},
        "compute_units": 132, "boost_clock_mhz": 1980, "tdp_w": 700, "pcie_gen": 5,
        "pcie_lanes": 16, "scale_up": "nvlink4", "scale_up_gbs": 900, "year": 2022,
        "matmul_efficiency": 0.803,
    }
    data.update(overrides)
    return GPU.model_validate(data)


def nvlink4() -> Link:
    return Link.model_validate({"id": "nvlink4", "name": "NVLink 4", "sources": ["test"],
                                "kind": "nvlink", "bandwidth_gbs": 450, "latency_us": 3,
                                "efficiency": 0.82})


def gpu_info(**overrides: Any) -> GpuInfo:
    """A healthy, busy H100 as NVML would describe it."""
    data: dict[str, Any] = {
        "index": 0, "name": "NVIDIA H100 80GB HBM3", "catalog_id": "H100-SXM5-80GB",
        "memory_total_gib": 79.6, "sm_clock_max_mhz": 1980, "sm_clock_mhz": 1980,
        "power_w": 540.0, "power_limit_w": 700.0, "power_limit_default_w": 700.0,
        "temperature_c": 58, "temperature_slowdown_c": 89, "utilization_gpu_pct": 100,
        "performance_state": 0, "pcie_gen_current": 5, "pcie_width_current": 16,
        "pcie_gen_max": 5, "pcie_width_max": 16, "pcie_gen_gpu_max": 5, "pcie_replay_count": 0,
        "nvlink_links": 18, "nvlink_active_links": 18, "ecc_enabled": True,
        "ecc_corrected_volatile": 0, "ecc_uncorrected_volatile": 0,
        "remapped_rows_pending": False, "remapped_rows_failure": False,
        "clock_event_reasons": [], "numa_node": 0,
    }
    data.update(overrides)
    return GpuInfo.model_validate(data)


def probe_result(gpus: list[GpuInfo] | None = None, cores: int = 64,
                 ram_gib: float = 1024, **overrides: Any) -> ProbeResult:
    system = SystemInfo(
        hostname="test", os="Linux", python="3.11",
        cpu=CpuInfo(model="test CPU", cores_physical=cores, threads_logical=cores,
                    usable_cpus=cores),
        memory=MemoryInfo(total_bytes=int(ram_gib * GIB), available_bytes=int(ram_gib * GIB)),
    )
    data: dict[str, Any] = {
        "trainrig_version": "test", "measured_at": "2026-01-01T00:00:00+00:00", "quick": True,
        "time_limit_s": 50, "system": system,
        "nvml": NvmlInfo(available=True, source="test", device_count=len(gpus or [])),
        "torch": TorchInfo(available=False), "gpus": gpus or [],
    }
    data.update(overrides)
    return ProbeResult.model_validate(data)


@pytest.fixture
def open_fake():
    """`open_fake(name)` → an open Nvml session replaying a shipped recording."""
    sessions: list[Nvml] = []

    def opener(name_or_recording: Any) -> Nvml:
        backend = (FakeNvml(name_or_recording) if isinstance(name_or_recording, dict)
                   else FakeNvml.from_recording(name_or_recording))
        session = Nvml.open(backend)
        sessions.append(session)
        return session

    yield opener
    for session in sessions:
        session.close()
