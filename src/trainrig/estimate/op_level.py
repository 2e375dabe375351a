"""torchtitan's op-level selective recompute (`recompute: selective` with `framework: torchtitan`):
what its policy redoes per layer beyond the forward it keeps, in GEMM time, kernels and TP
collectives. Which GEMMs those are, and why, is core._op_level_recomputed_gemms; which tensors the
policy keeps is memory.py. Megatron-Core's module list is module_recompute.py.
"""

from __future__ import annotations

from typing import Any

from trainrig.estimate import ops
from trainrig.estimate.inputs import Inputs
from trainrig.estimate.memory import op_level_recompute

__all__ = ["redone_gemm_s", "redone_kernels", "redone_tp_units"]


def redone_gemm_s(x: Inputs, gemm: dict[str, Any]):
    """(attention side, MLP side) forward GEMM time op-level selective recompute repeats per layer
    (see core._op_level_recomputed_gemms); zero where selective recompute is not op-level. Applied here,
    not in `core._gemm_times_s`, whose rows are shared by configurations that differ in recompute and
    sequence parallelism (GEMM_IGNORES)."""
    k, o, up = gemm["op_recompute"]
    redo_k, redo_o, redo_up = x.op_level_redone_linears
    active = op_level_recompute(x)
    return ops.where(active, redo_k * k + redo_o * o, 0.0), ops.where(active, redo_up * up, 0.0)


def redone_kernels(x: Inputs):
    """Kernels op-level selective recompute launches again per layer: its GEMMs (k, o unless kept
    as the reduce-scattered output, a gated MLP's up projection, each where it is a linear of its
    own; see core._op_level_recomputed_gemms),
    the elementwise kernels up to the last kept output (both norms, rotary, the attention residual
    add, the activation: all but the MLP's residual add) and TP's collective before them."""
    redo_k, redo_o, redo_up = x.op_level_redone_linears
    gemms = redo_k + redo_o + redo_up * (1.0 - x.n_moe_layers / x.n_layers)
    elementwise = 2 + 2 * x.rope + 1 + 1
    return gemms + elementwise + redone_tp_units(x)


def redone_tp_units(x: Inputs):
    """TP collectives op-level selective recompute repeats per layer, in all-reduce units: under
    sequence parallelism the all-gathers before the attention and MLP inputs (the policy keeps
    reduce-scatter outputs, not all-gather ones; two all-gathers move one all-reduce's bytes), else
    the all-reduce after the recomputed o."""
    return ops.where(op_level_recompute(x) & (x.tp > 1), 1.0, 0.0)
