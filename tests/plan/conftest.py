"""Shared planner fixtures: small models and few GPU types, so every search takes milliseconds."""

from __future__ import annotations

import datetime as dt

import pytest

from trainrig.plan.planner import Planner
from trainrig.specs import Offer

SMALL_MODEL = {  # a 1.3B-class Llama-style model: GQA, gated MLP, untied embeddings
    "name": "small-llama", "n_layers": 16, "hidden": 2048, "n_heads": 16, "n_kv_heads": 4,
    "ffn_hidden": 5632, "vocab": 32000,
}
MOE_MODEL = {  # a small mixture of experts
    "name": "small-moe", "n_layers": 8, "hidden": 1024, "n_heads": 8, "n_kv_heads": 8, "ffn_hidden": 2816,
    "vocab": 32000, "n_experts": 8, "top_k": 2,
}


def offer(**fields) -> Offer:
    """An offer with sensible defaults for tests."""
    data = {"id": "test-offer", "name": "test offer", "provider": "test", "instance": "t1", "gpu": "H100-SXM5-80GB",
            "gpus_per_node": 8, "usd_per_gpu_hour": 2.0, "price_date": dt.date(2026, 11, 1),
            "sources": ["a test"]}
    return Offer.model_validate({**data, **fields})


@pytest.fixture(scope="module")
def small_planner() -> Planner:
    """The small model on H100 and A100 80GB nodes, up to 64 GPUs, with the catalog's offers."""
    return Planner.create(SMALL_MODEL, tokens=2e10, seq_len=2048, global_batch="256-512",
                          gpu_types=["H100-SXM5-80GB", "A100-SXM4-80GB"], max_gpus=64)
