"""Detect what the machine is: CPU, RAM, disks, NICs (psutil and /sys), GPUs (NVML).

Nothing here needs torch or a GPU; without NVML the GPU list is empty and `NvmlInfo` says why.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from trainrig.probe.nvml import NA, Nvml, NvmlUnavailable, na_to_none
from trainrig.probe.results import (
    CpuInfo,
    DiskInfo,
    GpuInfo,
    MemoryInfo,
    NicInfo,
    NvmlInfo,
    SystemInfo,
)

__all__ = ["detect_system", "detect_cpu", "detect_memory", "detect_disks", "detect_nics",
           "detect_gpus", "disk_for_path", "parse_ethtool_max_speed", "parse_ib_rate",
           "gpu_numa_node", "SYS"]

SYS = Path("/sys")
_NETWORK_FS = {"nfs", "nfs4", "cifs", "smbfs", "lustre", "gpfs", "beegfs", "ceph", "fuse.s3fs",
               "9p", "virtiofs", "fuse.gcsfuse", "wekafs", "glusterfs"}
_MEMORY_FS = {"tmpfs", "ramfs", "devtmpfs"}


def detect_system() -> SystemInfo:
    """CPU, memory, disks and NICs of this machine."""
    return SystemInfo(
        hostname=socket.gethostname(),
        os=f"{platform.system()} {platform.release()}",
        python=sys.version.split()[0],
        cpu=detect_cpu(),
        memory=detect_memory(),
        disks=detect_disks(),
        nics=detect_nics(),
    )


# -- CPU -----------------------------------------------------------------------------------------
def detect_cpu(cpuinfo: str | None = None) -> CpuInfo:
    import psutil

    text = cpuinfo if cpuinfo is not None else _read("/proc/cpuinfo") or ""
    model = _cpuinfo_field(text, "model name") or platform.processor() or None
    physical_ids = set(re.findall(r"^physical id\s*:\s*(\d+)", text, re.M))
    freq = _safe(psutil.cpu_freq)
    return CpuInfo(
        model=model,
        vendor=_cpuinfo_field(text, "vendor_id"),
        sockets=len(physical_ids) or (1 if text else None),
        cores_physical=psutil.cpu_count(logical=False),
        threads_logical=psutil.cpu_count(logical=True),
        usable_cpus=_usable_cpus(),
        cgroup_quota_cores=_cgroup_cpu_quota(),
        numa_nodes=len(list((SYS / "devices/system/node").glob("node[0-9]*"))) or None,
        freq_max_mhz=(freq.max or None) if freq else None,
    )


def _cpuinfo_field(text: str, name: str) -> str | None:
    match = re.search(rf"^{name}\s*:\s*(.+)$", text, re.M)
    return match.group(1).strip() if match else None


def _usable_cpus() -> int | None:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


def _cgroup_cpu_quota() -> float | None:
    text = _read("/sys/fs/cgroup/cpu.max")  # cgroup v2: "max 100000" or "200000 100000"
    if text:
        quota, _, period = text.strip().partition(" ")
        return None if quota == "max" else int(quota) / int(period)
    quota = _read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")  # cgroup v1
    period = _read("/sys/fs/cgroup/cpu/cpu.cfs_period_us")
    if quota and period and int(quota) > 0:
        return int(quota) / int(period)
    return None


# -- memory ---------------------------------------------------------------------------------------
def detect_memory() -> MemoryInfo:
    import psutil

    vm = psutil.virtual_memory()
    limit = None
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        text = (_read(path) or "").strip()
        if text.isdigit() and int(text) < vm.total:
            limit = int(text)
    return MemoryInfo(total_bytes=vm.total, available_bytes=vm.available, cgroup_limit_bytes=limit)


# -- disks ----------------------------------------------------------------------------------------
def detect_disks() -> list[DiskInfo]:
    """Mounted filesystems backed by a disk or a network, one entry per device (RAM-backed
    filesystems such as tmpfs are left out; `disk_for_path` still reports them)."""
    import psutil

    disks, seen = [], set()
    for part in psutil.disk_partitions(all=True):
        kind = _fs_kind(part.fstype, part.device)
        if kind in (None, "memory") or part.device in seen:
            continue
        seen.add(part.device)
        disks.append(_disk_info(part.device, part.mountpoint, part.fstype, kind))
    return disks


def disk_for_path(path: str | Path) -> DiskInfo | None:
    """The disk (or network filesystem) that holds `path`: the longest matching mount point."""
    import psutil

    target = os.path.realpath(path)
    best = None
    for part in psutil.disk_partitions(all=True):
        mount = part.mountpoint
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and (best is None or len(mount) > len(best.mountpoint)):
            best = part
    if best is None:
        return None
    kind = _fs_kind(best.fstype, best.device) or "unknown"
    return _disk_info(best.device, best.mountpoint, best.fstype, kind)


def _fs_kind(fstype: str, device: str) -> str | None:
    """`network`, `memory`, `block` (look further), or None for pseudo filesystems."""
    if fstype in _NETWORK_FS or fstype.startswith("fuse.") and ":" in device:
        return "network"
    if fstype in _MEMORY_FS:
        return "memory"
    if device.startswith("/dev/") and not device.startswith("/dev/loop"):
        return "block"
    return None


def _disk_info(device: str, mountpoint: str, fstype: str, kind: str) -> DiskInfo:
    import psutil

    usage = _safe(psutil.disk_usage, mountpoint)
    rotational, model = None, None
    if kind == "block":
        block = _parent_block_device(device)
        kind, rotational, model = _block_kind(block) if block else ("unknown", None, None)
    return DiskInfo(
        device=device, mountpoint=mountpoint, fstype=fstype, kind=kind, rotational=rotational,
        model=model, total_bytes=usage.total if usage else None,
        free_bytes=usage.free if usage else None,
    )


def _parent_block_device(device: str) -> str | None:
    """/dev/nvme0n1p2 → nvme0n1, /dev/sda1 → sda, /dev/mapper/x → its first slave."""
    name = os.path.basename(os.path.realpath(device))
    if (SYS / "block" / name).exists():
        slaves = sorted((SYS / "block" / name / "slaves").glob("*"))
        return _parent_block_device(f"/dev/{slaves[0].name}") if slaves else name
    for block in (SYS / "block").glob("*"):
        if (block / name).exists():
            return block.name
    return None


def _block_kind(block: str) -> tuple[str, bool | None, str | None]:
    base = SYS / "block" / block
    rotational_text = _read(base / "queue/rotational")
    rotational = None if rotational_text is None else rotational_text.strip() == "1"
    model = (_read(base / "device/model") or "").strip() or None
    real = os.path.realpath(base)
    if block.startswith("nvme"):
        kind = "nvme"
    elif "virtio" in real or block.startswith(("vd", "xvd")):
        kind = "virtual"  # virtio/Xen disks report rotational=1 whatever backs them
    elif rotational is None:
        kind = "unknown"
    else:
        kind = "hdd" if rotational else "ssd"
    return kind, rotational, model


# -- network --------------------------------------------------------------------------------------
def detect_nics() -> list[NicInfo]:
    """Ethernet and InfiniBand ports with their link speeds; loopback left out."""
    import psutil

    nics = []
    for name, stats in sorted(psutil.net_if_stats().items()):
        if "loopback" in (getattr(stats, "flags", "") or "") or name == "lo":
            continue
        physical = (SYS / "class/net" / name / "device").exists()
        speed = stats.speed if stats.speed and stats.speed > 0 else None
        nics.append(NicInfo(
            name=name,
            kind="ethernet" if physical else "virtual",
            is_up=stats.isup,
            speed_mbps=speed,
            max_speed_mbps=_ethtool_max_speed(name) if physical else None,
            mtu=stats.mtu or None,
            numa_node=_numa_of(SYS / "class/net" / name / "device"),
        ))
    return nics + _infiniband_ports()


def _infiniband_ports() -> list[NicInfo]:
    ports = []
    for port in sorted((SYS / "class/infiniband").glob("*/ports/*")):
        rate = (_read(port / "rate") or "").strip()
        state = (_read(port / "state") or "").strip()
        device = port.parent.parent
        ports.append(NicInfo(
            name=f"{device.name}/{port.name}",
            kind="infiniband" if "InfiniBand" in (_read(port / "link_layer") or "") else "ethernet",
            is_up=state.endswith("ACTIVE"),
            speed_mbps=parse_ib_rate(rate),
            rate_text=rate or None,
            numa_node=_numa_of(device / "device"),
        ))
    return ports


def parse_ib_rate(rate: str) -> int | None:
    """`400 Gb/sec (4X NDR)` → 400000 (Mb/s)."""
    match = re.match(r"\s*([\d.]+)\s*Gb/sec", rate)
    return int(float(match.group(1)) * 1000) if match else None


def parse_ethtool_max_speed(text: str) -> int | None:
    """The fastest `Supported link modes` entry of `ethtool IFACE`, in Mb/s (e.g. 100000baseCR4)."""
    block = re.search(r"Supported link modes:(.*?)(?:\n\s*[A-Z][\w ]+:|\Z)", text, re.S)
    if not block:
        return None
    speeds = [int(s) for s in re.findall(r"(\d+)base", block.group(1))]
    return max(speeds) if speeds else None


def _ethtool_max_speed(name: str) -> int | None:
    ethtool = shutil.which("ethtool")
    if not ethtool:
        return None
    try:
        out = subprocess.run([ethtool, name], capture_output=True, text=True, timeout=2).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_ethtool_max_speed(out)


# -- GPUs -----------------------------------------------------------------------------------------
def detect_gpus(backend: Any | None = None, source: str = "pynvml") -> tuple[NvmlInfo, list[GpuInfo]]:
    """Every GPU NVML sees, or an NvmlInfo that says why there is none."""
    try:
        nvml = Nvml.open(backend)
    except NvmlUnavailable as error:
        return NvmlInfo(available=False, source=source, reason=str(error)), []
    with nvml:
        count = nvml.device_count()
        gpus = [gpu_info(nvml, index) for index in range(count)]
        info = NvmlInfo(
            available=True,
            source=source,
            reason=None if count else "NVML found no GPU",
            driver_version=na_to_none(nvml.driver_version()),
            cuda_driver_version=na_to_none(nvml.cuda_driver_version()),
            device_count=count,
            topology=nvml.topology() if count > 1 else [],
        )
    return info, gpus


def gpu_info(nvml: Nvml, index: int) -> GpuInfo:
    """One GPU's static facts and a snapshot, N/A as None."""
    static, sample = nvml.static(index), nvml.sample(index)
    memory = static.memory_total_bytes
    reasons = sample.clock_event_reasons
    return GpuInfo(
        index=index,
        name=na_to_none(static.name),
        uuid=na_to_none(static.uuid),
        pci_bus_id=na_to_none(static.pci_bus_id),
        numa_node=gpu_numa_node(na_to_none(static.pci_bus_id)),
        architecture=na_to_none(static.architecture),
        cuda_capability=na_to_none(static.cuda_capability),
        memory_total_gib=None if memory is NA else memory / 2**30,
        sm_clock_max_mhz=na_to_none(static.sm_clock_max_mhz),
        mem_clock_max_mhz=na_to_none(static.mem_clock_max_mhz),
        sm_clock_mhz=na_to_none(sample.sm_clock_mhz),
        power_w=na_to_none(sample.power_w),
        power_limit_w=na_to_none(sample.power_limit_w),
        power_limit_default_w=na_to_none(static.power_limit_default_w),
        temperature_c=na_to_none(sample.temperature_c),
        temperature_slowdown_c=na_to_none(static.temperature_slowdown_c),
        utilization_gpu_pct=na_to_none(sample.utilization_gpu_pct),
        performance_state=na_to_none(sample.performance_state),
        pcie_gen_current=na_to_none(sample.pcie_gen_current),
        pcie_width_current=na_to_none(sample.pcie_width_current),
        pcie_gen_max=na_to_none(static.pcie_gen_max),
        pcie_width_max=na_to_none(static.pcie_width_max),
        pcie_gen_gpu_max=na_to_none(static.pcie_gen_gpu_max),
        pcie_replay_count=na_to_none(sample.pcie_replay_count),
        nvlink_links=len(static.nvlink_links),
        nvlink_active_links=na_to_none(sample.nvlink_active_links),
        ecc_enabled=na_to_none(static.ecc_enabled),
        ecc_corrected_volatile=na_to_none(sample.ecc_corrected_volatile),
        ecc_uncorrected_volatile=na_to_none(sample.ecc_uncorrected_volatile),
        remapped_rows_pending=na_to_none(sample.remapped_rows_pending),
        remapped_rows_failure=na_to_none(sample.remapped_rows_failure),
        clock_event_reasons=None if reasons is NA else list(reasons),
        gpm_supported=na_to_none(static.gpm_supported),
        unavailable={**static.unavailable, **sample.unavailable},
    )


def gpu_numa_node(pci_bus_id: str | None) -> int | None:
    """The NUMA node of a PCI device from sysfs (`00000000:18:00.0` → /sys/bus/pci/…/0000:18:00.0)."""
    if not pci_bus_id:
        return None
    domain, _, rest = pci_bus_id.lower().partition(":")
    return _numa_of(SYS / "bus/pci/devices" / f"{int(domain or '0', 16):04x}:{rest}")


def _numa_of(device: Path) -> int | None:
    text = (_read(device / "numa_node") or "").strip()
    return int(text) if text.lstrip("-").isdigit() and int(text) >= 0 else None


# -- helpers --------------------------------------------------------------------------------------
def _read(path: str | Path) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def _safe(function: Any, *args: Any) -> Any:
    try:
        return function(*args)
    except (OSError, RuntimeError, NotImplementedError, AttributeError):
        return None
