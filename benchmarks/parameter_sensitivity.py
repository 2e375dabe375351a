"""The bundled set's tokens/s error per source with named parameters changed: what one parameter
carries across the sources, without fitting anything.

    python benchmarks/parameter_sensitivity.py [NAME=VALUE ...]
    python benchmarks/parameter_sensitivity.py sustained_matmul_fraction=1.0

Prints, per source family (as `trainrig validate` groups them), the cases with a measured tokens/s
per GPU, their mean and largest absolute error, and the mean over sources; with no arguments, the
shipped parameters.
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from dataclasses import fields, replace

from trainrig.catalog.cases import load_cases
from trainrig.estimate import estimate
from trainrig.estimate.params import DEFAULT_PARAMETERS
from trainrig.estimate.validation import source_family


def parse_overrides(arguments: list[str]) -> dict[str, float]:
    names = {f.name for f in fields(DEFAULT_PARAMETERS)}
    overrides = {}
    for argument in arguments:
        name, _, value = argument.partition("=")
        if name not in names or not value:
            print(f"{argument!r}: expected NAME=VALUE with NAME a field of ModelParameters", file=sys.stderr)
            raise SystemExit(2)
        overrides[name] = float(value)
    return overrides


def errors_by_source(overrides: dict[str, float]) -> dict[str, list[float]]:
    params = replace(DEFAULT_PARAMETERS, **overrides)
    errors: dict[str, list[float]] = defaultdict(list)
    for case in load_cases():
        measured = case.measured.get("tokens_per_s_per_gpu")
        if measured:
            result = estimate(case.job, params=params, advise_fit=False)
            errors[source_family(case.source)].append(abs(result.tokens_per_s_per_gpu / measured - 1))
    return errors


def main() -> int:
    overrides = parse_overrides(sys.argv[1:])
    errors = errors_by_source(overrides)
    print(f"parameters: {overrides or 'as shipped'}")
    for source, values in errors.items():
        print(f"{source[:56]:58} {len(values):4} cases  mean {statistics.mean(values):6.1%}  max {max(values):6.1%}")
    print(f"mean over sources {statistics.mean(statistics.mean(v) for v in errors.values()):.2%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
