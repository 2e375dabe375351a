"""torchtitan's published peak memory (docs/performance.md, pytorch/torchtitan@d4c86e3, runs at
torchtitan 9dec370 on 96 GB H100s) beside trainrig's reserved-pool estimate, with its parts.

    python benchmarks/torchtitan_memory.py

Tables 1 and 2 are the bundled calibration rows (`trainrig validate` scores them too); Tables 3–5
are not bundled and serve as a held-out check of the same terms at 128–512 GPUs. torchtitan logs
`max_reserved_gib` (torch.cuda.memory_stats()["reserved_bytes.all.peak"]); its Table 5 takes the
maximum over pipeline ranks. Pipeline micro-batches: torchtitan's default, one per stage. The jobs
name `framework: torchtitan` (the bundled rows do not; with tp 1 no memory term differs).
"""

from __future__ import annotations

from trainrig import estimate, load_job

L8 = {"n_layers": 32, "hidden": 4096, "n_heads": 32, "ffn_hidden": 14336, "vocab": 128256, "n_kv_heads": 8,
      "gated_mlp": True, "tied_embeddings": False}
L70 = {**L8, "n_layers": 80, "hidden": 8192, "n_heads": 64, "ffn_hidden": 28672}
L405 = {**L8, "n_layers": 126, "hidden": 16384, "n_heads": 128, "ffn_hidden": 53248}
GPU = {"base": "H100-SXM5-80GB", "memory_gib": 96, "memory_bandwidth_gbs": 2400, "tdp_w": 500}
SELECTIVE = {"seq_len": 8192, "micro_batch": 2, "zero": 3, "recompute": "selective", "framework": "torchtitan"}
FULL_FP8 = {"seq_len": 8192, "zero": 3, "recompute": "full", "precision": "fp8", "framework": "torchtitan"}


def hardware(n_gpus: int) -> dict:
    network = {"inter_node": {"bandwidth_gbps": 400, "ports_per_node": 8}} if n_gpus > 8 else {}
    return {"gpu": GPU, "n_gpus": n_gpus, "gpus_per_node": 8, "intra_node": "nvlink4", **network}


def cp_row(cp: int) -> dict:
    return {**FULL_FP8, "seq_len": 32768 * cp, "micro_batch": 1, "global_batch": 8 // cp, "cp": cp}


CASES = [  # (name, model, GPUs, training, measured GiB)
    ("T1 8B FSDP 8", L8, 8, {**SELECTIVE, "global_batch": 16, "fused_kernels": False}, 82.4),
    ("T1 8B FSDP 8 + compile", L8, 8, {**SELECTIVE, "global_batch": 16}, 77.0),
    ("T1 8B FSDP 8 + compile + fp8", L8, 8, {**SELECTIVE, "global_batch": 16, "precision": "fp8"}, 76.8),
    *[(f"T2 8B FSDP {8 // cp} CP {cp}", L8, 8, cp_row(cp), measured)
      for cp, measured in ((1, 83.9), (2, 84.2), (4, 84.0), (8, 84.5))],
    ("T3 8B FSDP 128", L8, 128, {**SELECTIVE, "global_batch": 256, "fused_kernels": False}, 67.0),
    ("T3 8B FSDP 128 + compile", L8, 128, {**SELECTIVE, "global_batch": 256}, 62.0),
    ("T3 8B FSDP 128 + compile + fp8", L8, 128, {**SELECTIVE, "global_batch": 256, "precision": "fp8"}, 61.8),
    ("T4 70B FSDP 32 x TP 8", L70, 256, {**FULL_FP8, "micro_batch": 16, "global_batch": 512, "tp": 8,
                                         "sequence_parallel": True}, 71.9),
    ("T5 405B FSDP 8 x TP 8 x PP 8, 1F1B", L405, 512, {**FULL_FP8, "micro_batch": 4, "global_batch": 256, "tp": 8,
                                                     "pp": 8, "sequence_parallel": True}, 82.5),
]


def main() -> None:
    print(f"{'case':36s} {'measured':>8s} {'reserved':>8s} {'error':>7s}  parts at the peak (GiB)")
    for name, model, n_gpus, training, measured in CASES:
        est = estimate(load_job({"model": model, "hardware": hardware(n_gpus), "training": training}),
                       advise_fit=False)
        parts = " ".join(f"{k} {v:.1f}" for k, v in est.memory_breakdown_gib.items())
        error = (est.memory_reserved_gib - measured) / measured * 100
        print(f"{name:36s} {measured:8.1f} {est.memory_reserved_gib:8.1f} {error:+6.1f}%  {parts}")


if __name__ == "__main__":
    main()
