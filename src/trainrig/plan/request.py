"""What a plan is asked for: the job to train and the constraints, checked once, up front.

Every bad value ends in a TrainrigError naming the field, so the CLI can answer with one sentence
and exit code 2 before any search starts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, get_args

from pydantic import ValidationError

from trainrig.errors import TrainrigError, from_validation_error
from trainrig.plan.space import SearchSpace
from trainrig.specs import ModelSpec, TrainingSpec
from trainrig.specs.base import MAX_BATCH, MAX_FIGURE, MAX_GPUS, MAX_SEQ_LEN, MAX_TOKENS, check_number
from trainrig.specs.job import TrainPrecision

__all__ = ["PlanRequest", "OBJECTIVES", "LAYOUT_FIELDS", "parse_global_batch", "make_request"]

OBJECTIVES = ("cost", "time", "pareto")
METHODS = ("full", "lora", "qlora")
SECONDS_PER_DAY = 86400.0
# Training fields the planner chooses; a job file's values for them are replaced, not used
# (`dp_shard`, `expert_tp` and the explicit pipeline split too: the planner shards over all of dp,
# gives the experts the layout's tp and splits layers evenly; none of those is searched).
LAYOUT_FIELDS = ("tp", "pp", "cp", "ep", "dp", "vpp", "grad_accum", "micro_batch", "global_batch", "zero",
                 "recompute", "sequence_parallel", "dp_shard", "expert_tp", "pipeline_layers",
                 "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers")


@dataclass(frozen=True)
class PlanRequest:
    """A validated planning question."""

    model: ModelSpec
    tokens: float
    seq_len: int
    global_batches: tuple[int, ...]
    precision: str
    method: str
    training: Mapping[str, Any] = field(default_factory=dict)
    """Other training fields held fixed (optimizer, flash_attention, lora_rank, data_format …)."""
    deadline_s: float | None = None
    budget_usd: float | None = None
    max_gpus: int = 1024
    max_nodes: int | None = None
    objective: str = "cost"
    top_k: int = 5
    priced_only: bool = False
    space: SearchSpace = SearchSpace()
    memory_headroom: float = 0.1
    """Share of GPU memory a recommended configuration leaves free: the caching allocator's
    fragmentation and transient buffers push real peaks past the modelled one (the estimate warns
    above 90%)."""

    def constraints(self) -> dict[str, Any]:
        """The constraints as plain values, for reports and JSON."""
        return {
            "deadline_days": None if self.deadline_s is None else self.deadline_s / SECONDS_PER_DAY,
            "budget_usd": self.budget_usd, "max_gpus": self.max_gpus, "max_nodes": self.max_nodes,
            "priced_only": self.priced_only, "memory_headroom": self.memory_headroom,
        }


def make_request(model: ModelSpec, tokens: float | None, seq_len: int, global_batch: int | Sequence[int] | str,
                 precision: str = "bf16", method: str = "full", training: Mapping[str, Any] | None = None,
                 deadline_days: float | None = None, budget_usd: float | None = None, max_gpus: int = 1024,
                 max_nodes: int | None = None, objective: str = "cost", top_k: int = 5,
                 priced_only: bool = False, space: SearchSpace | None = None,
                 memory_headroom: float = 0.1) -> PlanRequest:
    """A PlanRequest, or a TrainrigError naming the first bad field."""
    _check_positive("tokens", tokens, "of training tokens, e.g. 2e12", high=MAX_TOKENS)
    _check_positive("seq_len", seq_len, "of tokens per sequence", whole=True, high=MAX_SEQ_LEN)
    _check_choice("precision", precision, get_args(TrainPrecision))
    _check_choice("method", method, METHODS)
    _check_choice("objective", objective, OBJECTIVES)
    _check_optional_positive("deadline_days", deadline_days, "of days")
    _check_optional_positive("budget_usd", budget_usd, "of US dollars")
    _check_positive("max_gpus", max_gpus, "of GPUs", whole=True, high=MAX_GPUS)
    _check_optional_positive("max_nodes", max_nodes, "of nodes", whole=True, high=MAX_GPUS)
    if isinstance(memory_headroom, bool) or not isinstance(memory_headroom, int | float) \
            or not 0 <= memory_headroom < 0.5:
        raise TrainrigError("memory_headroom",
                            f"must be a share of GPU memory from 0 to 0.5 (got {memory_headroom!r}).")
    _check_positive("top_k", top_k, "of plans to show", whole=True, high=MAX_BATCH)
    extra = _fixed_training(training or {}, seq_len, precision, method)
    space = space or SearchSpace()
    if extra.get("pp_schedule") == "gpipe":  # GPipe runs one chunk per stage: no interleaving to search
        space = replace(space, vpp=(1,))
    return PlanRequest(
        model=model, tokens=float(tokens), seq_len=int(seq_len), global_batches=parse_global_batch(global_batch),
        precision=precision, method=method, training=extra,
        deadline_s=None if deadline_days is None else float(deadline_days) * SECONDS_PER_DAY,
        budget_usd=None if budget_usd is None else float(budget_usd), max_gpus=int(max_gpus),
        max_nodes=None if max_nodes is None else int(max_nodes), objective=objective, top_k=int(top_k),
        priced_only=priced_only, space=space, memory_headroom=float(memory_headroom))


def parse_global_batch(value: int | Sequence[int] | str) -> tuple[int, ...]:
    """`1024`, `"1024"`, a range `"512-2048"` / `(512, 2048)`: the batch sizes (sequences) to try.

    A range tries its ends and every power of two, or three times a power of two, between them."""
    low, high = _batch_bounds(value)
    inside = {b for b in _batch_ladder(high) if low <= b <= high}
    return tuple(sorted(inside | {low, high}))


def _batch_bounds(value: int | Sequence[int] | str) -> tuple[int, int]:
    if isinstance(value, str):
        parts = value.replace(":", "-").split("-")
        try:
            numbers = [int(float(p)) for p in parts if p.strip()]
        except (ValueError, OverflowError):  # "inf" overflows int()
            numbers = []
        if len(numbers) != len(parts) or not 1 <= len(numbers) <= 2:
            raise TrainrigError("global_batch", f"'{value}' is not a batch size or a range like 512-2048.")
        value = numbers if len(numbers) == 2 else numbers[0]
    if isinstance(value, Sequence):
        if len(value) != 2:
            raise TrainrigError("global_batch", "a range needs exactly two sizes, e.g. (512, 2048).")
        low, high = value
    else:
        low = high = value
    for bound in (low, high):
        _check_positive("global_batch", bound, "of sequences per optimizer step", whole=True, high=MAX_BATCH)
    if low > high:
        raise TrainrigError("global_batch", f"the range {low}-{high} runs backwards; write {high}-{low}.")
    return int(low), int(high)


def _batch_ladder(high: int) -> set[int]:
    ladder, power = set(), 1
    while power <= high:
        ladder |= {power, 3 * power}
        power *= 2
    return ladder


def _fixed_training(training: Mapping[str, Any], seq_len: int, precision: str, method: str) -> dict[str, Any]:
    """The training fields the planner keeps fixed, checked by TrainingSpec itself."""
    if not isinstance(training, Mapping):
        raise TrainrigError("training", "must be a mapping of training settings.")
    extra = {k: v for k, v in training.items() if k not in LAYOUT_FIELDS and k not in ("tokens", "seq_len")}
    extra.pop("precision", None)
    extra.pop("method", None)
    try:
        TrainingSpec.model_validate({**extra, "seq_len": seq_len, "precision": precision, "method": method})
    except ValidationError as error:
        raise from_validation_error(error, prefix="training") from None
    return extra


def _check_positive(name: str, value: Any, what: str, whole: bool = False, high: float = MAX_FIGURE) -> None:
    """The specs' rule for numbers (finite, not a bool, positive, bounded), so the CLI, the API and
    the web refuse the same values with the same sentence."""
    check_number(name, value, high=high, whole=whole, what=what)


def _check_optional_positive(name: str, value: Any, what: str, whole: bool = False,
                             high: float = MAX_FIGURE) -> None:
    if value is not None:
        _check_positive(name, value, what, whole, high)


def _check_choice(name: str, value: Any, choices: Sequence[str]) -> None:
    if value not in choices:
        raise TrainrigError(name, f"'{value}' is not one of {', '.join(choices)}.")
