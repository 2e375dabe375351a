"""The layouts the planner considers for one GPU count: parallelism, batch split and memory savers.

A layout is valid when the job rules accept it (specs/job.py: tp·pp·cp divides the GPUs, tp divides
the heads and suits the key/value heads, pp·vpp divides the layers, cp divides the sequence, ep
divides the experts and dp·cp, the global batch splits into whole micro-batches). On top of those
rules the search space makes a few choices, listed in `SearchSpace` and docs/planner.md: tensor
parallelism stays inside a node, degrees are powers of two, and combinations frameworks do not run
(ZeRO-2/3 with pipeline parallelism, interleaving with a micro-batch count that is not a multiple
of pp) are left out. Everything here is arithmetic on integers; the result is arrays, one row per
layout, cached per (model shape, GPU count, node size, batch choices).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from functools import lru_cache
from itertools import product
from typing import Any

import numpy as np

from trainrig.estimate.job_fields import RECOMPUTE_CODE
from trainrig.specs import ModelSpec

__all__ = ["SearchSpace", "Layouts", "ModelShape", "enumerate_layouts", "RECOMPUTE_NAMES"]

RECOMPUTE_NAMES = {code: name for name, code in RECOMPUTE_CODE.items()}


@dataclass(frozen=True)
class SearchSpace:
    """The choices the planner tries for every GPU count (see docs/planner.md)."""

    micro_batches: tuple[int, ...] = (1, 2, 4, 8)
    zero_stages: tuple[int, ...] = (0, 1, 2, 3)
    recompute: tuple[str, ...] = ("none", "selective", "full")
    sequence_parallel: tuple[bool, ...] = (False, True)
    tp_comm_overlap: tuple[bool, ...] = (True,)
    """Overlap of TP collectives with GEMMs, tried where tp > 1 with sequence parallelism (which both
    Megatron-Core's `--tp-comm-overlap` and torchtitan's async TP need); off everywhere else."""
    vpp: tuple[int, ...] = (1, 2, 4)
    max_cp: int = 8
    """Context parallelism up to this degree, and only while each rank keeps ≥ min_tokens_per_cp_rank."""
    min_tokens_per_cp_rank: int = 2048
    max_ep: int = 64
    tensor_parallel: bool = True
    """Whether tp (and sequence parallelism) > 1 is tried: off for stacks without it."""
    pipeline_parallel: bool = True
    """Whether pp > 1 is tried: off for stacks without it."""


@dataclass(frozen=True)
class ModelShape:
    """What of a model decides which layouts are valid."""

    n_layers: int
    n_heads: int
    kv_heads: int
    n_experts: int
    mamba_groups: int = 0
    """A hybrid's Mamba-2 groups, which TP must divide (0, which every tp divides, without Mamba layers)."""

    @classmethod
    def of(cls, model: ModelSpec) -> ModelShape:
        groups = model.mamba_groups if model.n_mamba_layers else 0
        return cls(model.n_layers, model.n_heads, model.kv_heads, model.n_experts, groups)


@dataclass(frozen=True)
class Layouts:
    """Layout fields as integer arrays, one row per configuration (recompute as its code 0/1/2)."""

    tp: np.ndarray
    pp: np.ndarray
    cp: np.ndarray
    ep: np.ndarray
    dp: np.ndarray
    vpp: np.ndarray
    micro_batch: np.ndarray
    global_batch: np.ndarray
    zero: np.ndarray
    recompute: np.ndarray
    sequence_parallel: np.ndarray
    tp_comm_overlap: np.ndarray

    def __len__(self) -> int:
        return len(self.tp)

    def take(self, index) -> Layouts:
        return Layouts(**{f.name: getattr(self, f.name)[index] for f in fields(self)})

    def as_floats(self) -> dict[str, np.ndarray]:
        """The arrays as `Inputs` fields take them."""
        return {f.name: getattr(self, f.name).astype(float) for f in fields(self)}

    def training_fields(self, i: int) -> dict[str, Any]:
        """Row i as job-file `training` fields."""
        row = {f.name: int(getattr(self, f.name)[i]) for f in fields(self)}
        row["recompute"] = RECOMPUTE_NAMES[float(row["recompute"])]
        row["sequence_parallel"] = bool(row["sequence_parallel"])
        row["tp_comm_overlap"] = bool(row["tp_comm_overlap"])
        return row

    @staticmethod
    def concatenate(parts: list[Layouts]) -> Layouts:
        return Layouts(**{f.name: np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(Layouts)})


def enumerate_layouts(model: ModelSpec, n_gpus: int, gpus_per_node: int, seq_len: int,
                      global_batches: tuple[int, ...], space: SearchSpace) -> Layouts:
    """Every layout of `space` the job rules accept on `n_gpus` GPUs (nodes of `gpus_per_node`)."""
    return _layouts(ModelShape.of(model), n_gpus, min(gpus_per_node, n_gpus), seq_len, tuple(global_batches), space)


@lru_cache(maxsize=4096)
def _layouts(shape: ModelShape, n_gpus: int, gpus_in_node: int, seq_len: int,
             global_batches: tuple[int, ...], space: SearchSpace) -> Layouts:
    coarse = np.array(_coarse_rows(shape, n_gpus, gpus_in_node, seq_len, global_batches, space), dtype=np.int64)
    return _with_memory_savers(coarse.reshape(-1, 8), space)


def _coarse_rows(shape, n_gpus, gpus_in_node, seq_len, global_batches, space) -> list[tuple[int, ...]]:
    """(tp, pp, cp, ep, dp, vpp, micro_batch, global_batch) rows that the job rules accept."""
    rows = []
    tps = _tp_values(shape, gpus_in_node) if space.tensor_parallel else [1]
    pps = _pipeline_sizes(shape.n_layers) if space.pipeline_parallel else [1]
    for tp, cp, pp in product(tps, _cp_values(seq_len, space), pps):
        if n_gpus % (tp * cp * pp):
            continue
        dp = n_gpus // (tp * cp * pp)
        for vpp, ep in product(_vpp_values(shape, pp, space), _ep_values(shape, dp * cp, space)):
            rows.extend((tp, pp, cp, ep, dp, vpp, mb, gb) for gb, mb in product(global_batches, space.micro_batches)
                        if _batch_splits(gb, mb, dp, pp, vpp))
    return rows


def _batch_splits(global_batch: int, micro_batch: int, dp: int, pp: int, vpp: int) -> bool:
    """Whole micro-batches per rank; interleaving also needs their count to be a multiple of pp
    (Megatron-LM's interleaved schedule asserts it)."""
    if global_batch % (micro_batch * dp):
        return False
    return vpp == 1 or (global_batch // (micro_batch * dp)) % pp == 0


def _tp_values(shape: ModelShape, gpus_in_node: int) -> list[int]:
    """Powers of two inside one node that divide the heads (and a hybrid's Mamba groups) and divide or
    are divided by the KV heads."""
    return [tp for tp in _powers_of_two(gpus_in_node)
            if shape.n_heads % tp == 0 and (shape.kv_heads % tp == 0 or tp % shape.kv_heads == 0)
            and shape.mamba_groups % tp == 0]


def _cp_values(seq_len: int, space: SearchSpace) -> list[int]:
    return [cp for cp in _powers_of_two(space.max_cp)
            if seq_len % cp == 0 and (cp == 1 or seq_len // cp >= space.min_tokens_per_cp_rank)]


def _vpp_values(shape: ModelShape, pp: int, space: SearchSpace) -> list[int]:
    return [v for v in space.vpp if (v == 1 or pp > 1) and shape.n_layers % (pp * v) == 0]


def _ep_values(shape: ModelShape, dp_cp: int, space: SearchSpace) -> list[int]:
    if shape.n_experts == 0:
        return [1]
    return [ep for ep in _powers_of_two(space.max_ep) if shape.n_experts % ep == 0 and dp_cp % ep == 0]


def _pipeline_sizes(n_layers: int) -> list[int]:
    """Stage counts tried: those that split the layers evenly, and the powers of two up to the layer
    count, which real runs use unevenly (Llama 3 405B: 126 layers on 16 stages; Dubey et al. 2024,
    "The Llama 3 Herd of Models")."""
    return sorted(set(_divisors(n_layers)) | set(_powers_of_two(n_layers)))


def _divisors(n: int) -> list[int]:
    """In O(√n): each divisor d ≤ √n brings its pair n // d."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small) | {n // d for d in small})


def _powers_of_two(limit: int) -> list[int]:
    return [2**k for k in range(int(limit).bit_length()) if 2**k <= limit]


def _with_memory_savers(coarse: np.ndarray, space: SearchSpace) -> Layouts:
    """Each coarse row × the ZeRO stages, recompute modes, sequence-parallel and TP-overlap flags that
    apply: ZeRO only with data parallelism to shard over (stage 0 otherwise) and at most stage 1 with
    pipeline parallelism; sequence parallelism only with tp > 1 (off, once, otherwise); TP overlap
    only with sequence parallelism (off, once, otherwise)."""
    savers = np.array(list(product(space.zero_stages, [RECOMPUTE_CODE[r] for r in space.recompute],
                                   [int(s) for s in space.sequence_parallel],
                                   [int(o) for o in space.tp_comm_overlap])), dtype=np.int64).reshape(-1, 4)
    rows = np.repeat(coarse, len(savers), axis=0)
    saver = np.tile(savers, (len(coarse), 1))
    tp, pp, cp, dp = rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 4]
    zero, sp, overlap = saver[:, 0], saver[:, 2], saver[:, 3]
    keep = np.where(dp * cp > 1, (pp == 1) | (zero <= 1), zero == min(space.zero_stages))
    keep &= (tp > 1) | (sp == savers[0, 2])
    keep &= ((tp > 1) & (sp > 0)) | (overlap == savers[0, 3])
    rows, saver = rows[keep], saver[keep]
    sequence_parallel = saver[:, 2] * (rows[:, 0] > 1)
    return Layouts(tp=rows[:, 0], pp=rows[:, 1], cp=rows[:, 2], ep=rows[:, 3], dp=rows[:, 4], vpp=rows[:, 5],
                   micro_batch=rows[:, 6], global_batch=rows[:, 7], zero=saver[:, 0], recompute=saver[:, 1],
                   sequence_parallel=sequence_parallel, tp_comm_overlap=saver[:, 3] * sequence_parallel)
