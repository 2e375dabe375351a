"""Elementwise operations on a number or an array of numbers: the model core's numpy vocabulary.

The planner runs the core on arrays of configurations, one estimate on single numbers. A numpy
call on single numbers costs about 1 µs of dispatch against ~0.05 µs for the same expression on
floats, and most of a single estimate is such calls: each function here takes the float path
when no argument is an array, numpy's otherwise, with numpy's semantics on both (NaN propagates
through `maximum` and `minimum`, `fmin` skips it, `nan_to_num` maps ±inf to the largest finite
float). A single estimate's numbers enter the core as Python floats, whose arithmetic costs a
third of np.float64's; where one divides by zero (a branch `where` discards, such as an MoE term
of a dense model) Python raises instead of giving inf or NaN, and the estimate evaluates again on
`np.float64`, which gives the same numbers (estimator.py). Every function here keeps the type it
is given, so both paths stay on their own kind of number.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["where", "maximum", "minimum", "fmin", "any", "all", "logical_not", "ceil", "floor", "log2", "isfinite",
           "nan_to_num", "divide", "total", "distinct_values"]

_ARRAY = np.ndarray
_LARGEST = np.finfo(np.float64).max


def where(condition: Any, if_true: Any, if_false: Any) -> Any:
    """np.where: `if_true` where `condition` holds, else `if_false`. A single condition picks one
    side as it is (a number or an array: the same values as np.where's broadcast of it)."""
    if type(condition) is _ARRAY:
        return np.where(condition, if_true, if_false)
    return if_true if condition else if_false


def maximum(a: Any, b: Any) -> Any:
    """np.maximum: the larger, NaN if either is NaN."""
    if type(a) is _ARRAY or type(b) is _ARRAY:
        return np.maximum(a, b)
    return a if (a >= b or a != a) else b


def minimum(a: Any, b: Any) -> Any:
    """np.minimum: the smaller, NaN if either is NaN."""
    if type(a) is _ARRAY or type(b) is _ARRAY:
        return np.minimum(a, b)
    return a if (a <= b or a != a) else b


def fmin(a: Any, b: Any) -> Any:
    """np.fmin: the smaller, ignoring a NaN (unknown) side."""
    if type(a) is _ARRAY or type(b) is _ARRAY:
        return np.fmin(a, b)
    if a != a:
        return b
    return a if (b != b or a <= b) else b


def any(value: Any) -> bool:  # noqa: A001 - numpy's name, as the core read before
    """np.any: whether any element holds."""
    return bool(value.any()) if type(value) is _ARRAY else bool(value)


def all(value: Any) -> bool:  # noqa: A001
    """np.all: whether every element holds."""
    return bool(value.all()) if type(value) is _ARRAY else bool(value)


def logical_not(value: Any) -> Any:
    """np.logical_not. Python's `~` on a single condition (a bool) is bitwise: ~True is -2, which
    is true."""
    return np.logical_not(value) if type(value) is _ARRAY else not value


def ceil(value: Any) -> Any:
    """np.ceil (±inf and NaN unchanged)."""
    if type(value) is _ARRAY:
        return np.ceil(value)
    return type(value)(math.ceil(value)) if math.isfinite(value) else value


def floor(value: Any) -> Any:
    """np.floor (±inf and NaN unchanged)."""
    if type(value) is _ARRAY:
        return np.floor(value)
    return type(value)(math.floor(value)) if math.isfinite(value) else value


def log2(value: Any) -> Any:
    """np.log2 of a positive value."""
    return np.log2(value) if type(value) is _ARRAY else type(value)(math.log2(value))


def isfinite(value: Any) -> Any:
    """np.isfinite."""
    return np.isfinite(value) if type(value) is _ARRAY else math.isfinite(value)


def nan_to_num(value: Any, nan: float = 0.0) -> Any:
    """np.nan_to_num: NaN → `nan`, ±inf → ± the largest finite float."""
    if type(value) is _ARRAY:  # np.nan_to_num's own checks cost more than these ufuncs
        return np.where(value != value, nan, np.minimum(np.maximum(value, -_LARGEST), _LARGEST))
    if value != value:
        return nan
    if math.isinf(value):
        return _LARGEST if value > 0 else -_LARGEST
    return value


def divide(numerator: Any, denominator: Any, default: float) -> Any:
    """numerator / denominator where the denominator is positive, `default` elsewhere."""
    if type(numerator) is _ARRAY or type(denominator) is _ARRAY:
        positive = denominator > 0
        return np.where(positive, numerator / np.where(positive, denominator, 1.0), default)
    return numerator / denominator if denominator > 0 else default


def total(values: Any) -> Any:
    """sum(values), leaving out single numbers that are exactly zero: adding one changes no element,
    and against an array it would cost a numpy call. 0.0 when nothing is left."""
    result = None
    for value in values:
        if type(value) is not _ARRAY and value == 0:
            continue
        result = value if result is None else result + value
    return 0.0 if result is None else result


def distinct_values(value: Any) -> set[float]:
    """The set of values an array (or a number) takes."""
    return set(np.unique(value).tolist()) if type(value) is _ARRAY else {float(value)}
