"""Storage: fsync'd writes and cache-bypassing reads, and how the cache was handled."""

from __future__ import annotations

import os
from collections import namedtuple

import pytest

from trainrig.probe import storage_bench
from trainrig.probe.storage_bench import CHUNK_BYTES, plan_size


def test_plan_size_leaves_free_space_and_whole_chunks():
    assert plan_size(256 * 2**20, None) == 256 * 2**20
    assert plan_size(256 * 2**20, 100 * 2**20) == 24 * 2**20
    assert plan_size(10 * 2**20, None) % CHUNK_BYTES == 0


def test_storage_bench_measures_and_cleans_up(tmp_path):
    steps = []
    result = storage_bench.storage_bench(tmp_path, 32 * 2**20, files=2,
                                         advance=lambda: steps.append(1))
    assert result.read_gbs > 0 and result.write_gbs > 0 and len(steps) == 2
    assert result.files == 2 and result.file_bytes == 16 * 2**20
    assert "fsync" in result.write_method
    assert "O_DIRECT" in result.read_method or "fadvise" in result.read_method
    assert list(tmp_path.iterdir()) == []  # shard files removed


def test_without_o_direct_it_says_the_cache_was_dropped(tmp_path, monkeypatch):
    monkeypatch.setattr(storage_bench, "_direct_flag", lambda: 0)
    result = storage_bench.storage_bench(tmp_path, 16 * 2**20, files=2)
    assert "posix_fadvise(DONTNEED)" in result.read_method and result.read_gbs > 0


def test_without_any_cache_control_it_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(storage_bench, "_direct_flag", lambda: 0)
    monkeypatch.delattr(os, "posix_fadvise")
    result = storage_bench.storage_bench(tmp_path, 16 * 2**20, files=2)
    assert "NOT bypassed" in result.read_method and "twice the RAM" in result.read_method


def test_too_little_space_is_an_error(tmp_path, monkeypatch):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(storage_bench.shutil, "disk_usage", lambda _: usage(1, 1, 2**20))
    with pytest.raises(OSError, match="not enough free space"):
        storage_bench.storage_bench(tmp_path, 32 * 2**20)


class _Ticks:
    """A fake clock: one second more at every reading, whatever the machine's speed."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_the_time_limit_stops_writing_and_reading_early(tmp_path):
    clock = _Ticks()
    result = storage_bench.storage_bench(tmp_path, 64 * CHUNK_BYTES, files=4,
                                         deadline_s=8.0, clock=clock)
    assert result.files * result.file_bytes < 64 * CHUNK_BYTES  # not all of the plan
    assert "stopped at the time limit" in result.write_method
    assert "stopped at the time limit" in result.read_method
    assert result.read_gbs > 0 and result.write_gbs > 0
    assert clock.now <= 14  # a handful of readings past the deadline, not one per chunk
    assert list(tmp_path.iterdir()) == []


def test_without_a_deadline_everything_planned_is_written(tmp_path):
    result = storage_bench.storage_bench(tmp_path, 4 * CHUNK_BYTES, files=2, clock=_Ticks())
    assert result.files == 2 and result.file_bytes == 2 * CHUNK_BYTES
    assert "stopped" not in result.write_method + result.read_method
