"""The monitor's SQLite store: runs, their metadata, GPU and host samples and steps.

Durability: WAL journal with `synchronous=NORMAL`. Every `write` is one committed transaction
("a flush"); a committed WAL transaction survives the writer being killed (SIGKILL, OOM killer)
and is lost only to an OS crash or power loss (sqlite.org/wal.html, sqlite.org/pragma.html#pragma_synchronous).
Several processes may write one database (the `trainrig monitor` wrapper writes samples, the job's
in-process monitor writes steps): WAL lets readers run beside one writer, and `busy_timeout`
makes a second writer wait instead of failing (sqlite.org/wal.html "Concurrency").
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainrig.errors import TrainrigError
from trainrig.monitor.home import database_path
from trainrig.monitor.schema import (
    DDL,
    GPU_COLUMNS,
    HOST_COLUMNS,
    SCHEMA_VERSION,
    STEP_COLUMNS,
    column_names,
)

__all__ = ["Store", "RunRow", "RunData", "open_store", "JSON_COLUMNS"]

BUSY_TIMEOUT_MS = 10_000
JSON_COLUMNS = frozenset({"cpu_per_core_pct", "workers_cpu_pct"})
_GPU_NAMES = ("run_id", "t", "gpu", *column_names(GPU_COLUMNS))
_HOST_NAMES = ("run_id", "t", *column_names(HOST_COLUMNS))
_STEP_NAMES = ("run_id", *column_names(STEP_COLUMNS))


@dataclass(frozen=True)
class RunRow:
    """One run as the `runs` table holds it; `status` is what is known now (see `effective_status`)."""

    id: int
    name: str | None
    status: str
    started_at: float
    ended_at: float | None
    pid: int | None
    hostname: str | None
    command: list[str] | None
    exit_code: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "status": self.status,
                "started_at": self.started_at, "ended_at": self.ended_at, "pid": self.pid,
                "hostname": self.hostname, "command": self.command, "exit_code": self.exit_code}


@dataclass
class RunData:
    """Everything recorded for one run, as plain rows (None where a metric was N/A)."""

    run: RunRow
    meta: dict[str, Any]
    gpu_samples: list[dict[str, Any]] = field(default_factory=list)
    host_samples: list[dict[str, Any]] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)


class Store:
    """One connection to the monitor database; writes are serialized by a lock."""

    def __init__(self, path: Path, connection: sqlite3.Connection) -> None:
        self.path = path
        self._db = connection
        self._lock = threading.RLock()

    @classmethod
    def open(cls, path: str | Path | None = None) -> Store:
        """Open (creating it and its folder if needed) the database at `path` or under the home."""
        target = Path(path) if path is not None else database_path()
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(target, timeout=BUSY_TIMEOUT_MS / 1000,
                                         check_same_thread=False, isolation_level=None)
            _prepare(connection)
        except (OSError, sqlite3.Error) as error:
            raise TrainrigError("TRAINRIG_HOME", f"cannot use the monitor database {target} "
                                                 f"({error}).") from None
        return cls(target, connection)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- writing -----------------------------------------------------------------------------
    def create_run(self, name: str | None, command: Sequence[str] | None, pid: int | None,
                   started_at: float | None = None) -> int:
        with self._lock:
            cursor = self._db.execute(
                "INSERT INTO runs (name, status, started_at, pid, hostname, command) "
                "VALUES (?, 'running', ?, ?, ?, ?)",
                (name, started_at or time.time(), pid, socket.gethostname(),
                 json.dumps(list(command)) if command is not None else None))
            return int(cursor.lastrowid)

    def set_meta(self, run_id: int, values: dict[str, Any]) -> None:
        """Store JSON values under keys (replacing earlier ones)."""
        rows = [(run_id, key, json.dumps(value, default=_json_default))
                for key, value in values.items()]
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany("INSERT OR REPLACE INTO run_meta VALUES (?, ?, ?)", rows)
            finally:
                self._db.execute("COMMIT")

    def write(self, run_id: int, gpu_rows: Iterable[dict[str, Any]] = (),
              host_rows: Iterable[dict[str, Any]] = (), step_rows: Iterable[dict[str, Any]] = ()) -> None:
        """One flush: all rows in one committed transaction."""
        batches = [(f"gpu_samples ({', '.join(_GPU_NAMES)})", _GPU_NAMES, list(gpu_rows)),
                   (f"host_samples ({', '.join(_HOST_NAMES)})", _HOST_NAMES, list(host_rows)),
                   (f"steps ({', '.join(_STEP_NAMES)})", _STEP_NAMES, list(step_rows))]
        batches = [b for b in batches if b[2]]
        if not batches:
            return
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for table, names, rows in batches:
                    marks = ", ".join("?" * len(names))
                    self._db.executemany(f"INSERT INTO {table} VALUES ({marks})",
                                         [_values(run_id, names, row) for row in rows])
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def finish_run(self, run_id: int, status: str, exit_code: int | None = None,
                   ended_at: float | None = None) -> None:
        with self._lock:
            self._db.execute("UPDATE runs SET status = ?, exit_code = ?, ended_at = ? WHERE id = ?",
                             (status, exit_code, ended_at or time.time(), run_id))

    # -- reading -----------------------------------------------------------------------------
    def runs(self, limit: int | None = None) -> list[RunRow]:
        """Runs, newest first, each with its effective status."""
        sql = "SELECT * FROM runs ORDER BY id DESC" + (" LIMIT ?" if limit else "")
        rows = self._query(sql, (limit,) if limit else ())[1]
        return [effective_status(self, _run_row(r)) for r in rows]

    def run(self, run_id: int) -> RunRow | None:
        rows = self._query("SELECT * FROM runs WHERE id = ?", (run_id,))[1]
        return effective_status(self, _run_row(rows[0])) if rows else None

    def resolve(self, ref: str | int) -> int:
        """A run id from `ref`: a number or `latest`; TrainrigError naming RUN otherwise."""
        text = str(ref).strip().lower()
        if text == "latest":
            latest = self._query("SELECT max(id) FROM runs")[1][0][0]
            if latest is None:
                raise TrainrigError("RUN", f"no runs recorded yet in {self.path}.")
            return int(latest)
        if not text.isdigit():
            raise TrainrigError("RUN", f"must be a run id (a number) or 'latest' (got {ref!r}).")
        if self.run(int(text)) is None:
            raise TrainrigError("RUN", f"no run {text} in {self.path}; `trainrig runs` lists them.")
        return int(text)

    def meta(self, run_id: int) -> dict[str, Any]:
        rows = self._query("SELECT key, value FROM run_meta WHERE run_id = ?", (run_id,))[1]
        return {key: json.loads(value) for key, value in rows}

    def load(self, run_id: int, since: float | None = None) -> RunData:
        """The run's rows (only those from Unix time `since` on, when given)."""
        run = self.run(run_id)
        if run is None:
            raise TrainrigError("RUN", f"no run {run_id} in {self.path}.")
        return RunData(run=run, meta=self.meta(run_id),
                       gpu_samples=self._rows("gpu_samples", run_id, "t", "t, gpu, id", since),
                       host_samples=self._rows("host_samples", run_id, "t", "t, id", since),
                       steps=self._rows("steps", run_id, "t_end", "id", since))

    def steps_after(self, run_id: int, after_id: int, limit: int = 1000) -> list[dict[str, Any]]:
        """Steps recorded after step row `after_id` (for a live view of another process's steps)."""
        names, rows = self._query("SELECT * FROM steps WHERE run_id = ? AND id > ? ORDER BY id "
                                  "LIMIT ?", (run_id, after_id, limit))
        return [_decode(names, r) for r in rows]

    def last_activity(self, run_id: int) -> float | None:
        """The time of the last sample or step recorded for a run."""
        rows = self._query(
            "SELECT max(m) FROM (SELECT max(t) AS m FROM gpu_samples WHERE run_id = ?1 UNION ALL "
            "SELECT max(t) FROM host_samples WHERE run_id = ?1 UNION ALL "
            "SELECT max(t_end) FROM steps WHERE run_id = ?1)", (run_id,))[1]
        return rows[0][0]

    def _rows(self, table: str, run_id: int, time_column: str, order: str,
              since: float | None) -> list[dict[str, Any]]:
        names, rows = self._query(f"SELECT * FROM {table} WHERE run_id = ? AND {time_column} >= ? "
                                  f"ORDER BY {order}", (run_id, -1.0 if since is None else since))
        return [_decode(names, r) for r in rows]

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> tuple[list[str], list[tuple]]:
        with self._lock:
            cursor = self._db.execute(sql, params)
            rows = cursor.fetchall()
            return [d[0] for d in cursor.description], rows


def open_store(path: str | Path | None = None) -> Store:
    return Store.open(path)


def effective_status(store: Store, run: RunRow) -> RunRow:
    """A run still marked running whose process is gone from this host was killed: say so."""
    if run.status != "running" or run.pid is None or run.hostname != socket.gethostname():
        return run
    if _pid_alive(run.pid):
        return run
    ended = store.last_activity(run.id) or run.started_at
    return RunRow(run.id, run.name, "killed", run.started_at, ended, run.pid, run.hostname,
                  run.command, run.exit_code)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _prepare(connection: sqlite3.Connection) -> None:
    connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = NORMAL")
    version = connection.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise sqlite3.DatabaseError(f"written by a newer trainrig (schema {version})")
    connection.execute("BEGIN IMMEDIATE")
    for statement in DDL:
        connection.execute(statement)
    connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    connection.execute("COMMIT")


def _values(run_id: int, names: tuple[str, ...], row: dict[str, Any]) -> tuple[Any, ...]:
    out = [run_id]
    for name in names[1:]:
        value = row.get(name)
        out.append(json.dumps(value) if name in JSON_COLUMNS and value is not None else value)
    return tuple(out)


def _decode(names: list[str], row: tuple[Any, ...]) -> dict[str, Any]:
    out = dict(zip(names, row, strict=True))
    for name in JSON_COLUMNS & out.keys():
        if out[name] is not None:
            out[name] = json.loads(out[name])
    return out


def _run_row(row: tuple[Any, ...]) -> RunRow:
    run_id, name, status, started, ended, pid, host, command, exit_code = row
    return RunRow(int(run_id), name, status, started, ended, pid, host,
                  json.loads(command) if command else None, exit_code)


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "to_dict"):
        return value.to_dict()
    return str(value)
