"""`training.activation_offload_layers` (Megatron-Core's `cpu_offloading_num_layers`): only that many
of a stage's layers send their saved activations to the host, counted by hand."""

from __future__ import annotations

import pytest

from jobs import make_job
from trainrig import estimate
from trainrig.errors import TrainrigError
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.memory import _kept_layers
from trainrig.estimate.params import DEFAULT_PARAMETERS as P

MODEL = {"n_layers": 8, "hidden": 1024, "n_heads": 8, "ffn_hidden": 4096, "vocab": 32000}


def job(**training):
    settings = {"framework": "megatron", "seq_len": 4096, "global_batch": 8, **training}
    return make_job(model=MODEL, hardware={"n_gpus": 1, "gpus_per_node": 1}, training=settings)


def test_the_layers_that_do_not_offload_keep_theirs():
    # 8 layers, 3 offloading: 5 kept, and 2 of the 3 on the GPU while they move (one out, one back)
    some, every = inputs_from_job(job(activation_offload_layers=3), P), inputs_from_job(job(activation_offload=True), P)
    assert float(some.offloaded_layer_share) == pytest.approx(3 / 8)
    assert float(_kept_layers(some, 8.0)) == pytest.approx(5 + 2)
    assert float(_kept_layers(every, 8.0)) == pytest.approx(0 + 2)
    assert float(inputs_from_job(job(), P).offloaded_layer_share) == 0.0


def test_activation_memory_falls_by_the_layers_that_leave():
    # kept layers: none offloading 8, three 7, all 2; the rest of the activation memory is the same
    none, some, every = (estimate(j, advise_fit=False).memory_breakdown_gib["activations"]
                         for j in (job(), job(activation_offload_layers=3), job(activation_offload=True)))
    assert (none - some) / (some - every) == pytest.approx(1 / 5)


def test_host_memory_and_traffic_carry_only_the_offloaded_share():
    none, some, every = (estimate(j, advise_fit=False)
                         for j in (job(), job(activation_offload_layers=3), job(activation_offload=True)))
    host = [r.host_ram_gb_per_node for r in (none, some, every)]
    assert (host[1] - host[0]) / (host[2] - host[0]) == pytest.approx(3 / 8)


def test_a_layer_count_means_offload_and_stays_within_the_model():
    assert job(activation_offload_layers=2).training.activation_offload is True
    with pytest.raises(TrainrigError) as error:
        job(activation_offload_layers=9)
    assert error.value.field == "training.activation_offload_layers"
