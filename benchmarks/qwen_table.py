"""The Qwen profiling table's throughput errors as the table itself: one row per method and size,
one column per sequence length (predicted vs measured tokens/s per GPU, %).

    python benchmarks/qwen_table.py
"""

from __future__ import annotations

from trainrig.catalog.cases import BUNDLED_CASES_DIR, load_cases
from trainrig.estimate.validation import score_cases

COLUMNS = (256, 512, 1024, 2048, 4096, 8192)


def main() -> None:
    report = score_cases(load_cases([BUNDLED_CASES_DIR / "qwen.yaml"]))
    rows: dict[str, dict[int, float]] = {}
    for case in report.cases:
        name, seq = case.id.rsplit("_s", 1)
        rows.setdefault(name, {})[int(seq)] = case.error_pct["tokens_per_s_per_gpu"]
    print(f"{'row':28s}" + "".join(f"{c:>8d}" for c in COLUMNS))
    for name, errors in rows.items():
        cells = "".join(f"{errors[c]:+8.0f}" if c in errors else f"{'—':>8s}" for c in COLUMNS)
        print(f"{name.removeprefix('qwen1_'):28s}{cells}")


if __name__ == "__main__":
    main()
