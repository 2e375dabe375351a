"""Detection without torch or a GPU, GPU facts from recordings, and catalog matching."""

from __future__ import annotations

import pytest

from trainrig.catalog import Section
from trainrig.probe.catalog_match import match_gpu
from trainrig.probe.detect import (
    detect_cpu,
    detect_gpus,
    detect_system,
    disk_for_path,
    parse_ethtool_max_speed,
    parse_ib_rate,
)
from trainrig.probe.nvml_fake import FakeNvml
from trainrig.specs import GPU

from .conftest import gpu_spec

ETHTOOL = (
    "Settings for ens1f0np0:\n"
    "\tSupported ports: [ FIBRE ]\n"
    "\tSupported link modes:   10000baseKR/Full\n"
    "\t                        25000baseCR/Full\n"
    "\t                        100000baseCR4/Full\n"
    "\tSupported pause frame use: Symmetric\n"
    "\tAdvertised link modes:  10000baseKR/Full\n"
    "\tSpeed: 10000Mb/s\n"
)


def test_system_detection_reports_real_figures():
    system = detect_system()
    assert system.cpu.threads_logical and system.cpu.threads_logical >= 1
    assert system.cpu.usable_cpus and system.cpu.usable_cpus >= 1
    assert system.memory.total_bytes > 2**28 and system.memory.available_bytes > 0
    assert all(d.kind != "memory" for d in system.disks)
    assert all(n.name != "lo" for n in system.nics)


def test_cpuinfo_parsing_counts_sockets():
    text = ("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel Xeon Platinum 8480+\n"
            "physical id\t: 0\n\nprocessor\t: 1\nmodel name\t: Intel Xeon Platinum 8480+\n"
            "physical id\t: 1\n")
    cpu = detect_cpu(text)
    assert cpu.model == "Intel Xeon Platinum 8480+" and cpu.vendor == "GenuineIntel"
    assert cpu.sockets == 2


def test_disk_for_path_finds_the_mount(tmp_path):
    disk = disk_for_path(tmp_path)
    assert disk is not None and disk.mountpoint and disk.free_bytes and disk.free_bytes > 0


def test_link_speed_parsers():
    assert parse_ethtool_max_speed(ETHTOOL) == 100000
    assert parse_ethtool_max_speed("Speed: 1000Mb/s") is None
    assert parse_ib_rate("400 Gb/sec (4X NDR)") == 400000
    assert parse_ib_rate("garbage") is None


def test_no_nvml_says_so():
    broken = {"format": "trainrig-nvml-recording/1", "label": "t", "source": "t",
              "system": {"nvmlInit": {"nvml_error": "LibraryNotFound"}}, "devices": []}
    info, gpus = detect_gpus(FakeNvml(broken), "fake:broken")
    assert not info.available and gpus == []
    assert "NVML library not found" in info.reason


def test_gpu_facts_from_recordings_use_none_for_not_supported():
    info, gpus = detect_gpus(FakeNvml.from_recording("rtx2080_not_supported"), "fake:rtx")
    assert info.available and info.device_count == 1 and info.driver_version == "550.54.14"
    gpu = gpus[0]
    assert gpu.name == "NVIDIA GeForce RTX 2080" and gpu.memory_total_gib == pytest.approx(8.0)
    assert gpu.ecc_enabled is None and gpu.ecc_uncorrected_volatile is None
    assert gpu.unavailable["ecc_enabled"] == "not supported"
    assert (gpu.pcie_gen_current, gpu.pcie_width_current, gpu.pcie_gen_max) == (1, 8, 3)
    info, gpus = detect_gpus(FakeNvml.from_recording("h100_sxm_healthy"), "fake:h100")
    assert info.topology == [["X", "NV18"], ["NV18", "X"]] and len(gpus) == 2
    assert gpus[0].nvlink_links == 18 and gpus[0].gpm_supported is True


# -- catalog matching ------------------------------------------------------------------------------
def _catalog(*entries: GPU) -> Section[GPU]:
    section: Section[GPU] = Section("GPU", "hardware.gpu")
    for entry in entries:
        section.add(entry)
    return section


@pytest.fixture
def catalog() -> Section[GPU]:
    def part(ident: str, form: str, memory: float, aliases=()) -> GPU:
        return gpu_spec(id=ident, name=f"NVIDIA {ident}", form_factor=form, memory_gib=memory,
                        aliases=list(aliases))

    return _catalog(
        part("H100-SXM5-80GB", "sxm", 80, ["h100", "NVIDIA H100 80GB HBM3"]),
        part("H100-PCIE-80GB", "pcie", 80),
        part("H100-NVL-94GB", "nvl", 94),
        part("A100-SXM4-40GB", "sxm", 40),
        part("A100-SXM4-80GB", "sxm", 80),
        part("A100-PCIE-80GB", "pcie", 80),
        part("A10", "pcie", 24),
        part("L4", "pcie", 24),
        part("L40S", "pcie", 48),
        part("RTX-4090", "pcie", 24),
        part("RTX-A6000", "pcie", 48),
        part("RTX-6000-ADA", "pcie", 48),
        part("V100-SXM2-32GB", "sxm", 32),
    )


@pytest.mark.parametrize(("nvml_name", "memory_gib", "expected"), [
    ("NVIDIA H100 80GB HBM3", 79.6, "H100-SXM5-80GB"),
    ("NVIDIA H100 PCIe", 79.6, "H100-PCIE-80GB"),
    ("NVIDIA H100 NVL", 93.6, "H100-NVL-94GB"),
    ("NVIDIA A100-SXM4-80GB", 80.0, "A100-SXM4-80GB"),
    ("NVIDIA A100-SXM4-40GB", 40.0, "A100-SXM4-40GB"),
    ("NVIDIA A100 80GB PCIe", 80.0, "A100-PCIE-80GB"),
    ("NVIDIA A10", 22.5, "A10"),
    ("NVIDIA L4", 22.5, "L4"),
    ("NVIDIA L40S", 45.0, "L40S"),
    ("NVIDIA GeForce RTX 4090", 23.6, "RTX-4090"),
    ("NVIDIA RTX A6000", 47.5, "RTX-A6000"),
    ("NVIDIA RTX 6000 Ada Generation", 47.5, "RTX-6000-ADA"),
    ("Tesla V100-SXM2-32GB", 32.0, "V100-SXM2-32GB"),
])
def test_nvml_names_match_catalog_entries(catalog, nvml_name, memory_gib, expected):
    assert match_gpu(nvml_name, memory_gib, catalog).catalog_id == expected


def test_unknown_gpu_is_none_with_a_note(catalog):
    match = match_gpu("NVIDIA GeForce RTX 2080", 8.0, catalog)
    assert match.catalog_id is None and "not in the catalog" in match.note
    assert match_gpu(None, None, catalog).catalog_id is None


def test_the_packaged_catalog_knows_the_h100_by_its_nvml_name():
    from trainrig.catalog import load_catalog

    assert match_gpu("NVIDIA H100 80GB HBM3", 79.6, load_catalog().gpus).catalog_id == \
        "H100-SXM5-80GB"
