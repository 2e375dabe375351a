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
                  advance: Callable[[], None] = lambda: None) -> StorageResult:
    """Write `files` shards totalling `total_bytes` with fsync, evict them, read them back."""
    directory = Path(directory)
    disk = disk_for_path(directory)
    size = plan_size(total_bytes, shutil.disk_usage(directory).free)
    if size < CHUNK_BYTES * files:
        raise OSError(f"not enough free space in {directory} for a storage test")
    per_file = size // files // CHUNK_BYTES * CHUNK_BYTES
    workdir = Path(tempfile.mkdtemp(prefix=".trainrig-probe-", dir=directory))
    try:
        paths = [workdir / f"shard-{i:03d}.bin" for i in range(files)]
        write_gbs = _write_files(paths, per_file)
        advance()
        read_gbs, read_method = _read_files(paths, per_file)
        advance()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return StorageResult(
        path=str(directory),
        filesystem=disk.fstype if disk else None,
        device_kind=disk.kind if disk else None,
        files=files,
        file_bytes=per_file,
        write_gbs=write_gbs,
        read_gbs=read_gbs,
        write_method=(
            f"{files} new files of {per_file / 2**20:.0f} MiB written in "
            f"{CHUNK_BYTES // 2**20} MiB requests, fsync per file, time includes fsync"
        ),
        read_method=read_method + _memory_note(disk.kind if disk else None),
    )


def _memory_note(kind: str | None) -> str:
    if kind == "memory":
        return " (a RAM-backed filesystem: these are memory speeds, not a disk's)"
    if kind == "network":
        return " (a network filesystem: the figure includes the network and the server)"
    return ""


def _write_files(paths: list[Path], per_file: int) -> float:
    block = os.urandom(CHUNK_BYTES)  # incompressible
    start = time.perf_counter()
    for path in paths:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            for _ in range(per_file // CHUNK_BYTES):
                _write_all(fd, block)
            os.fsync(fd)
        finally:
            os.close(fd)
    elapsed = time.perf_counter() - start
    return len(paths) * per_file / elapsed / 1e9


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_files(paths: list[Path], per_file: int) -> tuple[float, str]:
    evicted = all(_evict(path) for path in paths)
    direct = _direct_flag()
    if direct and _direct_works(paths[0], direct):
        gbs = _timed_read(paths, per_file, direct)
        return gbs, (f"O_DIRECT sequential reads of {CHUNK_BYTES // 2**20} MiB into an aligned "
                     "buffer, page cache bypassed")
    gbs = _timed_read(paths, per_file, 0)
    if evicted:
        return gbs, ("O_DIRECT not allowed here; files evicted from the page cache with "
                     "posix_fadvise(DONTNEED) after fsync, then read sequentially")
    total_gib = len(paths) * per_file / 2**30
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


def _timed_read(paths: list[Path], per_file: int, flag: int) -> float:
    buffer = mmap.mmap(-1, CHUNK_BYTES)  # page-aligned, as O_DIRECT requires
    try:
        start = time.perf_counter()
        total = 0
        for path in paths:
            fd = os.open(path, os.O_RDONLY | flag)
            try:
                total += _read_all(fd, buffer)
            finally:
                os.close(fd)
        elapsed = time.perf_counter() - start
    finally:
        with contextlib.suppress(BufferError):
            buffer.close()
    if total < len(paths) * per_file:
        raise OSError("short read in the storage test")
    return total / elapsed / 1e9


def _read_all(fd: int, buffer: mmap.mmap) -> int:
    total = 0
    while True:
        n = os.readv(fd, [buffer])
        if n <= 0:
            return total
        total += n
