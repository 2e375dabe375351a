"""The packaged catalog's parsed YAML, kept as JSON in the user's cache (`catalog.parsed_cache`): read back
exactly as parsed (types too), parsed again when the text or the parser changes, and never a reason to fail."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import pytest

from trainrig.catalog import parsed_cache, registry
from trainrig.catalog.files import load_data_file
from trainrig.catalog.parsed_cache import cache_dir, load_parsed_yaml
from trainrig.errors import TrainrigError

PACKAGED = sorted(registry.DATA_DIR.glob("*.yaml"))


@pytest.fixture(autouse=True)
def cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "trainrig" / "catalog"


def typed(data) -> str:
    """The data with its types showing: 1 vs 1.0 vs "1" vs true, a date vs its text."""
    return json.dumps(data, default=repr)


def entries() -> list[Path]:
    return sorted(cache_dir().glob("*.json")) if cache_dir().exists() else []


def no_parsing(monkeypatch):
    def refuse(*args):
        raise AssertionError("parsed the YAML although the cache holds it")

    monkeypatch.setattr(parsed_cache, "parse_yaml_text", refuse)


@pytest.mark.parametrize("path", PACKAGED, ids=lambda p: p.name)
def test_a_packaged_file_reads_back_from_the_cache_exactly_as_parsed(path, monkeypatch):
    parsed = load_data_file(path, "catalog")
    assert typed(load_parsed_yaml(path, "catalog")) == typed(parsed)  # parsed, and written
    assert len(entries()) == 1
    no_parsing(monkeypatch)
    assert typed(load_parsed_yaml(path, "catalog")) == typed(parsed)


def test_the_catalog_holds_dates_and_they_come_back_as_dates(monkeypatch):
    path = registry.DATA_DIR / "offers.yaml"
    load_parsed_yaml(path, "catalog")
    no_parsing(monkeypatch)
    offers = load_parsed_yaml(path, "catalog")["offers"]
    dates = [value for offer in offers for value in offer.values() if isinstance(value, dt.date)]
    assert dates, "offers.yaml has no date left: this test no longer covers them"


def test_a_changed_file_is_parsed_again_and_its_entry_rewritten(tmp_path):
    path = tmp_path / "gpus.yaml"
    path.write_text("gpus:\n  - {id: a, tdp_w: 300}\n")
    assert load_parsed_yaml(path, "catalog") == {"gpus": [{"id": "a", "tdp_w": 300}]}
    path.write_text("gpus:\n  - {id: a, tdp_w: 350.0}\n")
    assert typed(load_parsed_yaml(path, "catalog")) == typed({"gpus": [{"id": "a", "tdp_w": 350.0}]})
    assert len(entries()) == 1


def test_a_new_parser_is_a_miss(tmp_path, monkeypatch):
    path = tmp_path / "a.yaml"
    path.write_text("a: 1.0e11\n")
    load_parsed_yaml(path, "catalog")
    monkeypatch.setattr(parsed_cache, "_parser_digest", lambda: "another yaml_text\0")
    parsed = []
    real = parsed_cache.parse_yaml_text
    monkeypatch.setattr(parsed_cache, "parse_yaml_text", lambda *args: parsed.append(args) or real(*args))
    assert load_parsed_yaml(path, "catalog") == {"a": 1.0e11} and len(parsed) == 1


@pytest.mark.parametrize("stored", [b"", b"{not json", b"[]", b'{"format": "x", "key": "y", "data": 1}',
                                    b'{"format": "trainrig-parsed-yaml-1", "key": "0", "data": {"a": 2}}',
                                    b'{"a": {"$date": 7}}'])
def test_an_entry_that_is_corrupt_or_not_for_this_text_is_a_miss_and_rewritten(tmp_path, stored):
    path = tmp_path / "a.yaml"
    path.write_text("a: 1\n")
    load_parsed_yaml(path, "catalog")
    [entry] = entries()
    entry.write_bytes(stored)
    assert load_parsed_yaml(path, "catalog") == {"a": 1}
    assert json.loads(entry.read_text())["data"] == {"a": 1}


def test_a_cache_that_cannot_be_written_is_no_error(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))  # a file where the directory would go
    path = tmp_path / "a.yaml"
    path.write_text("a: [1, 2]\n")
    assert load_parsed_yaml(path, "catalog") == {"a": [1, 2]}
    assert list(tmp_path.glob("**/*.tmp")) == []


def test_without_a_home_or_an_absolute_cache_home_nothing_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")  # ignored, as the XDG rule says
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "trainrig" / "catalog"
    monkeypatch.setattr(parsed_cache.os.path, "expanduser", lambda p: p)  # no HOME, no password entry
    assert cache_dir() is None
    path = tmp_path / "a.yaml"
    path.write_text("a: 1\n")
    assert load_parsed_yaml(path, "catalog") == {"a": 1}
    assert not (tmp_path / "~").exists() and not Path("~").exists()


@pytest.mark.parametrize("text", ["a: 2024-05-01 10:00:00\n", "1: one\n", "a: !!binary aGk=\n", "a: {$date: x}\n",
                                  "a: !!set {x}\n"])
def test_data_json_would_not_give_back_as_it_was_is_parsed_every_time(tmp_path, text):
    path = tmp_path / "a.yaml"
    path.write_text(text)
    assert typed(load_parsed_yaml(path, "catalog")) == typed(load_data_file(path, "catalog"))
    assert entries() == []


def test_a_file_that_does_not_parse_is_the_same_error_and_not_cached(tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text("a: 1\na: 2\n")
    with pytest.raises(TrainrigError) as direct:
        load_data_file(path, "catalog")
    with pytest.raises(TrainrigError) as cached:
        load_parsed_yaml(path, "catalog")
    assert str(cached.value) == str(direct.value) and "duplicate key" in str(direct.value)
    assert entries() == []


def test_the_file_is_read_with_its_checks_every_time(tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text("a: 1\n")
    load_parsed_yaml(path, "catalog")
    path.unlink()
    with pytest.raises(TrainrigError, match="does not exist"):
        load_parsed_yaml(path, "catalog")


def test_the_catalog_from_the_cache_is_the_catalog_from_the_yaml(tmp_path, monkeypatch):
    from trainrig.catalog import _load

    def build():
        registry._packaged_file.cache_clear()
        registry._read_sections_cached.cache_clear()
        _load.cache_clear()
        catalog = _load((registry.DATA_DIR,))
        return {name: [e.model_dump(mode="json") for e in getattr(catalog, name)] for name in registry.SECTIONS}

    try:
        from_yaml = build()  # an empty cache: parsed, and written
        assert len(entries()) == len(PACKAGED)
        no_parsing(monkeypatch)
        assert build() == from_yaml
    finally:
        monkeypatch.undo()
        registry._packaged_file.cache_clear()
        registry._read_sections_cached.cache_clear()
        _load.cache_clear()


def test_two_directories_keep_apart_entries(tmp_path):
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        shutil.copy(PACKAGED[0], tmp_path / name / PACKAGED[0].name)
        load_parsed_yaml(tmp_path / name / PACKAGED[0].name, "catalog")
    assert len(entries()) == 2
