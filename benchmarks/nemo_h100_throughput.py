"""NeMo's published DGX-H100 FP8 rows of the 24.07 and 24.12 containers beside trainrig's estimate.
Not bundled, fitted on nothing: a held-out look at NeMo's own pre-training and fine-tuning tables,
a year and more older than Megatron-Bridge's (`megatron_bridge_dense_throughput.py`), on models
those do not have (GPT-3 5B/20B/175B, Llama 2, Nemotron 8B/22B/340B).

    python benchmarks/nemo_h100_throughput.py [--recipes] [--release 24.07|24.12]

Sources: NVIDIA/NeMo docs/source/performance/performance_summary.md at 070a0bb (24.07) and the
NeMo Framework user guide's 24.12 "Performance" page (docs.nvidia.com/nemo-framework/user-guide/
24.12/performance/performance_summary.html): "System: DGX-H100", "Precision: FP8"; fine-tuning on
SQuAD packed into 4096-token sequences; tokens/s per GPU as the tables print.

Each row takes what the table states (GPUs, GBS, MBS, sequence length, TP, PP, CP, VP) with
`framework: nemo`'s defaults (distributed optimizer, sequence parallelism with TP), precision fp8
with Transformer Engine's delayed scaling (the launcher configs' `fp8_hybrid` with an amax history
of 1024, FP8's recipe before current scaling) and the network of DGX-H100 (8 × 400 Gb/s per node).
The models' shapes are NeMo-Framework-Launcher's training configs (launcher_scripts/conf/training/
{gpt3,llama,nemotron}/*.yaml); GPT-3's configs train with hidden and attention dropout 0.1.

Fine-tuning packs SQuAD v1.1 into 4096-token sequences, and NeMo's packed sequences attend only
within each example (Transformer Engine's THD format with `cu_seqlens`: NeMo 24.07 user guide,
"Sequence Packing for SFT/PEFT"): `packed_sample_len`, an example being a Wikipedia paragraph, a
question and a short answer, a few hundred tokens (256 here; `--packed-sample-len` to vary it).

`--recipes` adds what the launcher's configs and H100 example scripts set beyond the table
(NeMo-Framework-Launcher at tag 24.07, 8325688d; see PRETRAIN_RECIPES and FINETUNE_RECIPES): bf16
gradient reduction where they set `grad_sync_dtype: bf16`, Transformer Engine's TP overlap where `ub_tp_comm_overlap` is
true with sequence parallelism (NeMo turns it off without: megatron_gpt_model.py
`_validate_and_override_config`), Nemotron 340B's selective recompute, and the fine-tuning
scripts' interleaved stages and pure-bf16 distributed optimizer (`optim.dtype: bf16`).
Not expressible and left out: the fine-tuning scripts' `fp8_params` (weights kept in fp8, a
memory saving the tables do not measure).
"""

from __future__ import annotations

import argparse
import statistics

from trainrig import estimate, load_job

# NeMo-Framework-Launcher launcher_scripts/conf/training/gpt3/5b.yaml and 20b.yaml: GPT-3's shape
# (learned positions, LayerNorm, biases, tied embeddings, GPT-2 BPE) at 24 x 4096 and 44 x 6144
GPT3_5B = {"name": "gpt3-5b", "n_layers": 24, "hidden": 4096, "n_heads": 32, "ffn_hidden": 16384, "vocab": 50257,
           "gated_mlp": False, "tied_embeddings": True, "norm": "layernorm", "bias": "all",
           "position_embedding": "learned", "max_positions": 2048}
GPT3_20B = {**GPT3_5B, "name": "gpt3-20b", "n_layers": 44, "hidden": 6144, "n_heads": 48, "ffn_hidden": 24576}
# nemotron/nemotron_{8b,22b,340b}.yaml: squared-ReLU MLP (not gated), LayerNorm (layernorm1p), no
# biases, rotary positions, untied embeddings, a 256k SentencePiece vocabulary; 340B: 8 query groups
NEMOTRON_8B = {"name": "nemotron-8b", "n_layers": 32, "hidden": 4096, "n_heads": 32, "ffn_hidden": 16384,
               "vocab": 256000, "gated_mlp": False, "norm": "layernorm"}
NEMOTRON_22B = {**NEMOTRON_8B, "name": "nemotron-22b", "n_layers": 40, "hidden": 6144, "n_heads": 48,
                "ffn_hidden": 24576}
NEMOTRON_340B = {**NEMOTRON_8B, "name": "nemotron-340b", "n_layers": 96, "hidden": 18432, "n_heads": 96,
                 "n_kv_heads": 8, "ffn_hidden": 73728}
MODELS = {"GPT3-5B": GPT3_5B, "GPT3-20B": GPT3_20B, "GPT3-175B": "gpt3-175b", "LLAMA2-7B": "llama2-7b",
          "LLAMA2-13B": "llama2-13b", "LLAMA2-70B": "llama2-70b", "NEMOTRON-8B": NEMOTRON_8B,
          "NEMOTRON-22B": NEMOTRON_22B, "NEMOTRON-340B": NEMOTRON_340B, "LLAMA3-8B": "llama3-8b",
          "LLAMA3-70B": "llama3-70b"}
DROPOUT_MODELS = {"GPT3-5B", "GPT3-20B", "GPT3-175B"}

# model, GPUs, GBS, MBS, seq, TP, PP, CP, VP, tokens/s per GPU in 24.07, in 24.12
PRETRAIN_ROWS = """
GPT3-5B 64 2048 4 2048 1 1 1 1 22521 23406
GPT3-20B 64 256 2 2048 2 1 1 1 5851 5851
GPT3-175B 128 256 1 2048 4 8 1 6 726 716
GPT3-175B 512 2048 2 2048 4 8 1 6 782 825
LLAMA2-7B 8 128 1 4096 1 1 1 1 16847 16934
LLAMA2-13B 16 128 1 4096 1 4 1 10 8646 8715
LLAMA2-70B 64 128 1 4096 4 4 1 20 1707 1728
NEMOTRON-8B 64 256 4 4096 2 1 1 1 12701 12507
NEMOTRON-22B 64 256 2 4096 2 4 1 10 4256 4312
NEMOTRON-340B 128 32 1 4096 8 8 1 12 322 326
LLAMA3-8B 8 128 1 8192 1 1 2 1 12036 12273
LLAMA3-70B 64 128 1 8192 4 4 2 5 1533 1524
"""
# model, scheme, GPUs, GBS, MBS, TP, PP, tokens/s per GPU in 24.07, in 24.12 (SQuAD packed to 4096)
FINETUNE_ROWS = """
LLAMA2-7B SFT 8 32 1 1 1 17120 16891
LLAMA2-13B SFT 8 32 1 1 4 9741 10176
LLAMA2-70B SFT 16 32 1 4 4 1833 1816
LLAMA2-7B LoRA 8 32 1 1 1 25206 24824
LLAMA2-13B LoRA 8 32 1 1 1 14161 14629
LLAMA2-70B LoRA 8 32 1 2 4 2557 2621
"""
# NeMo's LoRA (nemo/collections/nlp/parts/peft_config.py LoraPEFTConfig): adapters on the fused
# attention_qkv linear, adapter_dim 32, no dropout
LORA = {"method": "lora", "lora_rank": 32, "lora_targets": ["q", "k", "v"], "lora_dropout": 0.0}


def hardware(n_gpus: int) -> dict:
    """DGX-H100: 8 GPUs on NVLink 4 per node, 8 × 400 Gb/s InfiniBand ports."""
    network = {"inter_node": {"bandwidth_gbps": 400, "ports_per_node": 8}} if n_gpus > 8 else {}
    return {"gpu": "H100-SXM5-80GB", "n_gpus": n_gpus, "gpus_per_node": 8, "intra_node": "nvlink4", **network}


def row_job(model: str, n_gpus: int, training: dict, recipe: dict | None = None):
    """One row's job: the table's layout over `framework: nemo`'s defaults, then the recipe's settings."""
    base = {"framework": "nemo", "precision": "fp8", "fp8_recipe": "delayed",
            "sequence_parallel": training.get("tp", 1) > 1, "dropout": model in DROPOUT_MODELS}
    return load_job({"model": MODELS[model], "hardware": hardware(n_gpus),
                     "training": {**base, **training, **(recipe or {})}})


# launcher_scripts/conf/training/*.yaml and examples/training/*/h100/*_fp8*.sh at 8325688d: the
# GPT-3 and Llama scripts add `optim.grad_sync_dtype=bf16` (Nemotron 340B's yaml sets it); the yamls'
# `ub_tp_comm_overlap` (GPT-3 175B and Nemotron 340B false); Nemotron 340B recomputes selectively,
# keeps its distributed optimizer in bf16 (`optim.dtype: bf16`: no fp32 master copy) and, alone of the
# interleaved rows, turns `overlap_p2p_comm` off (`batch_p2p_comm: True`)
BF16_GRADS = {"grad_reduce_dtype": "bf16"}
OVERLAP = {"tp_comm_overlap": True}
PRETRAIN_RECIPES = {"GPT3-5B": BF16_GRADS, "GPT3-20B": {**BF16_GRADS, **OVERLAP}, "GPT3-175B": BF16_GRADS,
                    "LLAMA2-7B": BF16_GRADS, "LLAMA2-13B": BF16_GRADS, "LLAMA2-70B": {**BF16_GRADS, **OVERLAP},
                    "LLAMA3-8B": BF16_GRADS, "LLAMA3-70B": {**BF16_GRADS, **OVERLAP}, "NEMOTRON-8B": OVERLAP,
                    "NEMOTRON-22B": OVERLAP, "NEMOTRON-340B": {**BF16_GRADS, "recompute": "selective",
                                                               "master_weights": False, "pp_comm_overlap": False}}
# examples/peft/llama/h100/*.sh with conf/peft/llama/sft.yaml: SFT runs distributed_fused_adam with
# dtype and grad_sync_dtype bf16 (no fp32 master copy), 13B on 10 and 70B on 20 interleaved chunks,
# 70B with sequence parallelism and TP overlap; the LoRA scripts run fused_adam over the adapters,
# and 70B LoRA's ub_tp_comm_overlap goes unused without sequence parallelism
PURE_BF16 = {"master_weights": False}
FINETUNE_RECIPES = {("LLAMA2-7B", "SFT"): PURE_BF16, ("LLAMA2-13B", "SFT"): {**PURE_BF16, "vpp": 10},
                    ("LLAMA2-70B", "SFT"): {**PURE_BF16, "vpp": 20, "sequence_parallel": True, **OVERLAP}}


def pretrain_rows(release: int):
    for line in PRETRAIN_ROWS.strip().splitlines():
        model, *values = line.split()
        n_gpus, gbs, mbs, seq, tp, pp, cp, vp = (int(v) for v in values[:8])
        training = {"global_batch": gbs, "micro_batch": mbs, "seq_len": seq, "tp": tp, "pp": pp, "cp": cp,
                    "vpp": vp}
        yield model, "pre-train", n_gpus, training, PRETRAIN_RECIPES[model], float(values[8 + release])


def finetune_rows(release: int, packed_sample_len: int):
    for line in FINETUNE_ROWS.strip().splitlines():
        model, scheme, *values = line.split()
        n_gpus, gbs, mbs, tp, pp = (int(v) for v in values[:5])
        training = {"global_batch": gbs, "micro_batch": mbs, "seq_len": 4096, "packed_sample_len": packed_sample_len,
                    "tp": tp, "pp": pp, **(LORA if scheme == "LoRA" else {})}
        recipe = FINETUNE_RECIPES.get((model, scheme), {})
        yield model, scheme, n_gpus, training, recipe, float(values[5 + release])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipes", action="store_true", help="add the launcher configs' settings (see above)")
    parser.add_argument("--release", choices=["24.07", "24.12"], default="24.07")
    parser.add_argument("--packed-sample-len", type=int, default=256, help="mean SQuAD example, tokens")
    args = parser.parse_args()
    release = ["24.07", "24.12"].index(args.release)
    errors: dict[str, list[float]] = {"pre-train": [], "fine-tune": []}
    print(f"{'model':<15}{'run':<10}{'GPUs':>5} {'layout':<20}{'measured':>9}{'estimate':>10}{'error':>8}{'GiB':>7}")
    rows = [*pretrain_rows(release), *finetune_rows(release, args.packed_sample_len)]
    for model, run, n_gpus, training, recipe, measured in rows:
        result = estimate(row_job(model, n_gpus, training, recipe if args.recipes else None), advise_fit=False)
        error = result.tokens_per_s_per_gpu / measured - 1
        errors["pre-train" if run == "pre-train" else "fine-tune"].append(abs(error))
        t = {**training, **(recipe if args.recipes else {})}
        layout = f"tp{t['tp']} pp{t['pp']} cp{t.get('cp', 1)} vp{t.get('vpp', 1)}"
        fits = "" if result.fits else " (does not fit)"
        print(f"{model:<15}{run:<10}{n_gpus:>5} {layout:<20}{measured:>9.0f}{result.tokens_per_s_per_gpu:>10.0f}"
              f"{error:>+8.1%}{result.memory_per_gpu_gib:>7.1f}{fits}")
    every = [e for group in errors.values() for e in group]
    for name, group in errors.items():
        print(f"{name}: mean absolute error {statistics.mean(group):.1%} over {len(group)} rows")
    print(f"all: mean absolute error {statistics.mean(every):.1%} over {len(every)} rows;"
          f" median {statistics.median(every):.1%}")


if __name__ == "__main__":
    main()
