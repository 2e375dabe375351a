"""The fine-tuning measured runs and the scores `trainrig validate` gives them.

Structure and unit conversions only: the memory model is being changed, so no accuracy figure of
the estimator is asserted here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from trainrig import estimate
from trainrig.catalog.cases import BUNDLED_CASES_DIR, MEASURED_METRICS, MEMORY_METRICS, load_cases
from trainrig.errors import TrainrigError
from trainrig.estimate.validation import predicted_metrics, score_cases, source_family

FINETUNE = BUNDLED_CASES_DIR / "finetune.yaml"
LITGPT = "LitGPT tutorials/resource-tables.md"
TORCHTUNE = "torchtune README Optimization flags table"
FLASH2 = "Dao 2023 FlashAttention-2"
# FlashAttention-2 paper, Table 1: model TFLOP/s per GPU, as printed
FLASH2_TFLOPS = {"1p3b_2k_fa1": 189, "1p3b_2k_fa2": 196, "1p3b_8k_fa1": 170, "1p3b_8k_fa2": 220,
                 "2p7b_2k_fa1": 189, "2p7b_2k_fa2": 205, "2p7b_8k_fa1": 175, "2p7b_8k_fa2": 225}

SMALL_RUN = """
    id: {id}
    source: our cluster, 2026-11-01
    model: llama2-7b
    hardware: {{gpu: A100-SXM4-80GB, n_gpus: 1}}
    training: {{seq_len: 1024, global_batch: 8, micro_batch: 1, method: lora}}
    measured: {measured}
"""
# a full fine-tune of a 70B model on one GPU needs over 1 TB: no estimate can call it a fit
HUGE_RUN = """
    id: {id}
    source: our cluster, 2026-11-01
    model: llama2-70b
    hardware: {{gpu: A100-SXM4-80GB, n_gpus: 1}}
    training: {{seq_len: 1024, global_batch: 8, micro_batch: 1}}
    measured: {measured}
"""


def write_case(tmp_path, measured: str, template: str = SMALL_RUN, ident: str = "mine"):
    path = tmp_path / f"{ident}.yaml"
    path.write_text(textwrap.dedent(template.format(id=ident, measured=measured)))
    return path


@pytest.fixture(scope="module")
def finetune_cases():
    return load_cases([FINETUNE])


# ---- the bundled file ------------------------------------------------------------------------


def test_the_bundled_finetune_file_loads_with_three_source_families(finetune_cases):
    assert len(finetune_cases) == 52
    assert len({c.id for c in finetune_cases}) == 52
    families = {source_family(c.source) for c in finetune_cases}
    assert families == {LITGPT, TORCHTUNE, FLASH2}
    assert all(c.note for c in finetune_cases)
    # the unpacked torchtune baseline cannot be scored (its peak batch is unknown): left out
    assert "torchtune2411_llama32_3b_full_baseline" not in {c.id for c in finetune_cases}
    # and the default set includes the file
    assert {c.id for c in finetune_cases} <= {c.id for c in load_cases()}


def test_each_source_keeps_its_own_memory_unit(finetune_cases):
    for case in finetune_cases:
        family = source_family(case.source)
        if family == LITGPT:
            assert case.oom or set(case.measured) == {"memory_gb"}, case.id
        elif family == TORCHTUNE:
            assert set(case.measured) == {"memory_active_gib", "tokens_per_s_per_gpu"}, case.id
        else:
            assert set(case.measured) == {"tokens_per_s_per_gpu"}, case.id
    assert sum(c.oom for c in finetune_cases) == 8
    assert all(not c.measured for c in finetune_cases if c.oom)


def test_source_facts_map_onto_the_job_fields(finetune_cases):
    by_id = {c.id: c.job.training for c in finetune_cases}
    nf4 = by_id["litgpt2310_lora_llama2_7b_nf4_mbs1_1xa100"]
    assert (nf4.method, nf4.quantization, nf4.optimizer) == ("qlora", "nf4", "paged_adamw")
    assert by_id["litgpt2310_lora_llama2_7b_nf4dq_mbs1_1xa100"].quantization == "nf4-double"
    single = by_id["litgpt2310_lora_phi15_bf16_mbs4_1xa100"]
    assert (single.master_weights, single.lora_modules, single.lora_rank) == (False, ("q", "v"), 8)
    assert (single.seq_len, single.packing, single.loss, single.framework) == (1044, False, "chunked", "litgpt")
    assert (single.zero, single.recompute, single.grad_accum) == (0, "none", 32)
    fsdp = by_id["litgpt2310_lora_llama2_13b_bf16_mbs1_4xa100"]
    assert (fsdp.zero, fsdp.recompute, fsdp.seq_len, fsdp.global_batch) == (3, "full", 1304, 512)
    qlora = by_id["torchtune2411_llama32_3b_qlora_flags"]
    assert (qlora.method, qlora.quantization, qlora.lora_rank, qlora.packing) == ("qlora", "nf4-double", 64, True)
    assert qlora.lora_modules == ("q", "v", "o", "gate", "up", "down")
    assert by_id["torchtune2411_llama32_3b_full_packed"].fused_kernels is False
    assert by_id["torchtune2411_llama32_3b_full_packed_compile"].fused_kernels is True
    assert by_id["torchtune2411_llama32_3b_full_optinbwd"].optimizer_in_backward is True
    assert by_id["torchtune2411_llama32_3b_full_adamw8bit"].optimizer == "adam8bit"
    assert by_id["fa2paper_gpt3_2p7b_8k_fa1_8xa100"].flash_attention_version == 1
    assert by_id["fa2paper_gpt3_2p7b_8k_fa2_8xa100"].flash_attention_version == 2


def test_flash2_throughput_is_converted_with_the_papers_flop_formula(finetune_cases):
    flash2 = [c for c in finetune_cases if source_family(c.source) == FLASH2]
    assert len(flash2) == len(FLASH2_TFLOPS)
    for case in flash2:
        key = case.id.removeprefix("fa2paper_gpt3_").removesuffix("_8xa100")
        model, s = case.job.model, case.job.training.seq_len
        flops_per_sequence = 6 * s * model.n_params + 12 * model.n_layers * model.hidden * s**2
        expected = FLASH2_TFLOPS[key] * 1e12 * s / flops_per_sequence
        assert case.measured["tokens_per_s_per_gpu"] == pytest.approx(expected, abs=0.06), case.id
        assert f"{model.n_params:,}" in case.note  # the note states the N it used


# ---- the new measured keys ---------------------------------------------------------------------


def test_memory_keys_are_parsed_and_converted_to_gib(tmp_path):
    path = write_case(tmp_path, "{memory_gb: 4.82, memory_active_gib: 4.5, memory_reserved_gib: 5.25}")
    (case,) = load_cases([path])
    assert case.measured == {"memory_gb": 4.82, "memory_active_gib": 4.5, "memory_reserved_gib": 5.25}
    assert not case.oom
    # by hand: 4.82 GB = 4.82e9 bytes = 4.82e9 / 1,073,741,824 GiB
    assert case.memory_gib["memory_gb"] == pytest.approx(4.48897, abs=1e-5)
    assert case.memory_gib["memory_active_gib"] == 4.5
    assert case.memory_gib["memory_reserved_gib"] == 5.25


def test_each_memory_metric_is_scored_against_its_own_estimate_in_its_own_unit(tmp_path):
    path = write_case(tmp_path, "{memory_gib: 4.5, memory_gb: 4.82, memory_active_gib: 4.5,"
                                " memory_reserved_gib: 5.25, tokens_per_s_per_gpu: 3000}")
    (case,) = load_cases([path])
    est = estimate(case.job, advise_fit=False)
    (score,) = score_cases([case]).cases
    allocated_gib = est.memory_allocated_gib
    assert allocated_gib > 0 and est.memory_reserved_gib >= allocated_gib
    assert score.predicted["memory_gib"] == pytest.approx(allocated_gib)
    assert score.predicted["memory_active_gib"] == pytest.approx(allocated_gib)
    assert score.predicted["memory_gb"] == pytest.approx(allocated_gib * 2**30 / 1e9)
    assert score.predicted["memory_reserved_gib"] == pytest.approx(est.memory_reserved_gib)
    # the error does not depend on the unit: 4.82 GB against the same peak in GiB
    in_gib = (allocated_gib - 4.82e9 / 2**30) / (4.82e9 / 2**30) * 100
    assert score.error_pct["memory_gb"] == pytest.approx(in_gib)
    assert set(score.memory_errors_pct) == set(MEMORY_METRICS)
    assert predicted_metrics(est).keys() >= set(MEASURED_METRICS) - {"oom"}


def test_an_oom_case_is_scored_as_a_fit_verdict_only(tmp_path):
    ran = write_case(tmp_path, "{memory_gb: 20.0}", ident="ran")
    oom = write_case(tmp_path, "{oom: true}", template=HUGE_RUN, ident="ran_out")
    cases = load_cases([ran, oom])
    assert cases[1].oom and cases[1].measured == {}
    report = score_cases(cases)
    scored = {c.id: c for c in report.cases}
    assert scored["ran_out"].predicted == {} and scored["ran_out"].error_pct == {}
    assert scored["ran_out"].fits is False and scored["ran_out"].fit_right
    family = source_family(cases[0].source)
    # one memory error (the run that ran), no throughput, and both verdicts
    assert report.mape_by_source == {}
    assert set(report.memory_mape_by_source) == {family}
    assert report.fit_by_source[family][1] == 2
    assert report.fit_total == 2
    assert report.to_dict()["fit_verdicts_total"] == 2


def test_a_run_that_ran_but_is_predicted_not_to_fit_is_a_wrong_verdict(tmp_path):
    (case,) = load_cases([write_case(tmp_path, "{memory_gib: 70.0}", template=HUGE_RUN)])
    report = score_cases([case])
    (score,) = report.cases
    assert score.fits is False and not score.fit_right
    assert (report.fit_right, report.fit_total) == (0, 1)
    assert report.to_dict()["fit_verdicts_wrong"] == ["mine"]


@pytest.mark.parametrize(("measured", "field", "words"), [
    ("{memory_mb: 4800}", "mine.measured", "'memory_mb' is not one of"),
    ("{memory_gb: '4.8 GB'}", "mine.measured.memory_gb", "positive number"),
    ("{memory_gb: true}", "mine.measured.memory_gb", "positive number"),
    ("{memory_active_gib: -3}", "mine.measured.memory_active_gib", "positive number"),
    ("{memory_reserved_gib: .nan}", "mine.measured.memory_reserved_gib", "positive number"),
    ("{oom: yes please}", "mine.measured.oom", "true or false"),
    ("{oom: true, memory_gb: 41.0}", "mine.measured.oom", "drop memory_gb or oom"),
    ("{}", "mine.measured", "needs at least one of"),
])
def test_bad_measured_values_are_one_sentence_naming_the_field(tmp_path, measured, field, words):
    with pytest.raises(TrainrigError) as caught:
        load_cases([write_case(tmp_path, measured)])
    error = caught.value
    assert error.field == field
    assert words in error.message
    assert error.message.endswith(".") and "\n" not in str(error)


# ---- the command line --------------------------------------------------------------------------


def run_validate(*args: str) -> subprocess.CompletedProcess:
    # wide enough that no source name wraps onto a second table line
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "trainrig", "validate", *args], capture_output=True, text=True,
                          timeout=300, env=env)


def test_validate_json_has_memory_and_fit_scores_per_source():
    result = run_validate(str(FINETUNE), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    for key in ("mape_tokens_per_s_per_gpu_pct", "mape_by_source_pct", "max_abs_error_pct", "memory_mape_pct",
                "n_cases", "worst", "cases", "memory_mape_by_source_pct", "fit_verdicts_by_source",
                "fit_verdicts_right", "fit_verdicts_total", "fit_verdicts_wrong"):
        assert key in data
    assert data["n_cases"] == data["fit_verdicts_total"] == 52
    assert set(data["mape_by_source_pct"]) == {TORCHTUNE, FLASH2}  # LitGPT has no throughput
    assert set(data["memory_mape_by_source_pct"]) == {TORCHTUNE, LITGPT}  # the paper has no memory
    assert data["fit_verdicts_by_source"][LITGPT]["total"] == 35
    assert data["fit_verdicts_right"] == sum(v["right"] for v in data["fit_verdicts_by_source"].values())
    mean = sum(data["mape_by_source_pct"].values()) / 2
    assert data["mape_tokens_per_s_per_gpu_pct"] == pytest.approx(mean)
    assert all({"oom", "fit_right", "fits"} <= set(case) for case in data["cases"])


def test_validate_summary_shows_a_dash_where_a_source_has_no_such_measurement():
    result = run_validate(str(FINETUNE), "--summary")
    assert result.returncode == 0, result.stderr
    lines = {line.split("│")[1].strip(): line for line in result.stdout.splitlines() if line.count("│") > 2}
    assert "—" in lines[LITGPT] and "/35" in lines[LITGPT]
    assert "—" in lines[FLASH2] and "/8" in lines[FLASH2]


def test_a_bad_measured_key_on_the_command_line_exits_2_with_one_line(tmp_path):
    result = run_validate(str(write_case(tmp_path, "{memory_mb: 4800}")))
    assert result.returncode == 2
    message = result.stderr.strip()
    assert message.startswith("error:") and "\n" not in message and "mine.measured" in message
