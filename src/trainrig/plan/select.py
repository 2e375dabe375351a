"""Constraints, ranking and the Pareto front, on the candidate arrays.

Unknown cost (no price) is NaN here: it never meets a budget, ranks after every priced configuration
when cost is the objective, and is never on the time–cost front.

Near-ties: the plans shown rank costs within NEAR_TIE_RELATIVE of each other as equal and put the faster
first (a plan twice as fast for 0.04 % more should not come second). The messages that name "the
cheapest" or "the fastest" use the strict order.
"""

from __future__ import annotations

import numpy as np

from trainrig.plan.request import PlanRequest
from trainrig.plan.search import Candidates

__all__ = ["feasible_mask", "ranked", "distinct_hardware", "one_per_gpu_type", "pareto_front", "spread", "closest",
           "violation", "near_tie_groups", "NEAR_TIE_RELATIVE", "LAYOUT_FIELDS", "collapse_same_layout", "same_layout",
           "priced_first"]

NEAR_TIE_RELATIVE = 0.005
"""Costs within 0.5 % of each other rank as a tie, broken by time: well inside the model's own error, and
small enough that a plan never ranks ahead of one cheaper by more than 0.5 %."""


def feasible_mask(c: Candidates, request: PlanRequest) -> np.ndarray:
    """Fits with the requested memory headroom, meets the deadline and, with a budget, has a known
    cost within it."""
    ok = c.memory_bytes <= c.capacity_bytes * (1 - request.memory_headroom)
    if request.deadline_s is not None:
        ok &= c.total_time_s <= request.deadline_s
    if request.budget_usd is not None:
        ok &= np.nan_to_num(c.cost_usd, nan=np.inf) <= request.budget_usd
    return ok


def ranked(c: Candidates, index: np.ndarray, objective: str, near_tie_relative: float = 0.0) -> np.ndarray:
    """`index` ordered best first: by cost then time (`cost`), by time then cost (`time`/`pareto`).
    With `near_tie_relative` > 0 and the cost objective, costs in one `near_tie_groups` group are equal
    and the faster comes first (then the cheaper)."""
    cost = np.nan_to_num(c.cost_usd[index], nan=np.inf)
    time = c.total_time_s[index]
    if objective != "cost":
        return index[np.lexsort((cost, time))]
    if near_tie_relative <= 0:
        return index[np.lexsort((time, cost))]
    return index[np.lexsort((cost, time, near_tie_groups(cost, near_tie_relative)))]


def near_tie_groups(values: np.ndarray, relative: float) -> np.ndarray:
    """A group number per value, ascending with the value: from the smallest value not yet grouped, a
    group holds every value up to `relative` above it (so members differ by at most that much). One
    `searchsorted` per group, and each group spans a factor 1 + relative: the loop runs at most
    log(max/min) / log(1 + relative) times (about 1,400 for a 1,000× range), whatever the count."""
    order = np.argsort(values, kind="stable")
    ascending = values[order]
    grouped = np.empty(len(values), dtype=np.int64)
    start, group = 0, 0
    while start < len(ascending):
        stop = max(int(np.searchsorted(ascending, ascending[start] * (1 + relative), side="right")), start + 1)
        grouped[start:stop] = group
        start, group = stop, group + 1
    groups = np.empty(len(values), dtype=np.int64)
    groups[order] = grouped
    return groups


def one_per_gpu_type(gpu_keys: np.ndarray, ordered: np.ndarray) -> np.ndarray:
    """The first (best) of `ordered` for each GPU type, order kept; `gpu_keys[i]` is the type of `ordered[i]`."""
    return _first_of_each(gpu_keys, ordered)


def _first_of_each(keys: np.ndarray, ordered: np.ndarray) -> np.ndarray:
    """The first of `ordered` for each distinct key, order kept; `keys[i]` (a value, or a row of
    values) is the key of `ordered[i]`."""
    if not len(ordered):
        return ordered
    _, first = np.unique(keys, axis=0 if keys.ndim > 1 else None, return_index=True)
    return ordered[np.sort(first)]


def distinct_hardware(c: Candidates, ordered: np.ndarray) -> np.ndarray:
    """The first (best) configuration of each (node kind, GPU count), order kept — and of those,
    one per distinct machine: node kinds that are the same hardware (a catalog node and an offer
    of it, two providers' identical instances) give the same step time and memory, and the user
    would see the same row twice, once priced and once not; the better-ranked one stays."""
    kept = _first_of_each(c.option[ordered] * (1 << 32) + c.n_gpus[ordered], ordered)
    same_machine = np.stack([c.n_gpus[kept].astype(float), c.step_time_s[kept], c.memory_bytes[kept],
                             c.capacity_bytes[kept]], axis=1)
    return _first_of_each(same_machine, kept)


LAYOUT_FIELDS = ("tp", "pp", "cp", "ep", "vpp", "micro_batch", "global_batch", "zero", "recompute",
                 "sequence_parallel", "tp_comm_overlap")
"""What makes two configurations on one node kind "the same layout": everything but the data-parallel
degree (and the accumulation that follows from it), i.e. the same run at more or fewer GPUs."""


def _layout_keys(c: Candidates, rows: np.ndarray) -> np.ndarray:
    return np.stack([c.option[rows]] + [getattr(c.layouts, name)[rows] for name in LAYOUT_FIELDS], axis=1)


def collapse_same_layout(c: Candidates, ordered: np.ndarray) -> np.ndarray:
    """The first (best) of `ordered` for each layout on each node kind, order kept: the same layout at
    more GPUs (more data parallelism) is one row, whose scaling `same_layout` finds."""
    return _first_of_each(_layout_keys(c, ordered), ordered)


def same_layout(c: Candidates, pool: np.ndarray, row: int) -> np.ndarray:
    """The configurations of `pool` with `row`'s node kind and layout at other GPU counts, fewest GPUs
    first (at most one per count: node kind, layout and count make one configuration)."""
    match = pool[c.option[pool] == c.option[row]]
    for name in LAYOUT_FIELDS:  # one field at a time, each on what the last left: the pool shrinks fast
        values = getattr(c.layouts, name)
        match = match[values[match] == values[row]]
    match = match[c.n_gpus[match] != c.n_gpus[row]]
    return match[np.argsort(c.n_gpus[match], kind="stable")]


def priced_first(c: Candidates, ordered: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows to show, kept apart by price: the best k with a known cost, and the unpriced rows the order
    puts ahead of the last of those (they would have displaced a priced row), at most half of k rounded up
    (each row shown costs a full estimate and a node), or, with fewer than k priced, the best unpriced to
    fill k rows. Unpriced rows never rank among priced ones."""
    known = np.isfinite(c.cost_usd[ordered])
    priced = ordered[known][:k]
    unpriced = ordered[~known]
    if len(priced) < k:
        return priced, unpriced[:k - len(priced)]
    last = int(np.flatnonzero(ordered == priced[-1])[0])
    ahead = np.flatnonzero(~known[:last])
    return priced, ordered[ahead][:(k + 1) // 2]


def pareto_front(c: Candidates, index: np.ndarray) -> np.ndarray:
    """Priced candidates of `index` that no other is both faster and cheaper than, fastest first."""
    priced = index[np.isfinite(c.cost_usd[index])]
    ordered = priced[np.lexsort((c.cost_usd[priced], c.total_time_s[priced]))]
    cost = c.cost_usd[ordered]
    best_before = np.concatenate([[np.inf], np.minimum.accumulate(cost)[:-1]])
    return ordered[cost < best_before]


def spread(front: np.ndarray, k: int) -> np.ndarray:
    """k points spread evenly along a front (its ends included)."""
    if len(front) <= k:
        return front
    picks = np.unique(np.round(np.linspace(0, len(front) - 1, k)).astype(int))
    return front[picks]


def violation(c: Candidates, index: np.ndarray, request: PlanRequest) -> np.ndarray:
    """How far each candidate misses the constraints: the largest of time/deadline and cost/budget
    (≤ 1 meets both; an unknown cost misses any budget)."""
    worst = np.zeros(len(index))
    if request.deadline_s is not None:
        worst = np.maximum(worst, c.total_time_s[index] / request.deadline_s)
    if request.budget_usd is not None:
        worst = np.maximum(worst, np.nan_to_num(c.cost_usd[index], nan=np.inf) / request.budget_usd)
    return worst


def closest(c: Candidates, request: PlanRequest) -> np.ndarray:
    """Every candidate, the least violating first (ties by the objective)."""
    index = np.arange(len(c))
    by_objective = ranked(c, index, request.objective)
    miss = violation(c, by_objective, request)
    return by_objective[np.argsort(miss, kind="stable")]
