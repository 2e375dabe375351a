"""Host signals through psutil: CPU per core, RAM, swap, disk and network rates, the job's processes.

Rates are deltas of the kernel's cumulative counters between two reads (psutil reads /proc/stat,
/proc/meminfo, /proc/diskstats, /proc/net/dev on Linux). The process tree is re-read every
`tree_refresh_s` (a full scan of /proc is the costly part); each tick reads only the job's own
processes. Loader workers are the children of the training processes when those are known (the
in-process monitor registers itself), else the leaves of the tree forked from a process of the
same name (how DataLoader workers look).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["HostSource", "memory_limit", "host_info"]

SWAP_REFRESH_S = 1.0
_CGROUP_LIMITS = (Path("/sys/fs/cgroup/memory.max"),
                  Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"))


def memory_limit(declared_bytes: int | None = None) -> tuple[int, str]:
    """The memory the job may use: the declared budget, a cgroup limit, or the RAM (the smallest)."""
    import psutil

    options = [(psutil.virtual_memory().total, "host RAM")]
    for path in _CGROUP_LIMITS:
        value = _read_int(path)
        if value is not None:
            options.append((value, f"cgroup limit ({path})"))
    if declared_bytes:
        options.append((int(declared_bytes), "declared memory limit"))
    return min(options, key=lambda o: o[0])


def host_info(declared_memory_bytes: int | None = None) -> dict[str, Any]:
    """What the host is: cores, RAM, the memory limit and NIC speeds (read once per run)."""
    import psutil

    limit, source = memory_limit(declared_memory_bytes)
    return {"hostname": os.uname().nodename, "cpu_count": psutil.cpu_count(logical=True),
            "cpu_count_physical": psutil.cpu_count(logical=False),
            "ram_total_bytes": psutil.virtual_memory().total,
            "memory_limit_bytes": limit, "memory_limit_source": source,
            "nic_speeds_mbps": _nic_speeds()}


class HostSource:
    """Reads the host and the job's process tree rooted at `root_pid` (None: host only)."""

    def __init__(self, root_pid: int | None, trainer_pids: Callable[[], set[int]] | None = None,
                 tree_refresh_s: float = 2.0) -> None:
        import psutil

        self._psutil = psutil
        self.root_pid = root_pid
        self.trainer_pids = trainer_pids
        self.tree_refresh_s = tree_refresh_s
        self._nic_speeds = _nic_speeds()
        self._disks = _whole_disks(psutil)
        self._tree: list[Any] = []
        self._workers: set[int] = set()
        self._tree_at = -1e9
        self._swap: int | None = None
        self._swap_at = -1e9
        self._prev: dict[str, Any] = {}
        self._proc_prev: dict[int, tuple[float, int | None]] = {}
        self._baseline(time.monotonic())

    def read(self) -> dict[str, Any]:
        """One host row: rates over the time since the previous read."""
        now = time.monotonic()
        dt_s = max(now - self._prev["at"], 1e-6)
        row: dict[str, Any] = {"t": time.time()}
        row.update(self._cpu())
        row.update(self._memory(now))
        row.update(self._io(dt_s))
        row.update(self._job(now, dt_s))
        self._prev["at"] = now
        return row

    # -- pieces ---------------------------------------------------------------------------------
    def _baseline(self, now: float) -> None:
        ps = self._psutil
        self._prev = {"at": now, "cpu": ps.cpu_times(percpu=True), "disk": self._disk_totals(),
                      "net": ps.net_io_counters(pernic=True, nowrap=False)}
        if self.root_pid is not None:
            self._refresh_tree(now)
            for proc in self._tree:
                reading = _process_reading(proc)
                if reading is not None:
                    self._proc_prev[proc.pid] = reading[0], reading[2]

    def _cpu(self) -> dict[str, Any]:
        times = self._psutil.cpu_times(percpu=True)
        per_core, iowait, total = [], 0.0, 0.0
        for before, after in zip(self._prev["cpu"], times, strict=False):
            busy, io, span = _core_delta(before, after)
            per_core.append(round(100.0 * busy / span, 1) if span > 0 else None)
            iowait, total = iowait + io, total + span
        self._prev["cpu"] = times
        known = [v for v in per_core if v is not None]
        return {"cpu_per_core_pct": per_core,
                "cpu_pct": sum(known) / len(known) if known else None,
                "iowait_pct": 100.0 * iowait / total if total > 0 else None}

    def _memory(self, now: float) -> dict[str, Any]:
        ps = self._psutil
        vm = ps.virtual_memory()
        if now - self._swap_at >= SWAP_REFRESH_S:
            self._swap, self._swap_at = ps.swap_memory().used, now
        return {"ram_used_bytes": vm.total - vm.available, "ram_available_bytes": vm.available,
                "swap_used_bytes": self._swap}

    def _io(self, dt_s: float) -> dict[str, Any]:
        disk, net = self._disk_totals(), self._psutil.net_io_counters(pernic=True, nowrap=False)
        before_disk, before_net = self._prev["disk"], self._prev["net"]
        self._prev["disk"], self._prev["net"] = disk, net
        row: dict[str, Any] = {"disk_read_bps": None, "disk_write_bps": None}
        if disk is not None and before_disk is not None:
            row["disk_read_bps"] = max(0, disk[0] - before_disk[0]) / dt_s
            row["disk_write_bps"] = max(0, disk[1] - before_disk[1]) / dt_s
        row.update(self._net(before_net, net, dt_s))
        return row

    def _disk_totals(self) -> tuple[int, int] | None:
        """(read, written) bytes of the whole disks (partitions would count twice)."""
        try:
            disks = self._psutil.disk_io_counters(perdisk=True, nowrap=False)
        except (OSError, RuntimeError):
            return None
        chosen = [c for name, c in disks.items() if self._disks is None or name in self._disks]
        if not chosen:
            return None
        return sum(c.read_bytes for c in chosen), sum(c.write_bytes for c in chosen)

    def _net(self, before: dict[str, Any], after: dict[str, Any], dt_s: float) -> dict[str, Any]:
        rx = tx = 0.0
        util: float | None = None
        for nic, counters in after.items():
            if nic == "lo" or nic not in before:
                continue
            nic_rx = max(0, counters.bytes_recv - before[nic].bytes_recv) / dt_s
            nic_tx = max(0, counters.bytes_sent - before[nic].bytes_sent) / dt_s
            rx, tx = rx + nic_rx, tx + nic_tx
            speed = self._nic_speeds.get(nic)
            if speed:
                share = 100.0 * max(nic_rx, nic_tx) * 8 / (speed * 1e6)
                util = share if util is None else max(util, share)
        return {"net_rx_bps": rx, "net_tx_bps": tx, "net_util_pct": util}

    def _job(self, now: float, dt_s: float) -> dict[str, Any]:
        empty = {"job_cpu_pct": None, "job_rss_bytes": None, "job_read_bps": None,
                 "job_processes": None, "workers": None, "workers_cpu_pct": None}
        if self.root_pid is None:
            return empty
        if now - self._tree_at >= self.tree_refresh_s:
            self._refresh_tree(now)
        cpu_total, rss_total, read_total, workers_cpu, alive = 0.0, 0, 0.0, [], []
        read_known = False
        for proc in self._tree:
            reading = _process_reading(proc)
            if reading is None:
                continue
            seconds, rss, read_bytes = reading
            alive.append(proc)
            before_s, before_read = self._proc_prev.get(proc.pid, (seconds, read_bytes))
            self._proc_prev[proc.pid] = (seconds, read_bytes)
            share = 100.0 * max(0.0, seconds - before_s) / dt_s
            cpu_total, rss_total = cpu_total + share, rss_total + rss
            if read_bytes is not None and before_read is not None:
                read_total, read_known = read_total + max(0, read_bytes - before_read) / dt_s, True
            if proc.pid in self._workers:
                workers_cpu.append(round(share, 1))
        self._tree = alive
        if not alive:
            return empty
        return {"job_cpu_pct": cpu_total, "job_rss_bytes": rss_total,
                "job_read_bps": read_total if read_known else None, "job_processes": len(alive),
                "workers": len(workers_cpu), "workers_cpu_pct": workers_cpu}

    def _refresh_tree(self, now: float) -> None:
        ps = self._psutil
        self._tree_at = now
        try:
            root = ps.Process(self.root_pid)
            tree = [root, *root.children(recursive=True)]
        except (ps.NoSuchProcess, ps.AccessDenied):
            self._tree, self._workers = [], set()
            return
        known = {p.pid for p in self._tree}
        self._tree = [p for p in self._tree if p.pid in {q.pid for q in tree}]
        self._tree += [p for p in tree if p.pid not in known]
        self._workers = _workers(tree, self.trainer_pids() if self.trainer_pids else set())


def _workers(tree: list[Any], trainers: set[int]) -> set[int]:
    """Loader workers: descendants of the trainers, or leaves forked from a same-named parent."""
    parents = {}
    for proc in tree:
        try:
            parents[proc.pid] = (proc.ppid(), proc.name())
        except Exception:  # noqa: BLE001 - a process may vanish between two reads
            continue
    trainers = trainers & parents.keys()
    if trainers:
        return {pid for pid in parents if pid not in trainers and _below(pid, trainers, parents)}
    has_children = {ppid for ppid, _ in parents.values()}
    return {pid for pid, (ppid, name) in parents.items()
            if pid not in has_children and ppid in parents and parents[ppid][1] == name}


def _below(pid: int, ancestors: set[int], parents: dict[int, tuple[int, str]]) -> bool:
    seen = set()
    while pid in parents and pid not in seen:
        seen.add(pid)
        pid = parents[pid][0]
        if pid in ancestors:
            return True
    return False


def _process_reading(proc: Any) -> tuple[float, int, int | None] | None:
    """(CPU seconds, RSS bytes, bytes read from storage or None) of one process."""
    try:
        with proc.oneshot():
            times = proc.cpu_times()
            rss = proc.memory_info().rss
    except Exception:  # noqa: BLE001 - gone or inaccessible: not part of this reading
        return None
    try:
        read_bytes = proc.io_counters().read_bytes
    except Exception:  # noqa: BLE001 - /proc/PID/io needs the same user: N/A otherwise
        read_bytes = None
    return times.user + times.system, rss, read_bytes


def _core_delta(before: Any, after: Any) -> tuple[float, float, float]:
    """(busy, iowait, total) seconds of one core between two cpu_times readings."""
    span = sum(after) - sum(before)
    idle = (after.idle - before.idle) + (getattr(after, "iowait", 0) - getattr(before, "iowait", 0))
    iowait = getattr(after, "iowait", 0) - getattr(before, "iowait", 0)
    guest = getattr(after, "guest", 0) - getattr(before, "guest", 0)
    guest += getattr(after, "guest_nice", 0) - getattr(before, "guest_nice", 0)
    span -= guest  # Linux counts guest time inside user time as well (proc(5))
    return max(0.0, span - idle), max(0.0, iowait), max(0.0, span)


def _whole_disks(psutil: Any) -> set[str] | None:
    """Disk names that are whole devices (/sys/block/NAME exists, psutil's own test), read once;
    None where /sys/block is missing (then every listed device counts)."""
    block = Path("/sys/block")
    if not block.is_dir():
        return None
    try:
        names = psutil.disk_io_counters(perdisk=True, nowrap=False) or {}
    except (OSError, RuntimeError):
        return None
    return {name for name in names if (block / name.replace("/", "!")).exists()}


def _nic_speeds() -> dict[str, int]:
    import psutil

    try:
        stats = psutil.net_if_stats()
    except OSError:
        return {}
    return {nic: s.speed for nic, s in stats.items() if s.speed and nic != "lo"}


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() and int(text) < 2**62 else None
