"""Measured runs (DESIGN.md's format: a job file + `source` + `measured`) → jobs to score.

`measured:` holds any of MEASURED_METRICS. Throughput is compared as given. Peak memory keeps the
unit and the allocator statistic its source printed, so nothing is converted by hand: `memory_gib`
and `memory_gb` are the peak allocated (`torch.cuda.max_memory_allocated`) in GiB and in decimal GB,
`memory_active_gib` torch's `active_bytes.all.peak`, `memory_reserved_gib` `max_memory_reserved`.
`oom: true` says the run ran out of memory: it is scored as a fit verdict only, and a case may hold
nothing else."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainrig.catalog.job_file import load_job, read_job_file
from trainrig.catalog.registry import DATA_DIR
from trainrig.errors import TrainrigError
from trainrig.specs import Job

__all__ = ["MeasuredCase", "load_cases", "BUNDLED_CASES_DIR", "MEASURED_METRICS", "THROUGHPUT_METRICS",
           "MEMORY_METRICS", "METRIC_ESTIMATE_KEY", "GIB_BYTES", "GB_BYTES"]

BUNDLED_CASES_DIR = DATA_DIR / "calibration"
GIB_BYTES = 2**30
GB_BYTES = 1e9
THROUGHPUT_METRICS = ("tokens_per_s_per_gpu", "step_time_s", "model_tflops_per_gpu", "mfu")
# Each peak-memory metric: bytes in one of its units, and the Estimate attribute (GiB) it is scored
# against. The active peak is the allocated peak within rounding (active blocks are allocated ones
# plus those freed on another stream but not yet reusable), so both meet the allocated estimate.
MEMORY_METRICS: dict[str, tuple[float, str]] = {
    "memory_gib": (GIB_BYTES, "memory_allocated_gib"),
    "memory_gb": (GB_BYTES, "memory_allocated_gib"),
    "memory_active_gib": (GIB_BYTES, "memory_allocated_gib"),
    "memory_reserved_gib": (GIB_BYTES, "memory_reserved_gib"),
}
OOM = "oom"
MEASURED_METRICS = (*THROUGHPUT_METRICS, *MEMORY_METRICS, OOM)
# The Estimate attribute each measured metric is compared with (`oom` with `fits`, inverted).
METRIC_ESTIMATE_KEY = {**{m: m for m in THROUGHPUT_METRICS}, **{m: key for m, (_, key) in MEMORY_METRICS.items()},
                       OOM: "fits"}


@dataclass(frozen=True)
class MeasuredCase:
    """One published or user-measured run.

    `measured` holds the numeric metrics in the units their keys name; `oom` is True for a run that
    ran out of memory (and then `measured` is empty)."""

    id: str
    source: str
    job: Job
    measured: dict[str, float]
    note: str | None = None
    oom: bool = False

    @property
    def memory_gib(self) -> dict[str, float]:
        """Every measured peak-memory metric converted to GiB (2^30 bytes)."""
        return {k: v * MEMORY_METRICS[k][0] / GIB_BYTES for k, v in self.measured.items() if k in MEMORY_METRICS}


def load_cases(paths: list[str | Path] | None = None, extra_dirs: tuple[str, ...] = (),
               profile: str | Path | None = None) -> list[MeasuredCase]:
    """Cases from files or directories of YAML/JSON; the bundled set when `paths` is empty.

    `profile`: a `trainrig probe --save` file applied to every case (for runs measured on the
    machine the profile describes)."""
    files = _expand(paths or [BUNDLED_CASES_DIR])
    cases: list[MeasuredCase] = []
    for path in files:
        try:
            data = read_job_file(path)
        except TrainrigError as error:  # the file itself is wrong: name it as a cases file
            raise TrainrigError("cases", error.message) from None
        entries = data.get("cases", [data]) if isinstance(data, dict) else []
        if not isinstance(entries, list):
            raise TrainrigError("cases", f"{path}: `cases` must be a list of measured runs.")
        for index, entry in enumerate(entries):
            if profile is not None and isinstance(entry, dict) and isinstance(entry.get("hardware"), dict):
                entry = {**entry, "hardware": {**entry["hardware"], "profile": str(profile)}}
            cases.append(_case(entry, path, index, extra_dirs))
    return cases


def _expand(paths: list[str | Path]) -> list[Path]:
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml", ".json")))
        else:  # reading it says what is wrong with a missing file, a FIFO, a symlink loop …
            files.append(path)
    return files


def _case(entry: Any, path: Path, index: int, extra_dirs: tuple[str, ...]) -> MeasuredCase:
    where = f"{path.name} case {index + 1}"
    if not isinstance(entry, dict):
        raise TrainrigError("cases", f"{where} must be a mapping.")
    ident = str(entry.get("id") or f"{path.stem}_{index + 1}")
    measured, oom = _measured(entry.get("measured"), ident)
    if "source" not in entry:
        raise TrainrigError(f"{ident}.source", "is required: cite where the measurement comes from.")
    try:
        job = load_job({k: v for k, v in entry.items() if k in ("model", "hardware", "training")}, extra_dirs)
    except TrainrigError as error:
        raise TrainrigError(f"{ident}.{error.field}", error.message) from None
    return MeasuredCase(ident, str(entry["source"]), job, measured, entry.get("note"), oom)


def _measured(raw: Any, ident: str) -> tuple[dict[str, float], bool]:
    """The numeric metrics and the oom flag of `measured:`, each value checked."""
    field = f"{ident}.measured"
    if not isinstance(raw, dict) or not raw:
        raise TrainrigError(field, f"needs at least one of {', '.join(MEASURED_METRICS)}.")
    unknown = set(raw) - set(MEASURED_METRICS)
    if unknown:
        raise TrainrigError(field, f"'{sorted(unknown)[0]}' is not one of {', '.join(MEASURED_METRICS)}.")
    oom = raw.get(OOM, False)
    if not isinstance(oom, bool):
        raise TrainrigError(f"{field}.{OOM}", f"must be true or false (got {oom!r}).")
    values: dict[str, float] = {}
    for key, value in raw.items():
        if key == OOM:
            continue
        # bool is an int to Python, but `memory_gb: true` is a mistake, not 1 GB
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or not math.isfinite(value) or value <= 0:
            raise TrainrigError(f"{field}.{key}", f"must be a positive number (got {value!r}).")
        values[key] = float(value)
    if oom and values:
        raise TrainrigError(f"{field}.{OOM}", f"a run that ran out of memory has no measurements; drop"
                                              f" {sorted(values)[0]} or oom.")
    return values, oom
