"""Storage: checkpoint-like writes with fsync, then sequential reads of dataset-like shard files with
the page cache bypassed (O_DIRECT where the OS and filesystem allow it)."""

from __future__ import annotations

import contextlib
import mmap
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from trainrig.probe.detect import disk_for_path
from trainrig.probe.results import StorageResult

__all__ = ["storage_bench", "CHUNK_BYTES", "plan_size"]

CHUNK_BYTES = 8 * 2**20
"""Read and write in 8 MiB requests, like a loader streaming shards or a checkpoint writer."""
_ALIGN = 4096


def plan_size(requested_bytes: int, free_bytes: int | None) -> int:
    """The test's total size: at most a quarter of the free space, a whole number of chunks."""
    size = requested_bytes if free_bytes is None else min(requested_bytes, free_bytes // 4)
    return (size // CHUNK_BYTES) * CHUNK_BYTES


def storage_bench(directory: str | Path, total_bytes: int, files: int = 4,
                  advance: Callable[[], None] = lambda: None, deadline_s: float | None = None,
                  clock: Callable[[], float] = time.perf_counter) -> StorageResult:
    """Write `files` shards totalling `total_bytes` with fsync, evict them, read them back.

    deadline_s: a `clock()` time at which writing and reading stop early (the probe's time
    limit); the figures are then over what was written and read by then."""
    directory = Path(directory)
    disk = disk_for_path(directory)
    size = plan_size(total_bytes, shutil.disk_usage(directory).free)
    if size < CHUNK_BYTES * files:
        raise OSError(f"not enough free space in {directory} for a storage test")
    per_file = size // files // CHUNK_BYTES * CHUNK_BYTES
    # half the time left for writing, the rest for reading back: both figures stay meaningful
    write_timer = _Timer(clock, None if deadline_s is None else (clock() + deadline_s) / 2)
    read_timer = _Timer(clock, deadline_s)
    workdir = Path(tempfile.mkdtemp(prefix=".trainrig-probe-", dir=directory))
    try:  # a SIGTERM or SIGHUP reaches this `finally` too (probe's signal handlers)
        paths = [workdir / f"shard-{i:03d}.bin" for i in range(files)]
        write_gbs, sizes = _write_files(paths, per_file, write_timer)
        advance()
        written = [(path, n) for path, n in zip(paths, sizes, strict=True) if n]
        read_gbs, read_method = _read_files([p for p, _ in written], sum(n for _, n in written),
                                            read_timer)
        advance()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    total = sum(sizes)
    return StorageResult(
        path=str(directory),
        filesystem=disk.fstype if disk else None,
        device_kind=disk.kind if disk else None,
        files=len(written),
        file_bytes=total // len(written),
        write_gbs=write_gbs,
        read_gbs=read_gbs,
        write_method=(
            f"{len(written)} new files of {total / len(written) / 2**20:.0f} MiB written in "
            f"{CHUNK_BYTES // 2**20} MiB requests, fsync every {FSYNC_EVERY_BYTES // 2**20} MiB "
            f"and per file, time includes fsync" + write_timer.note(total, files * per_file)
        ),
        read_method=read_method + read_timer.note(read_timer.done_bytes, total)
        + _memory_note(disk.kind if disk else None),
    )


FSYNC_EVERY_BYTES = 64 * 2**20
"""Dirty data is flushed at least this often, so a time limit is overshot by one such flush at
most, not by the flush of a whole file (seconds on a slow disk)."""


class _Timer:
    """Elapsed time on `clock`, and whether the deadline passed (then `stopped` stays True)."""

    def __init__(self, clock: Callable[[], float], deadline_s: float | None) -> None:
        self.clock, self.deadline_s, self.stopped = clock, deadline_s, False
        self.done_bytes = 0

    def out_of_time(self) -> bool:
        if self.deadline_s is not None and self.clock() >= self.deadline_s:
            self.stopped = True
        return self.stopped

    def note(self, done_bytes: int, planned_bytes: int) -> str:
        if not self.stopped:
            return ""
        return (f"; stopped at the time limit after {done_bytes / 2**20:.0f} of "
                f"{planned_bytes / 2**20:.0f} MiB")


def _memory_note(kind: str | None) -> str:
    if kind == "memory":
        return " (a RAM-backed filesystem: these are memory speeds, not a disk's)"
    if kind == "network":
        return " (a network filesystem: the figure includes the network and the server)"
    return ""


def _write_files(paths: list[Path], per_file: int, timer: _Timer) -> tuple[float, list[int]]:
    """(GB/s, bytes written to each file); at least one chunk, then until done or out of time."""
    block = os.urandom(CHUNK_BYTES)  # incompressible
    sizes = [0] * len(paths)
    start = timer.clock()
    for i, path in enumerate(paths):
        if i and timer.out_of_time():
            break
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            sizes[i] = _write_file(fd, block, per_file, timer)
        finally:
            os.close(fd)
    elapsed = max(timer.clock() - start, 1e-9)
    return sum(sizes) / elapsed / 1e9, sizes


def _write_file(fd: int, block: bytes, size: int, timer: _Timer) -> int:
    written = 0
    while written < size:
        _write_all(fd, block)
        written += len(block)
        if written % FSYNC_EVERY_BYTES == 0:
            os.fsync(fd)
        if timer.out_of_time():
            break
    os.fsync(fd)
    return written


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_files(paths: list[Path], total_bytes: int, timer: _Timer) -> tuple[float, str]:
    evicted = all(_evict(path) for path in paths)
    direct = _direct_flag()
    if direct and _direct_works(paths[0], direct):
        gbs = _timed_read(paths, total_bytes, direct, timer)
        return gbs, (f"O_DIRECT sequential reads of {CHUNK_BYTES // 2**20} MiB into an aligned "
                     "buffer, page cache bypassed")
    gbs = _timed_read(paths, total_bytes, 0, timer)
    if evicted:
        return gbs, ("O_DIRECT not allowed here; files evicted from the page cache with "
                     "posix_fadvise(DONTNEED) after fsync, then read sequentially")
    total_gib = total_bytes / 2**30
    return gbs, (f"page cache NOT bypassed (no O_DIRECT or fadvise on {sys.platform}); the "
                 f"{total_gib:.2f} GiB just written may be read from RAM — a file of twice the "
                 "RAM would be needed for a disk figure")


def _direct_flag() -> int:
    return getattr(os, "O_DIRECT", 0)


def _direct_works(path: Path, flag: int) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | flag)
    except OSError:
        return False
    try:
        buffer = mmap.mmap(-1, _ALIGN)
        try:
            os.readv(fd, [buffer])
        except OSError:
            return False
        finally:
            buffer.close()
    finally:
        os.close(fd)
    return _evict(path)


def _evict(path: Path) -> bool:
    advise = getattr(os, "posix_fadvise", None)
    if advise is None:
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        advise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _timed_read(paths: list[Path], total_bytes: int, flag: int, timer: _Timer) -> float:
    buffer = mmap.mmap(-1, CHUNK_BYTES)  # page-aligned, as O_DIRECT requires
    try:
        start = timer.clock()
        total = 0
        for path in paths:
            fd = os.open(path, os.O_RDONLY | flag)
            try:
                total += _read_all(fd, buffer, timer)
            finally:
                os.close(fd)
        elapsed = max(timer.clock() - start, 1e-9)
    finally:
        with contextlib.suppress(BufferError):
            buffer.close()
    timer.done_bytes = total
    if total < total_bytes and not timer.stopped:
        raise OSError("short read in the storage test")
    return total / elapsed / 1e9


def _read_all(fd: int, buffer: mmap.mmap, timer: _Timer) -> int:
    """Bytes read to the end of the file, or (at least one chunk) until out of time."""
    total = 0
    while True:
        n = os.readv(fd, [buffer])
        if n <= 0:
            return total
        total += n
        if timer.out_of_time():
            return total
