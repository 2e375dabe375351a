"""The monitor's SQLite store: runs, their metadata, GPU and host samples and steps.

Durability: WAL journal with `synchronous=NORMAL`. Every `write` is one committed transaction
("a flush"); a committed WAL transaction survives the writer being killed (SIGKILL, OOM killer)
and is lost only to an OS crash or power loss (sqlite.org/wal.html, sqlite.org/pragma.html#pragma_synchronous).
Several processes may write one database (the `trainrig monitor` wrapper writes samples, the job's
in-process monitor writes steps): WAL lets readers run beside one writer, and `busy_timeout`
makes a second writer wait instead of failing (sqlite.org/wal.html "Concurrency").

A full disk never fails a write: the store keeps the write in memory (`MAX_PENDING_ROWS` rows at
most, the oldest samples dropped beyond that), says so in `storage_state()`, and writes what it kept,
in order, at the next write that finds space again. Reads add what is kept, so a report made while
the disk is full is still whole.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import sqlite3
import threading
import time
from collections import deque
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

__all__ = ["Store", "RunRow", "RunData", "open_store", "JSON_COLUMNS", "is_disk_full",
           "MAX_PENDING_ROWS", "LOST_STATUS"]

BUSY_TIMEOUT_MS = 10_000
JSON_COLUMNS = frozenset({"cpu_per_core_pct", "workers_cpu_pct"})
_GPU_NAMES = ("run_id", "t", "gpu", *column_names(GPU_COLUMNS))
_HOST_NAMES = ("run_id", "t", *column_names(HOST_COLUMNS))
_STEP_NAMES = ("run_id", *column_names(STEP_COLUMNS))
_TABLES = ("gpu_samples", "host_samples", "steps")
_SQLITE_FULL = getattr(sqlite3, "SQLITE_FULL", 13)
MAX_PENDING_ROWS = 100_000
"""Rows (samples and steps) kept in memory while the disk is full; beyond, the oldest go."""
LOST_STATUS = "lost"
"""A run still marked running whose recording process is gone: it vanished without closing it."""


def is_disk_full(error: BaseException) -> bool:
    """SQLite's SQLITE_FULL, or the OS's ENOSPC / EDQUOT: the disk (or a quota) is full."""
    if isinstance(error, sqlite3.Error):
        return (getattr(error, "sqlite_errorcode", None) == _SQLITE_FULL
                or "disk is full" in str(error))
    return isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)


@dataclass
class _Pending:
    """A write the full disk refused, kept to be written when space returns."""

    kind: str  # "create", "meta", "rows" or "finish"
    run_id: int
    payload: Any
    rows: int = 0


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

    def __init__(self, path: Path, connection: sqlite3.Connection, memory_only: bool = False) -> None:
        self.path = path
        self.memory_only = memory_only
        """True when the database could not even be opened for a full disk: nothing is saved."""
        self._db = connection
        self._lock = threading.RLock()
        self._pending: deque[_Pending] = deque()
        self._pending_rows = 0
        self._storage: dict[str, Any] = {}

    @classmethod
    def open(cls, path: str | Path | None = None, memory_if_full: bool = False) -> Store:
        """Open (creating it and its folder if needed) the database at `path` or under the home.

        memory_if_full: when a full disk refuses even that, record in memory instead (the monitor
        must not keep a job from starting); `memory_only` and `storage_state()` say so."""
        target = Path(path) if path is not None else database_path()
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(target, timeout=BUSY_TIMEOUT_MS / 1000,
                                         check_same_thread=False, isolation_level=None)
            _prepare(connection)
        except (OSError, sqlite3.Error) as error:
            if memory_if_full and is_disk_full(error):
                return cls._in_memory(target, error)
            raise TrainrigError("TRAINRIG_HOME", f"cannot use the monitor database {target} "
                                                 f"({error}).") from None
        return cls(target, connection)

    @classmethod
    def _in_memory(cls, target: Path, error: BaseException) -> Store:
        connection = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        _prepare(connection)
        store = cls(target, connection, memory_only=True)
        store._note_full(error)
        return store

    def close(self) -> None:
        with self._lock:
            self._replay()
            self._db.close()

    # -- writing -----------------------------------------------------------------------------
    def create_run(self, name: str | None, command: Sequence[str] | None, pid: int | None,
                   started_at: float | None = None) -> int:
        values = (name, started_at or time.time(), pid, socket.gethostname(),
                  json.dumps(list(command)) if command is not None else None)
        with self._lock:
            if self._replay():
                try:
                    return self._insert_run(None, values)
                except (OSError, sqlite3.Error) as error:
                    if not is_disk_full(error):
                        raise
                    self._note_full(error)
            # the disk is full: take the next id now (the job needs it), insert the row later
            run_id = self._next_run_id()
            self._keep(_Pending("create", run_id, values))
            return run_id

    def set_meta(self, run_id: int, values: dict[str, Any]) -> None:
        """Store JSON values under keys (replacing earlier ones)."""
        rows = [(run_id, key, json.dumps(value, default=_json_default))
                for key, value in values.items()]
        self._submit(_Pending("meta", run_id, rows))

    def write(self, run_id: int, gpu_rows: Iterable[dict[str, Any]] = (),
              host_rows: Iterable[dict[str, Any]] = (), step_rows: Iterable[dict[str, Any]] = ()) -> None:
        """One flush: all rows in one committed transaction."""
        batch = dict(zip(_TABLES, (list(gpu_rows), list(host_rows), list(step_rows)), strict=True))
        count = sum(len(rows) for rows in batch.values())
        if count:
            self._submit(_Pending("rows", run_id, batch, count))

    def finish_run(self, run_id: int, status: str, exit_code: int | None = None,
                   ended_at: float | None = None) -> None:
        self._submit(_Pending("finish", run_id, (status, exit_code, ended_at or time.time())))

    def storage_state(self) -> dict[str, Any]:
        """{} while the disk never refused a write; else when it did, what is kept in memory now
        (`pending_rows`), what was dropped, whether it is still full (`full_now`)."""
        with self._lock:
            if not self._storage:
                return {}
            return {**self._storage, "pending_rows": self._pending_rows,
                    "full_now": bool(self._pending) or self.memory_only,
                    "memory_only": self.memory_only, "max_pending_rows": MAX_PENDING_ROWS,
                    "path": str(self.path)}

    def retry(self) -> bool:
        """Write what a full disk refused, if there is space now; True when nothing is left."""
        with self._lock:
            return self._replay()

    def _submit(self, op: _Pending) -> None:
        """Write now, or keep the write (after those already kept) while the disk is full."""
        with self._lock:
            if self._replay():
                try:
                    self._apply(op)
                    return
                except (OSError, sqlite3.Error) as error:
                    if not is_disk_full(error):
                        raise
                    self._note_full(error)
            self._keep(op)

    def _replay(self) -> bool:
        """Write the kept writes in order until the disk refuses again; True when none is left."""
        while self._pending:
            op = self._pending[0]
            try:
                self._apply(op)
            except (OSError, sqlite3.Error) as error:
                if is_disk_full(error):
                    self._note_full(error)
                    return False
                self._storage["last_error"] = f"{type(error).__name__}: {error}"
                self._drop(op)  # it will never go in: do not block the ones behind it
                continue
            self._pending.popleft()
            self._pending_rows -= op.rows
            if not self._pending:
                self._storage["recovered_at"] = time.time()
        return True

    def _keep(self, op: _Pending) -> None:
        self._pending.append(op)
        self._pending_rows += op.rows
        while self._pending_rows > MAX_PENDING_ROWS:
            oldest = next((p for p in self._pending if p.kind == "rows"), None)
            if oldest is None:
                return
            self._pending.remove(oldest)
            self._drop(oldest)

    def _drop(self, op: _Pending) -> None:
        if op in self._pending:
            self._pending.remove(op)
        self._pending_rows -= op.rows
        self._storage["dropped_rows"] = self._storage.get("dropped_rows", 0) + op.rows

    def _note_full(self, error: BaseException) -> None:
        now = time.time()
        self._storage.setdefault("full_since", now)
        self._storage.setdefault("dropped_rows", 0)
        self._storage.update(last_full_at=now, last_error=f"{type(error).__name__}: {error}",
                             recovered_at=None)

    def _next_run_id(self) -> int:
        """The id SQLite would give the next run (AUTOINCREMENT: above every id ever used)."""
        used = [self._query("SELECT max(id) FROM runs")[1][0][0] or 0]
        with contextlib.suppress(sqlite3.Error):  # no sqlite_sequence before the first run
            used += [r[0] for r in self._query("SELECT seq FROM sqlite_sequence "
                                               "WHERE name = 'runs'")[1]]
        used += [p.run_id for p in self._pending if p.kind == "create"]
        return max(used) + 1

    def _apply(self, op: _Pending) -> None:
        if op.kind == "create":
            self._insert_run(op.run_id, op.payload)
            return
        self._transaction(lambda: _APPLY[op.kind](self._db, op))

    def _insert_run(self, run_id: int | None, values: tuple[Any, ...]) -> int:
        cursor = self._db.execute(
            "INSERT INTO runs (id, name, status, started_at, pid, hostname, command) "
            "VALUES (?, ?, 'running', ?, ?, ?, ?)", (run_id, *values))
        return int(cursor.lastrowid)

    def _transaction(self, body: Any) -> None:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            body()
            self._db.execute("COMMIT")  # a full disk may refuse the commit itself
        except BaseException:
            if self._db.in_transaction:  # SQLITE_FULL may already have rolled it back
                self._db.execute("ROLLBACK")
            raise

    # -- reading -----------------------------------------------------------------------------
    def runs(self, limit: int | None = None) -> list[RunRow]:
        """Runs, newest first, each with its effective status (kept ones included)."""
        sql = "SELECT * FROM runs ORDER BY id DESC" + (" LIMIT ?" if limit else "")
        rows = [_run_row(r) for r in self._query(sql, (limit,) if limit else ())[1]]
        with self._lock:
            kept = [self._kept_run(p) for p in self._pending if p.kind == "create"]
        rows = sorted([*kept, *rows], key=lambda r: -r.id)[:limit]
        return [effective_status(self, self._with_kept_finish(r)) for r in rows]

    def run(self, run_id: int) -> RunRow | None:
        rows = self._query("SELECT * FROM runs WHERE id = ?", (run_id,))[1]
        with self._lock:
            kept = [self._kept_run(p) for p in self._pending
                    if p.kind == "create" and p.run_id == run_id]
        row = _run_row(rows[0]) if rows else (kept[0] if kept else None)
        return effective_status(self, self._with_kept_finish(row)) if row else None

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
        if int(text) > _MAX_SQLITE_INT or self.run(int(text)) is None:
            raise TrainrigError("RUN", f"no run {text} in {self.path}; `trainrig runs` lists them.")
        return int(text)

    def meta(self, run_id: int) -> dict[str, Any]:
        rows = self._query("SELECT key, value FROM run_meta WHERE run_id = ?", (run_id,))[1]
        with self._lock:
            rows += [(key, value) for p in self._pending if p.kind == "meta" and p.run_id == run_id
                     for _, key, value in p.payload]
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
        out = [_decode(names, r) for r in rows]
        with self._lock:
            kept = [{**row, "id": None, "run_id": run_id} for p in self._pending
                    if p.kind == "rows" and p.run_id == run_id for row in p.payload[table]]
        return out + [r for r in kept if since is None or (r.get(time_column) or 0) >= since]

    def _kept_run(self, op: _Pending) -> RunRow:
        name, started, pid, host, command = op.payload
        return RunRow(op.run_id, name, "running", started, None, pid, host,
                      json.loads(command) if command else None, None)

    def _with_kept_finish(self, run: RunRow) -> RunRow:
        with self._lock:
            finish = [p.payload for p in self._pending if p.kind == "finish" and p.run_id == run.id]
        if not finish:
            return run
        status, exit_code, ended = finish[-1]
        return RunRow(run.id, run.name, status, run.started_at, ended, run.pid, run.hostname,
                      run.command, exit_code)

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> tuple[list[str], list[tuple]]:
        with self._lock:
            cursor = self._db.execute(sql, params)
            rows = cursor.fetchall()
            return [d[0] for d in cursor.description], rows


def open_store(path: str | Path | None = None) -> Store:
    return Store.open(path)


def effective_status(store: Store, run: RunRow) -> RunRow:
    """A run still marked running whose recording process is gone from this host is `lost`: that
    process vanished (SIGKILL, OOM killer, crash) without closing it."""
    if run.status != "running" or run.pid is None or run.hostname != socket.gethostname():
        return run
    if _pid_alive(run.pid):
        return run
    ended = store.last_activity(run.id) or run.started_at
    return RunRow(run.id, run.name, LOST_STATUS, run.started_at, ended, run.pid, run.hostname,
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
    if version == SCHEMA_VERSION:
        return  # up to date: write nothing, so that a full disk can still be opened
    connection.execute("BEGIN IMMEDIATE")
    for statement in DDL:
        connection.execute(statement)
    connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    connection.execute("COMMIT")


def _insert_meta(db: sqlite3.Connection, op: _Pending) -> None:
    db.executemany("INSERT OR REPLACE INTO run_meta VALUES (?, ?, ?)", op.payload)


def _insert_rows(db: sqlite3.Connection, op: _Pending) -> None:
    for table, names in zip(_TABLES, (_GPU_NAMES, _HOST_NAMES, _STEP_NAMES), strict=True):
        if op.payload[table]:
            marks = ", ".join("?" * len(names))
            db.executemany(f"INSERT INTO {table} ({', '.join(names)}) VALUES ({marks})",
                           [_values(op.run_id, names, row) for row in op.payload[table]])


def _update_finish(db: sqlite3.Connection, op: _Pending) -> None:
    status, exit_code, ended = op.payload
    db.execute("UPDATE runs SET status = ?, exit_code = ?, ended_at = ? WHERE id = ?",
               (status, exit_code, ended, op.run_id))


_APPLY = {"meta": _insert_meta, "rows": _insert_rows, "finish": _update_finish}
_MAX_SQLITE_INT = 2**63 - 1


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
