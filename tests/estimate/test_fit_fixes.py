"""`fit_fixes`: every change the estimate offers makes the job fit when applied the way `--what-if` and
the web page's Apply button apply it, with the memory it states; the first is the fit_message's."""

from __future__ import annotations

import pytest

from trainrig import estimate, load_job
from trainrig.catalog.job_file import apply_change
from trainrig.estimate.fit_advice import MAX_FIXES

JOBS = {
    "8b on 8 H100 without ZeRO": {"model": "llama3-8b", "hardware": {"gpu": "H100-SXM5-80GB", "n_gpus": 8},
                                  "training": {"seq_len": 8192, "global_batch": 64}},
    "8b on one 4090": {"model": "llama3-8b", "hardware": {"gpu": "RTX-4090", "n_gpus": 1},
                       "training": {"seq_len": 2048, "global_batch": 8}},
    "13b full fine-tune on one A100-80GB": {"model": "llama2-13b", "hardware": {"gpu": "A100-SXM4-80GB", "n_gpus": 1},
                                            "training": {"seq_len": 4096, "global_batch": 8, "micro_batch": 2}},
}


@pytest.mark.parametrize("name", list(JOBS))
def test_each_fix_applied_as_a_what_if_fits_with_the_memory_it_states(name):
    mapping = JOBS[name]
    est = estimate(load_job(mapping))
    assert not est.fits and 1 <= len(est.fit_fixes) <= MAX_FIXES
    for fix in est.fit_fixes:
        fixed = estimate(load_job(apply_change(mapping, fix["what_if"])))
        assert fixed.fits, fix
        assert fixed.memory_per_gpu_gib == pytest.approx(fix["memory_per_gpu_gib"]), fix
        assert all(f"{key}=" in fix["what_if"] for key in fix["changes"])
    first = est.fit_fixes[0]
    assert f"({first['memory_per_gpu_gib']:.1f} GiB)" in est.fit_message  # the smallest change is the first fix


def test_a_job_that_fits_or_cannot_be_fixed_lists_no_fixes():
    fits = {"model": "gpt3-125m", "hardware": {"gpu": "H100-SXM5-80GB", "n_gpus": 1},
            "training": {"seq_len": 1024, "global_batch": 8}}
    assert estimate(load_job(fits)).fit_fixes == []
    hopeless = {"model": "llama3-70b", "hardware": {"gpu": "RTX-4090", "n_gpus": 1},
                "training": {"seq_len": 2048, "global_batch": 8}}
    est = estimate(load_job(hopeless))
    assert not est.fits and est.fit_fixes == [] and "no single change fits" in est.fit_message
