"""torchtitan's published peak memory and tokens/s per GPU (benchmarks/llama3_h100_202412_torchtitan.md,
shown in docs/performance.md of pytorch/torchtitan@d4c86e3; runs at torchtitan 9dec370, torch 1963fc8, on
96 GB H100s at 500 W) beside trainrig's reserved-pool estimate, with its parts, and its throughput.

    python benchmarks/torchtitan_memory.py

Tables 1 and 2 are the bundled calibration rows (`trainrig validate` scores them too); Tables 3–6
are not bundled and serve as a held-out check of the same terms at 128–512 GPUs. torchtitan logs
`max_reserved_gib` (torch.cuda.memory_stats()["reserved_bytes.all.peak"]); Tables 5 and 6 take the
maximum over pipeline ranks. Pipeline micro-batches: torchtitan's default, one per stage (8 for
1F1B; 16 for Interleaved 1F1B, two stages per rank). Tables 4–6 name AsyncTP (`tp_comm_overlap`)
where the tables do; CP runs with torchtitan's default all-gather rotation (`cp_kind: all-gather`).
The jobs name `framework: torchtitan` (the bundled rows do too).
"""

from __future__ import annotations

from trainrig import estimate, load_job

L8 = {"n_layers": 32, "hidden": 4096, "n_heads": 32, "ffn_hidden": 14336, "vocab": 128256, "n_kv_heads": 8,
      "gated_mlp": True, "tied_embeddings": False}
L70 = {**L8, "n_layers": 80, "hidden": 8192, "n_heads": 64, "ffn_hidden": 28672}
L405 = {**L8, "n_layers": 126, "hidden": 16384, "n_heads": 128, "ffn_hidden": 53248}
GPU = {"base": "H100-SXM5-80GB", "memory_gib": 96, "memory_bandwidth_gbs": 2400, "tdp_w": 500}
SELECTIVE = {"seq_len": 8192, "micro_batch": 2, "zero": 3, "recompute": "selective", "framework": "torchtitan"}
# Tables 2 and 4-6 name torch.compile
FULL_FP8 = {"seq_len": 8192, "zero": 3, "recompute": "full", "precision": "fp8", "framework": "torchtitan",
            "compile": True}


def hardware(n_gpus: int) -> dict:
    network = {"inter_node": {"bandwidth_gbps": 400, "ports_per_node": 8}} if n_gpus > 8 else {}
    return {"gpu": GPU, "n_gpus": n_gpus, "gpus_per_node": 8, "intra_node": "nvlink4", **network}


def cp_row(cp: int) -> dict:
    return {**FULL_FP8, "seq_len": 32768 * cp, "micro_batch": 1, "global_batch": 8 // cp, "cp": cp}


T4 = {**FULL_FP8, "micro_batch": 16, "global_batch": 512, "tp": 8, "sequence_parallel": True}
T5 = {**FULL_FP8, "micro_batch": 4, "global_batch": 256, "tp": 8, "pp": 8, "sequence_parallel": True,
      "tp_comm_overlap": True}


def t6_row(cp: int) -> dict:
    return {**T5, "seq_len": 32768 * cp, "micro_batch": 1, "global_batch": 8 * (8 // cp), "cp": cp,
            "cp_kind": "all-gather"}


CASES = [  # (name, model, GPUs, training, measured GiB, measured tokens/s per GPU)
    ("T1 8B FSDP 8", L8, 8, {**SELECTIVE, "global_batch": 16, "fused_kernels": False}, 82.4, 5762),
    ("T1 8B FSDP 8 + compile", L8, 8, {**SELECTIVE, "global_batch": 16}, 77.0, 6667),
    ("T1 8B FSDP 8 + compile + fp8", L8, 8, {**SELECTIVE, "global_batch": 16, "precision": "fp8"}, 76.8, 8532),
    *[(f"T2 8B FSDP {8 // cp} CP {cp}", L8, 8, cp_row(cp), measured, tps)
      for cp, measured, tps in ((1, 83.9, 3890), (2, 84.2, 2540), (4, 84.0, 1071), (8, 84.5, 548))],
    ("T3 8B FSDP 128", L8, 128, {**SELECTIVE, "global_batch": 256, "fused_kernels": False}, 67.0, 5605),
    ("T3 8B FSDP 128 + compile", L8, 128, {**SELECTIVE, "global_batch": 256}, 62.0, 6514),
    ("T3 8B FSDP 128 + compile + fp8", L8, 128, {**SELECTIVE, "global_batch": 256, "precision": "fp8"}, 61.8, 8380),
    ("T4 70B FSDP 32 x TP 8", L70, 256, T4, 71.9, 829),
    ("T4 70B FSDP 32 x TP 8 + AsyncTP", L70, 256, {**T4, "tp_comm_overlap": True}, 67.6, 876),
    ("T5 405B FSDP 8 x TP 8 x PP 8, 1F1B", L405, 512, T5, 82.5, 100),
    ("T5 405B ..., Interleaved 1F1B", L405, 512, {**T5, "micro_batch": 2, "vpp": 2}, 72.7, 128),
    *[(f"T6 405B FSDP {8 // cp} CP {cp} x TP 8 x PP 8", L405, 512, t6_row(cp), measured, tps)
      for cp, measured, tps in ((1, 75.3, 76), (2, 75.9, 47), (4, 77.1, 31), (8, 84.9, 16))],
]


def main() -> None:
    print(f"{'case':40s} {'measured':>8s} {'reserved':>8s} {'error':>7s} {'tok/s':>6s} {'estimate':>8s} {'error':>7s}"
          "  parts at the peak (GiB)")
    memory_errors, speed_errors = [], []
    for name, model, n_gpus, training, measured, tps in CASES:
        est = estimate(load_job({"model": model, "hardware": hardware(n_gpus), "training": training}),
                       advise_fit=False)
        parts = " ".join(f"{k} {v:.1f}" for k, v in est.memory_breakdown_gib.items())
        memory_errors.append((est.memory_reserved_gib - measured) / measured * 100)
        speed_errors.append((est.tokens_per_s_per_gpu - tps) / tps * 100)
        print(f"{name:40s} {measured:8.1f} {est.memory_reserved_gib:8.1f} {memory_errors[-1]:+6.1f}% {tps:6d}"
              f" {est.tokens_per_s_per_gpu:8.0f} {speed_errors[-1]:+6.1f}%  {parts}")
    held_out = [i for i, case in enumerate(CASES) if not case[0].startswith(("T1", "T2"))]
    for label, errors in (("memory", memory_errors), ("tokens/s", speed_errors)):
        mean = sum(abs(e) for e in errors) / len(errors)
        held = sum(abs(errors[i]) for i in held_out) / len(held_out)
        print(f"{label}: mean |error| {mean:.1f}% over {len(errors)} rows; {held:.1f}% over the {len(held_out)}"
              " held-out rows (Tables 3-6)")


if __name__ == "__main__":
    main()
