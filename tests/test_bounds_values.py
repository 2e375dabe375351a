"""Issue 13, items 3, 9, 10 and 14: bounded size fields, finite positive numbers only, one sentence and
exit 2 for every bad value or usage error, and `--json` that is always strict JSON."""

from __future__ import annotations

import json
import math

import pytest
from pydantic import ValidationError

from trainrig import load_job
from trainrig.catalog.hf_config import _qwen_moe_layers, model_from_hf_mapping
from trainrig.cli.common import json_text, run_guarded
from trainrig.cli.main import app
from trainrig.errors import TrainrigError
from trainrig.plan.request import make_request
from trainrig.specs import ModelSpec, TrainingSpec
from trainrig.specs.base import MAX_LAYERS, check_number, divisors_text

MODEL = {"n_layers": 32, "hidden": 4096, "n_heads": 32, "n_kv_heads": 8, "ffn_hidden": 14336, "vocab": 128256}
HARDWARE = {"gpu": "h100", "n_gpus": 8}
FLAGS = ["estimate", "--model", "llama3-8b", "--gpu", "h100", "--gpus", "8"]
QWEN_MOE = {"model_type": "qwen2_moe", "hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 16,
            "intermediate_size": 5632, "vocab_size": 151936, "num_experts": 60, "num_experts_per_tok": 4,
            "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632, "num_hidden_layers": 24}


def cli(*args: str, capsys) -> tuple[int, str, str]:
    """The CLI in-process, through the same boundary as the `trainrig` entry point."""
    code = run_guarded(app, list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def refused(*args: str, capsys) -> str:
    """The one line of a rejection: exit 2, `error: …`, no traceback."""
    code, out, err = cli(*args, capsys=capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err + out
    return lines[0]


def job_error(model=None, hardware=None, training=None) -> TrainrigError:
    with pytest.raises(TrainrigError) as caught:
        load_job({"model": model or MODEL, "hardware": hardware or HARDWARE, "training": training or {}})
    return caught.value


# ---- item 3: bounded sizes, short divisor lists ------------------------------------------------


def test_divisors_are_complete_for_small_numbers_and_cut_short_for_large_ones():
    assert divisors_text(12) == "1, 2, 3, 4, 6, 12"
    assert divisors_text(97) == "1, 97"
    text = divisors_text(720720)  # 240 divisors
    assert text.startswith("1, 2, 3, 4, 5, 6, 7, 8, 9, 10 …") and "230 more, up to 720720" in text


def test_a_tp_that_does_not_divide_a_huge_head_count_lists_ten_valid_values():
    # 720,720 has 240 divisors: the message lists ten and says how many more, in O(√n)
    error = job_error(model={**MODEL, "n_heads": 720720, "n_kv_heads": 720720, "hidden": 720720 * 2},
                      hardware={**HARDWARE, "n_gpus": 17, "gpus_per_node": 17}, training={"tp": 17, "global_batch": 8})
    assert error.field == "training.tp"
    assert len(str(error)) < 200 and "230 more" in str(error)


def test_pp_beyond_the_layer_count_is_one_sentence_on_pp():
    error = job_error(model={**MODEL, "n_layers": 4}, hardware={**HARDWARE, "n_gpus": 8, "gpus_per_node": 8},
                      training={"pp": 8, "global_batch": 8})
    assert error.field == "training.pp" and len(str(error)) < 200


@pytest.mark.parametrize(("field", "value"), [
    ("n_layers", MAX_LAYERS + 1), ("hidden", 10**7 + 1), ("vocab", 10**8 + 1), ("n_heads", 10**6 + 1),
    ("ffn_hidden", 10**12), ("sliding_window", 10**10),
])
def test_size_fields_past_their_bound_are_refused_naming_the_field(field, value):
    assert job_error(model={**MODEL, field: value}).field == f"model.{field}"


def test_expert_count_is_bounded():
    with pytest.raises(ValidationError, match="n_experts"):
        ModelSpec.model_validate({**MODEL, "n_experts": 10**6, "top_k": 2})
    with pytest.raises(TrainrigError) as caught:
        load_job({"model": {**MODEL, "n_experts": 10**6, "top_k": 2}, "hardware": HARDWARE})
    assert caught.value.field == "model.n_experts"


@pytest.mark.parametrize(("field", "value"), [
    ("n_gpus", 10**8), ("gpus_per_node", 10**8),
])
def test_gpu_counts_are_bounded(field, value):
    assert job_error(hardware={**HARDWARE, field: value}).field == f"hardware.{field}"


def test_training_sizes_are_bounded():
    assert job_error(training={"seq_len": 10**10}).field == "training.seq_len"
    assert job_error(training={"global_batch": 10**10}).field == "training.global_batch"


def test_a_qwen2_moe_config_with_1e11_layers_is_refused_without_looping_over_them():
    with pytest.raises(TrainrigError, match="n_layers"):
        model_from_hf_mapping({**QWEN_MOE, "num_hidden_layers": 10**11, "decoder_sparse_step": 2})


@pytest.mark.parametrize(("n_layers", "step", "dense_only"), [
    (24, 1, []), (24, 2, [1, 4, 5]), (7, 3, [0, 2, 2, 6, 40]), (10, 0, []), (12, 4, [3, 7.0, "x", True]),
    (8, 2, [10**400, 1e308, math.nan, 3]),
])
def test_dense_layer_count_matches_the_layer_by_layer_rule(n_layers, step, dense_only):
    class Config:
        data = {"decoder_sparse_step": step, "mlp_only_layers": dense_only}
        file = "config.json"

        def int(self, key, default):
            return self.data.get(key, default)

    expected = sum(1 for i in range(n_layers) if i in dense_only or step <= 0 or (i + 1) % step)
    assert _qwen_moe_layers(Config(), n_layers) == expected


# ---- item 9: finite positive numbers only, never booleans ---------------------------------------


@pytest.mark.parametrize("flag", ["--price", "--tokens"])
@pytest.mark.parametrize("value", ["-1", "0", "inf", "-inf", "nan", "1e308"])
def test_estimate_refuses_non_finite_negative_and_absurd_numbers(flag, value, capsys):
    line = refused(*FLAGS, flag, value, "--json", capsys=capsys)
    assert flag in line


def test_a_negative_price_never_gives_a_negative_cost(capsys):
    assert "--price" in refused(*FLAGS, "--tokens", "1e12", "--price", "-1", "--json", capsys=capsys)


@pytest.mark.parametrize(("training", "field"), [
    ({"tokens": math.inf}, "training.tokens"), ({"tokens": math.nan}, "training.tokens"),
    ({"tokens": 1e308}, "training.tokens"), ({"tp": True}, "training.tp"), ({"zero": True}, "training.zero"),
    ({"seq_len": False}, "training.seq_len"), ({"flash_attention_version": True}, "training.flash_attention_version"),
])
def test_job_files_refuse_non_finite_numbers_and_booleans(training, field):
    assert job_error(training=training).field == field


@pytest.mark.parametrize(("hardware", "field"), [
    ({"gpu": {"base": "h100", "memory_gib": math.inf}}, "hardware.gpu.memory_gib"),
    ({"gpu": {"base": "h100", "memory_bandwidth_gbs": math.nan}}, "hardware.gpu.memory_bandwidth_gbs"),
    ({"gpu": {"base": "h100", "memory_gib": 1e308}}, "hardware.gpu.memory_gib"),
    ({"gpu": {"base": "h100", "tdp_w": True}}, "hardware.gpu.tdp_w"),
    ({"ram_gb_per_node": True}, "hardware.ram_gb_per_node"),
    ({"ram_gb_per_node": math.inf}, "hardware.ram_gb_per_node"),
    ({"profile": {"memory_bandwidth_gbs": math.inf}}, "hardware.profile.memory_bandwidth_gbs"),
    ({"profile": {"gemm_tflops": {"bf16": math.nan}}}, "hardware.profile.gemm_tflops.bf16"),
    ({"profile": {"gemm_tflops": {"bf16": True}}}, "hardware.profile.gemm_tflops"),
    ({"n_gpus": 16, "inter_node": {"bandwidth_gbps": math.inf}}, "hardware.inter_node.bandwidth_gbps"),
    ({"n_gpus": 16, "inter_node": {"bandwidth_gbps": True}}, "hardware.inter_node.bandwidth_gbps"),
])
def test_hardware_figures_must_be_finite_numbers(hardware, field):
    assert job_error(hardware={**HARDWARE, **hardware}).field == field


def test_the_web_estimate_and_plan_refuse_infinite_tokens_alike():
    """/api/estimate builds a TrainingSpec, /api/plan calls make_request: both now say tokens."""
    with pytest.raises(ValidationError, match="tokens"):
        TrainingSpec.model_validate({"tokens": math.inf})
    with pytest.raises(TrainrigError, match="tokens"):
        make_request(ModelSpec.model_validate(MODEL), math.inf, 4096, 256)


@pytest.mark.parametrize(("name", "value"), [("max_gpus", 10**9), ("budget_usd", math.inf), ("seq_len", 10**10)])
def test_plan_requests_are_bounded(name, value):
    arguments = {"model": ModelSpec.model_validate(MODEL), "tokens": 1e9, "seq_len": 4096, "global_batch": 256}
    with pytest.raises(TrainrigError) as caught:
        make_request(**{**arguments, name: value})
    assert caught.value.field == name


def test_a_batch_range_of_inf_is_one_sentence():
    with pytest.raises(TrainrigError, match="global_batch"):
        make_request(ModelSpec.model_validate(MODEL), 1e9, 4096, "512-inf")


def test_validate_refuses_a_negative_worst_count(capsys):
    assert "--worst" in refused("validate", "--worst", "-1", "--json", capsys=capsys)


@pytest.mark.parametrize("value", [True, math.nan, math.inf, -1.0, 0, 2e12])
def test_check_number_refuses_what_the_specs_refuse(value):
    with pytest.raises(TrainrigError, match="--price"):
        check_number("--price", value)


def test_json_output_turns_unknown_numbers_into_null_and_stays_strict():
    text = json_text({"cost_usd": math.inf, "mape": math.nan, "nested": [{"x": math.nan}], "ok": 1.5})
    assert json.loads(text, parse_constant=pytest.fail) == {"cost_usd": None, "mape": None, "nested": [{"x": None}],
                                                          "ok": 1.5}


def test_json_output_refuses_a_non_finite_contract_number():
    with pytest.raises(TrainrigError, match="step_breakdown_s.compute"):
        json_text({"step_breakdown_s": {"compute": math.inf}})


# ---- item 10: one sentence, not a traceback ------------------------------------------------------


@pytest.mark.parametrize("hardware", ["5", "[h100, 8]", "h100"])
@pytest.mark.parametrize("verb", ["estimate", "fit", "plan"])
def test_hardware_that_is_not_a_mapping_is_one_sentence(verb, hardware, tmp_path, capsys):
    job = tmp_path / "job.yaml"
    job.write_text(f"model: llama3-8b\nhardware: {hardware}\ntraining: {{tokens: 1.0e+9}}\n")
    line = refused(verb, str(job), capsys=capsys)
    assert "hardware" in line


def test_a_what_if_into_a_section_that_is_not_a_mapping_is_one_sentence():
    from trainrig.catalog.job_file import apply_change

    with pytest.raises(TrainrigError, match="training"):
        apply_change({"model": "llama3-8b", "training": 5}, "zero=3")


def test_a_config_with_a_hidden_size_of_1e308_is_one_sentence():
    with pytest.raises(TrainrigError, match="hidden"):
        model_from_hf_mapping({**QWEN_MOE, "model_type": "llama", "hidden_size": 1e308})


def test_a_job_with_a_hidden_of_1e308_is_one_sentence():
    assert job_error(model={**MODEL, "hidden": 1e308}).field == "model.hidden"


# ---- item 14: the right field, the option as typed, usage errors in one sentence ----------------


def test_a_pp_that_does_not_divide_the_gpus_is_blamed_on_pp_and_its_flag(capsys):
    line = refused(*FLAGS, "--pp", "3", capsys=capsys)
    assert line.startswith("error: training.pp (--pp):"), line


def test_in_a_job_file_the_culprit_degree_is_named():
    assert job_error(training={"tp": 2, "pp": 3}).field == "training.pp"
    assert job_error(training={"tp": 2, "cp": 3}).field == "training.cp"
    assert job_error(hardware={**HARDWARE, "n_gpus": 6}, training={"tp": 4, "global_batch": 6}).field \
        == "training.tp"


def test_a_flag_value_that_breaks_a_rule_names_the_flag(capsys):
    assert "(--tp)" in refused(*FLAGS, "--tp", "3", capsys=capsys)
    assert "(--seq-len)" in refused(*FLAGS, "--seq-len", "99999999999", capsys=capsys)


@pytest.mark.parametrize("args", [
    ("estimate", "--tp", "x"), ("estimate", "--bogus"), ("estimate", "--tp"), ("no-such-verb",),
    ("plan", "--max-gpus", "many"), ("fit", "--top", "1.5"), ("validate", "--worst", "nan"),
])
def test_usage_errors_are_one_sentence_and_exit_2(args, capsys):
    line = refused(*args, capsys=capsys)
    assert "╭" not in line and "--help" in line


def test_help_still_prints_and_exits_0(capsys):
    code, out, _ = cli("estimate", "--help", capsys=capsys)
    assert code == 0 and "--pp" in out
