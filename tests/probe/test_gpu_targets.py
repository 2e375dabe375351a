"""The GPU targets gpu_check.sh prints, evaluated on a synthetic probe result."""

from __future__ import annotations

import pytest

from trainrig.probe import gpu_targets
from trainrig.probe.gpu_targets import evaluate_targets

from .test_runner import _benchmarked


def test_targets_pass_and_fail_against_their_goals():
    result = _benchmarked()  # bf16 best 780 on GPU0, copy 2900 GB/s, pinned 53/54 GB/s, Gen5 x16
    gemm, copy, pcie = evaluate_targets(result, reference_tflops=800.0, memory_spec_gbs=3350.0)
    assert gemm.ratio == pytest.approx(780 / 800) and gemm.passed is True
    assert copy.ratio == pytest.approx(2900 / 3350) and copy.passed is True
    assert pcie.reference == pytest.approx(63.02, abs=0.01) and pcie.measured == 54
    assert pcie.passed is True
    slow = evaluate_targets(result, reference_tflops=900.0, memory_spec_gbs=4800.0)
    assert slow[0].passed is False and slow[1].passed is False
    unknown = evaluate_targets(result, None, None)
    assert unknown[0].passed is None and unknown[1].ratio is None


def test_tables_and_summary_print(tmp_path, capsys):
    path = tmp_path / "probe.json"
    path.write_text(_benchmarked().model_dump_json())
    assert gpu_targets.main(["tables", str(path)]) == 0
    gpu_targets._print_summary(_benchmarked(), evaluate_targets(_benchmarked(), 800.0, 3350.0), 0)
    out = capsys.readouterr().out
    assert "Health" in out or "GPUs" in out
    assert "gpu_check summary" in out and "PASS" in out
