"""Plans a person can choose between (issue 15): one row per layout and node kind, its other GPU
counts noted as its scaling; rows without a price kept apart from the priced ones and labelled."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from trainrig import estimate, load_job
from trainrig.plan import compare, plan

from .conftest import SMALL_MODEL

SEARCH = {"model": SMALL_MODEL, "tokens": 2e10, "seq_len": 2048, "global_batch": 256, "max_gpus": 64}
LAYOUT = ("tp", "pp", "cp", "ep", "vpp", "micro_batch", "global_batch", "zero", "recompute", "sequence_parallel",
          "tp_comm_overlap")


def _layout_key(p):
    return (p.gpu, p.offer.id if p.offer else None, p.gpus_per_node, *(p.layout[name] for name in LAYOUT))


@pytest.fixture(scope="module")
def fastest():
    """H100 (priced offers) and B200 (catalog nodes, no price), fastest first: the unpriced B200 rows are faster."""
    return plan(**SEARCH, gpu_types=["H100-SXM5-80GB", "B200"], objective="time", top_k=4)


@pytest.mark.parametrize("objective", ["time", "cost"])
def test_one_layout_on_one_node_kind_is_one_row_whatever_the_gpu_count(objective):
    result = plan(**SEARCH, gpu_types=["H100-SXM5-80GB"], objective=objective, top_k=8)
    keys = [_layout_key(p) for p in result.plans]
    assert len(keys) == len(set(keys)), keys
    assert any(p.scaling for p in result.plans)


def test_a_rows_scaling_is_its_layout_at_the_other_gpu_counts_as_estimate_gives_it(fastest):
    top = fastest.plans[0]
    assert top.scaling and top.scaling_note and top.scaling_note.startswith(f"also {top.n_gpus}→")
    assert [s.n_gpus for s in top.scaling] == sorted({s.n_gpus for s in top.scaling} - {top.n_gpus})
    for point in top.scaling:
        mapping = json.loads(json.dumps(top.job))
        mapping["hardware"]["n_gpus"] = point.n_gpus
        mapping["training"]["dp"] = point.n_gpus // (top.layout["tp"] * top.layout["pp"] * top.layout["cp"])
        mapping["training"].pop("grad_accum")
        other = estimate(load_job(mapping), price_usd_per_gpu_hour=top.offer.usd_per_gpu_hour)
        assert point.total_time_s == pytest.approx(other.total_time_s, rel=1e-9)
        assert point.cost_usd == pytest.approx(other.cost_usd, rel=1e-9)
        assert point.speedup == pytest.approx(top.estimate.total_time_s / other.total_time_s, rel=1e-9)
        assert point.cost_ratio == pytest.approx(other.cost_usd / top.estimate.cost_usd, rel=1e-9)
    largest = max(top.scaling, key=lambda s: s.n_gpus)
    if largest.n_gpus > top.n_gpus:
        assert f"{top.n_gpus}→{largest.n_gpus} GPUs" in top.scaling_note


def test_rows_without_a_price_come_after_every_priced_row_and_say_why(fastest):
    priced = [p for p in fastest.plans if p.estimate.cost_usd is not None]
    assert len(priced) == 4  # the priced rows fill --top, whatever faster unpriced rows exist
    assert [p.no_price_reason is None for p in fastest.plans] == [True] * 4 + [False] * (len(fastest.plans) - 4)
    unpriced = fastest.plans[4:]
    assert unpriced, "the unpriced B200 rows, faster than the H100 ones, are shown apart"
    assert min(p.estimate.total_time_s for p in unpriced) < priced[-1].estimate.total_time_s
    for p in unpriced:
        assert p.estimate.cost_usd is None and p.no_price_reason
    assert any(p.no_price_reason == "no offer in the catalog for B200" for p in unpriced)
    assert [p.rank for p in fastest.plans] == list(range(1, len(fastest.plans) + 1))


def test_compare_keeps_unpriced_rows_after_the_priced_ones_and_prefers_a_priced_configuration():
    result = compare(**SEARCH, gpu_types=["B200", "H100-SXM5-80GB"], objective="time")
    assert [row.gpu for row in result.rows] == ["H100-SXM5-80GB", "B200"]
    h100, b200 = (row.plan for row in result.rows)
    assert h100.estimate.cost_usd is not None and h100.no_price_reason is None  # not a faster catalog node
    assert b200.no_price_reason is not None and b200.estimate.cost_usd is None


def _cli(*args):
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "trainrig", *args], capture_output=True, text=True, timeout=300,
                          env=env, check=True).stdout


CLI = ["--model", "gpt3-350m", "--tokens", "1e10", "--seq-len", "2048", "--global-batch", "128", "--max-gpus", "32",
       "--objective", "time"]


def test_the_tables_label_the_unpriced_rows_and_note_the_scaling():
    out = _cli("plan", *CLI, "--gpus", "h100,b200", "--top", "3")
    head, _, rest = out.partition("Without a price")
    assert rest and "no offer in the catalog for B200" in rest and "B200" not in head.split("How to run")[0]
    assert "also " in head and "GPUs:" in head
    data = json.loads(_cli("plan", *CLI, "--gpus", "h100,b200", "--top", "3", "--json"))
    assert all("scaling" in p and "scaling_note" in p and "no_price_reason" in p for p in data["plans"])
    compared = _cli("compare", *CLI, "--gpus", "b200,h100")
    head, _, rest = compared.partition("Without a price")
    assert "H100-SXM5-80GB" in head and "B200" in rest and "B200" not in head.split("How to run")[0]
