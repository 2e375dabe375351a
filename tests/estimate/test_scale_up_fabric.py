"""A scale-up fabric larger than a node (GB200/GB300 NVL72: 72 GPUs in 18 trays of 4 behind NVLink
switch trays): groups inside a rack stay on NVLink across trays, groups beyond it cross the network,
and the per-GPU catalog figures are the rack's divided by 72."""

from __future__ import annotations

import pytest

from jobs import make_job
from trainrig import estimate
from trainrig.catalog import load_catalog
from trainrig.estimate import collectives as comm
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.params import DEFAULT_PARAMETERS as P

LLAMA = {"n_layers": 8, "hidden": 4096, "n_heads": 32, "n_kv_heads": 8, "ffn_hidden": 14336, "vocab": 32000}


def job(gpu, n_gpus, gpus_per_node, **training):
    return make_job(model=LLAMA, hardware={"gpu": gpu, "n_gpus": n_gpus, "gpus_per_node": gpus_per_node},
                    training={"seq_len": 4096, "global_batch": n_gpus, **training})


def test_gb200_is_the_nvl72_rack_divided_by_72():
    gpu = load_catalog().gpus.get("GB200").entry
    # GB200 NVL72: FP16/BF16 360 PF and FP8 720 PF with sparsity, 13.4 TB at 576 TB/s, NVLink 130 TB/s
    assert gpu.peak_tflops.bf16 == pytest.approx(360e3 / 72 / 2, rel=0.01)
    assert gpu.peak_tflops.fp8 == pytest.approx(720e3 / 72 / 2, rel=0.01)
    assert gpu.memory_bandwidth_gbs == pytest.approx(576e3 / 72, rel=0.01)
    assert gpu.scale_up_gbs == pytest.approx(130e3 / 72, rel=0.01)
    assert gpu.scale_up_domain == 72


def test_tensor_parallel_over_trays_of_one_rack_stays_on_nvlink():
    trays = estimate(job("GB200", 8, 4, tp=8, sequence_parallel=True), advise_fit=False)
    one_node = estimate(job("GB200", 8, 8, tp=8, sequence_parallel=True), advise_fit=False)
    assert trays.step_breakdown_s["tp_comm"] == pytest.approx(one_node.step_breakdown_s["tp_comm"], rel=1e-12)
    assert not any("spans nodes" in w for w in trays.warnings)
    hgx = estimate(job("B200", 8, 4, tp=8, sequence_parallel=True), advise_fit=False)  # no rack fabric
    assert hgx.step_breakdown_s["tp_comm"] > 2 * trays.step_breakdown_s["tp_comm"]
    assert any("spans nodes" in w for w in hgx.warnings)


def test_groups_beyond_the_rack_cross_the_network():
    x = inputs_from_job(job("GB200", 128, 4, zero=3), P)
    assert (float(x.fabric_gpus), float(x.n_fabrics)) == (72.0, 2.0)  # 18 trays per rack, 32 trays
    whole = comm.GroupLinks(128.0, 1.0, x, P)
    assert (float(whole.nodes), float(whole.ranks_per_node)) == (2.0, 64.0)
    rack = comm.GroupLinks(64.0, 1.0, x, P)
    assert float(rack.nodes) == 1.0
    hgx = comm.GroupLinks(64.0, 1.0, inputs_from_job(job("B200", 128, 4, zero=3), P), P)
    assert float(hgx.nodes) == 16.0  # 4-GPU nodes of HGX parts: every node its own fabric


def test_a_fabric_is_whole_nodes_and_at_most_the_job():
    x = inputs_from_job(job("GB300", 16, 4), P)
    assert (float(x.fabric_gpus), float(x.n_fabrics)) == (16.0, 1.0)
    x = inputs_from_job(job("GB200", 160, 8), P)  # 8-GPU "nodes": 9 of them in 72
    assert (float(x.fabric_gpus), float(x.n_fabrics)) == (72.0, 3.0)
