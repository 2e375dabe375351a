"""`plan(...)` and `compare(...)`: the search, the constraints, the chosen plans and their nodes.

Only the configurations finally shown get a full single-configuration `estimate()` (scalar); the
search itself stays in arrays (search.py). Timing is the caller's: `search_time_s` is filled in by
the CLI, which owns the clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from trainrig.catalog import Catalog, load_catalog
from trainrig.catalog.job_file import job_to_mapping, load_job
from trainrig.catalog.models import resolve_model
from trainrig.estimate.estimator import estimate
from trainrig.estimate.memory import GIB
from trainrig.estimate.params import DEFAULT_PARAMETERS, ModelParameters
from trainrig.plan.hardware import HardwareOption, hardware_options, resolve_gpu_types, with_profile
from trainrig.plan.node import node_advice
from trainrig.plan.request import PlanRequest, make_request
from trainrig.plan.result import CompareResult, Comparison, FrontPoint, OfferRef, Plan, PlanResult, ScalingPoint
from trainrig.plan.search import Candidates, SearchProgress, SearchResult, job_mapping, search
from trainrig.plan.select import (
    NEAR_TIE_RELATIVE,
    closest,
    collapse_same_layout,
    distinct_hardware,
    feasible_mask,
    one_per_gpu_type,
    pareto_front,
    priced_first,
    ranked,
    same_layout,
    spread,
)
from trainrig.plan.space import SearchSpace
from trainrig.specs import HardwareProfile, Offer
from trainrig.units import duration_text, money_text

__all__ = ["plan", "compare", "Planner"]


def plan(model: Any, tokens: float | None, seq_len: int = 4096, global_batch: int | Sequence[int] | str = 1024,
         precision: str = "bf16", method: str = "full", deadline_days: float | None = None,
         budget_usd: float | None = None, max_gpus: int = 1024, max_nodes: int | None = None,
         gpu_types: Sequence[str] | None = None, offers: Sequence[Offer] | None = None, objective: str = "cost",
         top_k: int = 5, training: Mapping[str, Any] | None = None, priced_only: bool = False,
         catalog_dirs: tuple[str, ...] = (), params: ModelParameters = DEFAULT_PARAMETERS,
         space: SearchSpace | None = None, profile: HardwareProfile | None = None,
         memory_headroom: float = 0.1, per_gpu_type: bool = False,
         progress: SearchProgress | None = None) -> PlanResult:
    """The best configurations for training `model` on `tokens` tokens under the constraints.

    `model`: a preset name, a config.json path, a mapping of model fields or a ModelSpec.
    `global_batch`: sequences per step, or a range `(512, 2048)` / `"512-2048"`.
    `offers`: the cloud offers to price with (default: the catalog's, including `catalog_dirs`).
    `training`: other training fields held fixed (optimizer, flash_attention, lora_rank …).
    `profile`: a `trainrig probe --save` profile; its GPU type is planned with the measured ceilings.
    `memory_headroom`: share of GPU memory a recommended configuration must leave free.
    `per_gpu_type`: at most one plan per GPU type (each type's best), rather than the best overall.
    `progress`: told the configurations evaluated so far and in all (see `search.SearchProgress`).
    """
    arguments = {name: value for name, value in locals().items() if name not in ("per_gpu_type", "progress")}
    planner = Planner.create(**arguments)
    return planner.plan_result(planner.run(progress), per_gpu_type=per_gpu_type)


def compare(model: Any, tokens: float | None, gpu_types: Sequence[str] | None = None, seq_len: int = 4096,
            global_batch: int | Sequence[int] | str = 1024, precision: str = "bf16", method: str = "full",
            deadline_days: float | None = None, budget_usd: float | None = None, max_gpus: int = 1024,
            max_nodes: int | None = None, offers: Sequence[Offer] | None = None, objective: str = "cost",
            training: Mapping[str, Any] | None = None, priced_only: bool = False,
            catalog_dirs: tuple[str, ...] = (), params: ModelParameters = DEFAULT_PARAMETERS,
            space: SearchSpace | None = None, profile: HardwareProfile | None = None,
            memory_headroom: float = 0.1, progress: SearchProgress | None = None) -> CompareResult:
    """The best configuration on each GPU type, side by side (same arguments as `plan`)."""
    arguments = {name: value for name, value in locals().items() if name != "progress"}
    planner = Planner.create(**arguments, top_k=1)
    return planner.compare_result(planner.run(progress))


@dataclass(frozen=True)
class Planner:
    """A validated request with its hardware options, catalog and model parameters."""

    request: PlanRequest
    options: list[HardwareOption]
    notes: list[str]
    catalog: Catalog
    params: ModelParameters
    catalog_dirs: tuple[str, ...]

    @classmethod
    def create(cls, model: Any, tokens: float | None, seq_len: int = 4096, global_batch: Any = 1024,
               precision: str = "bf16", method: str = "full", deadline_days: float | None = None,
               budget_usd: float | None = None, max_gpus: int = 1024, max_nodes: int | None = None,
               gpu_types: Sequence[str] | None = None, offers: Sequence[Offer] | None = None, objective: str = "cost",
               top_k: int = 5, training: Mapping[str, Any] | None = None, priced_only: bool = False,
               catalog_dirs: tuple[str, ...] = (), params: ModelParameters = DEFAULT_PARAMETERS,
               space: SearchSpace | None = None, profile: HardwareProfile | None = None,
               memory_headroom: float = 0.1) -> Planner:
        """Resolve the model and GPUs, check the request and list the node kinds (arguments as `plan`)."""
        catalog = load_catalog(tuple(catalog_dirs))
        spec, model_note = resolve_model(model, tuple(catalog_dirs))
        space = framework_space(catalog, training or {}, method, space or SearchSpace())
        request = make_request(spec, tokens, seq_len, global_batch, precision, method, training, deadline_days,
                               budget_usd, max_gpus, max_nodes, objective, top_k, priced_only, space,
                               memory_headroom)
        gpus = resolve_gpu_types(catalog, gpu_types)
        chosen_offers = list(catalog.offers) if offers is None else list(offers)
        options, notes = hardware_options(catalog, gpus, chosen_offers, precision, priced_only)
        options, profile_notes = with_profile(options, profile)
        notes += profile_notes
        ignored = sorted(set(training or {}) & {"tp", "pp", "cp", "ep", "dp", "vpp", "micro_batch", "zero",
                                                "recompute", "sequence_parallel", "grad_accum"})
        if ignored:
            notes.append(f"the planner chooses {', '.join(ignored)}; the given values were not used")
        return cls(request, options, ([model_note] if model_note else []) + notes, catalog, params,
                   tuple(catalog_dirs))

    def run(self, progress: SearchProgress | None = None) -> SearchResult:
        return search(self.request, self.options, self.params, self.catalog_dirs, progress)

    # ---- plan --------------------------------------------------------------------------------------

    def plan_result(self, found: SearchResult, per_gpu_type: bool = False) -> PlanResult:
        c, request = found.fitting, self.request
        feasible = feasible_mask(c, request)
        index = np.flatnonzero(feasible)
        chosen, message = self._chosen(c, index, per_gpu_type) if len(index) else self._closest(found, per_gpu_type)
        plans = [self._plan(rank, candidates, i, meets, pool, feasible)
                 for rank, (candidates, i, meets, pool) in enumerate(chosen, 1)]
        notes = self.notes + self._search_notes(c, index) + _not_finite_note(found)
        return PlanResult(plans=plans, feasible=bool(len(index)), message=message, objective=request.objective,
                          constraints=request.constraints(), n_configurations_evaluated=found.n_enumerated,
                          n_configurations_fitting=len(c), n_configurations_feasible=len(index),
                          search_time_s=None, points=self._points(c, feasible), notes=notes)

    def _chosen(self, c: Candidates, index: np.ndarray, per_gpu_type: bool = False) -> tuple[list, str | None]:
        """(candidates, row, meets, pool) per plan shown: priced rows first, then the unpriced ones apart;
        one row per layout and node kind, whose other GPU counts in `pool` become its scaling."""
        k = self.request.top_k
        if self.request.objective == "pareto" and not per_gpu_type:
            front = pareto_front(c, distinct_hardware(c, ranked(c, index, "time")))
            if len(front):
                return [(c, i, True, index) for i in spread(collapse_same_layout(c, front), k)], None
        objective = self.request.objective
        if per_gpu_type:  # each type's best among its own rows, as compare() picks it (pareto: by cost)
            objective = "time" if objective == "time" else "cost"
            index = np.array([self._best(c, rows, objective) for rows in self._rows_per_gpu_type(c, index)],
                             dtype=np.int64)
        rows = collapse_same_layout(c, distinct_hardware(c, self._ranked(c, index, objective)))
        priced, unpriced = priced_first(c, rows, k)
        return [(c, i, True, index) for i in np.concatenate([priced, unpriced])], None

    def _best(self, c: Candidates, rows: np.ndarray, objective: str) -> int:
        """The best of `rows` by the objective among those with a price, or of all when none has one."""
        known = rows[np.isfinite(c.cost_usd[rows])]
        return int(self._ranked(c, known if len(known) else rows, objective)[0])

    @staticmethod
    def _ranked(c: Candidates, index: np.ndarray, objective: str) -> np.ndarray:
        # costs within NEAR_TIE_RELATIVE of each other are a tie, and the faster one ranks first
        return ranked(c, index, objective, near_tie_relative=NEAR_TIE_RELATIVE)

    def _rows_per_gpu_type(self, c: Candidates, index: np.ndarray) -> list[np.ndarray]:
        gpu_of_option = np.array([o.gpu.id for o in self.options])
        gpus = gpu_of_option[c.option[index]]
        return [index[gpus == gpu] for gpu in dict.fromkeys(gpus.tolist())]

    def _closest(self, found: SearchResult, per_gpu_type: bool = False) -> tuple[list, str]:
        c, k = found.fitting, self.request.top_k
        if not len(c):
            over = found.closest_overflow
            ordered = np.arange(len(over))
            rows = distinct_hardware(over, self._per_gpu_type(over, ordered) if per_gpu_type else ordered)[:k]
            return [(over, i, False, None) for i in rows], self._nothing_fits_message(over)
        ordered = closest(c, self.request)
        rows = distinct_hardware(c, self._per_gpu_type(c, ordered) if per_gpu_type else ordered)
        priced, unpriced = priced_first(c, collapse_same_layout(c, rows), k)
        everything = np.arange(len(c))
        return [(c, i, False, everything) for i in np.concatenate([priced, unpriced])], self._miss_message(c)

    def _per_gpu_type(self, c: Candidates, ordered: np.ndarray) -> np.ndarray:
        gpu_of_option = np.array([o.gpu.id for o in self.options])
        return one_per_gpu_type(gpu_of_option[c.option[ordered]], ordered)

    def _plan(self, rank: int, c: Candidates, i: int, meets: bool, pool: np.ndarray | None = None,
              feasible: np.ndarray | None = None) -> Plan:
        """Row `i` as a plan, through the single-configuration estimate; its layout at the other GPU
        counts of `pool` (the rows it stands for) as its scaling, from the search's own figures."""
        option = self.options[int(c.option[i])]
        layout = c.layouts.training_fields(int(i))
        mapping = job_mapping(self.request, option, int(c.n_gpus[i]), layout)
        # the job as its file gives it back, so re-running the file reproduces this estimate exactly
        mapping = job_to_mapping(load_job(mapping, self.catalog_dirs))
        job = load_job(mapping, self.catalog_dirs)
        est = estimate(job, self.params, price_usd_per_gpu_hour=option.price_usd_per_gpu_hour)
        node = node_advice(job, est, self.catalog, self.params, self.catalog_dirs) if est.fits else None
        t, hw = job.training, job.hardware
        return Plan(
            rank=rank, gpu=hw.gpu.id, n_gpus=hw.n_gpus, n_nodes=hw.n_nodes, gpus_per_node=hw.gpus_in_node,
            offer=_offer_ref(option.offer), meets_constraints=meets, misses=self._misses(est),
            layout={"tp": t.tp, "pp": t.pp, "dp": t.dp_degree, "cp": t.cp, "ep": t.ep, "vpp": t.vpp, "zero": t.zero,
                    "micro_batch": t.micro_batch, "global_batch": t.global_batch, "grad_accum": t.micro_batches,
                    "recompute": t.recompute, "sequence_parallel": t.sequence_parallel,
                    "tp_comm_overlap": t.tp_comm_overlap},
            memory_headroom_gib=est.memory_capacity_gib - est.memory_per_gpu_gib, estimate=est, node=node,
            job=mapping, **self._scaling(c, int(i), pool, feasible, option),
            no_price_reason=None if est.cost_usd is not None else self._no_price_reason(option, hw.n_gpus))

    def _scaling(self, c: Candidates, i: int, pool: np.ndarray | None, feasible: np.ndarray | None,
                 option: HardwareOption) -> dict[str, Any]:
        if pool is None or not len(pool) or not np.isfinite(c.total_time_s[i]):
            return {}
        points = []
        for j in same_layout(c, pool, i):
            cost = float(c.cost_usd[j]) if np.isfinite(c.cost_usd[j]) else None
            ratio = cost / float(c.cost_usd[i]) if cost is not None and np.isfinite(c.cost_usd[i]) else None
            points.append(ScalingPoint(
                n_gpus=int(c.n_gpus[j]), n_nodes=max(1, int(c.n_gpus[j]) // option.gpus_per_node),
                total_time_s=float(c.total_time_s[j]), cost_usd=cost,
                speedup=float(c.total_time_s[i] / c.total_time_s[j]), cost_ratio=ratio,
                meets_constraints=bool(feasible[j]) if feasible is not None else False))
        return {"scaling": points, "scaling_note": scaling_note(int(c.n_gpus[i]), points)}

    def _no_price_reason(self, option: HardwareOption, n_gpus: int) -> str:
        gpu = option.gpu.id
        if option.offer is not None:
            return f"the offer {option.offer.provider} {option.offer.instance} publishes no price"
        priced = [o for o in self.options if o.gpu.id == gpu and o.price_usd_per_gpu_hour is not None]
        if not priced:
            return f"no offer in the catalog for {gpu}"
        largest = max(max(o.gpu_counts(self.request.max_gpus, self.request.max_nodes), default=0) for o in priced)
        if n_gpus > largest:
            return f"no offer in the catalog for {n_gpus} × {gpu}: the largest rents {largest}"
        return (f"no offer in the catalog for these nodes ({option.gpus_per_node} × {gpu}, default links);"
                " its offers rent other machines")

    def _misses(self, est) -> list[str]:
        misses, request = [], self.request
        if not est.fits:
            misses.append("does not fit in GPU memory")
        elif est.memory_per_gpu_gib > est.memory_capacity_gib * (1 - request.memory_headroom):
            misses.append(f"leaves under {request.memory_headroom:.0%} of GPU memory free")
        if request.deadline_s is not None and est.total_time_s is not None and est.total_time_s > request.deadline_s:
            misses.append(f"takes {duration_text(est.total_time_s)} (deadline {duration_text(request.deadline_s)})")
        if request.budget_usd is not None and (est.cost_usd is None or est.cost_usd > request.budget_usd):
            cost = "has no known price" if est.cost_usd is None else f"costs {money_text(est.cost_usd)}"
            misses.append(f"{cost} (budget {money_text(request.budget_usd)})")
        return misses

    # ---- messages ----------------------------------------------------------------------------------

    def _nothing_fits_message(self, over: Candidates) -> str:
        limit = f"up to {self.request.max_gpus} GPUs" + (f" on {self.request.max_nodes} nodes"
                                                         if self.request.max_nodes else "")
        if not len(over):
            return f"no valid configuration exists for this model and batch on the allowed GPUs with {limit}."
        i = 0
        option = self.options[int(over.option[i])]
        return (f"no configuration fits in GPU memory with {limit}; the closest needs "
                f"{over.memory_bytes[i] / GIB:.1f} GiB per GPU on {int(over.n_gpus[i])} × {option.gpu.id}"
                f" ({over.capacity_bytes[i] / GIB:g} GiB).")

    def _miss_message(self, c: Candidates) -> str:
        request, everything = self.request, np.arange(len(c))
        deadline_ok = np.ones(len(c), dtype=bool)
        if request.deadline_s is not None:
            deadline_ok = c.total_time_s <= request.deadline_s
        if request.deadline_s is not None and not deadline_ok.any():
            fastest = ranked(c, everything, "time")[0]
            return (f"no configuration meets a {deadline_text(request.deadline_s)} deadline; the fastest is "
                    f"{duration_text(c.total_time_s[fastest])} on {self._hardware_text(c, fastest)}.")
        priced = np.flatnonzero(np.isfinite(c.cost_usd))
        if not len(priced):
            return (f"no configuration has a known price, so none can be held to the {money_text(request.budget_usd)}"
                    " budget; add offers with prices (--offers or --catalog).")
        within = priced[deadline_ok[priced]]
        cheapest = ranked(c, within if len(within) else priced, "cost")[0]
        if request.deadline_s is None:
            return (f"no configuration costs under {money_text(request.budget_usd)}; the cheapest is "
                    f"{money_text(c.cost_usd[cheapest])} on {self._hardware_text(c, cheapest)}"
                    f" ({duration_text(c.total_time_s[cheapest])}).")
        in_budget = priced[c.cost_usd[priced] <= request.budget_usd]
        tail = ""
        if len(in_budget):
            fastest = ranked(c, in_budget, "time")[0]
            tail = (f"; within the budget the fastest takes {duration_text(c.total_time_s[fastest])}"
                    f" on {self._hardware_text(c, fastest)}")
        return (f"no configuration meets both a {deadline_text(request.deadline_s)} deadline and a "
                f"{money_text(request.budget_usd)} budget; within the deadline the cheapest costs "
                f"{money_text(c.cost_usd[cheapest])} on {self._hardware_text(c, cheapest)}{tail}.")

    def _hardware_text(self, c: Candidates, i: int) -> str:
        option = self.options[int(c.option[i])]
        where = f" ({option.offer.provider} {option.offer.instance})" if option.offer else ""
        return f"{int(c.n_gpus[i])} × {option.gpu.id}{where}"

    def _search_notes(self, c: Candidates, feasible: np.ndarray) -> list[str]:
        unpriced = int(np.sum(~np.isfinite(c.cost_usd[feasible])))
        if not unpriced:
            return []
        return [f"{unpriced:,} of the configurations that meet the constraints run on hardware without a known price"
                " (catalog nodes or offers without one): their cost is null, and any shown come after the priced"
                " plans, apart, never ranked among them"]

    # ---- points for the time–cost plot -------------------------------------------------------------

    def _points(self, c: Candidates, feasible: np.ndarray) -> list[FrontPoint]:
        priced = np.flatnonzero(np.isfinite(c.cost_usd))
        best = distinct_hardware(c, ranked(c, priced, "cost"))
        fastest = distinct_hardware(c, ranked(c, priced, "time"))
        rows = np.unique(np.concatenate([best, fastest]))
        front = set(pareto_front(c, np.arange(len(c))).tolist())
        return [FrontPoint(total_time_s=float(c.total_time_s[i]), cost_usd=float(c.cost_usd[i]),
                           gpu=self.options[int(c.option[i])].gpu.id, n_gpus=int(c.n_gpus[i]),
                           offer=_offer_id(self.options[int(c.option[i])]), on_front=int(i) in front,
                           meets_constraints=bool(feasible[i])) for i in rows]

    # ---- compare -----------------------------------------------------------------------------------

    def compare_result(self, found: SearchResult) -> CompareResult:
        c = found.fitting
        feasible = feasible_mask(c, self.request)
        # in the order the GPU types were allowed (the catalog nodes'), then any only offers have
        gpus = list(dict.fromkeys([o.gpu.id for o in self.options if o.offer is None]
                                  + [o.gpu.id for o in self.options]))
        rows = [self._comparison(gpu, c, feasible, found.closest_overflow) for gpu in gpus]
        # rows without a price after the others, never among them
        rows.sort(key=lambda row: row.plan is not None and row.plan.no_price_reason is not None)
        return CompareResult(rows=rows, objective=self.request.objective, constraints=self.request.constraints(),
                             n_configurations_evaluated=found.n_enumerated, n_configurations_fitting=len(c),
                             search_time_s=None, notes=self.notes + _not_finite_note(found))

    def _comparison(self, gpu: str, c: Candidates, feasible: np.ndarray, over: Candidates) -> Comparison:
        on_gpu = np.array([o.gpu.id == gpu for o in self.options])
        mine = np.flatnonzero(on_gpu[c.option])
        ok = mine[feasible[mine]]
        if len(ok):
            objective = "time" if self.request.objective == "time" else "cost"
            best = self._best(c, ok, objective)  # as plan() ranks them; a priced row before any unpriced
            return Comparison(gpu=gpu, plan=self._plan(1, c, best, True, ok, feasible), reason=None)
        if len(mine):
            best = closest(c.take(mine), self.request)[0]
            row = mine[best]
            plan = self._plan(1, c, row, False, mine, feasible)
            return Comparison(gpu=gpu, plan=plan, reason="; ".join(plan.misses) or "misses the constraints")
        limit = f"{self.request.max_gpus} GPUs"
        theirs = np.flatnonzero(on_gpu[over.option])
        if len(theirs):
            i = theirs[0]
            return Comparison(gpu=gpu, plan=None, reason=(
                f"does not fit on up to {limit}: the closest needs {over.memory_bytes[i] / GIB:.1f} of"
                f" {over.capacity_bytes[i] / GIB:g} GiB per GPU"))
        return Comparison(gpu=gpu, plan=None, reason=f"no valid layout for this model and batch on up to {limit}")


def scaling_note(n_gpus: int, points: list[ScalingPoint]) -> str | None:
    """`also 16→64 GPUs: 3.1× faster, 1.2× the cost`, for the largest count of `points` above `n_gpus` and
    the smallest below it; null without points."""
    ends = [p for p in (max((p for p in points if p.n_gpus > n_gpus), key=lambda p: p.n_gpus, default=None),
                        min((p for p in points if p.n_gpus < n_gpus), key=lambda p: p.n_gpus, default=None))
            if p is not None]
    if not ends:
        return None
    def times(r: float) -> str:
        return f"{r:.2f}×" if r < 10 else f"{r:.3g}×"

    parts = []
    for p in ends:
        speed = f"{times(p.speedup)} faster" if p.speedup >= 1 else f"{times(1 / p.speedup)} slower"
        cost = f", {times(p.cost_ratio)} the cost" if p.cost_ratio is not None else ""
        parts.append(f"{n_gpus}→{p.n_gpus} GPUs: {speed}{cost}")
    return "also " + "; ".join(parts)


def _not_finite_note(found: SearchResult) -> list[str]:
    if not found.n_not_finite:
        return []
    return [f"{found.n_not_finite:,} configurations that fit got no finite step time from the model and were left out"]


def _offer_ref(offer: Offer | None) -> OfferRef | None:
    if offer is None:
        return None
    return OfferRef(id=offer.id, provider=offer.provider, instance=offer.instance,
                    usd_per_gpu_hour=offer.usd_per_gpu_hour, price_date=offer.price_date.isoformat(),
                    region=offer.region, sources=list(offer.sources))


def _offer_id(option: HardwareOption) -> str | None:
    return option.offer.id if option.offer else None


def deadline_text(seconds: float) -> str:
    """`7-day`, `12-hour`: a deadline as an adjective."""
    if seconds >= 86400.0:
        return f"{seconds / 86400.0:g}-day"
    return f"{seconds / 3600.0:.3g}-hour"


def framework_space(catalog: Catalog, training: Mapping[str, Any], method: str, space: SearchSpace) -> SearchSpace:
    """The layouts the job's stack can run: no tensor or pipeline parallelism where its framework
    has none, and none for QLoRA, whose quantized linears (bitsandbytes, torchao NF4) are not
    sharded by any stack that runs it."""
    name = training.get("framework", "custom") if isinstance(training, Mapping) else "custom"
    framework = catalog.frameworks.get(str(name)).entry
    quantized = method == "qlora" or training.get("quantization", "none") not in ("none", None)
    overlap = space.tp_comm_overlap if framework.tp_comm_overlap else (False,)
    return replace(space, tensor_parallel=space.tensor_parallel and framework.tensor_parallel and not quantized,
                   pipeline_parallel=space.pipeline_parallel and framework.pipeline_parallel and not quantized,
                   tp_comm_overlap=overlap)
