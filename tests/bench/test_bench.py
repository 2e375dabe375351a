"""`trainrig bench` on the CPU with tiny models: the built model is the spec, a step trains, the
clock's median is exact, the saved run validates, and bad input is one sentence with exit 2."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
import typer

from trainrig import load_job
from trainrig.bench import model as bench_model
from trainrig.bench import run as bench_run
from trainrig.bench import scale as bench_scale
from trainrig.bench.result import StepTimes, median_times
from trainrig.catalog.cases import load_cases
from trainrig.cli.common import run_guarded
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.memory import lora_parameters_per_layer
from trainrig.estimate.params import DEFAULT_PARAMETERS
from trainrig.specs import ModelSpec

torch = pytest.importorskip("torch")

TINY = {"name": "tiny", "n_layers": 4, "hidden": 64, "n_heads": 4, "ffn_hidden": 172, "vocab": 256}
KINDS = {
    "llama-gqa": {**TINY, "n_kv_heads": 2},
    "gpt": {**TINY, "norm": "layernorm", "bias": "all", "gated_mlp": False, "position_embedding": "learned",
            "max_positions": 64, "tied_embeddings": True},
    "qwen-qkv-bias": {**TINY, "bias": "qkv", "n_kv_heads": 1, "tied_embeddings": True},
    "explicit-head-dim": {**TINY, "head_dim": 32, "n_kv_heads": 2},
    # a dense first layer, then routed experts narrower than the dense MLP and one shared expert
    "moe-shared": {**TINY, "n_kv_heads": 2, "n_experts": 4, "top_k": 2, "expert_ffn_hidden": 48,
                   "n_shared_experts": 1, "shared_ffn_hidden": 40, "n_dense_layers": 1},
    "moe-gpt": {**TINY, "norm": "layernorm", "bias": "all", "gated_mlp": False, "n_experts": 3, "top_k": 1},
    "narrow-values": {**TINY, "n_kv_heads": 2, "v_head_dim": 8},
    # multi-head latent attention, DeepSeek-V3 style: a query latent, 16 + 8 rotary query/key channels,
    # 16 value channels per head, then a dense layer and experts
    "mla-q-latent": {**TINY, "head_dim": 24, "v_head_dim": 16, "kv_lora_rank": 32, "q_lora_rank": 48,
                     "qk_rope_head_dim": 8, "n_experts": 4, "top_k": 2, "expert_ffn_hidden": 48,
                     "n_shared_experts": 1, "n_dense_layers": 1},
    # DeepSeek-V2-Lite style (queries straight from the hidden state), with LayerNorm latents and biases
    "mla-no-q-latent": {**TINY, "head_dim": 24, "v_head_dim": 16, "kv_lora_rank": 32, "qk_rope_head_dim": 8,
                        "norm": "layernorm", "bias": "all", "gated_mlp": False},
}
MOE = KINDS["moe-shared"]
MLA = KINDS["mla-q-latent"]
TRAINING = {"seq_len": 32, "micro_batch": 2, "global_batch": 2, "precision": "bf16"}


def tiny_job(model=None, **training):
    return load_job({"model": model or KINDS["llama-gqa"], "hardware": {"gpu": "h100", "n_gpus": 1},
                     "training": {**TRAINING, **training}})


def spec_with_layers(spec: ModelSpec, n_layers: int) -> ModelSpec:
    return ModelSpec(**{**spec.model_dump(), "n_layers": n_layers})


def cli(args, capsys):
    """Run the bench verb as `trainrig` would (its error boundary included): (exit code, out, err)."""
    from trainrig.cli.commands.bench import register

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    register(app)
    code = run_guarded(app, [str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def job_file(tmp_path, model=None, **training):
    path = tmp_path / "job.json"
    path.write_text(json.dumps({"model": model or KINDS["llama-gqa"], "hardware": {"gpu": "h100", "n_gpus": 1},
                                "training": {**TRAINING, **training}}))
    return path


# -- the model is the spec --------------------------------------------------------------------------
@pytest.mark.parametrize("kind", list(KINDS))
def test_built_model_has_exactly_the_specs_parameters_for_the_built_layers(kind):
    job = tiny_job(KINDS[kind])
    built = bench_model.build_model(torch, job.model, job.training, n_layers=2)
    assert bench_model.base_param_count(built) == spec_with_layers(job.model, 2).n_params
    assert bench_model.base_param_count(built) != job.model.n_params  # 2 of 4 layers: the count saw it


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_attention_has_the_specs_attention_parameters(kind):
    spec = tiny_job(KINDS[kind]).model
    attention = bench_model.build_model(torch, spec, tiny_job().training, n_layers=1).blocks[0].attn
    assert sum(p.numel() for p in attention.parameters()) == spec.attention_params_per_layer
    # what tensor parallelism would replicate: MLA's down projections and latent norms, else nothing
    replicated = [attention.q_down, attention.q_norm, attention.kv_down, attention.kv_norm] if spec.is_mla else []
    held_whole = sum(p.numel() for module in replicated if module is not None for p in module.parameters())
    assert held_whole == spec.attention_replicated_params_per_layer


@pytest.mark.parametrize("kind", ["mla-q-latent", "mla-no-q-latent"])
def test_latent_attention_computes_each_head_and_position_by_the_definition(kind):
    """DeepSeek-V2 eq. 9-19, one head and one position at a time: query [q_C; RoPE(q_R)], key
    [k_C; RoPE(k_R)] with k_R one for all heads, causal softmax over q·k / sqrt(head_dim), values v_C."""
    from trainrig.bench import layers  # imports torch: after the skip

    spec = tiny_job(KINDS[kind]).model
    torch.manual_seed(2)
    attention = bench_model.build_model(torch, spec, tiny_job().training, n_layers=1).blocks[0].attn
    seq, heads, rope, value = 6, spec.n_heads, spec.rope_head_width, spec.value_head_width
    plain = spec.head_width - rope
    cos, sin = layers.rotary_tables(seq, rope, torch.device("cpu"))
    x = torch.randn(1, seq, spec.hidden)
    with torch.no_grad():
        got = attention(x, cos, sin)[0]
        latent, k_rope = attention.kv_down(x[0]).split([spec.kv_lora_rank, rope], dim=-1)
        key_value = attention.kv_up(attention.kv_norm(latent)).view(seq, heads, plain + value)
        q_in = x[0] if attention.q_down is None else attention.q_norm(attention.q_down(x[0]))
        q = attention.q(q_in).view(seq, heads, spec.head_width)

        def turned(t, pos):
            return layers.rotary(t, cos[pos], sin[pos])

        heads_out = []
        for h in range(heads):
            for t in range(seq):
                query = torch.cat((q[t, h, :plain], turned(q[t, h, plain:], t)))
                keys = torch.stack([torch.cat((key_value[s, h, :plain], turned(k_rope[s], s))) for s in range(t + 1)])
                weights = torch.softmax(keys @ query / math.sqrt(spec.head_width), dim=0)
                heads_out.append(weights @ key_value[: t + 1, h, plain:])
        expected = attention.o(torch.stack(heads_out).view(heads, seq, value).transpose(0, 1).reshape(seq, -1))
    assert torch.allclose(got, expected, atol=1e-5)
    assert attention.o.in_features == heads * value < heads * spec.head_width


def test_a_latent_attention_job_trains_on_the_cpu():
    job = tiny_job(MLA, micro_batch=4, global_batch=4)
    result, _ = bench_run.run_bench(job, steps=3, warmup=1, device="cpu")
    assert result.params_built == spec_with_layers(job.model, 2).n_params
    assert result.measured.loss_last < result.measured.loss_first


@pytest.mark.parametrize("kind", ["mla-q-latent", "mla-no-q-latent"])
def test_lora_on_latent_attention_adapts_its_query_and_key_value_linears_as_the_estimate_counts(kind):
    spec = KINDS[kind]
    job = tiny_job(spec, method="lora", lora_rank=4, lora_targets=["q", "v", "o"])
    result, _ = bench_run.run_bench(job, steps=1, warmup=0, device="cpu")
    hidden, heads, rank_q, rank_kv = spec["hidden"], spec["n_heads"], spec.get("q_lora_rank"), spec["kv_lora_rank"]
    rope, head, value = spec["qk_rope_head_dim"], spec["head_dim"], spec["v_head_dim"]
    # rank·(fan_in + fan_out) for q_down and q (or one q), kv_down and kv_up, and o
    query = (hidden + rank_q) + (rank_q + heads * head) if rank_q else hidden + heads * head
    key_value = (hidden + rank_kv + rope) + (rank_kv + heads * (head - rope + value))
    per_layer = 4 * (query + key_value + heads * value + hidden)
    assert result.trainable_params == 2 * per_layer
    x = inputs_from_job(job, DEFAULT_PARAMETERS)
    assert float(lora_parameters_per_layer(x)) == per_layer


def test_lora_adds_rank_r_adapters_on_every_target_and_freezes_the_base():
    job = tiny_job(method="lora", lora_rank=4, lora_targets=["q", "v", "down"])
    built = bench_model.build_model(torch, job.model, job.training, n_layers=2)
    spec = job.model
    q_out, v_out = spec.n_heads * spec.head_width, spec.kv_heads * spec.head_width
    per_layer = 4 * (spec.hidden + q_out) + 4 * (spec.hidden + v_out) + 4 * (spec.ffn_hidden + spec.hidden)
    assert bench_model.trainable_param_count(built) == 2 * per_layer
    assert bench_model.base_param_count(built) == spec_with_layers(spec, 2).n_params


def test_importing_the_bench_and_its_verb_does_not_import_torch():
    code = ("import sys, trainrig.bench, trainrig.bench.run, trainrig.bench.result, trainrig.cli.commands.bench\n"
            "print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


# -- a step trains ----------------------------------------------------------------------------------
def test_a_tiny_job_trains_on_the_cpu_with_a_finite_falling_loss():
    result, _ = bench_run.run_bench(tiny_job(), steps=3, warmup=1, device="cpu")
    m = result.measured
    assert math.isfinite(m.loss_first) and math.isfinite(m.loss_last)
    assert abs(m.loss_first - math.log(256)) < 0.5  # a random init predicts about uniformly
    assert m.loss_last < m.loss_first  # AdamW steps on the same batch: the gradients reach the weights
    assert m.peak_allocated_gib is None and m.peak_reserved_gib is None
    assert result.params_built == spec_with_layers(tiny_job().model, 2).n_params
    assert result.n_layers == 2 and result.dtype.startswith("float32")
    assert m.tokens_per_s == pytest.approx(2 * 32 / m.step_time_s)


def test_full_recompute_gives_the_same_losses_as_no_recompute():
    plain, _ = bench_run.run_bench(tiny_job(), steps=2, warmup=0, device="cpu")
    recomputed, _ = bench_run.run_bench(tiny_job(recompute="full"), steps=2, warmup=0, device="cpu")
    assert recomputed.measured.loss_last == pytest.approx(plain.measured.loss_last, rel=1e-5)


def saved_for_backward(job):
    """Tensors autograd saves in one forward of the built 2-layer model."""
    built = bench_model.build_model(torch, job.model, job.training, n_layers=2)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.numel()) or t, lambda t: t):
        built(torch.randint(256, (2, 32)))
    return len(saved)


def test_full_recompute_keeps_fewer_tensors_for_backward():
    assert saved_for_backward(tiny_job(recompute="full")) < saved_for_backward(tiny_job()) / 2


def test_each_token_gets_the_renormalized_top_k_of_its_routed_experts_plus_the_shared_ones():
    job = tiny_job(MOE)
    torch.manual_seed(1)
    moe = bench_model.build_model(torch, job.model, job.training, n_layers=2).blocks[1].mlp
    x = torch.randn(3, 5, job.model.hidden)
    with torch.no_grad():
        got = moe(x).reshape(-1, job.model.hidden)
        for row, token in enumerate(x.reshape(-1, job.model.hidden)):  # one token at a time, by the definition
            scores = token @ moe.router.weight.T
            best = sorted(range(len(scores)), key=lambda e: -float(scores[e]))[: job.model.top_k]
            gates = torch.softmax(scores[best], dim=0)  # softmax then renormalizing the k = softmax over the k
            expected = sum(g * moe.experts[e](token) for g, e in zip(gates, best, strict=True)) + moe.shared[0](token)
            assert torch.allclose(got[row], expected, atol=1e-5), row


def test_an_moe_job_trains_and_every_expert_parameter_is_counted():
    result, _ = bench_run.run_bench(tiny_job(MOE, micro_batch=4, global_batch=4), steps=3, warmup=1, device="cpu")
    assert result.params_built == spec_with_layers(tiny_job(MOE).model, 2).n_params
    assert result.measured.loss_last < result.measured.loss_first


def test_a_benched_moe_model_keeps_an_moe_layer_when_its_dense_layers_are_all_built():
    job = tiny_job({**MOE, "n_dense_layers": 3})
    mapping, notes = bench_scale.scaled_mapping(job, 2)
    assert mapping["model"]["n_dense_layers"] == 1
    assert any(note.startswith("n_dense_layers 3 → 1") for note in notes)
    assert bench_scale.scaled_mapping(tiny_job(MOE), 2)[0]["model"]["n_dense_layers"] == 1  # 1 < 2: as it was


def test_lora_job_runs_and_only_the_adapters_train():
    result, _ = bench_run.run_bench(tiny_job(method="lora", lora_rank=4), steps=2, warmup=1, device="cpu")
    assert 0 < result.trainable_params < result.params_built
    assert math.isfinite(result.measured.loss_last)


# -- timing -------------------------------------------------------------------------------------------
def fake_clock(durations):
    """now() that advances by the given (forward, backward, optimizer) of each step in turn."""
    ticks = [0.0]
    for forward, backward, optimizer in durations:
        for part in (forward, backward, optimizer):
            ticks.append(ticks[-1] + part)
        ticks.append(ticks[-1])  # the next step's first mark comes right after this one's last
    times = iter(ticks)
    return lambda: next(times)


def test_an_injected_clock_gives_the_exact_medians():
    durations = [(0.5, 1.0, 0.25), (0.125, 4.0, 0.5), (0.25, 2.0, 1.0)]  # steps 1.75, 4.625, 3.25
    result, _ = bench_run.run_bench(tiny_job(), steps=3, warmup=2, device="cpu", now=fake_clock(durations))
    m = result.measured
    assert (m.step_time_s, m.forward_s, m.backward_s, m.optimizer_s) == (3.25, 0.25, 2.0, 0.5)
    assert m.tokens_per_s == 64 / 3.25
    assert result.error_pct["step_time_s"] == pytest.approx((result.estimated["step_time_s"] - 3.25) / 3.25 * 100)
    ratio = 3.25 / result.estimated["step_time_s"]
    assert result.projection["step_time_s"] == pytest.approx(result.full_estimate["step_time_s"] * ratio)


def test_median_of_parts_is_taken_per_part():
    steps = [StepTimes(1, 1, 1), StepTimes(3, 0, 0), StepTimes(2, 5, 2)]
    figures = median_times(steps, tokens_per_step=30)
    assert figures == {"step_time_s": 3, "forward_s": 2, "backward_s": 1, "optimizer_s": 1, "tokens_per_s": 10}


# -- the verb ---------------------------------------------------------------------------------------
def test_json_has_every_figure_and_the_saved_run_validates(tmp_path, capsys):
    saved = tmp_path / "bench.json"
    code, out, err = cli([job_file(tmp_path), "--steps", "2", "--warmup", "1", "--device", "cpu", "--json",
                          "--save", saved], capsys)
    assert code == 0, err
    data = json.loads(out)
    for key in ("step_time_s", "forward_s", "backward_s", "optimizer_s", "tokens_per_s", "peak_allocated_gib"):
        assert key in data["measured"]
    assert set(data["estimated"]) == set(data["error_pct"]) == set(data["projection"])
    assert "timed step 2/2" in err
    (case,) = load_cases([saved])
    assert case.job.model.n_layers == 2 and case.job.hardware.n_gpus == 1
    assert case.measured["step_time_s"] == data["measured"]["step_time_s"]
    validated = subprocess.run([sys.executable, "-m", "trainrig", "validate", str(saved), "--json"],
                               capture_output=True, text=True)
    assert validated.returncode == 0, validated.stderr
    assert "bench-tiny-2l" in validated.stdout


def test_table_output_puts_measured_beside_estimated(tmp_path, capsys):
    code, out, err = cli([job_file(tmp_path), "--steps", "1", "--warmup", "0", "--device", "cpu"], capsys)
    assert code == 0, err
    assert "measured vs estimated" in out and "corrected by the" in out and "N/A" in out


def test_out_of_memory_is_a_result_and_saves_as_an_oom_run(tmp_path, monkeypatch):
    def no_memory(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory.")

    monkeypatch.setattr(bench_run, "measure_rank", no_memory)
    result, scaled = bench_run.run_bench(tiny_job(), steps=1, warmup=0, device="cpu")
    assert result.measured is None and result.oom_message.startswith("out of memory at 2 layers (micro-batch 2")
    saved = tmp_path / "oom.json"
    saved.write_text(json.dumps(result.measured_run(scaled, "today")))
    (case,) = load_cases([saved])
    assert case.oom


def one_sentence_error(code, err):
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    return lines[0]


def test_qlora_and_8bit_optimizers_without_bitsandbytes_are_one_sentence(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(bench_model, "has_bitsandbytes", lambda: False)
    code, _, err = cli([job_file(tmp_path, method="qlora"), "--device", "cpu"], capsys)
    assert "QLoRA needs bitsandbytes, not available here" in one_sentence_error(code, err)
    code, _, err = cli([job_file(tmp_path, optimizer="paged_adamw8bit"), "--device", "cpu"], capsys)
    assert "paged_adamw8bit needs bitsandbytes, not available here" in one_sentence_error(code, err)


@pytest.mark.parametrize("quantization", ["int8", "gptq-int4"])
def test_bases_the_bench_cannot_quantize_are_one_sentence(tmp_path, capsys, quantization):
    code, _, err = cli([job_file(tmp_path, method="lora", quantization=quantization), "--device", "cpu"], capsys)
    assert f"{quantization} bases are not available in bench yet" in one_sentence_error(code, err)


@pytest.mark.parametrize("layers", [0, 5, -1])
def test_layers_outside_the_model_are_one_sentence(tmp_path, capsys, layers):
    code, _, err = cli([job_file(tmp_path), "--layers", layers, "--device", "cpu"], capsys)
    assert "between 1 and the model's 4 layers" in one_sentence_error(code, err)


def test_a_model_the_bench_cannot_build_is_one_sentence(tmp_path, capsys):
    alibi = {**TINY, "position_embedding": "alibi"}
    code, _, err = cli([job_file(tmp_path, alibi), "--device", "cpu"], capsys)
    assert "ALiBi attention is not available in bench yet" in one_sentence_error(code, err)


def test_a_sliding_window_shorter_than_the_sequence_is_one_sentence_that_names_the_field(tmp_path, capsys):
    windowed = {**TINY, "sliding_window": 8, "full_attention_layers": 2}  # gpt-oss style: half the layers
    code, _, err = cli([job_file(tmp_path, windowed), "--device", "cpu"], capsys)
    line = one_sentence_error(code, err)
    assert "model.sliding_window: a sliding_window (8) shorter than seq_len" in line
    assert "on 2 of the 4 layers, is not available in bench yet." in line and line.count(".") == 2  # field, end


def test_lora_on_the_experts_is_one_sentence_and_lora_on_attention_runs(tmp_path, capsys):
    code, _, err = cli([job_file(tmp_path, MOE, method="lora", lora_targets=["q", "gate"]), "--device", "cpu"],
                       capsys)
    assert "LoRA on the experts' MLP linears is not available" in one_sentence_error(code, err)
    attention_only = tiny_job(MOE, method="lora", lora_rank=4, lora_targets=["q", "v"])
    result, _ = bench_run.run_bench(attention_only, steps=1, warmup=0, device="cpu")
    assert 0 < result.trainable_params < result.params_built


@pytest.mark.parametrize(("args", "words"), [(["--steps", "0"], "--steps"), (["--device", "tpu"], "--device")])
def test_bad_counts_and_devices_are_one_sentence(tmp_path, capsys, args, words):
    code, _, err = cli([job_file(tmp_path), *args], capsys)
    assert words in one_sentence_error(code, err)


# -- the CUDA-side decisions, checked on the CPU --------------------------------------------------------
def test_precision_plan_on_cuda_follows_the_job():
    plan = bench_model.precision_plan(tiny_job().training, "cuda")
    assert (plan.weight_dtype, plan.autocast_dtype) == ("float32", "bfloat16")
    pure = bench_model.precision_plan(tiny_job(master_weights=False).training, "cuda")
    assert (pure.weight_dtype, pure.autocast_dtype) == ("bfloat16", None)
    lora = bench_model.precision_plan(tiny_job(method="lora").training, "cuda")
    assert (lora.weight_dtype, lora.frozen_dtype) == ("float32", "bfloat16")
    assert bench_model.precision_plan(tiny_job().training, "cpu").autocast_dtype is None


def test_the_cuda_lora_plan_mixes_dtypes_without_error_under_cpu_autocast():
    # the GPU plan (16-bit frozen base, fp32 adapters, bf16 autocast) run on the CPU's autocast
    job = tiny_job(method="lora", lora_rank=4)
    plan = bench_model.precision_plan(job.training, "cuda")
    built = bench_model.cast_model(torch, bench_model.build_model(torch, job.model, job.training, 2), plan, "cpu")
    assert {p.dtype for p in built.parameters() if not p.requires_grad} == {torch.bfloat16}
    optimizer = torch.optim.AdamW([p for p in built.parameters() if p.requires_grad])
    tokens = torch.randint(256, (2, 32))
    loss = bench_run._step(torch, built, optimizer, tokens, tokens, lambda: torch.autocast("cpu", torch.bfloat16), None)
    assert math.isfinite(float(loss))


def test_default_layers_on_a_gpu_are_the_most_whose_estimate_fits_the_budget():
    from trainrig.bench.scale import scaled_job
    from trainrig.estimate import estimate

    job = tiny_job()
    reserved = [estimate(scaled_job(job, n)[0]).memory_reserved_gib for n in (1, 2, 3, 4)]
    assert reserved == sorted(reserved) and reserved[1] < reserved[2]
    budget_gib = (reserved[1] + reserved[2]) / 2
    assert bench_run.resolve_layers(job, None, "cuda", budget_gib) == 2
    assert bench_run.resolve_layers(job, None, "cuda", reserved[3] * 2) == 4
    assert bench_run.resolve_layers(job, None, "cuda", 0.0) == 1  # the capped allocator decides then
    assert bench_run.resolve_layers(job, None, "cpu", None) == 2


def _preset_ids():
    """Presets of every family: GPT-3 (LayerNorm, biases, learned positions, tied), Llama 2/3
    (GQA, untied), Mistral, Qwen2.5 (Q/K/V biases), Mixtral (8 experts, top 2), DeepSeek-V2-Lite
    (latent attention without a query latent, 64 routed and 2 shared experts, a dense first layer),
    gpt-oss-20b (biases on attention and on every expert linear, 32 experts, top 4)."""
    from trainrig.catalog.models import load_model

    ids = ["gpt3-125m", "gpt3-13b", "llama2-70b", "llama3-8b", "llama3.1-405b", "mistral-7b", "qwen2.5-7b",
           "mixtral-8x7b", "deepseek-v2-lite", "gpt-oss-20b"]
    return [(name, load_model(name)) for name in ids]


@pytest.mark.parametrize(("name", "spec"), _preset_ids(), ids=lambda v: v if isinstance(v, str) else "")
def test_preset_models_built_on_the_meta_device_have_the_specs_parameter_count(name, spec):
    training = tiny_job().training
    with torch.device("meta"):  # shapes only: no memory, so the real sizes can be checked
        built = bench_model.build_model(torch, spec, training, n_layers=spec.n_layers)
    assert bench_model.base_param_count(built) == spec.n_params


# -- fp8 --------------------------------------------------------------------------------------------------
def test_an_fp8_linear_rounds_like_fp8_but_computes_the_same_linear_and_gradients():
    from trainrig.bench import layers

    torch.manual_seed(0)
    exact = torch.nn.Linear(64, 48)
    fp8 = layers.Fp8Linear(exact)
    x = torch.randn(2, 16, 64, requires_grad=True)
    y_exact, y_fp8 = exact(x), fp8(x)
    relative = (y_fp8 - y_exact).norm() / y_exact.norm()
    assert 1e-4 < relative < 0.1  # e4m3 keeps 3 mantissa bits: a few percent off, never exact
    grad = torch.randn_like(y_exact)
    exact_grads = torch.autograd.grad(y_exact, (x, exact.weight), grad)
    fp8_grads = torch.autograd.grad(y_fp8, (x, exact.weight), grad)
    for e, f in zip(exact_grads, fp8_grads, strict=True):
        assert f.shape == e.shape and 1e-4 < (f - e).norm() / e.norm() < 0.15  # e5m2 gradients: 2 mantissa bits


def test_an_fp8_job_runs_its_block_linears_in_fp8_and_trains():
    job = tiny_job(precision="fp8")
    built = bench_model.build_model(torch, job.model, job.training, n_layers=2)
    kinds = {type(m).__name__ for block in built.blocks for m in block.modules()}
    assert "Fp8Linear" in kinds and "Linear" not in kinds
    assert type(built.head).__name__ == "Linear"  # the LM head stays in 16 bits
    assert bench_model.base_param_count(built) == spec_with_layers(job.model, 2).n_params
    result, _ = bench_run.run_bench(job, steps=3, warmup=1, device="cpu")
    assert "fp8 linears" in result.dtype and result.measured.loss_last < result.measured.loss_first


def test_fp8_on_cuda_is_bf16_autocast_and_needs_an_ada_or_newer_gpu():
    plan = bench_model.precision_plan(tiny_job(precision="fp8").training, "cuda")
    assert (plan.weight_dtype, plan.autocast_dtype) == ("float32", "bfloat16") and "fp8 linears" in plan.label

    def fake_torch(capability):
        cuda = type("Cuda", (), {"get_device_capability": staticmethod(lambda _: capability),
                                 "get_device_name": staticmethod(lambda _: "NVIDIA A100-SXM4-80GB")})
        return type("Torch", (), {"cuda": cuda})

    training = tiny_job(precision="fp8").training
    bench_model.check_fp8_device(fake_torch((9, 0)), training, "cuda")  # Hopper: fine
    with pytest.raises(bench_model.TrainrigError, match="compute capability 8.9 or newer.*A100.* is 8.0"):
        bench_model.check_fp8_device(fake_torch((8, 0)), training, "cuda")


@pytest.mark.parametrize(("model", "training", "words"), [
    (None, {"method": "lora"}, "fp8 with LoRA is not available"),
    (MOE, {}, "fp8 experts are not available"),
])
def test_fp8_with_lora_or_experts_is_one_sentence(tmp_path, capsys, model, training, words):
    code, _, err = cli([job_file(tmp_path, model, precision="fp8", **training), "--device", "cpu"], capsys)
    assert words in one_sentence_error(code, err)


# -- QLoRA and the job's optimizer ---------------------------------------------------------------------
def test_a_qlora_job_stores_every_block_linear_in_nf4_and_trains_only_the_adapters():
    pytest.importorskip("bitsandbytes")
    job = tiny_job(method="qlora", lora_rank=4, lora_targets=["q", "v"])
    result, _ = bench_run.run_bench(job, steps=3, warmup=1, device="cpu")
    assert result.params_built == spec_with_layers(job.model, 2).n_params  # counted before packing
    assert result.measured.loss_last < result.measured.loss_first
    built = bench_model.build_model(torch, job.model, job.training, n_layers=2)
    plan = bench_model.precision_plan(job.training, "cpu")
    quantized = bench_model.quantize_base(torch, built, job.training, plan, "cpu")
    linears = [m for block in quantized.blocks for m in block.modules() if "Linear" in type(m).__name__]
    bases = [m for m in linears if type(m).__name__ == "Linear4bit"]
    assert len(bases) == 2 * 7 and not any(type(m).__name__ == "Linear" for m in linears)  # q k v o gate up down
    assert all(m.weight.quant_state.nested for m in bases)  # nf4-double: the constants quantized too
    assert bases[0].weight.dtype == torch.uint8 and bases[0].weight.numel() * 2 == bases[0].in_features * \
        bases[0].out_features  # two 4-bit codes per byte
    trainable = {n.rsplit(".", 1)[-1] for n, p in quantized.named_parameters() if p.requires_grad}
    assert trainable == {"lora_a", "lora_b"}


@pytest.mark.parametrize(("optimizer", "kind"), [("adam8bit", "AdamW8bit"), ("paged_adamw", "PagedAdamW"),
                                                 ("paged_adamw8bit", "PagedAdamW8bit"), ("sgd", "SGD"),
                                                 ("adafactor", "Adafactor"), ("adamw", "AdamW")])
def test_the_jobs_optimizer_is_the_one_that_steps(optimizer, kind):
    if optimizer in bench_model.BITSANDBYTES_OPTIMIZERS:
        pytest.importorskip("bitsandbytes")
    job = tiny_job(optimizer=optimizer)
    built = bench_model.build_model(torch, job.model, job.training, n_layers=1)
    made = bench_model.make_optimizer(torch, built, job.training, "cpu")
    assert type(made).__name__ == kind
    result, _ = bench_run.run_bench(job, layers=1, steps=2, warmup=1, device="cpu")
    assert math.isfinite(result.measured.loss_last)
