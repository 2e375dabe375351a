"""Peak memory of a LoRA fine-tune of Qwen3-30B-A3B (Hugging Face Trainer, 8 × H100, ZeRO 3,
rank 16, sequence 2048) with adapters on the attention only and on every linear: the second adapts
each routed expert's gate, up and down projections too (PEFT's target_modules), 830M adapter
parameters over 48 layers × 128 experts. Not a measurement: what the estimate holds.

    python benchmarks/moe_lora_memory.py
"""

from __future__ import annotations

from megatron_bridge_moe_throughput import QWEN3_30B  # this directory, on the path when run as a script
from trainrig import estimate, load_job

TARGETS = {"attention": ["q", "k", "v", "o"], "all linears": ["q", "k", "v", "o", "gate", "up", "down"]}


def main() -> None:
    print(f"{'targets':<14}{'GiB/GPU':>9}{'weights':>9}{'optimizer':>11}{'tokens/s/GPU':>14}")
    for name, targets in TARGETS.items():
        job = load_job({"model": QWEN3_30B, "hardware": {"gpu": "H100-SXM5-80GB", "n_gpus": 8},
                        "training": {"framework": "hf-trainer", "method": "lora", "lora_rank": 16,
                                     "lora_targets": targets, "seq_len": 2048, "micro_batch": 1, "global_batch": 16,
                                     "zero": 3}})
        result = estimate(job, advise_fit=False)
        parts = result.to_dict()["memory_breakdown_gib"]
        print(f"{name:<14}{result.memory_per_gpu_gib:>9.2f}{parts['weights']:>9.2f}{parts['optimizer']:>11.2f}"
              f"{result.tokens_per_s_per_gpu:>14.0f}")


if __name__ == "__main__":
    main()
