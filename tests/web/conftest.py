"""Shared pieces of the web tests: the app in-process, CLI answers to compare with, small searches."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from trainrig.cli.main import app as cli_app
from trainrig.web.app import create_app
from trainrig.web.settings import Settings

from .browser_support import artifacts, browser, server  # noqa: F401  (the browser tests' fixtures)

# A search that takes tens of milliseconds: a small model on one GPU type, few GPUs
SMALL_SEARCH = {"model": "gpt3-125m", "tokens": 1e9, "gpus": ["H100-SXM5-80GB"], "max_gpus": 8}
SMALL_SEARCH_FLAGS = ["--model", "gpt3-125m", "--tokens", "1e9", "--gpus", "H100-SXM5-80GB", "--max-gpus", "8"]


def cli_json(*args: str) -> dict | list:
    """What `trainrig ARGS --json` prints, run in-process."""
    result = CliRunner().invoke(cli_app, [*args, "--json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def client():
    """The app with its lifespan (the worker children start and stop with it); limits far above what these
    tests ask, so no answer depends on the machine's speed."""
    with TestClient(create_app(Settings(plan_timeout_s=120, request_timeout_s=120))) as test_client:
        yield test_client
