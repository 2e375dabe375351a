"""Shared fixtures: small jobs built from mappings, so every test states its configuration."""

from __future__ import annotations

import copy

from trainrig import load_job

GPT_LAYER = {  # a GPT-3-style layer: LayerNorm, biases, plain GeLU MLP with ffn = 4h
    "n_layers": 24, "hidden": 2048, "n_heads": 16, "ffn_hidden": 8192, "vocab": 51200,
    "gated_mlp": False, "norm": "layernorm", "bias": "all", "position_embedding": "learned",
    "max_positions": 2048, "tied_embeddings": True,
}


def make_job(model=None, hardware=None, training=None):
    """A Job from partial mappings over sensible defaults (GPT layer, 8 × H100 SXM)."""
    data = {
        "model": copy.deepcopy(model if model is not None else GPT_LAYER),
        "hardware": {"gpu": "H100-SXM5-80GB", "n_gpus": 8, "gpus_per_node": 8, **(hardware or {})},
        "training": {"seq_len": 2048, "global_batch": 64, "micro_batch": 1, **(training or {})},
    }
    return load_job(data)
