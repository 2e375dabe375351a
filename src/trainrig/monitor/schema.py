"""The monitor's tables: one typed column per metric; NULL is N/A (never -1, never 0 for unknown).

Column lists are the single definition that the store, the samplers and the reports share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["Column", "GPU_COLUMNS", "HOST_COLUMNS", "STEP_COLUMNS", "SCHEMA_VERSION", "DDL",
           "column_names"]

SCHEMA_VERSION: Final = 1


@dataclass(frozen=True)
class Column:
    name: str
    sql_type: str
    unit: str
    description: str


GPU_COLUMNS: Final = (
    Column("utilization_gpu_pct", "REAL", "%", "share of the sample period a kernel ran (NVML)"),
    Column("utilization_memory_pct", "REAL", "%", "share of the period device memory was read/written"),
    Column("memory_used_bytes", "INTEGER", "B", "device memory in use (reserved pools included)"),
    Column("memory_total_bytes", "INTEGER", "B", "device memory"),
    Column("power_w", "REAL", "W", "board power draw"),
    Column("power_limit_w", "REAL", "W", "enforced power limit"),
    Column("sm_clock_mhz", "INTEGER", "MHz", "SM clock"),
    Column("mem_clock_mhz", "INTEGER", "MHz", "memory clock"),
    Column("temperature_c", "INTEGER", "°C", "GPU temperature"),
    Column("clock_event_mask", "INTEGER", "bits", "clock event (throttle) reasons, nvml.h bits"),
    Column("pcie_tx_kbs", "INTEGER", "KB/s", "PCIe sent by the GPU (device to host), 20 ms window"),
    Column("pcie_rx_kbs", "INTEGER", "KB/s", "PCIe received by the GPU (host to device), 20 ms window"),
    Column("pcie_gen_current", "INTEGER", "", "current PCIe link generation"),
    Column("pcie_width_current", "INTEGER", "lanes", "current PCIe link width"),
    Column("nvlink_tx_gbs", "REAL", "GB/s", "NVLink data sent, from counter deltas"),
    Column("nvlink_rx_gbs", "REAL", "GB/s", "NVLink data received, from counter deltas"),
    Column("sm_active_pct", "REAL", "%", "SMs busy (NVML GPM, as DCGM_FI_PROF_SM_ACTIVE × 100)"),
    Column("tensor_active_pct", "REAL", "%", "tensor pipes busy (NVML GPM)"),
    Column("dram_active_pct", "REAL", "%", "DRAM interface busy (NVML GPM)"),
)

HOST_COLUMNS: Final = (
    Column("cpu_pct", "REAL", "%", "all cores busy, average"),
    Column("cpu_per_core_pct", "TEXT", "%", "JSON list: each core busy"),
    Column("iowait_pct", "REAL", "%", "CPU time waiting on I/O"),
    Column("ram_used_bytes", "INTEGER", "B", "host RAM in use (total − available)"),
    Column("ram_available_bytes", "INTEGER", "B", "host RAM available"),
    Column("swap_used_bytes", "INTEGER", "B", "swap in use"),
    Column("disk_read_bps", "REAL", "B/s", "all disks, read"),
    Column("disk_write_bps", "REAL", "B/s", "all disks, written"),
    Column("net_rx_bps", "REAL", "B/s", "all NICs but loopback, received"),
    Column("net_tx_bps", "REAL", "B/s", "all NICs but loopback, sent"),
    Column("net_util_pct", "REAL", "%", "busiest NIC of known speed: max(rx, tx) / line rate"),
    Column("job_cpu_pct", "REAL", "% of one core", "the job's processes together"),
    Column("job_rss_bytes", "INTEGER", "B", "the job's processes, RSS summed"),
    Column("job_read_bps", "REAL", "B/s", "storage reads of the job's processes (/proc/PID/io)"),
    Column("job_processes", "INTEGER", "", "processes in the job's tree"),
    Column("workers", "INTEGER", "", "loader worker processes (leaves of the job's tree)"),
    Column("workers_cpu_pct", "TEXT", "% of one core", "JSON list: each worker busy"),
)

STEP_COLUMNS: Final = (
    Column("rank", "INTEGER", "", "process rank (RANK env; 0 alone)"),
    Column("step", "INTEGER", "", "step number in that process"),
    Column("t_end", "REAL", "s", "wall-clock end of the step (Unix time)"),
    Column("step_s", "REAL", "s", "time since the previous step ended"),
    Column("data_wait_s", "REAL", "s", "part of it spent waiting for the next batch"),
    Column("tokens", "INTEGER", "", "tokens trained on in the step by this process"),
)


def column_names(columns: tuple[Column, ...]) -> tuple[str, ...]:
    return tuple(c.name for c in columns)


def _table(name: str, keys: str, columns: tuple[Column, ...]) -> str:
    body = ", ".join(f"{c.name} {c.sql_type}" for c in columns)
    return f"CREATE TABLE IF NOT EXISTS {name} (id INTEGER PRIMARY KEY, {keys}, {body})"


DDL: Final = (
    "CREATE TABLE IF NOT EXISTS runs (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT, "
    "status TEXT NOT NULL, started_at REAL NOT NULL, ended_at REAL, pid INTEGER, hostname TEXT, "
    "command TEXT, exit_code INTEGER)",
    "CREATE TABLE IF NOT EXISTS run_meta (run_id INTEGER NOT NULL, key TEXT NOT NULL, "
    "value TEXT, PRIMARY KEY (run_id, key))",
    _table("gpu_samples", "run_id INTEGER NOT NULL, t REAL NOT NULL, gpu INTEGER NOT NULL",
           GPU_COLUMNS),
    _table("host_samples", "run_id INTEGER NOT NULL, t REAL NOT NULL", HOST_COLUMNS),
    _table("steps", "run_id INTEGER NOT NULL", STEP_COLUMNS),
    "CREATE INDEX IF NOT EXISTS gpu_samples_run ON gpu_samples (run_id, t)",
    "CREATE INDEX IF NOT EXISTS host_samples_run ON host_samples (run_id, t)",
    "CREATE INDEX IF NOT EXISTS steps_run ON steps (run_id, id)",
)
