"""What the job computes, for live MFU and the comparison with an estimate.

`resolve_workload` turns the user's inputs (a job file, a model and sequence length, or FLOPs per
token directly; a peak rate or a precision) into plain numbers stored with the run. Bad input is a
`TrainrigError` naming the argument.
"""

from __future__ import annotations

import math
from typing import Any

from trainrig.errors import TrainrigError

__all__ = ["resolve_workload", "estimate_summary", "load_job_input", "ESTIMATE_KEYS"]

ESTIMATE_KEYS = ("fits", "step_time_s", "tokens_per_s", "model_tflops_per_gpu", "mfu",
                 "memory_per_gpu_gib", "bottleneck")
_PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8", "int8")


def load_job_input(job: Any, field: str = "job") -> Any:
    """A Job from a Job, a mapping or a path (TrainrigError from the job loader otherwise)."""
    if job is None:
        return None
    from trainrig import load_job
    from trainrig.specs import Job

    if isinstance(job, Job):
        return job
    try:
        return load_job(job)
    except TrainrigError:
        raise
    except (OSError, ValueError, TypeError) as error:
        raise TrainrigError(field, f"cannot read the job ({error}).") from None


def resolve_workload(*, job: Any = None, model: Any = None, seq_len: int | None = None,
                     flops_per_token: float | None = None, peak_tflops: float | None = None,
                     precision: str | None = None, devices: int | None = None,
                     micro_batch: int | None = None, method: str = "full") -> dict[str, Any]:
    """FLOPs per token, the peak per device and what else MFU needs, with where each came from."""
    _check_positive(peak_tflops, "peak_tflops")
    _check_positive(devices, "devices")
    _check_positive(micro_batch, "micro_batch")
    chosen = precision or (job.training.precision if job is not None else "bf16")
    if chosen not in _PRECISIONS:
        raise TrainrigError("precision", f"must be one of {', '.join(_PRECISIONS)} (got {chosen!r}).")
    flops, flops_source = _flops(job, model, seq_len, flops_per_token, method)
    peak, peak_source = peak_tflops, "given" if peak_tflops else None
    if peak is None and job is not None:
        peak = job.hardware.gpu.peak(chosen)
        peak_source = f"catalog {job.hardware.gpu.id} {chosen}" if peak else None
    return {"flops_per_token": flops, "flops_source": flops_source,
            "peak_tflops_per_device": peak, "peak_source": peak_source, "precision": chosen,
            "devices": devices,
            "micro_batch": micro_batch or (job.training.micro_batch if job is not None else None),
            "seq_len": seq_len or (job.training.seq_len if job is not None else None)}


def estimate_summary(job: Any) -> dict[str, Any] | None:
    """The estimate's figures the monitor compares with (None without a job)."""
    if job is None:
        return None
    from trainrig import estimate

    data = estimate(job).to_dict()
    summary = {key: data.get(key) for key in ESTIMATE_KEYS}
    summary["n_gpus"] = job.hardware.n_gpus
    summary["gpu"] = job.hardware.gpu.id
    return summary


def _flops(job: Any, model: Any, seq_len: int | None, flops_per_token: float | None,
           method: str) -> tuple[float | None, str | None]:
    if flops_per_token is not None:
        _check_positive(flops_per_token, "flops_per_token")
        return float(flops_per_token), "given"
    if model is None and job is None:
        return None, None
    from trainrig.estimate.flops import flops_per_token as count

    if model is not None:
        if not seq_len or seq_len <= 0:
            raise TrainrigError("seq_len", "is required (a positive number of tokens) with model= to "
                                           "count FLOPs per token.")
        from trainrig import load_model

        spec = load_model(model)
        return count(spec, int(seq_len), method), f"{getattr(spec, 'name', None) or 'model'}, "\
                                                  f"seq_len {seq_len}"
    length = seq_len or job.training.seq_len
    return count(job.model, int(length), job.training.method), f"job model, seq_len {length}"


def _check_positive(value: float | None, field: str) -> None:
    """Finite and above zero: NaN and infinity would make every MFU NaN or 0."""
    if value is not None and not (value > 0 and math.isfinite(value)):
        raise TrainrigError(field, f"must be a finite positive number (got {value!r}).")
