"""Expert tensor parallelism apart from tp (`training.expert_tp`, Megatron-Core's
expert_tensor_parallel_size): with expert_tp below tp the experts' ranks fold the tensor-parallel
ones into expert parallelism (MoE parallel folding), counted by hand on a small MoE model."""

from __future__ import annotations

import pytest

from jobs import make_job
from trainrig import estimate
from trainrig.errors import TrainrigError
from trainrig.estimate import collectives as comm
from trainrig.estimate.flops import model_flops_per_token
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.memory import local_parameter_counts
from trainrig.estimate.params import DEFAULT_PARAMETERS as P
from trainrig.estimate.traffic import _folded_expert_tp_saving, expert_parallel_s
from trainrig.specs.job import expert_tp_degree

MOE = {"n_layers": 4, "hidden": 256, "n_heads": 4, "ffn_hidden": 512, "vocab": 1000, "n_experts": 8, "top_k": 2}


def job(model=None, **training):
    settings = {"seq_len": 1024, "global_batch": 16, "tp": 2, "sequence_parallel": True, **training}
    return make_job(model={**MOE, **(model or {})}, training=settings)


def test_experts_are_split_over_ep_times_expert_tp():
    # 8 GPUs, tp 2, dp 4: ep 4 with whole experts holds what ep 2 with experts split in two holds
    folded = local_parameter_counts(inputs_from_job(job(ep=4, expert_tp=1), P))[1]
    split = local_parameter_counts(inputs_from_job(job(ep=2), P))[1]
    expert_params = 4 * 8 * 3 * 256 * 512  # layers × experts × one gated expert
    assert float(folded) == float(split) == pytest.approx(expert_params / 4)


def test_expert_parallelism_may_span_the_tensor_parallel_ranks_only_when_folded():
    assert job(ep=8, expert_tp=1).training.ep == 8  # 8 = tp 2 × dp 4
    with pytest.raises(TrainrigError) as error:
        job(ep=8, expert_tp=2)  # experts split over tp need ep within dp = 4
    assert error.value.field == "training.expert_tp"
    with pytest.raises(TrainrigError) as error:
        job(ep=16)  # more than the 8 ranks there are
    assert error.value.field == "training.ep"


def test_an_ep_past_dp_folds_the_experts_and_says_so():
    # Megatron-Bridge tables give tp and ep only (Qwen3-235B on H100: tp 2, ep 32 over dp 16); the
    # one layout that runs it has expert_tp 1, which the estimate then assumes and names
    inferred, given = job(ep=8), job(ep=8, expert_tp=1)
    assert expert_tp_degree(inferred.training) == 1
    assert float(local_parameter_counts(inputs_from_job(inferred, P))[1]) == float(
        local_parameter_counts(inputs_from_job(given, P))[1])
    result = estimate(inferred)
    assert result.config["expert_tp"] == 1
    assert any("ep 8 spans the tensor-parallel ranks" in line for line in result.assumptions)
    assert not any("spans the tensor-parallel" in line for line in estimate(given).assumptions)
    assert expert_tp_degree(job(ep=4).training) == 2  # within dp: experts split over tp, as before
    with pytest.raises(TrainrigError) as error:
        job({"n_experts": 0, "top_k": 0}, expert_tp=1)
    assert error.value.field == "training.expert_tp"


def test_a_folded_rank_dispatches_only_its_sequence_shard():
    x = inputs_from_job(job(ep=8, expert_tp=1), P)
    tokens = 1024.0
    # each rank's 512 sequence-parallel tokens, top-2, 256 wide in bf16, over 8 consecutive ranks
    one = comm.all_to_all_time_s(tokens / 2 * 2 * 256 * 2, comm.GroupLinks(8.0, 1.0, x, P))
    exposed, unpaired = expert_parallel_s(x, P, tokens, gemm=None)  # (no pairing: no GEMMs read)
    assert float(exposed) == float(unpaired) == pytest.approx(4 * 4 * float(one))


def test_the_same_model_flops_whatever_the_expert_layout():
    assert float(model_flops_per_token(inputs_from_job(job(ep=8, expert_tp=1), P))) == pytest.approx(
        float(model_flops_per_token(inputs_from_job(job(ep=2), P))))


def test_folded_moe_layers_skip_the_mlp_side_tp_collectives_unless_a_shared_expert_runs():
    x = inputs_from_job(job(ep=8, expert_tp=1), P)
    assert float(_folded_expert_tp_saving(x, 4.0)) == 4 * 2  # one unit forward, one backward, per layer
    shared = inputs_from_job(job({"n_shared_experts": 1}, ep=8, expert_tp=1), P)
    assert float(_folded_expert_tp_saving(shared, 4.0)) == 0.0
    assert float(_folded_expert_tp_saving(inputs_from_job(job(ep=2), P), 4.0)) == 0.0
