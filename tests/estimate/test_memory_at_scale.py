"""Issue 12, peak memory at scale: torchtitan's op-level selective recompute, PyTorch FSDP's fp32
shards, fp8 all-gather, the reduce-scatter buffers and the allocator's freed logits block, each
worked out by hand on a small Llama-style job and compared with the model's term."""

from __future__ import annotations

import pytest

from jobs import make_job
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.memory import activation_bytes_per_layer, memory_state
from trainrig.estimate.params import DEFAULT_PARAMETERS as P

H, HEADS, KV_HEADS, FFN, VOCAB, LAYERS = 1024, 8, 4, 2816, 32000, 8
LLAMA = {"n_layers": LAYERS, "hidden": H, "n_heads": HEADS, "n_kv_heads": KV_HEADS, "ffn_hidden": FFN,
         "vocab": VOCAB, "gated_mlp": True, "tied_embeddings": False}
HEAD_DIM = H // HEADS
KV = KV_HEADS * HEAD_DIM
# one layer's weights: q, k, v, o; gate, up, down; two RMSNorm scales
LAYER_LINEARS = H * (H + 2 * KV + H) + 3 * H * FFN
LAYER_PARAMS = LAYER_LINEARS + 2 * H
EIGHT = {"gpu": "H100-SXM5-80GB", "n_gpus": 8, "gpus_per_node": 8}
FSDP = {"seq_len": 2048, "micro_batch": 2, "global_batch": 16, "zero": 3, "flash_attention": True}


def state(training, model=LLAMA, hardware=EIGHT):
    job = make_job(model=model, hardware=hardware, training={**FSDP, **training})
    x = inputs_from_job(job, P)
    return job, x, {k: float(v) for k, v in memory_state(x, P).items()}


def test_op_level_selective_recompute_keeps_the_block_input_odd_matmuls_and_attention_outputs():
    """torchtitan's policy (parallelize_llama.py): the block input, the outputs of mm 1, 3, 5, 7 in
    forward order (q k v o w1 w3 w2 → q, v, w1, w2) and of the flash kernel (output + fp32 lse)."""
    _, x, _ = state({"recompute": "selective", "framework": "torchtitan"})
    tokens = 2 * 2048
    by_hand = tokens * (2 * H          # block input (the checkpoint's argument)
                        + 2 * H        # q = mm 1
                        + 2 * KV       # v = mm 3
                        + 2 * H        # attention output
                        + 4 * HEADS    # fp32 log-sum-exp per head
                        + 2 * FFN      # w1 (gate) = mm 5
                        + 2 * H)       # w2 (down) = mm 7
    saved, _ = activation_bytes_per_layer(x)
    assert float(saved) == pytest.approx(by_hand, rel=1e-12)


def test_op_level_policy_under_tp_keeps_local_shards_and_the_reduce_scatter_outputs():
    _, x, _ = state({"recompute": "selective", "tp": 2, "sequence_parallel": True, "global_batch": 8,
                     "framework": "torchtitan"})
    tokens = 2 * 2048
    by_hand = tokens * (2 * H / 2 + 2 * H / 2 + 2 * KV / 2 + 2 * H / 2 + 4 * HEADS / 2 + 2 * FFN / 2
                        + 2 * H          # down's mm output before its reduce-scatter: whole rows
                        + 2 * 2 * H / 2)  # the reduce-scatters after o and down, sequence-sharded
    saved, _ = activation_bytes_per_layer(x)
    assert float(saved) == pytest.approx(by_hand, rel=1e-12)


def test_op_level_policy_on_fused_linears_keeps_them_whole():
    """qkv o w1w3 w2: the fused qkv (mm 1) and gate/up (mm 3) outputs are kept whole; the down
    projection (mm 4) is not kept; no framework, so the layout is fused."""
    _, x, _ = state({"recompute": "selective"})
    tokens = 2 * 2048
    by_hand = tokens * (2 * H + 2 * (H + 2 * KV) + 2 * H + 4 * HEADS + 2 * 2 * FFN)
    saved, _ = activation_bytes_per_layer(x)
    assert float(saved) == pytest.approx(by_hand, rel=1e-12)


def test_megatron_selective_with_flash_keeps_everything_but_the_log_sum_exp():
    _, none, _ = state({"framework": "megatron"})
    _, selective, _ = state({"recompute": "selective", "framework": "megatron"})
    tokens = 2 * 2048
    assert float(activation_bytes_per_layer(none)[0] - activation_bytes_per_layer(selective)[0]) == pytest.approx(
        tokens * 4 * HEADS, rel=1e-12)


def test_fsdp_keeps_the_fp32_master_as_its_shard_and_no_16bit_copy():
    """PyTorch FSDP: 4 (fp32 shard) + 8 (Adam moments) bytes per parameter and rank; DeepSpeed's
    ZeRO-3 adds a 16-bit partition: 2 more."""
    job, _, fsdp = state({"recompute": "full"})
    _, _, deepspeed = state({"recompute": "full", "framework": "deepspeed"})
    n = job.model.n_params
    assert fsdp["optimizer"] == pytest.approx(8 * n / 8, rel=1e-9)
    assert (deepspeed["weights"] + deepspeed["optimizer"]) - (fsdp["weights"] + fsdp["optimizer"]) \
        == pytest.approx(2 * n / 8, rel=1e-9)


def test_fp8_all_gather_holds_the_gathered_linears_in_one_byte():
    base = {"precision": "fp8", "recompute": "full"}
    _, _, bf16_gather = state(base)
    _, _, fp8_gather = state({**base, "fp8_all_gather": True})
    # the gathered current and prefetched layers: their linears at 1 byte instead of 2
    assert bf16_gather["weights"] - fp8_gather["weights"] == pytest.approx(2 * LAYER_LINEARS * (2 - 1), rel=1e-9)


def test_fp8_all_gather_is_inert_off_fp8_and_below_zero3():
    """A plan varies precision and ZeRO stage under the job's settings: the field then changes nothing."""
    for training in ({"recompute": "full"}, {"recompute": "full", "zero": 2, "precision": "fp8"}):
        _, _, without = state(training)
        _, _, with_it = state({**training, "fp8_all_gather": True})
        assert with_it == without


def test_reserved_pool_keeps_the_freed_logits_block_and_the_reduce_scatter_streams_gradients():
    """At the start of the backward the reserved pool holds what is allocated, the fragmentation
    share of the activations, the 16-bit logits block (tokens × vocab × 2 bytes) that no fp32
    tensor of the loss fits in, and last step's fp32 gradient shards (4 bytes per parameter over
    8 ranks), freed by zero_grad on the reduce-scatter stream's blocks."""
    job, _, full = state({"recompute": "selective"})
    assert full["phase"] == 0.0
    logits_block = 2 * 2048 * VOCAB * 2
    gradient_shards = 4 * job.model.n_params / 8
    assert full["reserved"] - full["allocated"] == pytest.approx(
        P.allocator_overhead_fraction * full["activations"] + logits_block + gradient_shards, rel=1e-9)
    _, _, chunked = state({"recompute": "selective", "loss": "chunked"})
    assert chunked["reserved"] - chunked["allocated"] == pytest.approx(
        P.allocator_overhead_fraction * chunked["activations"] + gradient_shards, rel=1e-9)
    # one rank: nothing to reduce-scatter, so no side-stream gradient blocks
    one = {"gpu": "H100-SXM5-80GB", "n_gpus": 1, "gpus_per_node": 1}
    _, _, alone = state({"recompute": "selective", "loss": "chunked", "global_batch": 2}, hardware=one)
    assert alone["reserved"] - alone["allocated"] == pytest.approx(
        P.allocator_overhead_fraction * alone["activations"], rel=1e-9)


def test_end_of_backward_holds_a_layers_unsharded_gradients_and_their_fp32_reduce_scatter_input():
    """A short sequence with full recompute and a fused loss peaks at the end of the backward: every
    fp32 gradient shard, plus the layer being reduced: its bf16 gradients and the fp32 copy FSDP2
    reduce-scatters (foreach_reduce)."""
    job, x, end = state({"seq_len": 128, "recompute": "full", "loss": "fused"})
    assert end["phase"] == 1.0
    n = job.model.n_params
    assert end["gradients"] == pytest.approx(4 * n / 8 + LAYER_PARAMS * (2 + 4), rel=1e-9)


def test_ddp_keeps_its_gradient_buckets_between_steps():
    """DDP (ZeRO-0 over 8 ranks) allocates buckets holding every gradient once, at construction:
    at the start of the backward the fp32 gradient set (4 bytes per parameter) is alive already."""
    job, _, ddp = state({"zero": 0, "recompute": "selective"})
    assert ddp["phase"] == 0.0
    assert ddp["gradients"] == pytest.approx(4 * job.model.n_params, rel=1e-9)


def test_loss_parallel_holds_four_fp32_copies_of_the_local_logits():
    """torchtitan's TP loss runs through DTensor's loss_parallel, whose fused backward
    `(zeros_like(x) + exp(x)) * grad_output` holds the log-softmax x, the zeroed gradient, exp(x) and
    their sum: 16 bytes per local logit where PyTorch's own loss holds 12."""
    tp = {"tp": 2, "sequence_parallel": True, "global_batch": 8, "recompute": "full"}
    _, _, plain = state(tp)
    _, _, titan = state({**tp, "framework": "torchtitan"})
    local_logits = 2 * 2048 * VOCAB / 2
    assert titan["activations"] - plain["activations"] == pytest.approx(local_logits * (16 - 12), rel=1e-9)


@pytest.mark.parametrize("tp", [1, 2])
def test_megatron_cores_cross_entropy_holds_one_fp32_softmax_and_a_16_bit_gradient(tp):
    """Megatron-Core's vocab-parallel loss (and Megatron-Bridge's native fused one) upcasts the
    local logits into one fp32 buffer, saves it as the softmax and turns it into the gradient in
    place, returned in 16 bits: 4 + 2 bytes per local logit at any TP, where PyTorch's loss holds 12;
    `loss: fused` (Transformer Engine's in-place kernel) keeps only the 16-bit logits."""
    from trainrig.estimate.memory import logits_bytes

    layout = {"tp": tp, "sequence_parallel": tp > 1, "global_batch": 8 * 2 // tp, "zero": 0}
    local_logits = 2 * 2048 * VOCAB / tp
    for framework in ("megatron", "nemo"):
        _, x, _ = state({**layout, "framework": framework, "loss": "full"})
        assert float(logits_bytes(x, P)) == pytest.approx(local_logits * 6, rel=1e-9)
        _, fused, _ = state({**layout, "framework": framework, "loss": "fused"})
        assert float(logits_bytes(fused, P)) == pytest.approx(local_logits * 2, rel=1e-9)
    _, plain, _ = state(layout)
    assert float(logits_bytes(plain, P)) == pytest.approx(local_logits * 12, rel=1e-9)


def test_megatron_bridge_defaults_to_its_pretraining_recipes_loss_and_says_so():
    """Megatron-Bridge's pretraining recipes run Transformer Engine's cross-entropy (`loss: fused`,
    cross_entropy_fusion_impl 'te'): the job that names no loss gets it, named in the assumptions;
    Megatron-LM's stays its vocab-parallel loss (6 bytes per logit), named too."""
    from trainrig import estimate

    job, _, _ = state({"framework": "nemo", "zero": 0})
    assert job.training.loss == "fused" and "loss" not in job.training.model_fields_set
    assert any("recipes' cross-entropy (loss: fused)" in line for line in estimate(job).assumptions)
    job, _, _ = state({"framework": "nemo", "zero": 0, "loss": "full"})
    said = estimate(job).assumptions
    assert not any("recipes' cross-entropy" in line for line in said)
    assert any("own cross-entropy" in line and "6 bytes per logit" in line for line in said)
    job, _, _ = state({"framework": "megatron", "zero": 0})
    assert job.training.loss == "full"
    assert any("own cross-entropy" in line for line in estimate(job).assumptions)


def test_torchtitan_keeps_a_pipeline_stage_gathered_and_its_gradients_unsharded():
    """Under PP, torchtitan's FSDP keeps the stage's weights gathered (reshard_after_forward = not
    pp_enabled) and its fp32 gradients unsharded until the last backward (pipelining's
    backward_maybe_with_nosync): against the same job without that framework fact, the weights grow
    by the stage's 16-bit copy less the two-layer gather buffer, the end-of-backward gradients are
    the stage's in full, and the all-gathers happen once per step, not per micro-batch."""
    layout = {"pp": 2, "zero": 3, "recompute": "full", "global_batch": 64}
    _, plain_x, plain = state(layout)
    _, kept_x, kept = state({**layout, "framework": "torchtitan"})
    stage_layers = LAYERS // 2
    # the fuller end stage: its layers and the output head with the final norm (the embedding is 1024 smaller)
    stage_params = stage_layers * LAYER_PARAMS + VOCAB * H + H
    dp = 8 // 2
    # 16-bit copies of the whole stage, the embedding or head included (torchtitan wraps them alike),
    # in place of the two layers' worth of gather buffers FSDP otherwise holds
    extra_weights = stage_params * 2 * (1 - 2 / stage_layers)
    assert kept["weights"] - plain["weights"] == pytest.approx(extra_weights, rel=1e-9)
    # every gradient of the stage, unsharded, in FSDP2's fp32 reduce dtype; sharded over dp without the fact
    assert kept["gradients"] >= 4 * stage_params
    assert plain["gradients"] <= 4 * stage_params / dp * 1.01

    from trainrig import estimate
    from trainrig.specs import Job

    def dp_comm(framework: str) -> float:
        job = make_job(model=LLAMA, hardware=EIGHT, training={**FSDP, **layout, "framework": framework})
        assert isinstance(job, Job)
        return estimate(job, advise_fit=False).step_breakdown_s["dp_comm"]

    assert dp_comm("torchtitan") < dp_comm("custom")


def test_without_pipeline_parallelism_torchtitan_reshards_as_usual():
    plain, kept = state({"zero": 3})[2], state({"zero": 3, "framework": "torchtitan"})[2]
    assert kept["weights"] == plain["weights"] and kept["gradients"] == plain["gradients"]


def test_fp8_all_gather_moves_the_linears_in_one_byte_in_the_step_time_too():
    """Under fp8 all-gather, FSDP's gathers carry the layers' linears as 1-byte fp8 and the rest
    (norms, embedding, head) in 16 bits: the bytes per gathered weight are that mix, worked out by
    hand on the stage's weights, and the exposed data-parallel time can only fall."""
    from trainrig import estimate
    from trainrig.estimate.memory import gathered_bytes_per_weight

    slow = {"gpu": "H100-SXM5-80GB", "n_gpus": 16, "gpus_per_node": 8,
            "inter_node": {"bandwidth_gbps": 25, "ports_per_node": 1}}  # so the gathers show
    training = {**FSDP, "precision": "fp8", "zero": 3, "global_batch": 32}
    on_job = make_job(model=LLAMA, hardware=slow, training={**training, "fp8_all_gather": True})
    off_job = make_job(model=LLAMA, hardware=slow, training=training)
    linears = LAYERS * LAYER_LINEARS
    everything = linears + LAYERS * 2 * H + 2 * VOCAB * H + H  # + norms, embedding, head, final norm
    by_hand = (1.0 * linears + 2.0 * (everything - linears)) / everything
    assert float(gathered_bytes_per_weight(inputs_from_job(on_job, P))) == pytest.approx(by_hand, rel=1e-9)
    assert float(gathered_bytes_per_weight(inputs_from_job(off_job, P))) == 2.0
    on, off = (estimate(j, advise_fit=False).step_breakdown_s["dp_comm"] for j in (on_job, off_job))
    assert on < off


def test_an_unsharded_accumulation_is_still_reduce_scattered_into_side_stream_blocks():
    """Where FSDP accumulates the step's gradients unsharded (a pipeline stage torchtitan keeps
    gathered; no_sync micro-batches), its last backward still reduce-scatters them into sharded fp32
    blocks on the reduce-scatter stream; zero_grad frees those, and the pool keeps them out of the
    next forward's reach: the reserve grows by the sharded gradients, 4 bytes per stage parameter
    over the data-parallel group, and nothing allocated moves."""
    layout = {"pp": 2, "zero": 3, "recompute": "full", "global_batch": 64, "loss": "chunked"}
    _, x, kept = state({**layout, "framework": "torchtitan"})
    assert kept["phase"] == 0.0
    stage_params = (LAYERS // 2) * LAYER_PARAMS + VOCAB * H + H  # the fuller end stage, with the head
    sharded = 4 * stage_params / (8 // 2)
    assert kept["reserved"] - kept["allocated"] == pytest.approx(
        P.allocator_overhead_fraction * kept["activations"] + sharded, rel=1e-9)
    assert kept["releasable"] == pytest.approx(sharded, rel=1e-9)
    # accumulation in no_sync (the Hugging Face Trainer's FSDP): the same blocks, here over all 8 ranks
    hf = {"recompute": "full", "loss": "chunked", "global_batch": 64, "framework": "hf-trainer"}
    job, _, accumulated = state(hf)
    assert accumulated["releasable"] == pytest.approx(4 * job.model.n_params / 8, rel=1e-9)
    _, _, one_micro_batch = state({**hf, "global_batch": 16})  # nothing accumulates: the usual gradient blocks
    assert one_micro_batch["releasable"] == pytest.approx(4 * job.model.n_params / 8, rel=1e-9)
    assert one_micro_batch["gradients"] < accumulated["gradients"]


def test_cached_free_blocks_do_not_make_a_job_run_out_of_memory():
    """The fit rule leaves out what the caching allocator gives back before an OOM: a GPU just large
    enough for the allocated peak and its fragmentation, but not for the freed logits and gradient
    blocks, still fits; the estimate says the reserved peak is over the limit, and why."""
    from trainrig import estimate
    from trainrig.estimate.memory import memory_fit

    training = {**FSDP, "recompute": "selective"}
    job = make_job(model=LLAMA, hardware=EIGHT, training=training)
    x = inputs_from_job(job, P)
    full = memory_state(x, P)
    device, _, _ = memory_fit(x, P)
    needed = float(device - full["releasable"])
    assert full["releasable"] > 0.05 * needed  # the logits block and last step's gradient shards
    limit = 1 - P.fit_headroom_fraction
    # a GPU whose limit falls between the peak without the cached blocks and the peak with them
    memory_gib = (needed + 0.5 * float(full["releasable"])) / limit / 2**30
    tight = make_job(model=LLAMA, training=training,
                     hardware={**EIGHT, "gpu": {"base": "H100-SXM5-80GB", "memory_gib": round(memory_gib, 3)}})
    est = estimate(tight, advise_fit=False)
    assert est.fits
    assert est.memory_per_gpu_gib > est.memory_limit_gib
    assert any("caching allocator releases" in w for w in est.warnings)
    smaller = make_job(model=LLAMA, training=training, hardware={
        **EIGHT, "gpu": {"base": "H100-SXM5-80GB", "memory_gib": round(0.98 * needed / limit / 2**30, 3)}})
    assert not estimate(smaller, advise_fit=False).fits


@pytest.mark.parametrize("training", [
    {"recompute": "selective"}, {"recompute": "full", "seq_len": 128, "loss": "fused"},
    {"recompute": "full", "global_batch": 64}, {"zero": 0, "recompute": "selective"},
    {"pp": 2, "recompute": "full", "global_batch": 64, "framework": "torchtitan"},
])
def test_what_the_fit_leaves_out_is_never_allocated(training):
    """The releasable blocks are cached and free: the fit's peak (reserved less them) never falls
    below the allocated peak of either moment, and they are at most the two cached blocks."""
    _, _, s = state(training)
    assert 0.0 <= s["releasable"] <= s["reserved"] - s["allocated"] + 1e-6
