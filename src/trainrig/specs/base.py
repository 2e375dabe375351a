"""The base of every spec: frozen, strict about unknown fields, numbers finite and never booleans.

The bounds below are the one validation layer the CLI, the Python API and the web share: every
spec field uses them, and `check_number` applies the same rules to a value that is not a spec
field (a `--price`, a plan's deadline). They are generous on purpose, far past any model or
cluster built so far, and exist so that no input can make a request run for ever or a figure
overflow a float.
"""

from __future__ import annotations

import math
import types
import typing
from functools import cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from trainrig.errors import TrainrigError

__all__ = ["FrozenSpec", "CatalogEntry", "check_number", "divisors_text", "MAX_LAYERS", "MAX_WIDTH", "MAX_HEADS",
           "MAX_VOCAB", "MAX_EXPERTS", "MAX_GPUS", "MAX_SEQ_LEN", "MAX_BATCH", "MAX_TOKENS", "MAX_FIGURE"]

# Largest published models: ~126 layers, width ~25k, FFN ~100k, 256k vocabulary, 384 experts, 128
# heads; largest clusters ~1e5 GPUs; longest contexts ~1e7 tokens; largest runs ~4e13 tokens.
MAX_LAYERS = 1_000_000
"""Transformer blocks (layers, dense layers, pipeline chunks)."""
MAX_WIDTH = 10_000_000
"""Any width: hidden, FFN, expert FFN, head dim, LoRA rank."""
MAX_HEADS = 1_000_000
"""Attention heads (query or key/value)."""
MAX_VOCAB = 100_000_000
"""Vocabulary entries."""
MAX_EXPERTS = 100_000
"""Experts per MoE layer (routed, shared, or used per token)."""
MAX_GPUS = 10_000_000
"""GPUs, and so any parallel degree, GPUs per node, ports or cores."""
MAX_SEQ_LEN = 1_000_000_000
"""Tokens per sequence, position table or attention window."""
MAX_BATCH = 1_000_000_000
"""Sequences per step or per micro-batch, micro-batches per step, steps between checkpoints."""
MAX_TOKENS = 1e18
"""Training tokens (about 25 000 times the largest run published)."""
MAX_FIGURE = 1e12
"""Any measured or datasheet figure: a rate, a capacity, a latency, a price, a clock."""

NUMBER_TYPES = (int, float)


class FrozenSpec(BaseModel):
    """Immutable and hashable; an unknown key is an error, not silently ignored.

    Every float must be finite (no inf or NaN: they would turn every result into inf or NaN and
    `--json` into invalid JSON), and a boolean is never read as a number (YAML's `true` is 1 to
    pydantic)."""

    model_config = ConfigDict(frozen=True, extra="forbid", protected_namespaces=(), allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        if info.field_name in _numeric_fields(cls) and _holds_bool(value):
            raise ValueError("must be a number, not true or false")
        return value


class CatalogEntry(FrozenSpec):
    """Fields every catalog entry shares: an id, names it also answers to, and where its figures come from."""

    id: str
    """The catalog id, e.g. `H100-SXM5-80GB`; looked up case-insensitively."""
    name: str
    """A human-readable name, e.g. `NVIDIA H100 SXM5 80GB`."""
    aliases: tuple[str, ...] = ()
    """Other names that resolve to this entry (case-insensitive)."""
    sources: tuple[str, ...] = Field(min_length=1)
    """Datasheets, papers or measurements behind the figures; at least one."""
    notes: str | None = None
    """Anything a user should know about the figures (e.g. which clock a peak assumes)."""


@cache
def _numeric_fields(cls: type[BaseModel]) -> frozenset[str]:
    """Fields whose type is a number (or a mapping of numbers) and not also a bool."""
    return frozenset(name for name, info in cls.model_fields.items() if _is_numeric(info.annotation))


def _is_numeric(annotation: Any) -> bool:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is dict:
        return _is_numeric(args[1])
    if origin in (typing.Union, types.UnionType):
        return bool not in args and any(_is_numeric(a) for a in args)
    if origin is typing.Annotated:
        return _is_numeric(args[0])
    if origin is typing.Literal:  # `Literal[1, 2]` would take True as 1
        return all(isinstance(a, int) and not isinstance(a, bool) for a in args)
    return annotation in NUMBER_TYPES


def _holds_bool(value: Any) -> bool:
    if isinstance(value, dict):
        return any(isinstance(v, bool) for v in value.values())
    return isinstance(value, bool)


def check_number(field: str, value: Any, *, low: float = 0.0, high: float = MAX_FIGURE, low_ok: bool = False,
                 whole: bool = False, what: str = "") -> float | int:
    """`value` if it is a finite number (not a bool) in (low, high] — [low, high] with `low_ok` — and
    whole where asked; else a TrainrigError naming `field` (as the user wrote it, e.g. `--price`)."""
    is_number = isinstance(value, NUMBER_TYPES) and not isinstance(value, bool)
    finite = is_number and math.isfinite(value)
    in_range = finite and (low <= value if low_ok else low < value) and value <= high
    if in_range and (not whole or float(value).is_integer()):
        return int(value) if whole else value
    kind = ("whole number" if whole else "number") + (f" {what}" if what else "")
    if low == 0 and not low_ok:
        raise TrainrigError(field, f"must be a positive {kind}, at most {high:g} (got {value!r}).")
    raise TrainrigError(field, f"must be a {kind} from {low:g} to {high:g} (got {value!r}).")


DIVISORS_SHOWN = 10
"""How many valid values an error message lists before it cuts the list short."""


def divisors_text(n: int, shown: int = DIVISORS_SHOWN) -> str:
    """The divisors of n for an error message, smallest first, at most `shown` of them.

    O(√n): each divisor d ≤ √n brings its pair n // d, so a huge head, layer or expert count
    never makes the message slow or long."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    everything = sorted(set(small) | {n // d for d in small})
    listed = ", ".join(str(d) for d in everything[:shown])
    more = len(everything) - shown
    return f"{listed} … ({more} more, up to {n})" if more > 0 else listed
