"""Step timing in the loop, step statistics, live MFU, and the comparison with an estimate."""

from __future__ import annotations

import time

import pytest

from trainrig.monitor.analysis import compare, comparison_text, step_stats
from trainrig.monitor.live import recent_step_figures
from trainrig.monitor.steps import StepRecorder

from .conftest import steps_rows


def test_data_wait_is_the_time_spent_in_the_loader():
    def slow_loader():
        for i in range(4):
            time.sleep(0.03)
            yield i

    recorder = StepRecorder()
    for _ in recorder.data(slow_loader()):
        time.sleep(0.01)  # the step's own work
        recorder.step(tokens=100)
    rows = recorder.drain()
    assert [r["step"] for r in rows] == [0, 1, 2, 3] and recorder.drain() == []
    for row in rows:
        assert 0.025 <= row["data_wait_s"] <= row["step_s"]
        assert row["step_s"] - row["data_wait_s"] >= 0.009
        assert row["tokens"] == 100
    assert rows[1]["t_end"] > rows[0]["t_end"]


def test_callbacks_count_the_gap_between_steps_as_waiting():
    recorder = StepRecorder(rank=3)
    recorder.begin()
    time.sleep(0.01)
    recorder.step()
    time.sleep(0.03)  # the framework fetches the next batch
    recorder.begin()
    time.sleep(0.01)
    recorder.step()
    first, second = recorder.drain()
    assert first["data_wait_s"] == 0.0 and first["rank"] == 3
    assert second["data_wait_s"] >= 0.025 and second["step_s"] >= second["data_wait_s"] + 0.009


def test_step_stats_tokens_per_s_and_mfu_follow_their_definitions():
    steps = steps_rows([(5.0, 0.0)] + [(0.5, 0.1), (0.25, 0.05), (0.25, 0.05)], tokens=1000)
    workload = {"flops_per_token": 6e9, "peak_tflops_per_device": 100.0}
    stats = step_stats(steps, workload, warmup=1)
    assert stats.measured_steps == 3 and stats.steps == 4
    assert stats.tokens_per_s == pytest.approx(3000 / 1.0)
    assert stats.model_tflops_per_device == pytest.approx(3000 * 6e9 / 1e12)
    assert stats.mfu == pytest.approx(3000 * 6e9 / 1e12 / 100.0)
    assert stats.data_wait_share == pytest.approx(0.2)
    assert stats.step_time_s["median"] == 0.25 and stats.step_time_s["max"] == 0.5


def test_ranks_add_their_throughput_and_count_as_devices():
    steps = steps_rows([(1.0, 0.0)] * 3, rank=0, tokens=100) + \
        steps_rows([(1.0, 0.0)] * 3, rank=1, tokens=100, start_id=10)
    stats = step_stats(steps, {"flops_per_token": 1e12, "peak_tflops_per_device": 1000.0}, warmup=0)
    assert stats.tokens_per_s == pytest.approx(200) and stats.devices == 2
    assert stats.mfu == pytest.approx(100 * 1e12 / 1e12 / 1000.0)


def test_missing_figures_stay_missing():
    stats = step_stats(steps_rows([(1.0, 0.0)] * 3, tokens=None), {}, warmup=1)
    assert stats.tokens_per_s is None and stats.mfu is None and stats.model_tflops_per_device is None
    assert step_stats([], {}, 1).step_time_s is None


def test_comparison_reads_like_the_issue():
    assert comparison_text(0.84, 0.61) == "measured 0.84 s/step, estimated 0.61 s — 38% slower"
    assert comparison_text(0.5, 0.61).endswith("18% faster")
    assert comparison_text(0.62, 0.61).endswith("as estimated")
    stats = step_stats(steps_rows([(0.84, 0.0)] * 4), {}, warmup=1)
    result = compare(stats, {"step_time_s": 0.61, "tokens_per_s": 8000.0, "n_gpus": 8, "mfu": 0.4})
    assert result.ratio == pytest.approx(0.84 / 0.61)
    assert result.estimated_tokens_per_s_per_device == 1000.0
    assert compare(stats, None) is None


def test_live_figures_over_the_recent_steps():
    steps = steps_rows([(0.5, 0.25)] * 30, tokens=500)
    figures = recent_step_figures(steps, 30, {"flops_per_token": 2e12, "peak_tflops_per_device": 4000.0})
    assert figures["steps"] == 30 and figures["step_s"] == 0.5
    assert figures["tokens_per_s"] == pytest.approx(1000.0)
    assert figures["data_wait_share"] == pytest.approx(0.5)
    assert figures["mfu"] == pytest.approx(1000 * 2e12 / 1e12 / 4000.0)
    assert recent_step_figures([], 0, {})["mfu"] is None


def test_without_a_step_signal_the_diagnosis_says_what_it_did_not_see():
    from trainrig.monitor.analysis import diagnosis_summary
    from trainrig.monitor.findings import Check

    checks = [Check("memory_pressure", "ok"), Check("data_loading", "not_evaluated", "needs 3 timed steps")]
    blind = diagnosis_summary([], checks, steps=0)
    assert "no step signal" in blind and "nothing holds" not in blind
    assert "too little was observed" in diagnosis_summary([], [checks[1]], steps=5)
    seen = diagnosis_summary([], checks, steps=50)
    assert seen.startswith("nothing holds") and "1 could not run (data_loading)" in seen
