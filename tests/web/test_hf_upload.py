"""A config.json's content read as data gives the same model as the file read from disk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainrig.catalog.hf_config import model_from_hf_config, model_from_hf_mapping
from trainrig.errors import TrainrigError

HF_DIR = Path(__file__).parents[1] / "data" / "hf"


def _json_files() -> list[Path]:
    files = []
    for path in sorted(HF_DIR.rglob("*.json")):
        try:
            json.loads(path.read_text())
        except json.JSONDecodeError:
            continue  # a malformed file: the page's JSON.parse refuses it before any upload
        files.append(path)
    return files


@pytest.mark.parametrize("path", _json_files(), ids=lambda p: p.stem)
def test_the_mapping_reader_agrees_with_the_file_reader(path):
    data = json.loads(path.read_text())
    try:
        from_file = model_from_hf_config(path)
    except TrainrigError as error:  # refused from disk: refused as data too, for the same reason
        with pytest.raises(TrainrigError) as raised:
            model_from_hf_mapping(data, label="the uploaded config.json")
        assert raised.value.message == error.message.replace(str(path), "the uploaded config.json")
        return
    from_data = model_from_hf_mapping(data)
    assert from_data.model_dump(exclude={"name"}) == from_file.model_dump(exclude={"name"})
    assert from_data.n_params == from_file.n_params


def test_the_mapping_is_named_by_name_or_path_or_the_default():
    data = json.loads((HF_DIR / "Meta-Llama-3-8B.json").read_text())
    assert model_from_hf_mapping(data).name == "custom"
    assert model_from_hf_mapping(data, default_name="mine").name == "mine"
    assert model_from_hf_mapping({**data, "_name_or_path": "org/model"}).name == "org/model"


@pytest.mark.parametrize(("data", "words"), [
    ([1, 2], "array"), ("text", "string"), (None, "null"), ({}, "no model_type"),
    ({"model_type": "bert"}, "encoder-only"), ({"model_type": "llama", "num_hidden_layers": "32"}, "whole number"),
])
def test_bad_content_is_an_error_on_model_that_names_the_upload(data, words):
    with pytest.raises(TrainrigError) as raised:
        model_from_hf_mapping(data, label="the uploaded config.json")
    assert raised.value.field == "model"
    assert words in raised.value.message and "the uploaded config.json" in raised.value.message
