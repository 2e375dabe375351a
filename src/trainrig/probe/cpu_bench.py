"""CPU-side benchmarks: data loading (tokenization, collation) and host memory bandwidth.

Each is measured in one process (per core) and in one process per usable CPU at once (all cores),
the way a data loader's worker processes run. Processes start together at an agreed wall-clock time
so that they overlap; each times its own work with `time.perf_counter`.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import re
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from trainrig.probe.results import CpuLoadingResult, HostMemoryResult

__all__ = ["SimpleTokenizer", "synthetic_corpus", "make_tokenizer", "tokenize_rate", "collate_rate",
           "memcopy_rate", "run_parallel", "cpu_loading_bench", "host_memory_bench",
           "WorkerRate", "usable_cpus"]

_SYLLABLES = ("ka", "to", "ri", "an", "mo", "sel", "ter", "vin", "pra", "lu", "dex", "or", "qui",
              "nem", "sta", "be", "gro", "fal", "ith", "un", "pe", "zor", "ma", "cle")
_PUNCT = (".", ",", ";", "!", "?", ":")
SEQ_LEN_TOKENS = 2048
BATCH_SEQUENCES = 16
PAD_ID, IGNORE_INDEX = 0, -100


@dataclass(frozen=True)
class WorkerRate:
    units: float
    elapsed_s: float

    @property
    def rate(self) -> float:
        return self.units / self.elapsed_s if self.elapsed_s > 0 else 0.0


def usable_cpus() -> int:
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


# -- tokenization ---------------------------------------------------------------------------------
def synthetic_corpus(n_words: int = 60_000, seed: int = 0) -> str:
    """Deterministic pseudo-English text: Zipf-distributed words built from syllables."""
    rng = random.Random(seed)
    vocab = ["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(8000)]
    weights = [1.0 / (rank + 1) for rank in range(len(vocab))]
    words = rng.choices(vocab, weights=weights, k=n_words)
    out = []
    for i, word in enumerate(words):
        out.append(word.capitalize() if i % 17 == 0 else word)
        if i % 13 == 12:
            out[-1] += rng.choice(_PUNCT)
    return " ".join(out)


class SimpleTokenizer:
    """A word-piece tokenizer in plain Python: regex pre-tokenization, whole-word lookup, then
    greedy longest-match pieces. It does the same kind of per-character work as the Python side of
    a tokenizer; Rust tokenizers (Hugging Face `tokenizers`) are several times faster per core."""

    _SPLIT = re.compile(r" ?\w+| ?[^\w\s]+|\s+")

    def __init__(self, corpus: str, vocab_size: int = 6000, max_piece: int = 8) -> None:
        counts: dict[str, int] = {}
        for piece in self._SPLIT.findall(corpus):
            counts[piece] = counts.get(piece, 0) + 1
        words = sorted(counts, key=counts.get, reverse=True)[: vocab_size // 2]
        pieces = {w[i:j] for w in words for i in range(len(w)) for j in range(i + 1, len(w) + 1)
                  if j - i <= max_piece}
        self.vocab = {p: i for i, p in enumerate(sorted(set(words) | pieces))}
        self.max_piece = max_piece

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        vocab = self.vocab
        for word in self._SPLIT.findall(text):
            token = vocab.get(word)
            if token is not None:
                ids.append(token)
            else:
                ids.extend(self._pieces(word))
        return ids

    def _pieces(self, word: str) -> list[int]:
        ids, start = [], 0
        while start < len(word):
            for end in range(min(len(word), start + self.max_piece), start, -1):
                token = self.vocab.get(word[start:end])
                if token is not None:
                    ids.append(token)
                    start = end
                    break
            else:
                ids.append(0)  # unknown character
                start += 1
        return ids


def make_tokenizer(corpus: str, prefer_rust: bool = True) -> tuple[Callable[[str], int], str]:
    """(encode → token count, description): Hugging Face `tokenizers` BPE when installed, which is
    what real pipelines run; otherwise `SimpleTokenizer`."""
    if prefer_rust:
        try:
            return _hf_tokenizer(corpus)
        except ImportError:
            pass
    tokenizer = SimpleTokenizer(corpus)
    return (lambda text: len(tokenizer.encode(text))), tokenizer_description(prefer_rust=False)


def _hf_tokenizer(corpus: str) -> tuple[Callable[[str], int], str]:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=8000, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(_documents(corpus), trainer)
    return (lambda text: len(tokenizer.encode(text).ids)), tokenizer_description()


def _documents(corpus: str, words_per_document: int = 400) -> list[str]:
    words = corpus.split(" ")
    step = words_per_document
    return [" ".join(words[i:i + step]) for i in range(0, len(words) - step, step)]


def tokenize_rate(duration_s: float, seed: int = 0, prefer_rust: bool = True) -> WorkerRate:
    """Tokens per second on synthetic documents of ~400 words (see `make_tokenizer`)."""
    corpus = synthetic_corpus(seed=seed)
    encode, _ = make_tokenizer(corpus, prefer_rust)
    documents = _documents(corpus)
    tokens, i = 0, 0
    start = time.perf_counter()
    while True:
        tokens += encode(documents[i % len(documents)])
        i += 1
        elapsed = time.perf_counter() - start
        if elapsed >= duration_s:
            return WorkerRate(tokens, elapsed)


def tokenizer_description(prefer_rust: bool = True) -> str:
    """What `make_tokenizer` will use, without training one."""
    if prefer_rust:
        try:
            import tokenizers
        except ImportError:
            pass
        else:
            return (f"Hugging Face tokenizers {tokenizers.__version__}: byte-level BPE, 8k "
                    "vocabulary trained on the synthetic text, one document per encode() call")
    return ("trainrig SimpleTokenizer (pure-Python word-piece with whole-word lookup; install "
            "`tokenizers` for the Rust BPE that real pipelines use)")


# -- collation ------------------------------------------------------------------------------------
def _samples(seed: int, n: int = 256) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(SEQ_LEN_TOKENS // 4, SEQ_LEN_TOKENS + 1, size=n)
    return [rng.integers(1, 50_000, size=int(length), dtype=np.int32) for length in lengths]


def collate(batch: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Pad a batch to its longest sample; attention mask; labels shifted with ignore-index."""
    longest = max(len(s) for s in batch)
    input_ids = np.full((len(batch), longest), PAD_ID, dtype=np.int64)
    mask = np.zeros((len(batch), longest), dtype=np.int64)
    for row, sample in enumerate(batch):
        input_ids[row, : len(sample)] = sample
        mask[row, : len(sample)] = 1
    labels = np.where(mask == 1, input_ids, IGNORE_INDEX)
    labels[:, :-1] = labels[:, 1:].copy()
    labels[:, -1] = IGNORE_INDEX
    return {"input_ids": input_ids, "attention_mask": mask, "labels": labels}


def collate_rate(duration_s: float, seed: int = 0) -> WorkerRate:
    """Real (non-pad) tokens per second collated into batches of 16 × up to 2048 tokens."""
    samples = _samples(seed)
    tokens, i = 0, 0
    start = time.perf_counter()
    while True:
        batch = [samples[(i + j) % len(samples)] for j in range(BATCH_SEQUENCES)]
        out = collate(batch)
        tokens += int(out["attention_mask"].sum())
        i += BATCH_SEQUENCES
        elapsed = time.perf_counter() - start
        if elapsed >= duration_s:
            return WorkerRate(tokens, elapsed)


# -- host memory --------------------------------------------------------------------------------
def memcopy_rate(duration_s: float, array_bytes: int) -> WorkerRate:
    """Bytes read plus written per second copying one array into another (STREAM 'copy')."""
    src = np.ones(array_bytes // 8, dtype=np.float64)  # touched: pages are really allocated
    dst = np.zeros_like(src)
    np.copyto(dst, src)  # warm-up, and first touch of dst
    copies = 0
    start = time.perf_counter()
    while True:
        np.copyto(dst, src)
        copies += 1
        elapsed = time.perf_counter() - start
        if elapsed >= duration_s:
            return WorkerRate(2.0 * src.nbytes * copies, elapsed)


# -- parallel runner ----------------------------------------------------------------------------
def _worker(kind: str, duration_s: float, start_at: float, seed: int, array_bytes: int) -> WorkerRate:
    # Wait for the common start so that all workers overlap; each builds its inputs after.
    delay = start_at - time.time()
    if delay > 0:
        time.sleep(delay)
    if kind == "tokenize":
        return tokenize_rate(duration_s, seed)
    if kind == "collate":
        return collate_rate(duration_s, seed)
    return memcopy_rate(duration_s, array_bytes)


def _context() -> mp.context.BaseContext:
    """fork (fast) unless this process has initialised CUDA, which a forked child cannot use."""
    torch = sys.modules.get("torch")
    cuda_started = torch is not None and torch.cuda.is_initialized()
    if "fork" in mp.get_all_start_methods() and not cuda_started:
        return mp.get_context("fork")
    return mp.get_context("spawn")


def run_parallel(kind: str, processes: int, duration_s: float, array_bytes: int = 0,
                 startup_s: float | None = None) -> list[WorkerRate]:
    """Run one benchmark kind in `processes` worker processes at once; each worker's rate."""
    context = _context()
    if startup_s is None:
        startup_s = 0.3 + 0.02 * processes + (1.5 if context.get_start_method() == "spawn" else 0)
    start_at = time.time() + startup_s
    with ProcessPoolExecutor(max_workers=processes, mp_context=context) as pool:
        futures = [pool.submit(_worker, kind, duration_s, start_at, seed, array_bytes)
                   for seed in range(processes)]
        return [f.result() for f in futures]


def _per_core_and_all(kind: str, duration_s: float, processes: int,
                      array_bytes: int = 0) -> tuple[float, float]:
    one = run_parallel(kind, 1, duration_s, array_bytes)[0].rate
    if processes == 1:
        return one, one
    return one, sum(r.rate for r in run_parallel(kind, processes, duration_s, array_bytes))


def cpu_loading_bench(duration_s: float, processes: int | None = None,
                      advance: Callable[[], None] = lambda: None) -> CpuLoadingResult:
    """Tokenization and collation rates, one core and all usable cores."""
    n = processes or usable_cpus()
    tok_one, tok_all = _per_core_and_all("tokenize", duration_s, n)
    advance()
    col_one, col_all = _per_core_and_all("collate", duration_s, n)
    advance()
    return CpuLoadingResult(
        tokenize_tokens_per_s_per_core=tok_one,
        tokenize_tokens_per_s_all_cores=tok_all,
        collate_tokens_per_s_per_core=col_one,
        collate_tokens_per_s_all_cores=col_all,
        processes=n,
        tokenizer=tokenizer_description(),
        method=(
            f"{duration_s:g} s per run; one worker process, then {n} at once (one per usable CPU), "
            "started together; tokenization of synthetic ~400-word documents; collation of "
            f"{BATCH_SEQUENCES} samples of 512–{SEQ_LEN_TOKENS} tokens into padded input_ids, "
            "attention_mask and shifted labels (numpy); rates count real tokens"
        ),
    )


def host_memory_bench(duration_s: float, total_bytes: int, processes: int | None = None,
                      advance: Callable[[], None] = lambda: None) -> HostMemoryResult:
    """STREAM-like copy bandwidth: one core, and every usable core each copying its own arrays."""
    n = processes or usable_cpus()
    array_bytes = max(16 * 2**20, min(256 * 2**20, total_bytes // (2 * n)))
    one = run_parallel("memcopy", 1, duration_s, array_bytes)[0].rate
    advance()
    every = one if n == 1 else sum(w.rate for w in run_parallel("memcopy", n, duration_s,
                                                                array_bytes))
    advance()
    return HostMemoryResult(
        copy_gbs_one_core=one / 1e9,
        copy_gbs_all_cores=every / 1e9,
        processes=n,
        array_bytes=array_bytes,
        method=(
            f"numpy copyto of {array_bytes / 2**20:.0f} MiB float64 arrays per process for "
            f"{duration_s:g} s; bytes read plus written (STREAM 'copy' convention: the extra "
            f"read of write-allocate is not counted); 1 process, then {n} at once, each on "
            "its own first-touched arrays"
        ),
    )
