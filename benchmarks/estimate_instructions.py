"""Instructions one in-process `trainrig.estimate(job)` executes, counted by valgrind (cachegrind).

    python benchmarks/estimate_instructions.py [--baseline /tmp/base] [--calls 100]
    python benchmarks/estimate_instructions.py --all-jobs [--baseline /tmp/base]   # estimate_speed.py's jobs

Timings on a shared, loaded machine move by ±50% from run to run; the instruction count of the same
work moves by about 1%. Each version runs the same script twice under `valgrind --tool=cachegrind
--cache-sim=no`, once with `--calls` more estimates than the other, so start-up and imports cancel:
instructions per estimate = (I(long) − I(short)) / calls. Needs valgrind (Debian: apt-get install
valgrind); each run takes about a minute.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

JOB = Path(__file__).resolve().parents[1] / "examples" / "llama3-8b-8xh100.yaml"
LOOP = """
import sys
from trainrig import estimate, load_job
job = load_job(sys.argv[1])
for _ in range(int(sys.argv[2])):
    estimate(job)
"""
# estimate_speed.py's jobs (this checkout's list, for every version counted)
NAMED_LOOP = """
import sys
sys.path.insert(0, sys.argv[3])
from estimate_speed import JOBS
from trainrig import estimate, load_job
job = load_job(JOBS[sys.argv[1]])
for _ in range(int(sys.argv[2])):
    estimate(job)
"""
BENCHMARKS = Path(__file__).resolve().parent


def count_instructions(source_root: Path, code: str, *args: str) -> int:
    """Instructions of a Python process running `code` with `args` on `source_root`'s trainrig,
    counted by cachegrind (also used by estimate_parts.py)."""
    # one BLAS/OpenMP thread: idle pool threads spin for a while under valgrind, which counts them
    env = {"PYTHONPATH": str(source_root / "src"), "PATH": "/usr/bin:/bin", "OPENBLAS_NUM_THREADS": "1",
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
    done = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                           sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, check=False)
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if done.returncode or found is None:
        raise SystemExit(f"valgrind printed no instruction count:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def instructions(source_root: Path, calls: int, job: str | None = None) -> int:
    """Instructions of a process that loads the job (the example file, or estimate_speed.py's job
    of that name) and makes `calls` estimates."""
    if job is None:
        return count_instructions(source_root, LOOP, str(JOB), str(calls))
    return count_instructions(source_root, NAMED_LOOP, job, str(calls), str(BENCHMARKS))


def per_estimate(source_root: Path, calls: int, job: str | None = None) -> float:
    instructions(source_root, 1, job)  # a first run writes any bytecode a later one would count
    return (instructions(source_root, 20 + calls, job) - instructions(source_root, 20, job)) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="A previous checkout to count beside this one.")
    parser.add_argument("--calls", type=int, default=100, help="Estimates the long run makes beyond the short one.")
    parser.add_argument("--all-jobs", action="store_true", help="Count each of estimate_speed.py's jobs instead.")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    versions = {"this": Path(__file__).resolve().parents[1]}
    if args.baseline:
        versions["baseline"] = args.baseline.resolve()
    if not args.all_jobs:
        counts = {name: per_estimate(root, args.calls) for name, root in versions.items()}
        print(f"job: {JOB.name}")
        for name, count in counts.items():
            print(f"{name:9s} {count / 1e6:6.2f} M instructions per estimate")
        if args.baseline:
            print(f"ratio     baseline / this = {counts['baseline'] / counts['this']:.2f}×")
        return
    sys.path.insert(0, str(BENCHMARKS))
    from estimate_speed import JOBS

    tasks = [(name, root, job) for job in JOBS for name, root in versions.items()]
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:  # valgrind runs are single-threaded processes
        counts = dict(zip(((n, j) for n, _, j in tasks),
                          pool.map(lambda t: per_estimate(t[1], args.calls, t[2]), tasks), strict=True))
    header = " ".join(f"{name:>9s}" for name in versions) + ("   baseline / this" if args.baseline else "")
    print(f"{'job':32s} {header}")
    for job in JOBS:
        row = " ".join(f"{counts[name, job] / 1e6:7.2f} M" for name in versions)
        ratio = f"   {counts['baseline', job] / counts['this', job]:.2f}×" if args.baseline else ""
        print(f"{job:32s} {row}{ratio}")


if __name__ == "__main__":
    main()
