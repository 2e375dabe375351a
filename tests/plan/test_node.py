"""Node sizing leans on the model core: its figures must agree with what the core computes."""

from __future__ import annotations

import numpy as np
import pytest

from trainrig import estimate, load_job
from trainrig.catalog import load_catalog
from trainrig.catalog.job_file import job_to_mapping
from trainrig.estimate.core import evaluate
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.params import DEFAULT_PARAMETERS
from trainrig.plan.node import CHECKPOINTS_KEPT, node_advice

from .conftest import SMALL_MODEL


def _job(n_gpus: int, method: str = "full", data_format: str = "pretokenized"):
    return load_job({"model": SMALL_MODEL, "hardware": {"gpu": "H100-SXM5-80GB", "n_gpus": n_gpus, "gpus_per_node": 8},
                     "training": {"seq_len": 2048, "global_batch": 256, "tokens": 5e10, "method": method,
                                  "data_format": data_format, "zero": 1}})


@pytest.mark.parametrize("method", ["full", "lora"])
def test_checkpoint_size_is_what_the_core_writes(method):
    job = _job(16, method)
    x = inputs_from_job(job, DEFAULT_PARAMETERS)
    out = evaluate(x.with_values(storage_write_gbs=1.0, checkpoint_interval_steps=1.0), DEFAULT_PARAMETERS)
    written = float(out.step_parts_s["checkpoint"]) * 1e9 * job.hardware.n_nodes
    assert written == pytest.approx(float(x.checkpoint_bytes), rel=1e-12)


def test_storage_capacity_holds_dataset_and_checkpoints():
    job = _job(16)
    est = estimate(job)
    node = node_advice(job, est, load_catalog(), DEFAULT_PARAMETERS)
    checkpoint_tb = float(inputs_from_job(job, DEFAULT_PARAMETERS).checkpoint_bytes) / 1e12
    assert node.storage_tb == pytest.approx(5e10 * 4 / 1e12 + CHECKPOINTS_KEPT * checkpoint_tb, abs=0.01)


def test_text_data_needs_more_cores_than_pretokenized():
    tokenized = _job(8, data_format="pretokenized")
    text = _job(8, data_format="text")
    cores = [node_advice(j, estimate(j), load_catalog(), DEFAULT_PARAMETERS) for j in (tokenized, text)]
    assert "tokenizing text" in cores[1].reasons["cpu"]
    assert cores[1].cpu_cores >= cores[0].cpu_cores


def test_the_recommended_network_is_within_five_percent_of_the_fastest():
    job = _job(32)
    mapping = job_to_mapping(job)
    node = node_advice(job, estimate(job), load_catalog(), DEFAULT_PARAMETERS)
    ports, _, link = node.network.partition(" × ")
    def on(network: str, n_ports: int) -> float:
        hardware = {**mapping["hardware"], "inter_node": {"link": network, "ports_per_node": n_ports}}
        return estimate(load_job({**mapping, "hardware": hardware})).step_time_s

    steps = [on(link, int(ports)), on("ib-xdr", 8)]
    assert steps[0] <= steps[1] * 1.05 + 1e-12
    assert np.isfinite(node.network_gbps_per_node)
