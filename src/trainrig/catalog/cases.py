"""Measured runs (DESIGN.md's format: a job file + `source` + `measured`) → jobs to score."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainrig.catalog.job_file import load_job, read_job_file
from trainrig.catalog.registry import DATA_DIR
from trainrig.errors import TrainrigError
from trainrig.specs import Job

__all__ = ["MeasuredCase", "load_cases", "BUNDLED_CASES_DIR", "MEASURED_METRICS"]

BUNDLED_CASES_DIR = DATA_DIR / "calibration"
MEASURED_METRICS = ("tokens_per_s_per_gpu", "step_time_s", "model_tflops_per_gpu", "mfu", "memory_gib")


@dataclass(frozen=True)
class MeasuredCase:
    """One published or user-measured run."""

    id: str
    source: str
    job: Job
    measured: dict[str, float]
    note: str | None = None


def load_cases(paths: list[str | Path] | None = None, extra_dirs: tuple[str, ...] = (),
               profile: str | Path | None = None) -> list[MeasuredCase]:
    """Cases from files or directories of YAML/JSON; the bundled set when `paths` is empty.

    `profile`: a `trainrig probe --save` file applied to every case (for runs measured on the
    machine the profile describes)."""
    files = _expand(paths or [BUNDLED_CASES_DIR])
    cases: list[MeasuredCase] = []
    for path in files:
        data = read_job_file(path)
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
        elif path.is_file():
            files.append(path)
        else:
            raise TrainrigError("cases", f"{path} does not exist.")
    return files


def _case(entry: Any, path: Path, index: int, extra_dirs: tuple[str, ...]) -> MeasuredCase:
    where = f"{path.name} case {index + 1}"
    if not isinstance(entry, dict):
        raise TrainrigError("cases", f"{where} must be a mapping.")
    ident = str(entry.get("id") or f"{path.stem}_{index + 1}")
    measured = entry.get("measured")
    if not isinstance(measured, dict) or not measured:
        raise TrainrigError(f"{ident}.measured", f"needs at least one of {', '.join(MEASURED_METRICS)}.")
    unknown = set(measured) - set(MEASURED_METRICS)
    if unknown:
        raise TrainrigError(f"{ident}.measured", f"'{sorted(unknown)[0]}' is not one of {', '.join(MEASURED_METRICS)}.")
    if "source" not in entry:
        raise TrainrigError(f"{ident}.source", "is required: cite where the measurement comes from.")
    try:
        job = load_job({k: v for k, v in entry.items() if k in ("model", "hardware", "training")}, extra_dirs)
    except TrainrigError as error:
        raise TrainrigError(f"{ident}.{error.field}", error.message) from None
    return MeasuredCase(ident, str(entry["source"]), job, {k: float(v) for k, v in measured.items()}, entry.get("note"))
