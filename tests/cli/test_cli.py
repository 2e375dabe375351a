"""The command line end to end: contract keys, catalog listings, and one-sentence errors (exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

import trainrig

DESIGN_GPU_IDS = (
    "V100-SXM2-32GB", "V100-SXM3-32GB", "V100-PCIE-32GB", "A100-SXM4-40GB", "A100-SXM4-80GB",
    "A100-PCIE-80GB", "H100-SXM5-80GB", "H100-PCIE-80GB", "H100-NVL-94GB", "H200-SXM5-141GB", "H20", "B200",
    "L40S", "L4", "A10", "A40", "RTX-A6000", "RTX-6000-ADA", "RTX-3090", "RTX-4090", "RTX-5090", "T4",
    "MI100", "MI210", "MI250X", "MI300X", "MI325X", "GAUDI2", "GAUDI3",
)
ESTIMATE_FLAGS = ["estimate", "--model", "llama3-8b", "--gpu", "h100", "--gpus", "8", "--zero", "3",
                  "--seq-len", "8192", "--micro-batch", "1", "--global-batch", "256"]


def run(*args: str, check_rc: int | None = 0) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "trainrig", *args], capture_output=True, text=True, timeout=120)
    if check_rc is not None:
        assert result.returncode == check_rc, result.stdout + result.stderr
    return result


def test_estimate_with_flags_prints_every_contract_key_and_matches_the_python_api():
    data = json.loads(run(*ESTIMATE_FLAGS, "--price", "2.5", "--json").stdout)
    for key in ("fits", "memory_per_gpu_gib", "memory_breakdown_gib", "step_time_s", "step_breakdown_s",
                "tokens_per_s", "model_tflops_per_gpu", "hardware_tflops_per_gpu", "mfu", "bottleneck",
                "total_time_s", "gpu_hours", "cost_usd", "warnings"):
        assert key in data
    job = trainrig.load_job({"model": "llama3-8b", "hardware": {"gpu": "h100", "n_gpus": 8},
                             "training": {"zero": 3, "seq_len": 8192, "micro_batch": 1, "global_batch": 256}})
    assert trainrig.estimate(job, price_usd_per_gpu_hour=2.5).to_dict() == data


def test_without_a_price_the_cli_quotes_the_cheapest_catalog_offer():
    data = json.loads(run(*ESTIMATE_FLAGS, "--tokens", "1e11", "--json").stdout)
    offers = [o for o in trainrig.load_catalog().offers if o.gpu == "H100-SXM5-80GB" and o.usd_per_gpu_hour]
    cheapest = min(o.usd_per_gpu_hour for o in offers)
    assert data["price_usd_per_gpu_hour"] == cheapest
    assert data["cost_usd"] == pytest.approx(data["gpu_hours"] * cheapest)
    assert any("cheapest catalog offer" in note for note in data["notes"])


def test_estimate_table_names_the_bottleneck():
    out = run(*ESTIMATE_FLAGS).stdout
    assert "bottleneck" in out and "Memory per GPU" in out


def test_estimate_from_a_job_file_with_what_ifs(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text(textwrap.dedent("""
        model: llama2-7b
        hardware: {gpu: A100-SXM4-80GB, n_gpus: 32, gpus_per_node: 8, inter_node: ib-hdr}
        training: {seq_len: 4096, global_batch: 256, micro_batch: 2, zero: 1, recompute: full, tokens: 1.0e+11}
    """))
    data = json.loads(run("estimate", str(job), "--json", "--what-if", "inter_node=eth-10g",
                          "--what-if", "pcie=gen3x16").stdout)
    slow = data["what_if"][0]["estimate"]
    assert data["what_if"][0]["change"] == "inter_node=eth-10g"
    assert slow["step_time_s"] > data["step_time_s"] and slow["bottleneck"] == "inter_node"
    assert data["total_time_s"] is not None


def test_gpus_json_lists_every_design_gpu_with_sources():
    gpus = {g["id"]: g for g in json.loads(run("gpus", "--json").stdout)}
    for gpu_id in DESIGN_GPU_IDS:
        assert gpus[gpu_id]["sources"], gpu_id


def test_models_json_has_exact_parameter_counts():
    models = {m["id"]: m for m in json.loads(run("models", "--json").stdout)}
    assert models["llama3-8b"]["n_params"] == 8_030_261_248
    assert models["mixtral-8x7b"]["n_params"] == 46_702_792_704


def test_validate_json_reports_the_error_table():
    data = json.loads(run("validate", "--json").stdout)
    assert data["n_cases"] >= 234
    assert set(data["mape_by_source_pct"]) >= {"vTrain", "Narayanan et al. 2021"}
    assert all("error_pct" in case for case in data["cases"])


def bad(*args: str) -> str:
    result = run(*args, check_rc=2)
    assert "Traceback" not in result.stderr + result.stdout
    message = result.stderr.strip()
    assert message.startswith("error:") and message.count("\n") <= 1, message
    return message


def test_unknown_gpu_suggests_close_names():
    message = bad("estimate", "--model", "llama3-8b", "--gpu", "h1000", "--gpus", "8")
    assert "hardware.gpu" in message and "did you mean" in message


def test_unknown_model_suggests_close_names():
    assert "did you mean" in bad("estimate", "--model", "llama3-8bb", "--gpu", "h100")


def test_tp_not_dividing_heads_names_valid_values():
    message = bad("estimate", "--model", "llama3-8b", "--gpu", "h100", "--gpus", "6", "--tp", "3",
                  "--global-batch", "6")
    assert "training.tp" in message and "valid" in message


def test_parallel_product_must_equal_gpu_count(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("model: llama3-8b\nhardware: {gpu: h100, n_gpus: 8}\ntraining: {tp: 2, dp: 2, global_batch: 8}\n")
    assert "training.dp" in bad("estimate", str(job))


def test_malformed_yaml_is_one_sentence(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("model: llama3-8b\nhardware: {gpu: h100, n_gpus: [8\n")
    assert "not valid YAML" in bad("estimate", str(job))


def test_a_config_json_that_is_not_a_decoder_llm(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "bert", "architectures": ["BertForMaskedLM"], "hidden_size": 768,
                                  "num_hidden_layers": 12, "num_attention_heads": 12, "vocab_size": 30522}))
    message = bad("estimate", "--model", str(config), "--gpu", "h100")
    assert message.startswith("error: model")


def test_unknown_training_field_is_named(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("model: llama3-8b\nhardware: {gpu: h100, n_gpus: 8}\ntraining: {zer0: 3}\n")
    assert "training.zer0" in bad("estimate", str(job))


def test_precision_the_gpu_lacks():
    assert "training.precision" in bad("estimate", "--model", "llama3-8b", "--gpu", "a100", "--precision", "fp8")


@pytest.mark.parametrize("args", [["estimate", "--what-if", "nonsense"], ["validate", "/no/such/file.yaml"]])
def test_other_bad_inputs_exit_2(args):
    if args[0] == "estimate":
        args = [*ESTIMATE_FLAGS, "--what-if", "nonsense"]
    bad(*args)


def test_validate_accepts_a_profile_for_the_users_own_runs(tmp_path):
    case = tmp_path / "mine.yaml"
    case.write_text(textwrap.dedent("""
        id: my_run
        source: our cluster, 2026-11-01
        model: llama3-8b
        hardware: {gpu: H100-SXM5-80GB, n_gpus: 8}
        training: {seq_len: 4096, global_batch: 64, zero: 3}
        measured: {tokens_per_s_per_gpu: 6000}
    """))
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps({"gpu_catalog_id": "H100-SXM5-80GB", "gemm_tflops": {"bf16": 300.0}}))
    plain = json.loads(run("validate", str(case), "--json").stdout)["cases"][0]
    measured = json.loads(run("validate", str(case), "--json", "--profile", str(profile)).stdout)["cases"][0]
    assert measured["predicted"]["tokens_per_s_per_gpu"] < plain["predicted"]["tokens_per_s_per_gpu"]


def test_a_job_file_with_tokens_in_exponent_notation_plans(tmp_path):
    # PyYAML alone reads 1.0e9 as a string (YAML 1.1); trainrig reads it as the number it is
    job = tmp_path / "job.yaml"
    job.write_text("model: gpt3-125m\nhardware: {gpu: a100, n_gpus: 8}\n"
                   "training: {seq_len: 1024, global_batch: 64, tokens: 1.0e9}\n")
    plans = json.loads(run("plan", str(job), "--gpus", "a100", "--max-gpus", "8", "--json").stdout)
    assert plans["plans"][0]["job"]["training"]["tokens"] == 1e9


def test_one_what_if_can_combine_changes_and_equals_applying_them_in_turn():
    from trainrig.catalog.job_file import apply_change

    job = {"model": "llama3-8b", "hardware": {"gpu": "H100-SXM5-80GB", "n_gpus": 8},
           "training": {"seq_len": 4096, "global_batch": 64, "lora_targets": ["q", "v"]}}
    combined = apply_change(job, "zero=3, recompute=full,training.lora_targets=[q, k, v]")
    assert combined == apply_change(apply_change(apply_change(job, "zero=3"), "recompute=full"),
                                    "training.lora_targets=[q, k, v]")
    assert combined["training"]["zero"] == 3 and combined["training"]["lora_targets"] == ["q", "k", "v"]
    assert apply_change(job, "lora_targets=[q, v, o]")["training"]["lora_targets"] == ["q", "v", "o"]  # one change
    data = json.loads(run(*ESTIMATE_FLAGS, "--tokens", "1e11", "--json", "--what-if", "zero=3, recompute=full",
                          "--what-if", "zero=3").stdout)
    both, zero_only = (entry["estimate"] for entry in data["what_if"])
    assert data["what_if"][0]["change"] == "zero=3, recompute=full"
    assert both["memory_per_gpu_gib"] < zero_only["memory_per_gpu_gib"]  # recompute keeps fewer activations
