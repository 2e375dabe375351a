"""benchmarks/bench_profile.py: its trace summary on a hand-made trace, and the harness smoke-run on
the CPU (no kernels there, so the sums are empty but the timed steps and the estimate are real)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "bench_profile.py"


def _module():
    spec = importlib.util.spec_from_file_location("bench_profile", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_kernel_names_fall_into_their_kinds():
    kind = _module().kernel_kind
    assert kind("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_cublas") == "gemm"
    assert kind("nvjet_tst_256x128_64x4_2x1_v_bz_coopA_TNT") == "gemm"
    assert kind("void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits>") \
        == "attention"
    assert kind("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>") \
        == "elementwise"
    assert kind("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor>") \
        == "optimizer"
    assert kind("void at::native::reduce_kernel<512, 1, ReduceOp<float, MeanOps>>") == "norm_reduce"
    # casts are copies, whatever lambda their template names (an early "lamb" pattern took them for optimizers)
    assert kind("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda("
                "at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda(float)#1}>") == "copy"
    assert kind("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<"
                "at::native::float8_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda(float)#1}>>") == "copy"
    assert kind("something_new") == "other"


def test_a_trace_sums_kernel_time_and_counts_overlap_once():
    summary = _module().summarise_trace({"traceEvents": [
        {"cat": "kernel", "name": "sm90_xmma_gemm_x", "ts": 0.0, "dur": 600.0},
        {"cat": "kernel", "name": "vectorized_elementwise_kernel", "ts": 500.0, "dur": 200.0},  # overlaps 100 µs
        {"cat": "cpu_op", "name": "aten::mm", "ts": 0.0, "dur": 5000.0},  # host side: not a kernel
        {"cat": "kernel", "name": "sm90_xmma_gemm_x", "ts": 900.0, "dur": 100.0},  # 200 µs idle before it
    ]})
    assert summary["kernels"] == 3
    assert summary["kernel_s_by_kind"] == pytest.approx({"gemm": 700e-6, "elementwise": 200e-6})
    assert summary["span_s"] == pytest.approx(1000e-6) and summary["busy_s"] == pytest.approx(800e-6)
    assert summary["busy_fraction"] == pytest.approx(0.8)
    assert summary["longest"][0]["name"] == "sm90_xmma_gemm_x" and summary["longest"][0]["kind"] == "gemm"


def test_the_step_gemm_flops_count_each_pass_the_linears_run():
    from trainrig import load_job
    from trainrig.catalog.models import load_model

    module = _module()

    def job(**training):
        return load_job({"model": {**load_model("llama3-8b").model_dump(), "n_layers": 4},
                         "hardware": {"gpu": "H200-SXM5-141GB"},
                         "training": {"seq_len": 4096, "micro_batch": 1, "global_batch": 1, **training}})

    layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336  # q, o; k, v (GQA 8 of 32); gate, up, down
    head = 4096 * 128256
    assert module.linear_gemm_flops(job()) == pytest.approx(6 * 4096 * (4 * layer + head))
    # a frozen base runs no weight gradients; a full recompute runs the layers' forward once more
    assert module.linear_gemm_flops(job(method="lora")) == pytest.approx(4 * 4096 * (4 * layer + head))
    assert module.linear_gemm_flops(job(recompute="full")) == pytest.approx(2 * 4096 * (4 * 4 * layer + 3 * head))


def test_the_profile_harness_runs_tiny_on_the_cpu(tmp_path):
    pytest.importorskip("torch")
    done = subprocess.run([sys.executable, str(SCRIPT), "--tiny", "--device", "cpu", "--steps", "2", "--warmup", "1",
                           "--only", "llama3-8b,mixtral-8x7b", "--out", str(tmp_path)], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    rows = json.loads((tmp_path / "profile.json").read_text())
    assert [row["job"] for row in rows] == ["llama3-8b", "mixtral-8x7b"]
    assert all(row["step_s_measured"] > 0 and row["step_s_estimated"] > 0 for row in rows)
    assert all(row["layers"] == 2 and row["kernels"] == 0 for row in rows)
    assert all(set(row["phases_s_measured"]) == {"forward_s", "backward_s", "optimizer_s"}
               and sum(row["phases_s_measured"].values()) > 0 for row in rows)
    assert "llama3-8b" in done.stdout and "mixtral-8x7b" in done.stdout
