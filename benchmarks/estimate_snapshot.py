"""Every bundled measured run's and example job's estimate, saved, or compared with a saved one: the
check that a change to the model moves only the cases it should.

    python benchmarks/estimate_snapshot.py OUT.json                    # save
    python benchmarks/estimate_snapshot.py NEW.json --against OLD.json # save and list what moved

Each entry is tokens/s per GPU and the reserved-memory estimate in GiB, keyed by case id or file.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from trainrig import estimate, load_job
from trainrig.catalog.cases import load_cases

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def snapshot() -> dict[str, list[float]]:
    jobs = [(case.id, case.job) for case in load_cases()]
    jobs += [(str(path.relative_to(EXAMPLES.parent)), load_job(path)) for path in sorted(EXAMPLES.rglob("*.yaml"))]
    result = {}
    for key, job in jobs:
        est = estimate(job, advise_fit=False)
        result[key] = [round(est.tokens_per_s_per_gpu, 6), round(est.memory_reserved_gib, 6)]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--against", type=Path, help="an earlier snapshot to compare with")
    args = parser.parse_args()
    now = snapshot()
    args.out.write_text(json.dumps(now, indent=0))
    if args.against is None:
        print(f"{len(now)} estimates saved to {args.out}")
        return
    before = json.loads(args.against.read_text())
    moved = [key for key in now if before.get(key) != now[key]]
    for key in moved:
        print(f"{key}: {before.get(key)} -> {now[key]}")
    print(f"{len(moved)} of {len(now)} differ")


if __name__ == "__main__":
    main()
