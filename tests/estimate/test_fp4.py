"""precision: fp4 (NVFP4, Blackwell): the linear layers' GEMMs at the fp4 peak, NVFP4's cast bytes,
attention and the output head in bf16, MFU against the fp4 peak, and clear refusals elsewhere."""

from __future__ import annotations

import subprocess
import sys

import pytest

from jobs import make_job
from trainrig import estimate
from trainrig.bench.model import check_buildable
from trainrig.errors import TrainrigError
from trainrig.estimate.compute import linear_time_s
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.job_fields import NVFP4_CAST_BYTES
from trainrig.estimate.params import DEFAULT_PARAMETERS as P

LLAMA = {"n_layers": 8, "hidden": 4096, "n_heads": 32, "n_kv_heads": 8, "ffn_hidden": 14336, "vocab": 32000}


def job(precision, gpu="B200", **training):
    return make_job(model=LLAMA, hardware={"gpu": gpu, "n_gpus": 1},
                    training={"seq_len": 4096, "global_batch": 8, "precision": precision, **training})


def test_nvfp4_casts_read_twice_and_write_both_copies_with_their_scales():
    # the amax read, the 16-bit read, two 4-bit copies and an E4M3 scale per 16 elements for each
    assert pytest.approx(2 + 2 + 2 * (0.5 + 1 / 16)) == NVFP4_CAST_BYTES
    assert float(inputs_from_job(job("fp4"), P).fp8_cast_bytes) == pytest.approx(NVFP4_CAST_BYTES)


def test_a_large_linear_runs_at_twice_the_fp8_rate_on_b200():
    fp8, fp4 = (inputs_from_job(job(p), P) for p in ("fp8", "fp4"))
    shape = (16384, 8192, 8192)  # tokens, fan-in, fan-out: arithmetic-bound in both formats
    t8, t4 = (float(linear_time_s(*shape, x, P)[0]) for x in (fp8, fp4))
    assert t8 / t4 == pytest.approx(9000 / 4500, rel=1e-9)  # B200 dense fp4 / fp8


def test_attention_and_the_output_head_stay_in_bf16():
    x = inputs_from_job(job("fp4"), P)
    assert float(x.attention_peak_tflops) == 2250 == float(x.head_gemm_peak_tflops)
    assert float(x.gemm_peak_tflops) == 9000


def test_mfu_is_against_the_fp4_peak_and_the_estimate_names_the_recipe():
    result = estimate(job("fp4"), advise_fit=False)
    assert result.mfu_peak == "fp4 dense" and result.mfu_peak_tflops == 9000
    assert 0 < result.mfu < 1
    assert any("NVFP4" in line for line in result.assumptions)
    assert result.tokens_per_s_per_gpu > estimate(job("fp8"), advise_fit=False).tokens_per_s_per_gpu


def test_fp4_off_blackwell_and_fp8_recipes_on_fp4_are_refused():
    with pytest.raises(TrainrigError, match="no fp4 support"):
        job("fp4", gpu="H100-SXM5-80GB")
    with pytest.raises(TrainrigError, match="applies to precision: fp8"):
        job("fp4", fp8_recipe="mxfp8")


def test_the_cli_refuses_fp4_on_hopper_in_one_sentence(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("model: llama3-8b\nhardware: {gpu: H100-SXM5-80GB, n_gpus: 8}\n"
                    "training: {seq_len: 4096, global_batch: 64, precision: fp4}\n")
    done = subprocess.run([sys.executable, "-m", "trainrig", "estimate", str(path)], capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().startswith("error: training.precision:")


def test_the_bench_says_it_cannot_build_nvfp4_linears():
    j = job("fp4")
    with pytest.raises(TrainrigError, match="NVFP4"):
        check_buildable(j.model, j.training)
