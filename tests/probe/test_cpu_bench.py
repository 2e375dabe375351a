"""CPU-side benchmarks give positive, real figures quickly."""

from __future__ import annotations

import numpy as np
import pytest

from trainrig.probe import cpu_bench
from trainrig.probe.cpu_bench import SimpleTokenizer, collate, synthetic_corpus


def test_synthetic_corpus_is_deterministic_text():
    assert synthetic_corpus(500, seed=1) == synthetic_corpus(500, seed=1)
    assert synthetic_corpus(500, seed=1) != synthetic_corpus(500, seed=2)
    assert len(synthetic_corpus(500).split(" ")) == 500


def test_simple_tokenizer_covers_unseen_words_with_pieces():
    tokenizer = SimpleTokenizer(synthetic_corpus(5000))
    known = tokenizer.encode("katori anmo")
    assert known and all(isinstance(t, int) for t in known)
    unseen = tokenizer.encode(" kakakakakaka")
    assert len(unseen) >= 2  # longer than any vocabulary piece: split greedily


@pytest.mark.parametrize("prefer_rust", [False, True])
def test_tokenize_rate_is_positive(prefer_rust):
    if prefer_rust:
        pytest.importorskip("tokenizers")  # optional: HF tokenizers, used when installed
    rate = cpu_bench.tokenize_rate(0.2, prefer_rust=prefer_rust)
    assert rate.units > 0 and rate.elapsed_s >= 0.2 and rate.rate > 1e4
    encode, description = cpu_bench.make_tokenizer(synthetic_corpus(2000), prefer_rust)
    assert encode("hello world") > 0
    assert ("Hugging Face" in description) is prefer_rust


def test_collate_pads_masks_and_shifts_labels():
    batch = [np.array([5, 6, 7], dtype=np.int32), np.array([8], dtype=np.int32)]
    out = collate(batch)
    assert out["input_ids"].tolist() == [[5, 6, 7], [8, 0, 0]]
    assert out["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert out["labels"].tolist() == [[6, 7, -100], [-100, -100, -100]]
    assert cpu_bench.collate_rate(0.1).rate > 1e5


def test_memcopy_counts_read_plus_write():
    rate = cpu_bench.memcopy_rate(0.1, 16 * 2**20)
    assert rate.units % (2 * 16 * 2**20) == 0 and rate.rate > 1e8


def test_parallel_workers_each_report_a_rate():
    rates = cpu_bench.run_parallel("collate", 2, 0.2, startup_s=0.2)
    assert len(rates) == 2 and all(r.rate > 0 for r in rates)


def test_loading_and_host_memory_benchmarks_end_to_end():
    steps = []
    result = cpu_bench.cpu_loading_bench(0.2, processes=2, advance=lambda: steps.append(1))
    assert result.tokenize_tokens_per_s_per_core > 0 and result.collate_tokens_per_s_all_cores > 0
    assert result.processes == 2 and result.tokenizer and len(steps) == 2
    memory = cpu_bench.host_memory_bench(0.2, 64 * 2**20, processes=2)
    assert memory.copy_gbs_one_core > 0.1 and memory.copy_gbs_all_cores > 0.1
    assert memory.array_bytes == 16 * 2**20 and "read plus written" in memory.method
