"""The planner proposes only layouts the job's stack can run."""

from __future__ import annotations

import pytest

from trainrig.plan.planner import Planner

from .conftest import SMALL_MODEL


def _layouts(method: str, training: dict) -> set[tuple[int, int]]:
    planner = Planner.create(SMALL_MODEL, tokens=1e9, seq_len=2048, global_batch=64, method=method,
                             training=training, gpu_types=["RTX-4090"], max_gpus=8)
    rows = planner.run().fitting
    return set(zip(rows.layouts.tp.tolist(), rows.layouts.pp.tolist(), strict=True))


@pytest.mark.parametrize("method, training", [
    ("qlora", {}),  # QLoRA stacks (bitsandbytes, torchao NF4) shard no quantized linear
    ("lora", {"framework": "hf-trainer"}),  # HF Trainer has neither TP nor PP
    ("full", {"framework": "torchtune"}),
])
def test_stacks_without_tensor_or_pipeline_parallelism_get_neither(method, training):
    layouts = _layouts(method, training)
    assert layouts == {(1, 1)}


def test_a_stack_with_both_still_gets_both():
    layouts = _layouts("full", {"framework": "megatron"})
    assert any(tp > 1 for tp, _ in layouts) and any(pp > 1 for _, pp in layouts)
