"""Framework callbacks, against stand-in `transformers` / `lightning` modules (neither is a
dependency): each hook records steps, data wait and tokens into the monitor."""

from __future__ import annotations

import sys
import time
import types
from types import SimpleNamespace

import pytest

import trainrig
from trainrig.errors import TrainrigError
from trainrig.monitor.integrations import batch_tokens

from .conftest import fake


class _Base:
    """What the frameworks' Callback base classes are: hook methods that do nothing."""


@pytest.fixture
def frameworks(monkeypatch):
    transformers = types.ModuleType("transformers")
    transformers.TrainerCallback = type("TrainerCallback", (_Base,), {})
    lightning = types.ModuleType("lightning")
    pytorch = types.ModuleType("lightning.pytorch")
    pytorch.Callback = type("Callback", (_Base,), {})
    lightning.pytorch = pytorch
    monkeypatch.setitem(sys.modules, "transformers", transformers)
    monkeypatch.setitem(sys.modules, "lightning", lightning)
    monkeypatch.setitem(sys.modules, "lightning.pytorch", pytorch)
    return transformers, pytorch


def test_hugging_face_callback_records_optimizer_steps(frameworks):
    transformers, _ = frameworks
    with trainrig.monitor(hz=5, nvml_backend=fake("h100_sxm_healthy")) as m:
        callback = m.hf_callback()
        assert isinstance(callback, transformers.TrainerCallback)
        state = SimpleNamespace(num_input_tokens_seen=0)
        for _ in range(4):
            time.sleep(0.02)  # the Trainer fetching the next batch
            callback.on_step_begin(None, state, None)
            time.sleep(0.01)
            state.num_input_tokens_seen += 4096
            callback.on_step_end(None, state, None)
        rows = m.steps.drain()
    assert len(rows) == 4
    assert [r["tokens"] for r in rows] == [None, 4096, 4096, 4096]  # a delta needs two readings
    assert all(r["data_wait_s"] >= 0.015 for r in rows[1:])


def test_lightning_callback_counts_tokens_from_the_batch(frameworks):
    _, pytorch = frameworks
    batch = {"input_ids": SimpleNamespace(shape=(8, 512))}
    with trainrig.monitor(hz=5, nvml_backend=fake("h100_sxm_healthy")) as m:
        callback = m.lightning_callback()
        assert isinstance(callback, pytorch.Callback)
        for index in range(3):
            callback.on_train_batch_start(None, None, batch, index)
            callback.on_train_batch_end(None, None, None, batch, index)
        rows = m.steps.drain()
    assert [r["tokens"] for r in rows] == [4096] * 3
    assert batch_tokens({"pixels": 1}) is None


def test_missing_framework_is_one_sentence_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)
    monkeypatch.setitem(sys.modules, "lightning", None)
    monkeypatch.setitem(sys.modules, "lightning.pytorch", None)
    monkeypatch.setitem(sys.modules, "pytorch_lightning", None)
    m = trainrig.monitor()
    with pytest.raises(TrainrigError, match="transformers"):
        m.hf_callback()
    with pytest.raises(TrainrigError, match="lightning"):
        m.lightning_callback()
