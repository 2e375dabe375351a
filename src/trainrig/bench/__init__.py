"""`trainrig bench`: a real, short, layer-reduced training step of a job, measured beside the estimate.

Importing this package (or any of its modules but `layers`) does not import torch: torch loads
inside the functions that build and run the model, so the CLI starts fast and torch stays optional.
"""

from __future__ import annotations

__all__ = ["BenchResult", "run_bench", "build_model", "scaled_job"]


def __getattr__(name: str):
    if name == "BenchResult":
        from trainrig.bench.result import BenchResult
        return BenchResult
    if name == "run_bench":
        from trainrig.bench.run import run_bench
        return run_bench
    if name == "build_model":
        from trainrig.bench.model import build_model
        return build_model
    if name == "scaled_job":
        from trainrig.bench.scale import scaled_job
        return scaled_job
    raise AttributeError(f"module 'trainrig.bench' has no attribute {name!r}")
