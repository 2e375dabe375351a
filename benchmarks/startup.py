"""Whole-process times of the commands people type, beside their goals, and against a previous version.

    python benchmarks/startup.py                              # this checkout, 7 runs per command
    python benchmarks/startup.py --baseline /tmp/base         # … and a previous checkout, interleaved

Each command runs as `python -m trainrig …` (or `python -c …`) in a fresh process with the source tree
first on PYTHONPATH, so this checkout and the baseline run the same way. Runs of the two versions
alternate, so a machine that gets busier slows both alike; compare their ratio rather than absolute
times across runs. Prints goal, min/median/max wall seconds and median CPU seconds per command.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# (label, arguments after `python`, goal in wall seconds) — goals from the speed issue
COMMANDS = (
    ("python -c 'import trainrig'", ["-c", "import trainrig"], 0.15),
    ("trainrig --help", ["-m", "trainrig", "--help"], 0.25),
    ("trainrig estimate examples/llama3-8b-8xh100.yaml --json",
     ["-m", "trainrig", "estimate", "examples/llama3-8b-8xh100.yaml", "--json"], 0.4),
    ("trainrig plan --model llama3-70b --tokens 2e12", ["-m", "trainrig", "plan", "--model", "llama3-70b",
                                                       "--tokens", "2e12"], 0.5),
    ("trainrig plan --model llama3-8b --tokens 1e12", ["-m", "trainrig", "plan", "--model", "llama3-8b",
                                                      "--tokens", "1e12"], 1.0),
)


def run_once(source_root: Path, arguments: list[str]) -> tuple[float, float]:
    """(wall s, CPU s) of one fresh process running `python arguments` against `source_root`."""
    env = {**os.environ, "PYTHONPATH": str(source_root / "src"), "COLUMNS": "120"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, *arguments], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True)
    wall_s = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall_s, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(sources: dict[str, Path], runs: int) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """Every command `runs` times per source, the sources interleaved run by run."""
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for label, arguments, _ in COMMANDS:
        for root in sources.values():  # one warm-up each: the OS file cache, .pyc files
            run_once(root, arguments)
        for _ in range(runs):
            for name, root in sources.items():
                results.setdefault((label, name), []).append(run_once(root, arguments))
    return results


def table(results, sources: dict[str, Path]) -> str:
    lines = [f"{'command':58s} {'goal s':>6s}  {'version':8s} {'wall min / median / max s':>26s} {'CPU s':>6s}"]
    for label, _, goal in COMMANDS:
        medians = {}
        for name in sources:
            walls = [w for w, _ in results[(label, name)]]
            cpus = [c for _, c in results[(label, name)]]
            medians[name] = statistics.median(walls)
            met = "met" if min(walls) <= goal else "missed"
            lines.append(f"{label:58s} {goal:6.2f}  {name:8s} {min(walls):8.3f} / {medians[name]:6.3f} / "
                         f"{max(walls):6.3f} {statistics.median(cpus):6.3f}  {met}")
        if "baseline" in medians:
            ratio = medians["baseline"] / medians["this"]
            lines.append(f"{'':58s} {'':6s}  {'ratio':8s} baseline / this = {ratio:.2f}×")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path,
                        help="A previous checkout (e.g. a git worktree) to run beside this one.")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    sources = {"this": ROOT}
    if args.baseline:
        sources["baseline"] = args.baseline.resolve()
    print(table(measure(sources, args.runs), sources))
    print(f"machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}; goal met = fastest run within the goal")


if __name__ == "__main__":
    main()
