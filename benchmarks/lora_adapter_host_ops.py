"""Host time one LoRA adapter adds to a frozen linear, in units of one eager op, for PEFT and
torchtune (the frameworks catalog's `lora_adapter_host_ops`).

    pip install torch==2.13.0 peft==0.6.0 transformers==4.34.1 accelerate==0.24.1      # PEFT
    python benchmarks/lora_adapter_host_ops.py [--rounds 300]
    # torchtune in a venv of its own (its huggingface_hub is newer than transformers 4.34 accepts):
    pip install torch==2.13.0 numpy omegaconf huggingface_hub datasets tiktoken blobfile sentencepiece \
        kagglehub Pillow safetensors && pip install --no-deps torchtune==0.4.0 torchao==0.7.0

Runs on the CPU with 4×16 tensors, so every time is Python, the dispatcher and autograd, not
arithmetic. A chain of 64 frozen nn.Linear is timed plain and with an adapter on each (rank 4; PEFT
with dropout 0.05 as PEFT's LoraConfig in the Qwen and HF recipes, and 0; torchtune's LoRALinear
with its configs' dropout 0), forward and forward + backward, with a chain of 64 eager multiplies
(one kernel each) timed in the same interleaved rounds, so the machine's drift cancels; medians over
the rounds. A stack that is not installed is skipped.

On a GPU each kernel also pays its CUDA launch. `eager_op_host_us` (10 µs) is one eager op: about
half dispatch and autograd (what this CPU measures, ~5 µs) and half launch. So one adapter costs
(measured / one op's CPU time + its kernels) / 2 eager ops. Its kernels, counted from the code:
PEFT 0.6.0 `tuners/lora/layer.py` Linear.forward: dropout, lora_A, lora_B, the multiply by `scaling`
and the in-place add (5; 4 without dropout, whose Identity launches nothing); backward: the
multiply's gradient, two GEMMs each for lora_B and lora_A (input and weight gradients), dropout's
mask multiply and the add of the branch's input gradient to the base's (7; 6 without dropout).
torchtune 0.4.0 `modules/peft/lora.py` LoRALinear.forward (the base linear in the same module):
lora_a, lora_b, the multiply by alpha / rank and the add (4), backward as PEFT's without dropout (6).
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import torch
from torch import nn

N_LINEARS, WIDTH = 64, 16
# variant → (forward, backward) kernels per adapter
KERNELS = {"peft, dropout 0.05": (5, 7), "peft, dropout 0.0": (4, 6), "torchtune, dropout 0.0": (4, 6)}


class Chain(nn.Module):
    """`n` linears applied in turn, each made by `make` (also gptq_dequant_host_ops.py's)."""

    def __init__(self, make=lambda: nn.Linear(WIDTH, WIDTH, bias=False), n: int = N_LINEARS) -> None:
        super().__init__()
        self.layers = nn.ModuleList(make() for _ in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def _frozen() -> nn.Module:
    chain = Chain()
    for weight in chain.parameters():
        weight.requires_grad_(False)
    return chain


def _peft(dropout: float) -> nn.Module:
    from peft import LoraConfig, get_peft_model  # optional: only this benchmark needs it

    targets = [f"layers.{i}" for i in range(N_LINEARS)]
    model = get_peft_model(Chain(), LoraConfig(r=4, lora_alpha=16, lora_dropout=dropout, target_modules=targets))
    return model.train()


def _torchtune() -> nn.Module:
    from torchtune.modules.peft import LoRALinear  # optional: only this benchmark needs it

    chain = Chain()
    for i in range(N_LINEARS):
        chain.layers[i] = LoRALinear(WIDTH, WIDTH, rank=4, alpha=16, dropout=0.0)
        chain.layers[i].weight.requires_grad_(False)  # the frozen base, as torchtune's recipes set it
    return chain.train()


def _installed() -> dict[str, nn.Module]:
    """Each adapted chain whose stack imports here."""
    built = {}
    for name, build in (("peft, dropout 0.05", lambda: _peft(0.05)), ("peft, dropout 0.0", lambda: _peft(0.0)),
                        ("torchtune, dropout 0.0", _torchtune)):
        try:
            built[name] = build()
        except ImportError as missing:
            print(f"{name}: skipped ({missing})")
    return built


def multiplies(n: int = N_LINEARS):
    """`n` eager multiplies in turn: one kernel each, the unit the results are given in."""
    def run(x: torch.Tensor) -> torch.Tensor:
        for _ in range(n):
            x = x * 1.0001
        return x
    return run


def interleaved_medians_us(variants: dict, x: torch.Tensor, rounds: int, per: int, warmup: int = 20) -> dict:
    """Median µs per one of `per` linears (or ops) of each variant, keyed "name fwd" (forward) and
    "name both" (forward + backward), timed in interleaved rounds so the machine's drift cancels."""
    calls = {}
    for name, run in variants.items():
        calls[name + " fwd"] = lambda run=run: run(x)
        calls[name + " both"] = lambda run=run: run(x).sum().backward()
    for call in calls.values():
        for _ in range(warmup):
            call()
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(s) / per * 1e6 for name, s in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    variants = {"frozen": _frozen(), **_installed(), "op": multiplies()}
    us = interleaved_medians_us(variants, torch.randn(4, WIDTH, requires_grad=True), args.rounds, N_LINEARS)
    op = us["op fwd"]
    print(f"one eager op (CPU): forward {op:.2f} µs; frozen nn.Linear: forward {us['frozen fwd']:.2f} µs,"
          f" forward + backward {us['frozen both']:.2f} µs")
    for name, (k_forward, k_backward) in KERNELS.items():
        if name + " fwd" not in us:
            continue
        forward = us[name + " fwd"] - us["frozen fwd"]
        backward = us[name + " both"] - us["frozen both"] - forward
        print(f"{name}: forward {forward:.1f} µs = {forward / op:.1f} op CPU times, backward {backward:.1f} µs ="
              f" {backward / op:.1f}; with {k_forward} + {k_backward} kernel launches:"
              f" lora_adapter_host_ops [{(forward / op + k_forward) / 2:.1f}, {(backward / op + k_backward) / 2:.1f}]")


if __name__ == "__main__":
    main()
