"""A full disk never harms the job nor loses what fits in memory: the store keeps refused writes,
says so, and writes them in order when space returns (item 1 of issue 13).

The disk is made full in two ways: SQLite's own limit (`PRAGMA max_page_count`), which makes SQLite
answer SQLITE_FULL ("database or disk is full") exactly as on a full filesystem once a write needs
a new page, and `FullDisk`, a connection that refuses every INSERT and UPDATE with that error (as
on a disk with no byte left). Freeing the limit is space coming back. No timing is involved."""

from __future__ import annotations

import sqlite3
import sys

import pytest

from trainrig.monitor import store as store_module
from trainrig.monitor.analysis import analyze
from trainrig.monitor.recording import RecordingConfig
from trainrig.monitor.sampler import Sampler
from trainrig.monitor.store import Store, is_disk_full
from trainrig.monitor.supervise import Supervisor

from .conftest import host_row


def _fill(store: Store) -> None:
    """No page more: every write that needs one gets SQLITE_FULL."""
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages}")


def _free(store: Store) -> None:
    store._db.execute("PRAGMA max_page_count = 1073741823")


class FullDisk:
    """A connection whose disk has no byte left while `full`: writes fail, reads work."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection, self.full = connection, True

    def execute(self, sql: str, *args):
        self._refuse(sql)
        return self.connection.execute(sql, *args)

    def executemany(self, sql: str, *args):
        self._refuse(sql)
        return self.connection.executemany(sql, *args)

    def _refuse(self, sql: str) -> None:
        if self.full and sql.lstrip().upper().startswith(("INSERT", "UPDATE")):
            raise sqlite3.OperationalError("database or disk is full")

    def __getattr__(self, name: str):
        return getattr(self.connection, name)


def _full_disk(store: Store) -> FullDisk:
    disk = FullDisk(store._db)
    store._db = disk
    return disk


def _steps(n: int, start: int = 0) -> list[dict]:
    return [{"rank": 0, "step": i, "t_end": 1000.0 + i, "step_s": 1.0, "data_wait_s": 0.0,
             "tokens": 10} for i in range(start, start + n)]


def _big_rows(n: int) -> list[dict]:
    return [host_row(i, cpu_per_core_pct=[1.0] * 512) for i in range(n)]


def test_sqlite_full_and_enospc_read_as_disk_full():
    assert is_disk_full(sqlite3.OperationalError("database or disk is full"))
    assert is_disk_full(OSError(28, "No space left on device"))
    assert not is_disk_full(sqlite3.OperationalError("database is locked"))


def test_writes_refused_by_a_full_disk_are_kept_then_written_in_order(store):
    run_id = store.create_run("x", ["x"], None)
    store.write(run_id, step_rows=_steps(2))
    _fill(store)
    store.write(run_id, host_rows=_big_rows(20), step_rows=_steps(3, start=2))  # no exception
    store.set_meta(run_id, {"late": 1})
    store.finish_run(run_id, "finished", 0)
    state = store.storage_state()
    assert state["full_now"] and state["pending_rows"] == 23 and state["dropped_rows"] == 0
    data = store.load(run_id)  # a report made now still sees everything
    assert [s["step"] for s in data.steps] == [0, 1, 2, 3, 4] and len(data.host_samples) == 20
    assert data.meta["late"] == 1 and data.run.status == "finished"
    _free(store)
    assert store.retry()
    on_disk = Store.open(store.path)
    written = on_disk.load(run_id)
    assert [s["step"] for s in written.steps] == [0, 1, 2, 3, 4]
    assert len(written.host_samples) == 20 and written.meta["late"] == 1
    assert written.run.status == "finished" and written.run.exit_code == 0
    state = store.storage_state()
    assert not state["full_now"] and state["pending_rows"] == 0 and state["recovered_at"]


def test_a_run_created_on_a_full_disk_gets_its_id_and_is_written_later(store):
    first = store.create_run("a", None, None)
    disk = _full_disk(store)
    run_id = store.create_run("b", ["b"], None)
    assert store.storage_state()["full_now"]
    assert run_id == first + 1 and store.run(run_id).name == "b"
    assert [r.id for r in store.runs()] == [run_id, first]
    disk.full = False
    assert store.retry()
    assert Store.open(store.path).run(run_id).name == "b"


def test_memory_is_bounded_the_oldest_samples_are_dropped_and_counted(store, monkeypatch):
    monkeypatch.setattr(store_module, "MAX_PENDING_ROWS", 10)
    run_id = store.create_run("x", None, None)
    _fill(store)
    for start in range(0, 12, 4):
        store.write(run_id, host_rows=[host_row(i, cpu_per_core_pct=[1.0] * 512)
                                       for i in range(start, start + 4)])
    state = store.storage_state()
    assert state["pending_rows"] == 8 and state["dropped_rows"] == 4
    assert [r["t"] for r in store.load(run_id).host_samples] == [host_row(i)["t"]
                                                                  for i in range(4, 12)]


def test_a_full_existing_database_still_opens(store):
    store.create_run("x", None, None)
    store.close()
    reopened = sqlite3.connect(store.path)
    reopened.execute("PRAGMA max_page_count = 1")  # per connection: proves no write at open
    assert store_module._prepare(reopened) is None


def test_a_database_that_cannot_be_created_falls_back_to_memory(tmp_path, monkeypatch):
    def refuse(connection):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(store_module, "_prepare", refuse)
    with pytest.raises(Exception, match="TRAINRIG_HOME"):
        Store.open(tmp_path / "a.sqlite")
    monkeypatch.undo()
    monkeypatch.setattr(store_module, "_prepare", _refuse_on_disk(store_module._prepare))
    memory = Store.open(tmp_path / "b.sqlite", memory_if_full=True)
    assert memory.memory_only and memory.storage_state()["full_now"]
    assert memory.run(memory.create_run("x", None, None)).name == "x"


def _refuse_on_disk(prepare):
    def refuse_files(connection):
        if connection.execute("PRAGMA database_list").fetchone()[2]:  # a file, not :memory:
            raise sqlite3.OperationalError("database or disk is full")
        prepare(connection)
    return refuse_files


def test_the_sampler_keeps_going_and_the_report_warns(store):
    run_id = store.create_run("x", None, None)
    sampler = Sampler(store, run_id, hz=10, flush_interval_s=1)
    _full_disk(store)
    sampler._buffers["host_samples"].extend(_big_rows(5))
    sampler.flush()
    assert sampler.errors == 0 and store.storage_state()["pending_rows"] == 5
    store.set_meta(run_id, {"storage": store.storage_state()})
    report = analyze(store.load(run_id))
    assert report.storage["full_now"] and report.to_dict()["storage"]["pending_rows"] == 5
    from trainrig.report.monitor_report import storage_warning

    assert "disk" in storage_warning(report.storage).lower()


def test_a_command_under_the_monitor_on_a_full_disk_keeps_its_exit_code(store):
    disk = _full_disk(store)
    supervisor = Supervisor(store, RecordingConfig(hz=10), refresh_s=0.05)
    code = supervisor.run([sys.executable, "-c", "import time; time.sleep(0.3)"])
    assert code == 0
    run = store.run(supervisor.run_id)
    assert run.status == "finished" and run.exit_code == 0
    assert store.meta(supervisor.run_id)["storage"]["full_now"]
    disk.full = False
    assert store.retry()
    assert Store.open(store.path).run(supervisor.run_id).status == "finished"


def test_the_live_view_shows_the_full_disk_loudly(store):
    from rich.console import Console

    from trainrig.monitor.live import LiveState
    from trainrig.report.monitor_live import live_renderable

    disk = _full_disk(store)
    store.write(store.create_run("x", None, None), host_rows=_big_rows(3))
    state = LiveState(run_id=1, command=["x"], elapsed_s=1.0, gpus=[], gpu_rows=[], host_row=None,
                      host={}, step_figures={}, storage=store.storage_state())
    console = Console(record=True, width=200)
    console.print(live_renderable(state))
    text = console.export_text()
    assert "DISK FULL" in text and "3 rows held in memory" in text
    disk.full = False
    store.retry()
    assert "was full" in _rendered_warning(store.storage_state())


def _rendered_warning(state: dict) -> str:
    from trainrig.report.monitor_report import storage_warning

    return storage_warning(state) or ""
