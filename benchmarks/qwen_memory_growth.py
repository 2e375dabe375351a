"""How much each Qwen profiling row's memory grows from its shortest to its longest sequence, per GPU,
beside trainrig's allocated-memory growth for the same jobs at micro-batch 1 and 2.

The README does not say which memory statistic it prints, so the absolute values are not scored; the
growth with sequence length is what activations, logits and the loss hold, and so it says how many
sequences a micro-batch held. It decides the micro-batch of the 7B multinode row (see qwen.yaml).

    python benchmarks/qwen_memory_growth.py
"""

from __future__ import annotations

import re

import yaml

from trainrig.catalog.cases import BUNDLED_CASES_DIR, load_cases
from trainrig.estimate.estimator import estimate

GB_PER_GIB = 2**30 / 1e9


def _with_micro_batch(job, micro_batch: int):
    data = job.model_dump()
    training = data["training"]
    training["global_batch"] = training["global_batch"] // training["micro_batch"] * micro_batch
    training["micro_batch"] = micro_batch
    return type(job).model_validate(data)


def main() -> None:
    path = BUNDLED_CASES_DIR / "qwen.yaml"
    sources = {entry["id"]: entry["source"] for entry in yaml.safe_load(path.read_text())["cases"]}
    rows: dict[str, list] = {}
    for case in load_cases([path]):
        name, seq = case.id.rsplit("_s", 1)
        cell = re.search(r'"([\d.]+)G? / ', sources[case.id])
        rows.setdefault(name, []).append((int(seq), float(cell.group(1)) / case.job.hardware.n_gpus, case))
    print(f"{'row':28s} {'lengths':>10s} {'README G/GPU':>13s} {'mb 1 GB':>8s} {'mb 2 GB':>8s}  transcribed mb")
    for name, cells in rows.items():
        cells.sort(key=lambda cell: cell[0])
        (short, short_g, short_case), (long, long_g, long_case) = cells[0], cells[-1]
        growth = []
        for micro_batch in (1, 2):
            gib = [estimate(_with_micro_batch(c.job, micro_batch), advise_fit=False).memory_allocated_gib
                   for c in (short_case, long_case)]
            growth.append((gib[1] - gib[0]) * GB_PER_GIB)
        print(f"{name.removeprefix('qwen1_'):28s} {f'{short}-{long}':>10s} {long_g - short_g:+13.1f} "
              f"{growth[0]:+8.1f} {growth[1]:+8.1f}  {short_case.job.training.micro_batch}")


if __name__ == "__main__":
    main()
