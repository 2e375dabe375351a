"""FrameworkSpec.pp_p2p_overlap: Megatron-Core's interleaved schedule sends each chunk's activations
beside the next chunk's compute (traffic.pipeline_comm_s)."""

from __future__ import annotations

import pytest

from jobs import make_job
from trainrig import estimate
from trainrig.estimate import traffic
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.params import DEFAULT_PARAMETERS as P

LLAMA = {"n_layers": 16, "hidden": 4096, "n_heads": 32, "n_kv_heads": 8, "ffn_hidden": 14336, "vocab": 32000,
         "gated_mlp": True}


def job(framework, **training):
    return make_job(model=LLAMA, hardware={"n_gpus": 8, "gpus_per_node": 8},
                    training={"framework": framework, "seq_len": 4096, "global_batch": 32, "micro_batch": 1,
                              "pp": 4, "tp": 2, **training})


def pp_comm_s(a_job):
    return estimate(a_job, advise_fit=False).step_breakdown_s.get("pp_comm", 0.0)


def test_interleaved_sends_hide_behind_chunks_but_the_fill_and_drain_do_not():
    x = inputs_from_job(job("megatron", vpp=2), P)
    exposed = float(traffic.pipeline_comm_s(x, P, per_micro_s=1.0))  # chunks far longer than a send
    everything = float(traffic.pipeline_comm_s(x, P, per_micro_s=0.0))
    fill_drain, steady = 2 * (4 - 1), 2 * 2 * float(x.micro_batches)
    assert exposed == pytest.approx(everything * fill_drain / (fill_drain + steady), rel=1e-9)


def test_only_the_interleaved_schedule_overlaps():
    assert pp_comm_s(job("megatron", vpp=2)) < pp_comm_s(job("custom", vpp=2))
    assert pp_comm_s(job("megatron")) == pytest.approx(pp_comm_s(job("custom")), rel=1e-9)


@pytest.mark.parametrize("framework", ["megatron", "nemo"])
def test_named_in_the_assumptions(framework):
    said = estimate(job(framework, vpp=2), advise_fit=False).assumptions
    assert any("overlap_p2p_comm" in line for line in said)
    assert not any("overlap_p2p_comm" in line for line in estimate(job(framework), advise_fit=False).assumptions)


def test_the_job_states_it_either_way():
    assert pp_comm_s(job("megatron", vpp=2, pp_comm_overlap=False)) == pytest.approx(
        pp_comm_s(job("custom", vpp=2)), rel=1e-9)
    assert pp_comm_s(job("custom", vpp=2, pp_comm_overlap=True)) == pytest.approx(
        pp_comm_s(job("megatron", vpp=2)), rel=1e-9)
    stated = estimate(job("megatron", vpp=2, pp_comm_overlap=True), advise_fit=False).assumptions
    assert not any("overlap_p2p_comm" in line for line in stated)
