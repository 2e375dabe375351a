"""Megatron-MoE-ModelZoo's Qwen3-235B-A22B rows on 256 H100s (yanring/Megatron-MoE-ModelZoo
best_practice/qwen3/readme.md, "Performance Results, H100": step times of Megatron-Core's MoE
recipes) beside trainrig's estimate. Not bundled and fitted on nothing: a held-out look at the
token dispatchers (`moe_dispatcher`) and the paired micro-batches (`moe_a2a_overlap`).

    python benchmarks/megatron_moe_modelzoo.py

Each row takes what the table states: dispatcher (DeepEP → deepep, A2A → alltoall), TP, EP, PP,
VPP, ETP 1, MBS, GBS 2048 at 4096 tokens, the recompute column (norm, act → recompute_modules
layernorm, moe_act; full), Megatron-FSDP (zero 3) where the FSDP column says On, and "+1f1b
overlap" (moe_a2a_overlap). Stated by the page's setup: NVLink 4 within a node, InfiniBand 8 × 50
GB/s per node. From the recipe the rows run (model_configs/benchmarking/Qwen3-235B-A22B.yaml):
sequence parallelism, the distributed optimizer (ZeRO 1) where Megatron-FSDP is off, the embedding
and loss counted as pipeline slots, Transformer Engine's fused cross-entropy (`loss: fused`). Left
to trainrig's defaults (named in each estimate's assumptions): no CUDA graphs, tokens routed
evenly (the rows are dropless, not force-balanced), the recipe's qk-norm not modelled. The
Qwen3-Next row (gated delta-net layers) is not expressible and left out.

`--plain` estimates every row with the defaults instead (alltoall, no pairing): the estimate
before `moe_dispatcher` and `moe_a2a_overlap` existed.
"""

from __future__ import annotations

import argparse
import statistics

from megatron_bridge_moe_throughput import QWEN3_235B  # this directory, on the path when run as a script
from trainrig import estimate, load_job

RECOMPUTE = {"norm, act": ("selective", ["layernorm", "moe_act"]), "full": ("full", None), "-": ("none", None)}
# dispatcher, TP, EP, PP, VPP, FSDP, MBS, recompute, 1f1b overlap, step time (s); GBS 2048, seq 4096
ROWS = [
    ("DeepEP", 2, 32, 8, 4, False, 1, "norm, act", False, 19.7),
    ("DeepEP", 2, 32, 8, 4, False, 1, "norm, act", True, 17.6),
    ("DeepEP", 2, 8, 1, 1, True, 4, "full", False, 17.6),
    ("A2A", 2, 8, 32, 3, False, 1, "norm, act", False, 24.2),
    ("DeepEP", 4, 8, 8, 4, False, 1, "-", False, 29.0),
]


def row_job(dispatcher, tp, ep, pp, vpp, fsdp, mbs, recompute, overlap, plain=False):
    policy, modules = RECOMPUTE[recompute]
    training = {"framework": "megatron", "precision": "bf16", "global_batch": 2048, "micro_batch": mbs,
                "seq_len": 4096, "tp": tp, "pp": pp, "vpp": vpp, "ep": ep, "expert_tp": 1,
                "sequence_parallel": tp > 1, "recompute": policy, "zero": 3 if fsdp else 1, "loss": "fused"}
    if modules:
        training["recompute_modules"] = modules
    if pp > 1:
        training["account_for_embedding_in_pipeline_split"] = True
        training["account_for_loss_in_pipeline_split"] = True
    if not plain:
        training["moe_dispatcher"] = {"DeepEP": "deepep", "A2A": "alltoall"}[dispatcher]
        training["moe_a2a_overlap"] = overlap
    hardware = {"gpu": "H100-SXM5-80GB", "n_gpus": 256, "gpus_per_node": 8,
                "inter_node": {"bandwidth_gbps": 400, "ports_per_node": 8}}
    return load_job({"model": QWEN3_235B, "hardware": hardware, "training": training})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plain", action="store_true", help="alltoall and no pairing on every row")
    args = parser.parse_args()
    errors = []
    print(f"{'dispatcher':<11}{'layout':<28}{'recompute':<11}{'1f1b':<6}{'measured':>9}{'estimate':>10}{'error':>8}"
          f"{'ep_comm':>9}{'GiB':>7}")
    for dispatcher, tp, ep, pp, vpp, fsdp, mbs, recompute, overlap, measured in ROWS:
        job = row_job(dispatcher, tp, ep, pp, vpp, fsdp, mbs, recompute, overlap, plain=args.plain)
        result = estimate(job, advise_fit=False)
        error = result.step_time_s / measured - 1
        errors.append(abs(error))
        layout = f"tp{tp} ep{ep} pp{pp} vpp{vpp} mbs{mbs}" + (" fsdp" if fsdp else "")
        print(f"{dispatcher:<11}{layout:<28}{recompute:<11}{'yes' if overlap else '':<6}{measured:>9.1f}"
              f"{result.step_time_s:>10.2f}{error:>+8.1%}{result.step_breakdown_s['ep_comm']:>9.2f}"
              f"{result.memory_per_gpu_gib:>7.1f}" + ("" if result.fits else " (does not fit)"))
    print(f"step time: mean absolute error {statistics.mean(errors):.1%} over {len(errors)} rows;"
          f" median {statistics.median(errors):.1%}")


if __name__ == "__main__":
    main()
