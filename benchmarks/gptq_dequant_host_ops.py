"""Host time AutoGPTQ's torch-path QuantLinear adds to a frozen 16-bit linear, in units of one eager op:
a check of the 12 dequantization ops per linear and use that the model counts (`DEQUANT_OPS`).

    pip install torch==2.13.0 transformers==4.34.1 && pip install --no-deps auto-gptq==0.5.1
    # not in lora_adapter_host_ops.py's PEFT venv: PEFT imports an installed auto_gptq, whose
    # package needs `datasets`
    python benchmarks/gptq_dequant_host_ops.py [--rounds 200]

PEFT trains through `auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py` QuantLinear's torch path (its
CUDA kernels have no backward); that module is loaded by file, so AutoGPTQ's package imports (datasets,
…) are not needed. Runs on the CPU: 4-bit, group 32, 32×32 weights and 4×32 fp16 inputs, so the time is
Python, the dispatcher and autograd, not arithmetic. A chain of 32 QuantLinear is timed against 32 frozen
fp16 nn.Linear and 32 eager multiplies in interleaved rounds; medians.
"""

from __future__ import annotations

import argparse
import importlib.util
import warnings
from pathlib import Path

import torch
from torch import nn

from lora_adapter_host_ops import Chain, interleaved_medians_us, multiplies  # this directory, on the path

N_LINEARS, WIDTH, GROUP = 32, 32, 32


def _quant_linear_class() -> type:
    """QuantLinear from its file (it imports torch, numpy and transformers only)."""
    spec = importlib.util.find_spec("auto_gptq")
    if spec is None or spec.submodule_search_locations is None:
        raise SystemExit("auto-gptq is not installed (pip install --no-deps auto-gptq==0.5.1)")
    path = Path(next(iter(spec.submodule_search_locations))) / "nn_modules" / "qlinear" / "qlinear_cuda_old.py"
    module_spec = importlib.util.spec_from_file_location("qlinear_cuda_old", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.QuantLinear


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    quant_linear = _quant_linear_class()
    frozen = Chain(lambda: nn.Linear(WIDTH, WIDTH, bias=False), N_LINEARS).half().requires_grad_(False)
    quantized = Chain(lambda: quant_linear(bits=4, group_size=GROUP, infeatures=WIDTH, outfeatures=WIDTH, bias=False),
                      N_LINEARS)
    x = torch.randn(4, WIDTH, dtype=torch.float16, requires_grad=True)
    variants = {"frozen": frozen, "gptq": quantized, "op": multiplies(N_LINEARS)}
    us = interleaved_medians_us(variants, x, args.rounds, N_LINEARS, warmup=10)
    op = us["op fwd"]
    forward = us["gptq fwd"] - us["frozen fwd"]
    backward = us["gptq both"] - us["frozen both"] - forward
    # each dequantization op is one kernel, so on a GPU the measured CPU share plus its launches is the
    # same count in eager_op_host_us units; the backward reuses the kept 16-bit weight (no kernels of its own)
    print(f"one eager op (CPU): {op:.2f} µs; QuantLinear adds forward {forward:.1f} µs = {forward / op:.1f} ops,"
          f" backward {backward:.1f} µs = {backward / op:.1f} op CPU times (the model: DEQUANT_OPS 12 forward,"
          " none backward with the 16-bit weight kept)")


if __name__ == "__main__":
    main()
