"""The smallest change that makes a configuration fit in GPU memory."""

from __future__ import annotations

from collections.abc import Iterator

from trainrig.errors import TrainrigError
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.memory import GIB, memory_fit
from trainrig.estimate.params import ModelParameters
from trainrig.specs import Job

__all__ = ["smallest_fitting_change", "fit_advice", "MAX_FIXES"]

MAX_FIXES = 6
"""How many of the changes that fit on their own an estimate lists (`fit_fixes`)."""


def fit_advice(job: Job, params: ModelParameters, limit: int = MAX_FIXES) -> tuple[str | None, list[dict]]:
    """(`smallest_fitting_change`, the estimate's `fit_fixes`) from one pass over the candidate changes.

    The fixes are each change that makes the job fit on its own, least to most costly in speed, at
    most `limit`; when none does, the one run of them applied together that fits; empty when even
    that does not. Each is `{what_if, changes, memory_per_gpu_gib}`: `what_if` in `--what-if` syntax
    (`zero=3, recompute=full`), `changes` as job-file training fields."""
    found = _fitting(job, params, limit)
    smallest = f"{found[0][0]} ({found[0][2]:.1f} GiB)" if found else None
    return smallest, [_fix(job, changes, memory) for _, changes, memory in found]


def smallest_fitting_change(job: Job, params: ModelParameters) -> str | None:
    """The first change, from least to most costly in speed, whose job fits; else the shortest
    run of those changes applied together that fits; None if even all of them do not fit.

    Order: a chunked loss, recompute (selective, then full), ZeRO stages, 8-bit optimizer states,
    activation offload, offloading the optimizer, smaller micro-batches (more accumulation), more
    tensor or pipeline parallelism inside the same GPUs, then LoRA over the frozen base and QLoRA
    (a different training method, so last).
    """
    return fit_advice(job, params, limit=1)[0]


def _fitting(job: Job, params: ModelParameters, limit: int) -> list[tuple[str, dict, float]]:
    """(label, changes, memory GiB) of each candidate that fits alone, at most `limit`; else the one
    combination that fits (labelled `together: a + b`); else nothing."""
    found = []
    for label, changes in _candidates(job):
        memory = _fitting_memory_gib(job, changes, params)
        if memory is not None:
            found.append((label, changes, memory))
            if len(found) == limit:
                break
    if found:
        return found
    combined = _combined(job, params)
    return [] if combined is None else [(f"together: {' + '.join(combined[0])}", combined[1], combined[2])]


def _fix(job: Job, changes: dict, memory_gib: float) -> dict:
    """A change as the page and `--what-if` apply it: `dp: auto` is implied by a new tp or pp, and an
    unset quantization that stays unset is left out."""
    shown = {k: v for k, v in changes.items()
             if not (k == "dp" and v == "auto") and not (k == "quantization" and v is getattr(job.training, k))}
    what_if = ", ".join(f"{k}={'null' if v is None else str(v).lower() if isinstance(v, bool) else v}"
                        for k, v in shown.items())
    return {"what_if": what_if, "changes": shown, "memory_per_gpu_gib": memory_gib}


def _combined(job: Job, params: ModelParameters) -> tuple[list[str], dict, float] | None:
    """The shortest run of the candidate changes, applied together in order, that fits: (labels,
    changes, memory GiB); None if even all of them do not fit."""
    candidates = list(_candidates(job))
    combined: dict = {}
    labels: list[str] = []
    for label, changes in candidates:  # accumulate: later steps of a kind supersede earlier ones
        trial = {**combined, **changes}
        if _invalid(job, trial):
            continue
        combined, labels = trial, [*labels, label]
        memory = _fitting_memory_gib(job, combined, params)
        if memory is not None:
            return _dedupe(labels), combined, memory
    return None


def _dedupe(labels: list[str]) -> list[str]:
    """Keep the last label of each field (recompute: full supersedes recompute: selective)."""
    last = {label.split(":")[0]: label for label in labels}
    return list(last.values())


def _invalid(job: Job, changes: dict) -> bool:
    try:
        _job_with(job, changes)
    except TrainrigError:
        return True
    return False


def _job_with(job: Job, changes: dict) -> Job:
    return Job(model=job.model, hardware=job.hardware, framework=job.framework,
               training=job.training.model_copy(update={**changes, "grad_accum": None}))


def _fitting_memory_gib(job: Job, changes: dict, params: ModelParameters) -> float | None:
    """Memory per GPU of the changed job when it is valid and fits; None otherwise."""
    try:
        candidate = _job_with(job, changes)
    except TrainrigError:
        return None
    memory, _, fits = memory_fit(inputs_from_job(candidate, params), params)
    return float(memory) / GIB if bool(fits) else None


def _candidates(job: Job) -> Iterator[tuple[str, dict]]:
    t, model = job.training, job.model
    if t.loss == "full":
        yield "loss: chunked", {"loss": "chunked"}
    if t.recompute == "none" and not t.flash_attention:
        yield "recompute: selective", {"recompute": "selective"}
    if t.recompute != "full":
        yield "recompute: full", {"recompute": "full"}
    elif t.recompute_num_layers is not None:  # full recompute of some layers: of every layer
        yield "recompute_num_layers: null", {"recompute_num_layers": None}
    if t.dp_degree * t.cp > 1:
        for stage in range(t.zero + 1, 4):
            yield f"zero: {stage}", {"zero": stage}
    if t.optimizer in ("adamw", "paged_adamw"):
        yield "optimizer: adam8bit", {"optimizer": "adam8bit"}
    if not t.activation_offload:
        yield "activation_offload: true", {"activation_offload": True}
    if t.offload == "none" and t.method == "full":
        yield "offload: optimizer", {"offload": "optimizer"}
    micro = t.micro_batch // 2
    while micro >= 1:
        yield f"micro_batch: {micro}", {"micro_batch": micro}
        micro //= 2
    for tp in (2 * t.tp, 4 * t.tp, 8 * t.tp):
        if tp <= job.hardware.gpus_per_node and t.dp_degree * t.tp % tp == 0 and model.n_heads % tp == 0:
            yield f"tp: {tp}", {"tp": tp, "dp": "auto"}
    for pp in (2 * t.pp, 4 * t.pp, 8 * t.pp):
        if t.dp_degree * t.pp % pp == 0 and model.n_layers % pp == 0:
            explicit = {"pipeline_layers": None} if t.pipeline_layers else {}  # a split of the old pp
            yield f"pp: {pp}", {"pp": pp, "dp": "auto", **explicit}
    if t.method == "full":
        yield "method: lora", {"method": "lora", "quantization": None}
    if t.method != "qlora":
        yield "method: qlora", {"method": "qlora", "quantization": None}
