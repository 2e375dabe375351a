"""The enumeration produces exactly the layouts the job rules accept (within the search space's choices)."""

from __future__ import annotations

from itertools import product

import pytest

from trainrig import load_job, load_model
from trainrig.errors import TrainrigError
from trainrig.plan.space import SearchSpace, enumerate_layouts

from .conftest import MOE_MODEL, SMALL_MODEL

SPACE = SearchSpace()
CASES = [  # (model, n_gpus, gpus_per_node, seq_len, global batches)
    (SMALL_MODEL, 8, 8, 2048, (256,)),
    (SMALL_MODEL, 24, 8, 4096, (96, 128)),
    (SMALL_MODEL, 2, 8, 8192, (16,)),
    (MOE_MODEL, 16, 8, 4096, (64,)),
    ("llama3-70b", 64, 8, 4096, (1024,)),
]


def _job(model, n_gpus, gpus_per_node, seq_len, layout):
    return load_job({"model": model, "hardware": {"gpu": "H100-SXM5-80GB", "n_gpus": n_gpus,
                                                   "gpus_per_node": gpus_per_node},
                     "training": {"seq_len": seq_len, **layout}})


@pytest.mark.parametrize(("model", "n_gpus", "gpus_per_node", "seq_len", "batches"), CASES)
def test_every_enumerated_layout_is_a_valid_job(model, n_gpus, gpus_per_node, seq_len, batches):
    spec = load_model(model)
    layouts = enumerate_layouts(spec, n_gpus, gpus_per_node, seq_len, batches, SPACE)
    assert len(layouts) > 0
    step = max(1, len(layouts) // 300)  # every row for small cases, an even sample of the 70B case
    for i in range(0, len(layouts), step):
        layout = layouts.training_fields(i)
        job = _job(model, n_gpus, gpus_per_node, seq_len, layout)
        assert job.training.dp_degree == layout["dp"]
        assert job.training.micro_batches == layout["global_batch"] // (layout["micro_batch"] * layout["dp"])


@pytest.mark.parametrize(("model", "n_gpus", "gpus_per_node", "seq_len", "batches"), CASES[:4])
def test_enumeration_finds_every_layout_the_job_rules_accept(model, n_gpus, gpus_per_node, seq_len, batches):
    """Brute force: every (tp, pp, cp, ep, vpp, batch split) the Job accepts, within the search space's
    documented choices, times the memory savers frameworks run with it ⇔ the enumeration."""
    spec = load_model(model)
    layouts = enumerate_layouts(spec, n_gpus, gpus_per_node, seq_len, batches, SPACE)
    enumerated = {tuple(sorted(layouts.training_fields(i).items())) for i in range(len(layouts))}
    assert len(enumerated) == len(layouts), "no duplicates"
    accepted = set()
    powers = (1, 2, 4, 8, 16)
    for tp, pp, cp, ep, vpp, gb, mb in product(powers, range(1, spec.n_layers + 1), powers, powers, SPACE.vpp,
                                               batches, SPACE.micro_batches):
        layout = {"tp": tp, "pp": pp, "cp": cp, "ep": ep, "vpp": vpp, "global_batch": gb, "micro_batch": mb}
        if not _in_search_space({**layout, "n_layers": spec.n_layers}, n_gpus, gpus_per_node, seq_len):
            continue
        try:
            job = _job(model, n_gpus, gpus_per_node, seq_len, layout)
        except TrainrigError:
            continue
        layout["dp"] = job.training.dp_degree
        if (layout["dp"] * cp) % ep:  # a job folds such an ep into the TP ranks; the search does not
            continue
        for zero, rc, sp, overlap in product(SPACE.zero_stages, SPACE.recompute, (False, True), (False, True)):
            # TP overlap needs sequence parallelism (specs/job.py); tried as the space says, off otherwise
            if overlap not in (SPACE.tp_comm_overlap if tp > 1 and sp else (False,)):
                continue
            full = {**layout, "zero": zero, "recompute": rc, "sequence_parallel": sp, "tp_comm_overlap": overlap}
            if _framework_supported(full, job.training.micro_batches):
                accepted.add(tuple(sorted(full.items())))
    assert accepted == enumerated


def _in_search_space(layout, n_gpus, gpus_per_node, seq_len) -> bool:
    """The search space's documented choices, restated independently of the enumeration code."""
    tp, cp, pp = layout["tp"], layout["cp"], layout["pp"]
    # pipeline sizes: those that split the layers evenly, and powers of two (which real runs use
    # unevenly: 126 layers on 16 stages)
    even_or_power_of_two = layout["n_layers"] % pp == 0 or pp & (pp - 1) == 0
    return tp <= min(gpus_per_node, n_gpus) and cp <= SPACE.max_cp and even_or_power_of_two and (
        cp == 1 or seq_len // cp >= SPACE.min_tokens_per_cp_rank)


def _framework_supported(layout, micro_batches) -> bool:
    dp_cp = layout["dp"] * layout["cp"]
    if dp_cp == 1 and layout["zero"] != 0:
        return False  # nothing to shard: stage 0 stands for all
    if layout["pp"] > 1 and layout["zero"] >= 2:
        return False  # DeepSpeed and Megatron do not run ZeRO-2/3 with pipeline parallelism
    if layout["vpp"] > 1 and micro_batches % layout["pp"]:
        return False  # Megatron's interleaved schedule needs micro-batches in multiples of pp
    return not (layout["tp"] == 1 and layout["sequence_parallel"])  # sp only means something with tp
