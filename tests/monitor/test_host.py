"""Host sampling with psutil on this machine: every column, rates, the job's tree and its workers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from trainrig.monitor.host import HostSource, host_info, memory_limit
from trainrig.monitor.schema import HOST_COLUMNS, column_names

# A "trainer" that forks two busy loader workers (as DataLoader's fork start method does).
TRAINER = """
import os, time
pids = []
for _ in range(2):
    pid = os.fork()
    if pid == 0:
        end = time.time() + 10
        while time.time() < end and os.getppid() != 1:
            pass
        os._exit(0)
    pids.append(pid)
print("ready", flush=True)
time.sleep(10)
"""


def start_trainer() -> subprocess.Popen:
    """The trainer in a session of its own, so that it and its workers end together."""
    trainer = subprocess.Popen([sys.executable, "-c", TRAINER], stdout=subprocess.PIPE, text=True,
                               start_new_session=True)
    assert trainer.stdout.readline().strip() == "ready"
    return trainer


def stop_trainer(trainer: subprocess.Popen) -> None:
    os.killpg(trainer.pid, signal.SIGKILL)
    trainer.wait()


def test_a_host_row_has_every_column():
    source = HostSource(None)
    time.sleep(0.05)
    row = source.read()
    assert set(column_names(HOST_COLUMNS)) <= row.keys()
    assert len(row["cpu_per_core_pct"]) == host_info()["cpu_count"]
    assert 0 <= row["cpu_pct"] <= 100
    assert row["ram_used_bytes"] > 0
    assert row["disk_read_bps"] is None or row["disk_read_bps"] >= 0
    assert row["job_cpu_pct"] is None and row["workers"] is None  # no job to follow


def test_the_jobs_workers_are_found_and_their_cpu_measured():
    trainer = start_trainer()
    try:
        source = HostSource(trainer.pid, trainer_pids=lambda: {trainer.pid}, tree_refresh_s=0.1)
        time.sleep(0.5)
        row = source.read()
    finally:
        stop_trainer(trainer)
    assert row["job_processes"] == 3 and row["workers"] == 2
    assert min(row["workers_cpu_pct"]) > 10  # busy loops, not sleepers (the trainer sleeps)
    assert row["job_rss_bytes"] > 0


def test_without_registered_trainers_forked_leaves_are_workers():
    trainer = start_trainer()
    try:
        row = HostSource(trainer.pid).read()
    finally:
        stop_trainer(trainer)
    assert row["workers"] == 2


def test_a_declared_memory_limit_below_ram_wins():
    ram = host_info()["ram_total_bytes"]
    assert memory_limit(2**30) == (2**30, "declared memory limit")
    assert memory_limit(None)[0] <= ram


def test_a_root_process_that_exits_leaves_job_columns_none():
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    source = HostSource(process.pid)
    time.sleep(0.05)
    row = source.read()
    assert row["job_processes"] is None and row["job_rss_bytes"] is None
    assert row["cpu_pct"] is not None
