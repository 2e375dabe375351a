"""The JSON API under random and malformed bodies (hypothesis, fixed seed, bounded examples): never a 5xx,
every refusal one sentence in `message` naming a `field`, every 200 valid JSON (no NaN, no Infinity)."""

from __future__ import annotations

import json
import re

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainrig.web.app import create_app
from trainrig.web.settings import Settings

from .conftest import SMALL_SEARCH

JOB = {"model": "gpt3-125m", "hardware": {"gpu": "h100", "n_gpus": 8},
       "training": {"seq_len": 2048, "global_batch": 64, "zero": 1, "tokens": 1e10}}
VALID_BODIES = {
    "/api/model": {"model": "llama3-8b"},
    "/api/estimate": {**JOB, "what_if": ["zero=3"]},
    "/api/fit": JOB,
    "/api/node": JOB,
    "/api/plan": {**SMALL_SEARCH, "top": 2},
    "/api/compare": SMALL_SEARCH,
}
FIELDS = sorted({key for body in VALID_BODIES.values() for key in body}
                | {"seq_len", "micro_batch", "tp", "pp", "zero", "gpu", "n_gpus", "hf_config", "profile"})

numbers = (st.integers(min_value=-3, max_value=64) | st.sampled_from([0, -1, 2**31, 2**63, 10**30, 1e308, 0.5, -0.0])
           | st.floats(allow_nan=False, allow_infinity=False))
scalars = st.none() | st.booleans() | numbers | st.text(max_size=12) | st.sampled_from(
    ["h100", "llama3-8b", "/etc/passwd", "~", "1e12", "64-4096", "zero=3", "model=/etc", "x" * 300])
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=6), inner, max_size=3),
                           max_leaves=8)


@st.composite
def mutated(draw, valid: dict) -> bytes:
    """A valid body with one key changed, dropped or added, as JSON text."""
    body = json.loads(json.dumps(valid))
    section = body
    if draw(st.booleans()):
        nested = [key for key, value in body.items() if isinstance(value, dict)]
        section = body[draw(st.sampled_from(nested))] if nested else body
    key = draw(st.sampled_from(sorted(section)) | st.sampled_from(FIELDS))  # half the time one it already has
    if draw(st.integers(0, 4)) == 0:
        section.pop(key, None)
    else:
        section[key] = draw(numbers | scalars | json_values)  # mostly a number or a scalar: deeper checks
    return json.dumps(body).encode()


def malformed(valid: dict) -> st.SearchStrategy[bytes]:
    text = json.dumps(valid)
    return st.one_of(
        st.binary(max_size=40),
        st.integers(1, len(text) - 1).map(lambda cut: text[:cut].encode()),  # cut short
        st.sampled_from(["utf-16", "utf-32", "latin-1"]).map(lambda encoding: (text + " é").encode(encoding)),
        st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999"]).map(
            lambda number: text.replace("8", number, 1).encode()),
        json_values.map(lambda value: json.dumps(value).encode()),
        st.just(("[" * 5000 + "]" * 5000).encode()),
    )


def bodies(route: str) -> st.SearchStrategy[bytes]:
    valid = VALID_BODIES[route]
    # mostly one change to a valid body, which gets past the parsing into the loaders and the model
    return st.one_of(mutated(valid), mutated(valid), mutated(valid), malformed(valid),
                     st.just(json.dumps(valid).encode()))


SENTENCE_BREAK = re.compile(r"[.!?]\s+[A-Z]")


def _no_constant(name: str) -> float:
    raise AssertionError(f"{name} in a 200 answer")


def check_answer(route: str, body: bytes, answer) -> None:
    assert answer.status_code < 500, (route, body[:200], answer.text[:500])
    if answer.status_code == 200:
        json.loads(answer.text, parse_constant=_no_constant)
        return
    problem = answer.json()
    message = problem["message"]
    assert isinstance(problem["field"], str) and problem["field"], (route, body[:200], problem)
    assert message.strip() and "\n" not in message and "Traceback" not in message, (route, body[:200], problem)
    assert not SENTENCE_BREAK.search(message), (route, body[:200], message)


@pytest.fixture(scope="module")
def fuzzed():
    # short limits: a generated request that asks for much ends in the 422 that names the limit, quickly
    limits = Settings(plan_timeout_s=3, request_timeout_s=5, max_parallel_plans=1, max_parallel_requests=1)
    with TestClient(create_app(limits)) as client:
        yield client


def fuzz(max_examples: int) -> settings:
    """A fixed seed (derandomize) and a bounded count, so a run is the same everywhere and stays short."""
    return settings(derandomize=True, deadline=None, database=None, max_examples=max_examples,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


@pytest.mark.parametrize("route", ["/api/model", "/api/estimate", "/api/fit", "/api/node"])
@fuzz(max_examples=40)
@given(data=st.data())
def test_quick_routes_never_answer_5xx_and_refuse_in_one_sentence(fuzzed, route, data):
    body = data.draw(bodies(route))
    check_answer(route, body, fuzzed.post(route, content=body, headers={"content-type": "application/json"}))


@pytest.mark.parametrize("route", ["/api/plan", "/api/compare"])
@fuzz(max_examples=20)
@given(data=st.data())
def test_searches_never_answer_5xx_and_refuse_in_one_sentence(fuzzed, route, data):
    body = data.draw(bodies(route))
    check_answer(route, body, fuzzed.post(route, content=body, headers={"content-type": "application/json"}))
