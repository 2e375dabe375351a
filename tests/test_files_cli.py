"""The file and YAML limits seen from the command line: one sentence on stderr, exit 2, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys

from test_yaml_limits import BOMB


def trainrig(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainrig", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def one_sentence(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1, result.stderr
    return result.stderr


def test_a_directory_as_the_job_file_is_named_a_directory(tmp_path):
    assert f"{tmp_path} is a directory, not a regular file." in one_sentence(trainrig("estimate", str(tmp_path)))


def test_a_fifo_in_the_catalog_exits_2_at_once(tmp_path):
    os.mkfifo(tmp_path / "lab.yaml")
    stderr = one_sentence(trainrig("gpus", env={"TRAINRIG_CATALOG": str(tmp_path), "COLUMNS": "500"}))
    assert "lab.yaml is a FIFO (named pipe), not a regular file." in stderr


def test_a_what_if_alias_bomb_exits_2(tmp_path):
    result = trainrig("estimate", "--model", "llama3-8b", "--gpu", "h100", "--gpus", "8", "--what-if", f"gpus={BOMB}")
    assert "more than 1,000,000 values" in one_sentence(result)
    assert "what_if 'gpus'" in result.stderr  # the error names the flag's key, not "the YAML text"


def test_an_offers_file_in_utf16_or_a_fifo_is_one_sentence(tmp_path):
    utf16 = tmp_path / "offers.yaml"
    utf16.write_text("offers: []\n", encoding="utf-16")
    result = trainrig("plan", "--model", "llama3-8b", "--tokens", "1e11", "--offers", str(utf16))
    assert "UTF-16" in one_sentence(result)
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    stderr = one_sentence(trainrig("plan", "--model", "llama3-8b", "--tokens", "1e11", "--offers", str(fifo)))
    assert "FIFO" in stderr


def test_a_hugging_face_config_that_is_not_utf8_is_one_sentence(tmp_path):
    config = tmp_path / "config.json"
    config.write_bytes(b'{"hidden_size": \xff}')
    assert "not UTF-8" in one_sentence(trainrig("estimate", "--model", str(config), "--gpu", "h100", "--gpus", "8"))
