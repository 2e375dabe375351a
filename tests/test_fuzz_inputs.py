"""Job files and CLI flags under random and mutated input (hypothesis, fixed seed, bounded examples).

Zero tracebacks: every input either gives an answer or a TrainrigError; at the command line every
rejection is one sentence `error: …` with exit code 2, and every `--json` output is strict JSON (no
NaN, no Infinity). Examples are few and small (tiny plan searches) so the file runs in well under a
minute on a slow machine; the seed is fixed, so a failure reproduces.
"""

from __future__ import annotations

import json
import math
import sys

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from trainrig import estimate, load_job
from trainrig.catalog.hf_config import model_from_hf_mapping
from trainrig.cli.common import json_text, run_guarded
from trainrig.cli.main import app
from trainrig.errors import TrainrigError
from trainrig.specs import HardwareSpec, ModelSpec, TrainingSpec

FUZZ = settings(derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BASE_JOB = {
    "model": {"n_layers": 4, "hidden": 256, "n_heads": 8, "n_kv_heads": 4, "ffn_hidden": 1024, "vocab": 32000},
    "hardware": {"gpu": "h100", "n_gpus": 8, "gpus_per_node": 8},
    "training": {"seq_len": 1024, "global_batch": 16, "micro_batch": 1, "tokens": 1e9},
}
GPU_FIELDS = ["memory_gib", "memory_bandwidth_gbs", "tdp_w", "boost_clock_mhz", "compute_units", "peak_tflops"]
SECTION_FIELDS = {
    "model": sorted(ModelSpec.model_fields),
    "hardware": sorted(set(HardwareSpec.model_fields) | {"pcie"}),
    "training": sorted(TrainingSpec.model_fields),
}

# values that broke something once: huge, tiny, negative, non-finite, booleans, wrong kinds
EDGE_VALUES = [0, -1, 1, 2, 3, 7, 8, 10**6, 10**7 + 1, 2**63, 10**30, 1e308, -1e308, math.inf, -math.inf,
               math.nan, 0.5, 1e-300, 5e-324, -0.0, True, False, None, "", "auto", "x", "1e3", "h100", "ib-ndr",
               [], {}, [1, 2], {"a": 1}, {"base": "h100", "memory_gib": math.inf}, {"bandwidth_gbps": math.nan}]
numbers = st.integers(-10, 10**9) | st.floats(allow_nan=True, allow_infinity=True)
scalars = st.sampled_from(EDGE_VALUES) | numbers | st.booleans() | st.none() | st.text(max_size=8)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6)


@st.composite
def mutated_jobs(draw) -> dict:
    """The base job with one to three fields set to a nasty value, dropped, or a section replaced."""
    job = json.loads(json.dumps(BASE_JOB))
    for _ in range(draw(st.integers(1, 3))):
        section = draw(st.sampled_from(sorted(SECTION_FIELDS)))
        if draw(st.integers(0, 9)) == 0:  # the whole section: `hardware: 5`, a list, a name
            job[section] = draw(scalars | st.lists(scalars, max_size=2))
            continue
        if not isinstance(job.get(section), dict):
            continue
        key = draw(st.sampled_from(SECTION_FIELDS[section]))
        if section == "hardware" and key == "gpu" and draw(st.booleans()):
            job[section]["gpu"] = {"base": "h100", draw(st.sampled_from(GPU_FIELDS)): draw(scalars)}
        elif draw(st.integers(0, 5)) == 0:
            job[section].pop(key, None)
        else:
            job[section][key] = draw(scalars | values)
    return job


def estimate_or_refuse(job: object) -> None:
    """An answer whose JSON is strict, or a TrainrigError; anything else fails the test."""
    try:
        data = estimate(load_job(job)).to_dict()
        strict_json(json_text(data))
    except TrainrigError as error:
        assert str(error).strip() and "\n" not in str(error)


def strict_json(text: str) -> object:
    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in --json output")

    return json.loads(text, parse_constant=refuse)


def invoke(args: list[str]) -> tuple[int, str, str]:
    """The CLI in-process through the entry point's own boundary (run_guarded), output captured."""
    with CliRunner().isolation() as streams:
        code = run_guarded(app, args)
        sys.stdout.flush()
        sys.stderr.flush()
        return code, streams[0].getvalue().decode(), streams[1].getvalue().decode()


def check_cli(args: list[str], *, may_be_infeasible: bool = False) -> None:
    code, out, err = invoke(args)
    assert "Traceback" not in out + err, err
    if code == 2:
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), (args, err)
        return
    assert code == 0 or (may_be_infeasible and code == 1), (args, code, err)
    if "--json" in args:
        data = strict_json(out)
        assert code == 0 or data["feasible"] is False


# ---- job files ----------------------------------------------------------------------------------


@settings(FUZZ, max_examples=200)
@given(mutated_jobs())
def test_mutated_job_mappings_are_estimated_or_refused_in_one_sentence(job):
    estimate_or_refuse(job)


EXTREMES = {  # in-bounds values at the edges: the answer must still be strict JSON, or one sentence
    ("model", "n_layers"): [1, 2, 10**6], ("model", "hidden"): [8, 256, 10**7], ("model", "vocab"): [1, 10**8],
    ("model", "ffn_hidden"): [1, 10**7], ("training", "seq_len"): [8, 1024, 10**9],
    ("training", "tokens"): [1e-300, 1.0, 1e18], ("training", "global_batch"): [8, 16, 10**9 - 1],
    ("training", "micro_batch"): [1, 2], ("hardware", "n_gpus"): [1, 8, 8 * 10**6],
    ("hardware", "ram_gb_per_node"): [1e-300, 1e12], ("hardware", "cpu_cores_per_node"): [1, 10**7],
}
GPU_EXTREMES = {"memory_gib": [1e-300, 1e12], "memory_bandwidth_gbs": [1e-300, 1e12], "tdp_w": [1e-300, 1e12],
                "peak_tflops": [{"bf16": 1e-300}, {"bf16": 1e12}]}


@st.composite
def extreme_jobs(draw) -> dict:
    job = json.loads(json.dumps(BASE_JOB))
    for (section, key), choices in EXTREMES.items():
        if draw(st.booleans()):
            job[section][key] = draw(st.sampled_from(choices))
    if draw(st.booleans()):
        field = draw(st.sampled_from(sorted(GPU_EXTREMES)))
        job["hardware"]["gpu"] = {"base": "h100", field: draw(st.sampled_from(GPU_EXTREMES[field]))}
    return job


@settings(FUZZ, max_examples=80)
@given(extreme_jobs())
def test_jobs_at_the_bounds_give_strict_json_or_one_sentence(job):
    estimate_or_refuse(job)


@settings(FUZZ, max_examples=60)
@given(values | st.dictionaries(st.sampled_from(["model", "hardware", "training", "name", "gpu"]), values,
                                max_size=4))
def test_random_mappings_are_refused_in_one_sentence(job):
    estimate_or_refuse(job)


@settings(FUZZ, max_examples=25)
@given(mutated_jobs())
def test_mutated_job_files_through_trainrig_estimate(tmp_path_factory, job):
    path = tmp_path_factory.mktemp("job") / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    check_cli(["estimate", str(path), "--json"])


QWEN_MOE = {"model_type": "qwen2_moe", "hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 16,
            "intermediate_size": 5632, "vocab_size": 151936, "num_experts": 60, "num_experts_per_tok": 4,
            "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632, "num_hidden_layers": 24,
            "decoder_sparse_step": 1, "mlp_only_layers": []}


@settings(FUZZ, max_examples=100)
@given(st.dictionaries(st.sampled_from(sorted(QWEN_MOE) + ["model_type", "tie_word_embeddings"]), scalars | values,
                       max_size=3))
def test_hf_configs_give_a_model_or_one_sentence(changes):
    """A `config.json` with huge, negative or non-numeric sizes (1e11 layers once looped for ever)."""
    try:
        model_from_hf_mapping({**QWEN_MOE, **changes}).n_params  # noqa: B018
    except TrainrigError as error:
        assert "\n" not in str(error)


# ---- CLI flags ----------------------------------------------------------------------------------

FLAG_VALUES = st.sampled_from(["-1", "0", "1", "2", "3", "8", "1.5", "1e308", "inf", "-inf", "nan", "true", "",
                               "x", "9999999999", "1e9", "2e12", "1e19", "512-2048", "9-3"]) \
    | st.integers(-5, 10**8).map(str) | st.floats(allow_nan=True, allow_infinity=True).map(repr)


def flags(names: list[str]) -> st.SearchStrategy[list[str]]:
    """One to three of `names`, each with a random value."""
    pair = st.tuples(st.sampled_from(names), FLAG_VALUES).map(list)
    return st.lists(pair, min_size=1, max_size=3).map(lambda pairs: [item for p in pairs for item in p])


ESTIMATE = ["estimate", "--model", "gpt3-125m", "--gpu", "h100", "--gpus", "8", "--json"]
ESTIMATE_FLAGS = ["--tp", "--pp", "--cp", "--ep", "--gpus", "--gpus-per-node", "--seq-len", "--global-batch",
                  "--micro-batch", "--zero", "--tokens", "--price"]
PLAN = ["plan", "--model", "gpt3-125m", "--tokens", "1e9", "--gpus", "h100", "--max-gpus", "8", "--top", "1",
        "--json"]
PLAN_FLAGS = ["--tokens", "--seq-len", "--global-batch", "--deadline-days", "--budget-usd", "--max-nodes",
              "--memory-headroom", "--top"]
FIT = ["fit", "--model", "gpt3-125m", "--gpu", "h100", "--gpus", "1", "--max-gpus", "8", "--top", "1", "--json"]
FIT_FLAGS = ["--tp", "--seq-len", "--micro-batch", "--global-batch", "--zero", "--tokens", "--top", "--max-gpus"]


@settings(FUZZ, max_examples=100)
@given(flags(ESTIMATE_FLAGS))
def test_estimate_flags(extra):
    check_cli([*ESTIMATE, *extra])


@settings(FUZZ, max_examples=30)
@given(flags(PLAN_FLAGS))
def test_plan_flags_with_a_tiny_search(extra):
    # the search stays tiny however the flags come out: --max-gpus stays 8 unless drawn (it is not)
    check_cli([*PLAN, *extra], may_be_infeasible=True)


@settings(FUZZ, max_examples=25)
@given(flags(FIT_FLAGS).filter(lambda extra: "--max-gpus" not in extra or _small(extra)))
def test_fit_flags(extra):
    check_cli([*FIT, *extra])


def _small(extra: list[str]) -> bool:
    """Keep fit's own search small: a drawn --max-gpus above 64 would only make the example slow."""
    value = extra[extra.index("--max-gpus") + 1]
    try:
        return float(value) <= 64
    except ValueError:
        return True
