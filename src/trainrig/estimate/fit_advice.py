"""The smallest change that makes a configuration fit in GPU memory."""

from __future__ import annotations

from collections.abc import Iterator

from trainrig.errors import TrainrigError
from trainrig.estimate.core import evaluate
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.memory import GIB
from trainrig.estimate.params import ModelParameters
from trainrig.specs import Job

__all__ = ["smallest_fitting_change"]


def smallest_fitting_change(job: Job, params: ModelParameters) -> str | None:
    """The first change, from least to most costly in speed, whose job fits; None if none does.

    Order: recompute (selective, then full), ZeRO stages, offloading the optimizer, smaller
    micro-batches (more accumulation), then more tensor or pipeline parallelism inside the same GPUs.
    """
    for label, changes in _candidates(job):
        try:
            candidate = Job(model=job.model, hardware=job.hardware,
                            training=job.training.model_copy(update={**changes, "grad_accum": None}))
        except TrainrigError:
            continue
        out = evaluate(inputs_from_job(candidate, params), params)
        if bool(out.fits):
            return f"{label} ({float(out.memory_bytes) / GIB:.1f} GiB)"
    return None


def _candidates(job: Job) -> Iterator[tuple[str, dict]]:
    t, model = job.training, job.model
    if t.recompute == "none" and not t.flash_attention:
        yield "recompute: selective", {"recompute": "selective"}
    if t.recompute != "full":
        yield "recompute: full", {"recompute": "full"}
    if t.dp_degree * t.cp > 1:
        for stage in range(t.zero + 1, 4):
            yield f"zero: {stage}", {"zero": stage}
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
            yield f"pp: {pp}", {"pp": pp, "dp": "auto"}
