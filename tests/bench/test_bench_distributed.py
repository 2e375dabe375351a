"""Data-parallel `trainrig bench` on the CPU: two gloo processes, DDP for ZeRO 0 and FSDP for ZeRO 3.
What can be checked without a GPU: the ranks train as replicas (DDP's weights agree exactly after
every step, where ranks training apart on their own data would not), the estimate beside the
measurement is for the data-parallel job that ran, and the saved run divides tokens/s by the ranks."""

from __future__ import annotations

import json
import math

import pytest

from trainrig.bench import distributed
from trainrig.bench import run as bench_run
from trainrig.bench.result import RankRun, StepTimes, combine_ranks
from trainrig.bench.scale import scaled_mapping
from trainrig.catalog.cases import load_cases

from .test_bench import TINY, cli, job_file, one_sentence_error, tiny_job

torch = pytest.importorskip("torch")


def ranks(job, n=2, steps=2, warmup=1):
    scaled = bench_run.load_job(scaled_mapping(job, 2, n)[0])
    return distributed.run_ranks(scaled, n, "cpu", steps, warmup, None)


def test_ddp_ranks_hold_the_same_weights_after_training_on_different_data():
    runs = ranks(tiny_job())
    assert len(runs) == 2
    assert runs[0].parameter_checksum == runs[1].parameter_checksum  # gradients were averaged
    assert runs[0].loss_first != runs[1].loss_first  # ... over different tokens on each rank
    apart = [bench_run.measure_rank(torch, bench_run.load_job(scaled_mapping(tiny_job(), 2)[0]), "cpu",
                                    bench_run.make_clock(torch, "cpu"), 2, 1, None, seed=seed) for seed in (0, 1)]
    assert apart[0].parameter_checksum != apart[1].parameter_checksum  # without the reduction they drift apart


def test_fsdp_zero3_ranks_train_with_sharded_parameters():
    runs = ranks(tiny_job(zero=3))
    full = tiny_job().model.model_copy(update={"n_layers": 2}).n_params
    assert all(r.params_built == full for r in runs)  # counted before sharding
    assert all(math.isfinite(r.loss_last) for r in runs)
    assert runs[0].parameter_checksum != runs[1].parameter_checksum  # each rank holds its own shard


def test_the_bench_of_a_data_parallel_job_is_estimated_as_that_job(tmp_path):
    result, mapping = bench_run.run_bench(tiny_job(zero=1, micro_batch=1, global_batch=2), steps=2, warmup=0,
                                          device="cpu", gpus=2)
    assert result.n_gpus == 2 and result.parallel.startswith("FSDP over 2 processes")
    assert mapping["hardware"]["n_gpus"] == 2 and mapping["training"]["dp"] == 2
    assert mapping["training"]["zero"] == 2 and mapping["training"]["global_batch"] == 2
    assert any(note.startswith("zero 1 → 2") for note in result.notes)
    assert result.measured.tokens_per_s == pytest.approx(2 * 32 / result.measured.step_time_s)
    saved = tmp_path / "bench.json"
    saved.write_text(json.dumps(result.measured_run(mapping, "today")))
    (case,) = load_cases([saved])
    assert case.measured["tokens_per_s_per_gpu"] == pytest.approx(result.measured.tokens_per_s / 2)


def test_a_step_lasts_as_long_as_its_slowest_rank():
    def run(steps, loss):
        return RankRun(times=[StepTimes(*s) for s in steps], peak_allocated_gib=None, peak_reserved_gib=None,
                       loss_first=loss, loss_last=loss, params_built=1, trainable_params=1, parameter_checksum=0.0)

    fast, slow = run([(1, 1, 1), (1, 1, 1), (1, 1, 1)], 2.0), run([(1, 2, 1), (1, 1, 1), (3, 3, 3)], 4.0)
    measured = combine_ranks([fast, slow], tokens_per_step=100)
    assert measured.step_time_s == 4.0  # the slowest rank's steps are 4, 3, 9
    assert measured.tokens_per_s == 25.0 and measured.loss_last == 3.0


@pytest.mark.parametrize("gpus", [0, 17])
def test_gpus_outside_the_range_are_one_sentence(tmp_path, capsys, gpus):
    code, _, err = cli([job_file(tmp_path), "--gpus", gpus, "--device", "cpu"], capsys)
    assert "--gpus" in one_sentence_error(code, err)


def test_the_cli_runs_two_processes_and_names_them(tmp_path, capsys):
    code, out, err = cli([job_file(tmp_path, TINY), "--gpus", 2, "--device", "cpu", "--steps", 1, "--warmup", 0],
                         capsys)
    assert code == 0, err
    assert "2 × " in out and "DDP over 2 processes" in out
