"""A killed or signalled monitor never orphans its job nor misreports it (item 7 of issue 13):
SIGTERM/SIGHUP are passed on, the job dies with a SIGKILLed monitor (Linux PR_SET_PDEATHSIG), a
run whose monitor vanished reads `lost`, a job ended by a signal reads `killed by SIGNAME`.

Waits poll for an event with a generous bound (never assert a duration)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from trainrig.monitor.recording import RecordingConfig
from trainrig.monitor.supervise import Supervisor, exit_status, shell_exit_code

from .test_cli import trainrig

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG")

JOB = textwrap.dedent("""
    import os, signal, sys, time
    out = sys.argv[1]
    def on_term(signum, frame):
        open(out + ".signal", "w").write(signal.Signals(signum).name)
        sys.exit(3)
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)
    open(out + ".tmp", "w").write(str(os.getpid()))
    os.rename(out + ".tmp", out)
    time.sleep(120)
""")


def _wait_for(condition, what: str, bound_s: float = 60.0):
    deadline = time.monotonic() + bound_s
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {bound_s} s"
        time.sleep(0.05)


def _start_monitor(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    pid_file = tmp_path / "job.pid"
    monitor = subprocess.Popen([sys.executable, "-m", "trainrig", "monitor", "--no-live", "--hz", "5",
                                "--", sys.executable, "-c", JOB, str(pid_file)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _wait_for(pid_file.exists, "the job starting")
    return monitor, pid_file


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_statuses_name_the_signal_and_the_shell_exit_code():
    assert exit_status(0) == "finished" and exit_status(3) == "failed"
    assert exit_status(-signal.SIGKILL) == "killed by SIGKILL"
    assert exit_status(None) == "ended"
    assert shell_exit_code(-signal.SIGKILL) == 137 and shell_exit_code(3) == 3


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_to_the_monitor_reach_the_job(tmp_path, signum):
    monitor, pid_file = _start_monitor(tmp_path)
    try:
        monitor.send_signal(signum)
        _, stderr = monitor.communicate(timeout=120)
    finally:
        monitor.kill()
    assert (tmp_path / "job.pid.signal").read_text() == signal.Signals(signum).name
    assert monitor.returncode == 3, stderr
    run = json.loads(trainrig("runs", "--json").stdout)[0]
    assert run["status"] == "failed" and run["exit_code"] == 3


@linux_only
def test_a_sigkilled_monitor_takes_its_job_along_and_the_run_reads_lost(tmp_path):
    monitor, pid_file = _start_monitor(tmp_path)
    job_pid = int(pid_file.read_text())
    try:
        monitor.kill()
        monitor.wait(timeout=60)
        _wait_for(lambda: _gone(job_pid), "the job ending with its monitor")
    finally:
        if not _gone(job_pid):
            os.kill(job_pid, signal.SIGKILL)
    assert (tmp_path / "job.pid.signal").read_text() == "SIGTERM"  # DEATH_SIGNAL
    run = json.loads(trainrig("runs", "--json").stdout)[0]
    assert run["status"] == "lost"


def test_a_job_killed_by_a_signal_reads_killed_by_its_name(store):
    supervisor = Supervisor(store, RecordingConfig(hz=10), refresh_s=0.05)
    code = supervisor.run([sys.executable, "-c", "import os; os.kill(os.getpid(), 9)"])
    run = store.run(supervisor.run_id)
    assert code == -9 and run.status == "killed by SIGKILL" and run.exit_code == 137


def test_the_cli_exits_137_for_a_sigkilled_job():
    result = trainrig("monitor", "--no-live", "--", sys.executable, "-c",
                      "import os; os.kill(os.getpid(), 9)", check_rc=137)
    assert "Traceback" not in result.stderr


def test_an_attached_process_killed_by_sigkill_is_not_recorded_as_finished(store):
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    supervisor = Supervisor(store, RecordingConfig(hz=10), refresh_s=0.05)
    try:
        # killed once the monitor follows it; this test is its parent and reaps it only later,
        # so the monitor sees the zombie and reads its exit status
        run_id = supervisor.attach(target.pid, on_refresh=lambda state: target.kill())
    finally:
        target.kill()
        target.wait()
    run = store.run(run_id)
    assert run.status == "killed by SIGKILL" and run.exit_code == 137


def test_an_attached_process_still_running_after_duration_reads_detached(store):
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        run_id = Supervisor(store, RecordingConfig(hz=10), refresh_s=0.05).attach(
            target.pid, duration_s=0.2)
        assert store.run(run_id).status == "detached"
    finally:
        target.kill()
        target.wait()
