"""Where one estimate's instructions go: the model core's `evaluate` of the base and its what-if rows,
with one of its terms at a time replaced by that term's cached result (valgrind's cachegrind).

    python benchmarks/estimate_parts.py [--job "mixtral-8x7b, 32×A100, ep8"] [TERM ...]

A TERM is a function of `trainrig.estimate.core` (`_micro_batch`) or `module:function` of another
module of `trainrig.estimate` (`collectives:reduce_scatter_time_s`); the printed figure is how many
fewer instructions an evaluation makes with that term answered from a cache, i.e. the term's own
cost including what it calls. Terms nest, so the figures do not add up. Needs valgrind; each term
takes two runs of about half a minute.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from estimate_instructions import count_instructions  # this directory, on the path when run as a script

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TERMS = ["_micro_batch", "_arithmetic_s", "host_issue:host_issue_s", "traffic:tensor_parallel_s",
                 "traffic:expert_parallel_s", "traffic:data_parallel_exposed_s", "collectives:reduce_scatter_time_s",
                 "_memory"]
LOOP = """
import importlib, sys
sys.path.insert(0, sys.argv[4])
from estimate_speed import JOBS
from trainrig import load_job
from trainrig.estimate.estimator import doubled_resource_inputs
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.params import DEFAULT_PARAMETERS
core = importlib.import_module("trainrig.estimate.core")
rows = doubled_resource_inputs(inputs_from_job(load_job(JOBS[sys.argv[2]]), DEFAULT_PARAMETERS, python_floats=True))
if sys.argv[3] != "-":
    module_name, _, name = sys.argv[3].rpartition(":")
    module = importlib.import_module("trainrig.estimate." + module_name) if module_name else core
    real, memo = getattr(module, name), []
    def cached(*args, **kwargs):
        if not memo:
            memo.append(real(*args, **kwargs))
        return memo[0]
    setattr(module, name, cached)
for _ in range(20 + int(sys.argv[1])):
    core.evaluate(rows, DEFAULT_PARAMETERS)
"""


def instructions(job: str, term: str, calls: int) -> int:
    return count_instructions(ROOT, LOOP, str(calls), job, term, str(ROOT / "benchmarks"))


def per_evaluation(job: str, term: str, calls: int) -> float:
    return (instructions(job, term, calls) - instructions(job, term, 0)) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("terms", nargs="*", default=DEFAULT_TERMS)
    parser.add_argument("--job", default="mixtral-8x7b, 32×A100, ep8", help="A job of estimate_speed.py.")
    parser.add_argument("--calls", type=int, default=40)
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    instructions(args.job, "-", 1)  # a first run writes any bytecode a later one would count
    whole = per_evaluation(args.job, "-", args.calls)
    print(f"job: {args.job}\nevaluate (base and what-if rows)  {whole / 1e6:6.3f} M instructions")
    for term in args.terms:
        saved = whole - per_evaluation(args.job, term, args.calls)
        print(f"  {term:32s} {saved / 1e6:6.3f} M")


if __name__ == "__main__":
    main()
