"""Fine-tuning fields: each one's effect on memory from first principles, and the invariants."""

from __future__ import annotations

import subprocess
import sys

import pytest

from jobs import make_job
from trainrig import estimate
from trainrig.errors import TrainrigError
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.memory import memory_state
from trainrig.estimate.params import DEFAULT_PARAMETERS as P

LLAMA_SMALL = {"n_layers": 8, "hidden": 1024, "n_heads": 8, "n_kv_heads": 4, "ffn_hidden": 2816,
               "vocab": 32000, "gated_mlp": True}
ONE_GPU = {"n_gpus": 1, "gpus_per_node": 1}


def state(**training):
    base = {"seq_len": 1024, "global_batch": 2, "micro_batch": 2}
    job = make_job(model=LLAMA_SMALL, hardware=ONE_GPU, training={**base, **training})
    return job, {k: float(v) for k, v in memory_state(inputs_from_job(job, P), P).items()}


def test_pure_low_precision_drops_exactly_the_fp32_master_copy_and_halves_grads_and_moments():
    job, mixed = state()
    _, pure = state(master_weights=False)
    n = job.model.n_params
    # AdamW: master 4 + m, v 4 + 4 (mixed) vs m, v 2 + 2 (pure); fp32 gradients 4 vs 2
    assert mixed["optimizer"] - pure["optimizer"] == pytest.approx(8 * n, rel=1e-9)
    _, mixed_bwd = state(recompute="full", loss="chunked")
    _, pure_bwd = state(recompute="full", loss="chunked", master_weights=False)
    assert mixed_bwd["phase"] == pure_bwd["phase"] == 1.0  # every gradient alive at the end of backward
    assert mixed_bwd["gradients"] - pure_bwd["gradients"] == pytest.approx(2 * n, rel=1e-9)


def test_chunked_loss_removes_the_whole_batch_fp32_logits():
    job, full = state()
    _, chunked = state(loss="chunked")
    tokens = 2 * 1024
    # full: 12 bytes per logit at the start of backward; chunked: the 16-bit logits only (fused)
    expected = tokens * job.model.vocab * (P.logits_bytes_per_element - 2)
    assert full["activations"] - chunked["activations"] == pytest.approx(expected, rel=1e-9)


def test_a_fused_loss_kernel_keeps_only_the_16_bit_logits():
    job, full = state()
    _, fused = state(loss="fused")
    tokens = 2 * 1024
    expected = tokens * job.model.vocab * (P.logits_bytes_per_element - 2)
    assert full["activations"] - fused["activations"] == pytest.approx(expected, rel=1e-9)


def test_activation_offload_keeps_two_layers_of_saved_activations_on_the_gpu():
    from trainrig.estimate.memory import activation_bytes_per_layer, logits_bytes

    job, offloaded = state(activation_offload=True, recompute="full")
    x = inputs_from_job(job, P)
    saved, _ = activation_bytes_per_layer(x.with_values(recompute=2.0))
    assert offloaded["phase"] == 0.0
    assert offloaded["activations"] == pytest.approx(2 * float(saved) + float(logits_bytes(x, P)), rel=1e-9)


def test_offloaded_parameters_leave_two_gathered_layers_and_the_host_holds_the_rest():
    two = {"gpu": "H100-SXM5-80GB", "n_gpus": 2, "gpus_per_node": 2}
    base = {"seq_len": 1024, "global_batch": 2, "zero": 3}
    kept = make_job(model=LLAMA_SMALL, hardware=two, training=base)
    moved = make_job(model=LLAMA_SMALL, hardware=two, training={**base, "offload": "all"})
    nvme = make_job(model=LLAMA_SMALL, hardware=two, training={**base, "offload": "all", "offload_device": "nvme"})
    kept_state, moved_state = (memory_state(inputs_from_job(j, P), P) for j in (kept, moved))
    # PyTorch FSDP's sharded parameter is the fp32 master (cast to bf16 only when gathered): 4 bytes
    # per parameter, sharded over 2 ranks
    resident_shard = 4 * kept.model.n_params / 2
    assert float(kept_state["weights"] - moved_state["weights"]) == pytest.approx(resident_shard, rel=1e-9)
    assert float(moved_state["optimizer"]) == 0.0
    # NVMe holds the states and shards; the host keeps a staging tenth of them
    assert estimate(nvme).host_ram_gb_per_node < estimate(moved).host_ram_gb_per_node


def test_fused_linear_cross_entropy_never_builds_the_logits():
    _, chunked = state(loss="chunked")
    _, fused = state(loss="fused_linear")
    assert fused["activations"] < chunked["activations"]


def test_optimizer_in_backward_never_holds_every_gradient():
    job, plain = state(recompute="full", loss="chunked")
    _, in_backward = state(recompute="full", loss="chunked", optimizer_in_backward=True)
    assert in_backward["allocated"] < plain["allocated"]
    assert in_backward["gradients"] < 0.5 * job.model.n_params * 4


def test_paged_states_leave_the_allocator_and_the_fit():
    _, plain = state(method="qlora", optimizer="adamw")
    _, paged = state(method="qlora", optimizer="paged_adamw")
    assert paged["paged"] > 0 and plain["paged"] == 0
    assert paged["optimizer"] == pytest.approx(0.0)
    assert paged["allocated"] < plain["allocated"]


def test_lora_targets_count_rank_times_fan_in_plus_fan_out():
    job, q_v = state(method="lora", lora_rank=8, lora_targets=["q_proj", "v_proj"], master_weights=False)
    # q: 1024 → 1024, v: 1024 → 512 (4 KV heads of 128); adapters in bf16 (pure), 8 layers
    adapters = 8 * ((1024 + 1024) + (1024 + 512)) * 8
    _, no_adapters_on_v = state(method="lora", lora_rank=8, lora_targets=["q"], master_weights=False)
    assert q_v["weights"] - no_adapters_on_v["weights"] == pytest.approx(2 * 8 * (1024 + 512) * 8, rel=1e-9)
    assert q_v["optimizer"] == pytest.approx(adapters * 4, rel=1e-9)  # m and v in bf16


def test_train_embeddings_trains_a_16_bit_copy_beside_the_frozen_original():
    job, lora = state(method="lora", recompute="full", loss="chunked")
    _, with_embeddings = state(method="lora", recompute="full", loss="chunked", train_embeddings=True)
    ends = 2 * job.model.vocab * job.model.hidden  # untied embedding and head
    # PEFT modules_to_save: a trained bf16 copy beside the frozen bf16 original, bf16 gradients,
    # AdamW moments in the parameter's dtype (2 + 2 bytes)
    assert with_embeddings["weights"] - lora["weights"] == pytest.approx(2 * ends, rel=1e-9)
    assert with_embeddings["optimizer"] - lora["optimizer"] == pytest.approx(4 * ends, rel=1e-9)


@pytest.mark.parametrize("saver", [
    {"recompute": "full"}, {"recompute": "selective"}, {"activation_offload": True}, {"loss": "chunked"},
    {"loss": "fused_linear"}, {"optimizer": "adam8bit"}, {"optimizer": "paged_adamw8bit"},
    {"optimizer_in_backward": True}, {"master_weights": False}, {"offload": "optimizer"},
    {"offload": "all"}, {"zero": 1},
])
@pytest.mark.parametrize("method", ["full", "lora", "qlora"])
def test_no_memory_saver_ever_raises_memory(saver, method):
    _, before = state(method=method)
    _, after = state(method=method, **saver)
    assert after["allocated"] <= before["allocated"] * (1 + 1e-12)


def test_framework_that_accumulates_under_no_sync_keeps_unsharded_gradients_of_every_weight():
    base = {"method": "lora", "zero": 3, "recompute": "full", "master_weights": False, "seq_len": 1024,
            "micro_batch": 1, "global_batch": 16}
    hw = {"n_gpus": 2, "gpus_per_node": 2}
    litgpt = make_job(model=LLAMA_SMALL, hardware=hw, training={**base, "framework": "litgpt"})
    custom = make_job(model=LLAMA_SMALL, hardware=hw, training=base)
    grads = {name: float(memory_state(inputs_from_job(j, P), P)["gradients"]) for name, j in
             (("litgpt", litgpt), ("custom", custom))}
    # FSDP with frozen and trainable weights in one flat parameter, accumulated under no_sync:
    # a bf16 gradient for every weight, not divided by the 2 ranks
    est = estimate(litgpt)
    assert est.memory_peak_phase == "forward"
    assert grads["litgpt"] == pytest.approx(2 * litgpt.model.n_params, rel=1e-9)
    assert grads["custom"] < 0.01 * grads["litgpt"]


def test_fits_leaves_the_documented_headroom():
    # a chunked loss frees no logits block, so no cached block is left out of the fit
    training = {"seq_len": 1024, "global_batch": 2, "micro_batch": 2, "loss": "chunked"}
    job = make_job(model=LLAMA_SMALL, hardware=ONE_GPU, training=training)
    est = estimate(job)
    assert est.memory_limit_gib == pytest.approx(job.hardware.gpu.memory_gib * (1 - P.fit_headroom_fraction))
    tight = make_job(model=LLAMA_SMALL, training=training,
                     hardware={**ONE_GPU, "gpu": {"base": "H100-SXM5-80GB",
                                                  "memory_gib": est.memory_per_gpu_gib / 0.97}})
    assert not estimate(tight).fits  # 97% full is an out-of-memory crash in practice


def test_allocated_reserved_and_device_totals_are_ordered_and_sum_the_breakdown():
    est = estimate(make_job(model=LLAMA_SMALL, hardware=ONE_GPU, training={"global_batch": 2}))
    assert est.memory_allocated_gib < est.memory_reserved_gib < est.memory_per_gpu_gib
    assert sum(est.memory_breakdown_gib.values()) == pytest.approx(est.memory_per_gpu_gib, rel=1e-9)
    assert est.assumptions


def test_unpacked_batches_count_only_real_tokens_and_peak_at_seq_len():
    packed = estimate(make_job(model=LLAMA_SMALL, hardware=ONE_GPU, training={"global_batch": 4, "micro_batch": 4}))
    unpacked = estimate(make_job(model=LLAMA_SMALL, hardware=ONE_GPU, training={
        "global_batch": 4, "micro_batch": 4, "packing": False, "mean_seq_len": 512}))
    assert unpacked.memory_allocated_gib == pytest.approx(packed.memory_allocated_gib)
    assert unpacked.step_time_s < packed.step_time_s  # padded to the longest of 4, not to seq_len
    # 4 samples of up to 2·512 tokens: the longest is expected at 1024·4/5
    ratio = unpacked.tokens_per_s / packed.tokens_per_s
    assert ratio < 1.0


@pytest.mark.parametrize("training, field", [
    ({"method": "full", "quantization": "nf4"}, "training.quantization"),
    ({"method": "qlora", "quantization": "none"}, "training.quantization"),
    ({"optimizer_in_backward": True, "global_batch": 64}, "training.optimizer_in_backward"),
    ({"train_embeddings": True}, "training.train_embeddings"),
    ({"offload_device": "nvme"}, "training.offload_device"),
    ({"packing": False, "mean_seq_len": 99999}, "training.mean_seq_len"),
])
def test_impossible_combinations_are_one_sentence_naming_the_field(training, field):
    with pytest.raises(TrainrigError) as error:
        make_job(model=LLAMA_SMALL, training=training)
    assert error.value.field == field


def test_bad_values_end_in_exit_2_without_traceback(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("model: llama3-8b\nhardware: {gpu: h100, n_gpus: 1}\ntraining: {loss: sideways}\n")
    result = subprocess.run([sys.executable, "-m", "trainrig", "estimate", str(job)], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 2
    assert "training.loss" in result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_lora_target_names_of_every_stack_resolve_and_typos_do_not():
    job = make_job(model=LLAMA_SMALL, training={"method": "lora", "lora_targets": ["query", "w2", "gate_proj"]})
    assert job.training.lora_modules == ("q", "gate", "down")
    with pytest.raises(TrainrigError) as error:
        make_job(model=LLAMA_SMALL, training={"method": "lora", "lora_targets": ["qq_proj"]})
    assert error.value.field.startswith("training.lora_targets")


def test_fit_advice_offers_the_fine_tuning_savers_and_keeps_the_framework():
    from trainrig.estimate.fit_advice import smallest_fitting_change

    job = make_job(model="llama3-8b", hardware={"gpu": "A100-SXM4-80GB", **ONE_GPU},
                   training={"seq_len": 8192, "global_batch": 8, "framework": "torchtune"})
    advice = smallest_fitting_change(job, P)
    assert advice is not None and "lora" in advice  # full fine-tuning's states cannot fit 80 GB
    training = {"seq_len": 1024, "global_batch": 2, "micro_batch": 2}
    full_loss = estimate(make_job(model=LLAMA_SMALL, hardware=ONE_GPU, training=training)).memory_per_gpu_gib
    chunked = estimate(make_job(model=LLAMA_SMALL, hardware=ONE_GPU,
                                training={**training, "loss": "chunked"})).memory_per_gpu_gib
    # a GPU on which only the chunked loss fits: the cheapest saver is the one proposed
    capacity = (full_loss + chunked) / 2 / (1 - P.fit_headroom_fraction)
    small = make_job(model=LLAMA_SMALL, training=training,
                     hardware={"gpu": {"base": "H100-SXM5-80GB", "memory_gib": capacity}, **ONE_GPU})
    assert smallest_fitting_change(small, P).startswith("loss: chunked")


@pytest.mark.parametrize("name, expected", [("transformers", "hf-trainer"), ("PEFT", "hf-trainer"),
                                            ("lit-gpt", "litgpt"), ("torchtune", "torchtune")])
def test_framework_aliases_resolve_to_their_catalog_entry(name, expected):
    job = make_job(model=LLAMA_SMALL, training={"framework": name})
    assert job.training.framework == expected and job.framework.id == expected
    assert job.framework.sources


def test_an_unknown_framework_is_one_sentence_naming_the_field():
    with pytest.raises(TrainrigError) as error:
        make_job(model=LLAMA_SMALL, training={"framework": "jax-magic"})
    assert error.value.field == "training.framework"


def test_peft_prepares_a_quantized_base_with_fp32_embedding_head_and_norms():
    """QLoRA through PEFT's prepare_model_for_kbit_training (hf-trainer, axolotl) keeps the weights
    the quantizer leaves alone (embedding, head, norms) in fp32: 2 more bytes each than Unsloth or
    torchtune, whose QLoRA keeps them 16-bit; LoRA over a 16-bit base is untouched, and it is named."""
    qlora = {"method": "qlora", "quantization": "nf4", "recompute": "full", "loss": "chunked"}
    job, hf = state(**qlora, framework="hf-trainer")
    _, tune = state(**qlora, framework="torchtune")
    m = job.model
    unquantized = 2 * m.vocab * m.hidden + (2 * m.n_layers + 1) * m.hidden  # embedding, head, RMSNorm scales
    assert hf["weights"] - tune["weights"] == pytest.approx(2 * unquantized, rel=1e-9)
    _, hf_lora = state(method="lora", recompute="full", loss="chunked", framework="hf-trainer")
    _, tune_lora = state(method="lora", recompute="full", loss="chunked", framework="torchtune")
    assert hf_lora["weights"] == pytest.approx(tune_lora["weights"], rel=1e-12)
    said = estimate(make_job(model=LLAMA_SMALL, hardware=ONE_GPU, training={
        "seq_len": 1024, "global_batch": 2, "micro_batch": 2, **qlora, "framework": "hf-trainer"})).assumptions
    assert any("prepare_model_for_kbit_training" in a for a in said)


@pytest.mark.parametrize("quantization, method, cast", [("gptq-int4", "qlora", False), ("int8", "lora", True),
                                                        ("nf4-double", "qlora", True)])
def test_peft_casts_to_fp32_only_beside_a_bitsandbytes_base(quantization, method, cast):
    """prepare_model_for_kbit_training skips its fp32 cast for GPTQ bases (peft/utils/other.py,
    `if not is_gptq_quantized ...`) and applies it to every bitsandbytes one, 8-bit LoRA included."""
    job_file = {"method": method, "quantization": quantization, "recompute": "full", "loss": "chunked"}
    job, hf = state(**job_file, framework="hf-trainer")
    _, tune = state(**job_file, framework="torchtune")
    m = job.model
    unquantized = 2 * m.vocab * m.hidden + (2 * m.n_layers + 1) * m.hidden
    assert hf["weights"] - tune["weights"] == pytest.approx(2 * unquantized if cast else 0.0, abs=1.0)
    said = estimate(make_job(model=LLAMA_SMALL, hardware=ONE_GPU, training={
        "seq_len": 1024, "global_batch": 2, "micro_batch": 2, **job_file, "framework": "hf-trainer"})).assumptions
    assert any("prepare_model_for_kbit_training" in a for a in said) == cast


def test_litgpt_chunks_its_head_and_loss_unless_told_otherwise():
    """LitGPT's fine-tuning scripts run `model(input_ids, lm_head_chunk_size=128)` and
    `chunked_cross_entropy`: a LitGPT job that names no loss gets `chunked`, named."""
    base = {"method": "lora", "seq_len": 1024, "global_batch": 2, "micro_batch": 2, "framework": "litgpt"}
    job = make_job(model=LLAMA_SMALL, hardware=ONE_GPU, training=base)
    assert job.training.loss == "chunked" and "loss" not in job.training.model_fields_set
    assert any("recipes' cross-entropy (loss: chunked)" in line for line in estimate(job).assumptions)
    full = make_job(model=LLAMA_SMALL, hardware=ONE_GPU, training={**base, "loss": "full"})
    assert estimate(job).memory_per_gpu_gib < estimate(full).memory_per_gpu_gib


def test_unsloth_defaults_to_what_its_notebooks_run_and_names_each():
    """Unsloth's get_peft_model checkpoints every layer into host RAM by default
    (use_gradient_checkpointing="unsloth"), its notebooks and README benchmarks train with
    optim="adamw_8bit", and its forward computes the loss without the logits: a job that states
    none of these gets them, each named; a job that states one keeps it."""
    base = {"method": "qlora", "seq_len": 1024, "global_batch": 2, "micro_batch": 2, "framework": "unsloth"}
    job = make_job(model=LLAMA_SMALL, hardware=ONE_GPU, training=base)
    t = job.training
    assert (t.recompute, t.activation_offload, t.optimizer, t.loss) == ("full", True, "adam8bit", "fused_linear")
    assert not {"recompute", "activation_offload", "optimizer", "loss"} & t.model_fields_set
    said = estimate(job).assumptions
    assert any(line.startswith("optimizer: adam8bit, Unsloth's") for line in said)
    assert any("recompute: full with the saved activations in host RAM" in line for line in said)
    stated = make_job(model=LLAMA_SMALL, hardware=ONE_GPU,
                      training={**base, "recompute": "none", "optimizer": "adamw", "loss": "full"})
    t = stated.training
    assert (t.recompute, t.activation_offload, t.optimizer, t.loss) == ("none", False, "adamw", "full")
    assert not any("Unsloth's" in line and ("optimizer:" in line or "recompute:" in line)
                   for line in estimate(stated).assumptions)
    # the defaults change the estimate the way their bytes say: 8-bit moments, no logits, one layer kept
    plain = make_job(model=LLAMA_SMALL, hardware=ONE_GPU, training={**base, "framework": "hf-trainer"})
    assert estimate(job).memory_per_gpu_gib < estimate(plain).memory_per_gpu_gib


def test_a_layers_backward_holds_its_gradients_beside_its_rebuilt_activations():
    """At the end of the backward the layer being backpropagated holds, beside its whole saved set,
    the hidden state's incoming gradient (h) and the gradient of its gated MLP's input side (gate and
    up, 2·ffn), in the activations' dtype: the peak moves by exactly that against the saved set."""
    from trainrig.estimate.memory import activation_bytes_per_layer

    job, end = state(seq_len=128, recompute="full", loss="fused")
    assert end["phase"] == 1.0
    x = inputs_from_job(job, P)
    whole = float(activation_bytes_per_layer(x, 0.0)[1])
    tokens = 2 * 128
    gradients = tokens * 2 * (LLAMA_SMALL["hidden"] + 2 * LLAMA_SMALL["ffn_hidden"])
    assert end["activations"] == pytest.approx(whole + gradients, rel=1e-9)
