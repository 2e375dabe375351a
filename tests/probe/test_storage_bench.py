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
