"""Host time that eager tensor parallelism through DTensors adds to a decoder layer (the
`dtensor_*_host_us` model parameters: torchtitan, NeMo AutoModel and torchtune without torch.compile).

    python benchmarks/dtensor_host_time.py [--layers 4] [--rounds 20] [--repeats 5]

Builds a small Llama-style decoder layer (RMSNorm, q/k/v/o, SDPA, SwiGLU) and times its forward and
backward on the CPU with tiny tensors, so the time is Python, dispatch and autograd, not arithmetic.
Layouts of the same layers:

* plain: ordinary tensors, one process;
* tp: torch's ColwiseParallel on q, k, v, gate, up and RowwiseParallel on o, down (Megatron's
  split, the TP plan of torchtitan and AutoModel), on a two-rank mesh of torch's fake process group,
  whose collectives return at once: what is left is the DTensor host work (sharding propagation,
  wrapping and unwrapping, the redistribute calls), not communication;
* tp+sp: the same with sequence parallelism as torchtitan and torchtune plan it: the norms as
  SequenceParallel on sequence shards, each block's input gathered by PrepareModuleInput, the
  row-parallel outputs left as sequence shards;
* plain and tp with a LoRA adapter (rank 8) on all seven linears and the base frozen. Sharded, the
  adapters take AutoModel's placements (components/distributed/parallel_styles.py,
  ColwiseParallelLora / RowwiseParallelLora): a column-parallel linear shards A and B on their
  output dimension and gathers A's output to every rank; a row-parallel one shards the input
  dimension of A and of B.

Prints the extra host time per sharded linear, per sharded linear with its adapter, and per layer
for sequence parallelism.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

HIDDEN, HEADS, FFN, RANK, TOKENS = 64, 4, 128, 8, 16


class Adapted(nn.Linear):
    """A frozen linear plus a low-rank update B·A·x scaled by 2 (alpha / rank); a subclass of the
    linear, as AutoModel's LinearLoRA, so torch's TP styles take it."""

    def __init__(self, fan_in: int, fan_out: int):
        super().__init__(fan_in, fan_out, bias=False)
        self.weight.requires_grad_(False)
        self.lora_a = nn.Linear(fan_in, RANK, bias=False)
        self.lora_b = nn.Linear(RANK, fan_out, bias=False)

    def forward(self, x):
        return F.linear(x, self.weight) + 2.0 * self.lora_b(self.lora_a(x))


def _linear(fan_in: int, fan_out: int, lora: bool) -> nn.Module:
    return Adapted(fan_in, fan_out) if lora else nn.Linear(fan_in, fan_out, bias=False)


class Attention(nn.Module):
    def __init__(self, lora: bool):
        super().__init__()
        self.q, self.k, self.v, self.o = (_linear(HIDDEN, HIDDEN, lora) for _ in range(4))

    def forward(self, h):
        q, k, v = (m(h).unflatten(-1, (-1, HIDDEN // HEADS)).transpose(1, 2) for m in (self.q, self.k, self.v))
        return self.o(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).flatten(2))


class Mlp(nn.Module):
    def __init__(self, lora: bool):
        super().__init__()
        self.gate, self.up = _linear(HIDDEN, FFN, lora), _linear(HIDDEN, FFN, lora)
        self.down = _linear(FFN, HIDDEN, lora)

    def forward(self, h):
        return self.down(F.silu(self.gate(h)) * self.up(h))


class Layer(nn.Module):
    """One pre-norm decoder layer; head counts come from the local shapes, as Hugging Face's code does."""

    def __init__(self, lora: bool):
        super().__init__()
        self.norm1, self.norm2 = nn.RMSNorm(HIDDEN), nn.RMSNorm(HIDDEN)
        self.attn, self.mlp = Attention(lora), Mlp(lora)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


def _shard_adapter(module: Adapted, mesh, column: bool) -> None:
    """AutoModel's placements for an adapter on a sharded linear (see the module docstring)."""
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    if not isinstance(module, Adapted):  # torch calls this for every submodule; the adapter's own are done
        return
    placements = [Shard(0)] if column else [Shard(1)]
    for sub in (module, module.lora_a, module.lora_b):
        sub.weight = nn.Parameter(distribute_tensor(sub.weight.data, mesh, placements),
                                  requires_grad=sub.weight.requires_grad)
    if column:  # A's sharded output is gathered before B projects it
        module.lora_a.register_forward_hook(lambda _m, _i, out: out.redistribute(mesh, [Replicate()]))


def _parallelize(layer: Layer, mesh, lora: bool, sequence_parallel: bool) -> None:
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )

    class _Column(ColwiseParallel):
        def _partition_linear_fn(self, name, module, device_mesh):
            _shard_adapter(module, device_mesh, column=True)

    class _Row(RowwiseParallel):
        def _partition_linear_fn(self, name, module, device_mesh):
            _shard_adapter(module, device_mesh, column=False)

    column, row = (_Column, _Row) if lora else (ColwiseParallel, RowwiseParallel)
    plan = {f"attn.{name}": column() for name in ("q", "k", "v")} | {"mlp.gate": column(), "mlp.up": column()}
    if not sequence_parallel:
        plan |= {"attn.o": row(), "mlp.down": row()}
    else:  # torchtitan's and torchtune's plan: norms on sequence shards, gathered into each block
        gather = {"input_layouts": (Shard(1),), "desired_input_layouts": (Replicate(),)}
        plan |= {"attn.o": row(output_layouts=Shard(1)), "mlp.down": row(output_layouts=Shard(1)),
                 "norm1": SequenceParallel(), "norm2": SequenceParallel(),
                 "attn": PrepareModuleInput(**gather), "mlp": PrepareModuleInput(**gather)}
    parallelize_module(layer, mesh, plan)


def _model(layers: int, lora: bool, mesh, sequence_parallel: bool = False) -> nn.Sequential:
    torch.manual_seed(0)
    model = nn.Sequential(*(Layer(lora) for _ in range(layers)))
    if mesh is not None:
        for layer in model:
            _parallelize(layer, mesh, lora, sequence_parallel)
    return model


def _pass_us(model: nn.Sequential, rounds: int, tokens: int = TOKENS) -> tuple[float, float]:
    """Median host µs of one forward and one backward of the whole stack (`tokens`: this rank's)."""
    x = torch.randn(1, tokens, HIDDEN, requires_grad=True)
    forward, backward = [], []
    for i in range(rounds + 5):  # the first rounds warm the sharding-propagation caches
        start = time.perf_counter()
        loss = model(x).float().square().mean()
        middle = time.perf_counter()
        loss.backward()
        end = time.perf_counter()
        if i >= 5:
            forward.append(middle - start)
            backward.append(end - middle)
    return sorted(forward)[rounds // 2] * 1e6, sorted(backward)[rounds // 2] * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    mesh = init_device_mesh("cpu", (2,))
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, {args.layers} layers, median of {args.repeats} repeats of"
          f" {args.rounds} rounds, µs per layer")
    # (LoRA, layout): plain tensors, tp 2, tp 2 with sequence parallelism (full fine-tune only)
    layouts = [(False, "plain"), (False, "tp"), (False, "tp+sp"), (True, "plain"), (True, "tp")]
    models = {key: _model(args.layers, key[0], None if key[1] == "plain" else mesh, key[1] == "tp+sp")
              for key in layouts}
    samples = {key: [] for key in layouts}
    for _ in range(args.repeats):  # interleaved, so a slow spell of a shared machine hits every layout
        for key in layouts:
            tokens = TOKENS // 2 if key[1] == "tp+sp" else TOKENS  # a sequence shard
            samples[key].append(_pass_us(models[key], args.rounds, tokens))
    results = {}
    for key in layouts:
        fwd, bwd = (sorted(s[i] for s in samples[key])[args.repeats // 2] / args.layers for i in (0, 1))
        results[key] = fwd, bwd
        print(f"{'LoRA' if key[0] else 'full':4} {key[1]:6}  forward {fwd:8.0f}  backward {bwd:8.0f}")
    linears = 7

    def extra(key, over):
        """(forward, backward) µs that layout `key` takes beyond layout `over`."""
        return [a - b for a, b in zip(results[key], results[over], strict=True)]

    full = extra((False, "tp"), (False, "plain"))
    sp = extra((False, "tp+sp"), (False, "tp"))
    lora = extra((True, "tp"), (True, "plain"))
    print(f"extra per sharded linear (full fine-tune): forward {full[0] / linears:.0f} µs,"
          f" backward {full[1] / linears:.0f} µs")
    print(f"extra per sharded linear with its adapter: forward {lora[0] / linears:.0f} µs,"
          f" backward {lora[1] / linears:.0f} µs")
    print(f"extra per layer for sequence parallelism (2 norms, 2 gathers): forward {sp[0]:.0f} µs,"
          f" backward {sp[1]:.0f} µs")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
