"""The longest sequence a QLoRA fine-tune of Llama 3.1 8B and Llama 3.3 70B fits on one GPU, by the
GPU's memory, as Unsloth's benchmark page publishes it for Unsloth and for Hugging Face +
FlashAttention-2, beside `trainrig fit`'s answer for the same jobs. Not bundled and fitted on nothing.

    python benchmarks/unsloth_context_length.py

Source: docs.unsloth.ai "Unsloth Benchmarks", "Llama 3.1 (8B) max. context length" and "Llama 3.3
(70B) max. context length" (the Llama 3.3 blog of December 2024 gives the same rows): 4-bit QLoRA on
q, k, v, o, gate, up and down at rank 32, batch size 1, sequences padded to the length. What the
page does not state and the jobs assume: Unsloth's own gradient checkpointing
(`use_gradient_checkpointing="unsloth"`, which keeps each layer's checkpoint in host RAM: full
recompute with activation offload) and Apple's Cut Cross Entropy (the page credits it: `loss:
fused_linear`); Hugging Face with gradient checkpointing (full recompute) and PyTorch's
cross-entropy over the shifted contiguous copy of the fp32 logits that transformers then made
(`loss_shift_copy`: ForCausalLMLoss before huggingface/transformers#35646, January 2025); for both,
NF4 with double quantization (the QLoRA paper's storage, trainrig's QLoRA default). The GPUs are
modelled as an A100 of the stated memory (GiB).
"""

from __future__ import annotations

import statistics

from trainrig import estimate, load_job
from trainrig.estimate.max_fit import longest_seq_len
from trainrig.estimate.params import DEFAULT_PARAMETERS

# model → GPU memory (GB) → (Unsloth, Hugging Face + FA2) longest context; None = out of memory
TABLES = {
    "llama3.1-8b": {8: (2972, None), 12: (21848, 932), 16: (40724, 2551), 24: (78475, 5789), 40: (153977, 12264),
                    48: (191728, 15502), 80: (342733, 28454)},
    "llama3-70b": {48: (12106, None), 80: (89389, 6916)},  # Llama 3.3 70B has Llama 3 70B's shape
}
QLORA = {"method": "qlora", "quantization": "nf4-double", "lora_rank": 32,
         "lora_targets": ["q", "k", "v", "o", "gate", "up", "down"], "micro_batch": 1, "global_batch": 1,
         "seq_len": 2048}
STACKS = {
    "Unsloth": {**QLORA, "framework": "unsloth"},  # its defaults: offloaded checkpoints, fused loss, 8-bit AdamW
    # the transformers of December 2024 shifted a contiguous copy of the fp32 logits (ForCausalLMLoss)
    "HF + FA2": {**QLORA, "framework": "hf-trainer", "recompute": "full", "loss_shift_copy": True},
}


def longest(model: str, memory_gb: int, training: dict) -> int | None:
    job = load_job({"model": model, "hardware": {"gpu": {"base": "A100-SXM4-80GB", "memory_gib": memory_gb},
                                                         "n_gpus": 1}, "training": training})
    sweep = longest_seq_len(job, DEFAULT_PARAMETERS, limit=2_000_000)
    return None if sweep.best is None else int(sweep.values[sweep.best])


def main() -> None:
    print(f"{'model':<12}{'GPU GB':>6} " + " ".join(f"{name + ' measured':>18}{'estimate':>10}{'error':>8}"
                                                  for name in STACKS))
    errors: dict[str, list[float]] = {name: [] for name in STACKS}
    rows = [(model, memory_gb, measured) for model, table in TABLES.items() for memory_gb, measured in table.items()]
    for model, memory_gb, measured in rows:
        cells = []
        for (name, training), value in zip(STACKS.items(), measured, strict=True):
            longest_fit = longest(model, memory_gb, training)
            if value is None or longest_fit is None:
                shown = ("OOM" if value is None else f"{value:,}", "OOM" if longest_fit is None else f"{longest_fit:,}")
                cells.append(f"{shown[0]:>18}{shown[1]:>10}{'':>8}")
                continue
            errors[name].append((longest_fit - value) / value * 100)
            cells.append(f"{value:>18,}{longest_fit:>10,}{errors[name][-1]:>+7.1f}%")
        print(f"{model:<12}{memory_gb:>6} " + " ".join(cells))
    for name, values in errors.items():
        print(f"{name}: mean |error| {statistics.mean(abs(v) for v in values):.1f}% over {len(values)} rows")
    # memory per added token: the page's 48 → 80 GB step (as GiB), and the estimate's 16k → 32k step
    table = TABLES["llama3.1-8b"]
    for (name, training), column in zip(STACKS.items(), (0, 1), strict=True):
        measured = 32 * 2**30 / (table[80][column] - table[48][column]) / 2**10
        peaks = [estimate_gib(seq, training) for seq in (16384, 32768)]
        print(f"{name}: {measured:.0f} KiB per token from the page (8B, 48 to 80 GB),"
              f" {(peaks[1] - peaks[0]) * 2**30 / 16384 / 2**10:.0f} KiB estimated (16k to 32k tokens)")


def estimate_gib(seq_len: int, training: dict) -> float:
    job = load_job({"model": "llama3.1-8b", "hardware": {"gpu": "A100-SXM4-80GB", "n_gpus": 1},
                    "training": {**training, "seq_len": seq_len}})
    return estimate(job, advise_fit=False).memory_per_gpu_gib


if __name__ == "__main__":
    main()
