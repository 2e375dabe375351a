"""YAML limits (issue 13 item 2 and 10, issue 16): alias bombs, deep nesting and duplicate keys end
in one error, with libyaml's loader and with the pure-Python one, which read every file alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from trainrig.catalog import yaml_text
from trainrig.catalog.job_file import apply_change, read_job_file
from trainrig.catalog.registry import DATA_DIR
from trainrig.catalog.yaml_text import MAX_DEPTH, YAMLLimitError, load_yaml
from trainrig.errors import TrainrigError

REPO = Path(__file__).resolve().parents[1]
# "billion laughs": 9 levels of 9 aliases each, 9^9 ≈ 387 million strings in about 340 bytes
BOMB = '{a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]' + "".join(
    f", {b}: &{b} [{','.join([f'*{a}'] * 9)}]" for a, b in zip("abcdefgh", "bcdefghi", strict=True)) + "}"
LOADERS = ["fast", "pure"]


@pytest.fixture(params=LOADERS)
def loader(request, monkeypatch):
    """Run the test with libyaml's loader and again with the pure-Python fallback."""
    if request.param == "fast":
        if yaml_text._FastLoader is None:
            pytest.skip("PyYAML was built without libyaml")
    else:
        monkeypatch.setattr(yaml_text, "_FastLoader", None)
    return request.param


def test_an_alias_bomb_is_refused_before_it_expands(loader):
    assert len(BOMB) < 400
    with pytest.raises(YAMLLimitError, match=r"bomb\.yaml holds more than 1,000,000 values"):
        load_yaml(BOMB, source="bomb.yaml")


def test_an_alias_that_contains_itself_is_refused(loader):
    with pytest.raises(YAMLLimitError, match="contains itself"):
        load_yaml("a: &a [1, *a]")


def test_aliases_that_stay_small_still_work(loader):
    # merge keys are a common way to share settings; an explicit key overrides the merged one
    data = load_yaml("base: &b {x: 1, y: 2}\nrun:\n  <<: *b\n  x: 5\nsame: *b\n")
    assert data == {"base": {"x": 1, "y": 2}, "run": {"x": 5, "y": 2}, "same": {"x": 1, "y": 2}}


def test_the_value_cap_counts_expanded_aliases(loader, monkeypatch):
    monkeypatch.setattr(yaml_text, "MAX_VALUES", 20)
    load_yaml("a: &a [1, 2, 3, 4]\nb: [*a, *a]\n")  # 1 + 2·1 + 5 + 2 + 2·5 = 20 values
    with pytest.raises(YAMLLimitError, match="more than 20 values"):
        load_yaml("a: &a [1, 2, 3, 4]\nb: [*a, *a, *a]\n")


def test_the_text_cap_counts_an_aliased_long_string_each_time(loader, monkeypatch):
    monkeypatch.setattr(yaml_text, "MAX_CHARS", 250)
    with pytest.raises(YAMLLimitError, match="more than 250 characters"):
        load_yaml(f"a: &a {'x' * 100}\nb: [*a, *a]\n")


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 900, 5000])
def test_deep_nesting_is_one_error_not_a_recursion_error(loader, depth):
    with pytest.raises(YAMLLimitError, match=f"deep.yaml nests deeper than {MAX_DEPTH} levels"):
        load_yaml("[" * depth + "]" * depth, source="deep.yaml")


def test_nesting_up_to_the_limit_is_read(loader):
    data = load_yaml("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    for _ in range(MAX_DEPTH - 1):
        data = data[0]
    assert data == []


def test_deep_nesting_through_aliases_is_counted(loader):
    inner = "[" * 60 + "1" + "]" * 60
    with pytest.raises(YAMLLimitError, match="nests deeper"):
        load_yaml(f"a: &a {inner}\nb: {'[' * 50}*a{']' * 50}\n")


def test_a_key_written_twice_is_an_error(loader):
    with pytest.raises(yaml.YAMLError, match="found duplicate key 'n_gpus'"):
        load_yaml("hardware:\n  n_gpus: 8\n  gpu: h100\n  n_gpus: 16\n")


def test_exponent_floats_hold_with_either_loader(loader):
    assert load_yaml("a: 1.0e11\nb: 2e12\nc: '2e3'\nd: 7\n") == {"a": 1.0e11, "b": 2e12, "c": "2e3", "d": 7}


def _packaged_yaml_files() -> list[Path]:
    return sorted(DATA_DIR.rglob("*.yaml")) + sorted((REPO / "examples").rglob("*.yaml"))


@pytest.mark.skipif(yaml_text._FastLoader is None, reason="PyYAML was built without libyaml")
@pytest.mark.parametrize("path", _packaged_yaml_files(), ids=lambda p: p.name)
def test_both_loaders_read_every_packaged_file_identically(path, monkeypatch):
    text = path.read_text()
    fast = load_yaml(text)
    monkeypatch.setattr(yaml_text, "_FastLoader", None)
    pure = load_yaml(text)
    assert fast == pure
    assert json.dumps(fast, default=repr) == json.dumps(pure, default=repr)  # types too: 1 vs 1.0 vs "1"


def test_the_fast_loader_is_used_when_libyaml_is_there():
    if yaml.__with_libyaml__:
        assert issubclass(yaml_text._FastLoader, yaml.CSafeLoader)
    else:
        assert yaml_text._FastLoader is None


def test_a_what_if_alias_bomb_is_refused():
    mapping = {"model": "llama3-8b", "hardware": {"gpu": "h100", "n_gpus": 8}}
    with pytest.raises(TrainrigError, match="more than 1,000,000 values"):
        apply_change(mapping, f"gpus={BOMB}")


def test_a_job_file_alias_bomb_names_the_file(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(f"model: llama3-8b\nhardware: {{gpu: h100, n_gpus: {BOMB}}}\n")
    with pytest.raises(TrainrigError) as error:
        read_job_file(path)
    assert error.value.field == "job" and str(path) in error.value.message
    assert "more than 1,000,000 values" in error.value.message


def test_a_job_file_with_a_duplicate_key_names_the_file_and_key(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("model: llama3-8b\nmodel: llama3-70b\nhardware: {gpu: h100}\n")
    with pytest.raises(TrainrigError, match=r"job\.yaml is not valid YAML \(found duplicate key 'model' at line 2"):
        read_job_file(path)
