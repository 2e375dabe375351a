"""Compute a term once per distinct configuration and gather it back to every row.

A planner search evaluates hundreds of thousands of rows, but the GPU time of one micro-batch
depends on few of their fields (the GPU, tp, pp, cp, ep, micro-batch, recompute): rows that differ
only in dp, ZeRO stage, global batch or links share it exactly. `per_distinct_row` finds the
distinct rows over the fields a term reads, evaluates the term on those, and indexes the answers
back — the values are bitwise those of evaluating every row, at a fraction of the cost.

Rows are keyed by a 64-bit hash of their fields' bit patterns, then checked field by field against
their representative, so a hash collision can never merge two different rows (it only turns the
shortcut off).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any

import numpy as np

from trainrig.estimate.inputs import Inputs

__all__ = ["per_distinct_row", "MIN_ROWS"]

MIN_ROWS = 64
"""Below this many rows a term is evaluated directly: finding the distinct rows would cost more."""
_MAX_DISTINCT_SHARE = 0.5
"""Above this share of distinct rows the shortcut saves too little to pay for the gather."""
_FIELD_NAMES = tuple(f.name for f in fields(Inputs))
# splitmix64's finalizer (Steele, Lea & Flood 2014, "Fast splittable pseudorandom number generators"):
# every input bit reaches every output bit, so keys that differ only in a float's exponent still spread
_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)  # 2^64 / golden ratio: odd, so no two keys merge before the mix
_MIX = (np.uint64(30), np.uint64(0xBF58476D1CE4E5B9), np.uint64(27), np.uint64(0x94D049BB133111EB), np.uint64(31))


def per_distinct_row(term: Callable[[Inputs], dict[str, Any]], x: Inputs, ignored: frozenset[str]) -> dict[str, Any]:
    """`term(x)`, evaluated once per distinct row of `x` over the fields not in `ignored`.

    `ignored` names fields `term` never reads; tests check each name against the term (changing
    an ignored field must leave the term's values unchanged).
    """
    found = _distinct(x, ignored)
    if found is None:
        return term(x)
    first, inverse = found
    values = term(_take_rows(x, first))
    return {name: _gather(value, inverse) for name, value in values.items()}


def _distinct(x: Inputs, ignored: frozenset[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """(index of each distinct row's first occurrence, each row's distinct row), or None."""
    if _n_rows(x) < MIN_ROWS:
        return None
    columns = [getattr(x, name) for name in _FIELD_NAMES if name not in ignored]
    columns = [np.asarray(c, dtype=float) for c in columns if np.ndim(c)]
    if not columns:
        return None
    key = np.zeros(len(columns[0]), dtype=np.uint64)
    for column in columns:
        key = _mix(key * _MULTIPLIER + column.view(np.uint64))  # wraps modulo 2^64, as intended
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    if len(first) > _MAX_DISTINCT_SHARE * len(key):
        return None
    representative = first[inverse]
    if not all(np.array_equal(c, c[representative], equal_nan=True) for c in columns):
        return None  # a hash collision: evaluate every row rather than risk merging two
    return first, inverse


def _n_rows(x: Inputs) -> int:
    """Rows of `x`: the length of its first array field (they all broadcast to one length), or 1."""
    array = np.ndarray
    for value in vars(x).values():  # a type check per field: this runs on every estimate
        if type(value) is array and value.ndim:
            return len(value)
    return 1


def _mix(z: np.ndarray) -> np.ndarray:
    shift1, multiplier1, shift2, multiplier2, shift3 = _MIX
    z = (z ^ (z >> shift1)) * multiplier1
    z = (z ^ (z >> shift2)) * multiplier2
    return z ^ (z >> shift3)


def _take_rows(x: Inputs, index: np.ndarray) -> Inputs:
    return Inputs(**{name: _take(getattr(x, name), index) for name in _FIELD_NAMES})


def _take(value: Any, index: np.ndarray) -> Any:
    return value[index] if np.ndim(value) else value


def _gather(value: Any, inverse: np.ndarray) -> Any:
    if isinstance(value, tuple):
        return tuple(_gather(v, inverse) for v in value)
    return value[inverse] if np.ndim(value) else value
