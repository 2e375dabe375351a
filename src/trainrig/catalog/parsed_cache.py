"""The packaged catalog's YAML files, parsed once per content and kept as JSON in the user's cache.

Building the data of the packaged catalog (eight YAML files, about 130 KB) with PyYAML's constructor
is the largest single piece of an estimate's own work; reading the same data back with `json.loads`
takes a small fraction of it. So each packaged file's data is kept in
`$XDG_CACHE_HOME/trainrig/catalog/` (default `~/.cache/trainrig/catalog/`), one entry per file, with
the key it was parsed under: a digest of the file's text and of the parser (FORMAT, PyYAML's
version and whether it uses libyaml, and the source of `yaml_text`, trainrig's reading of YAML). A
file whose text changed, a new PyYAML or a change to `yaml_text` means the key no longer matches:
the file is parsed again and its entry rewritten.

The file itself is read (`files.read_text`, with its checks) every time; only its parsing is saved.
An entry holds only what YAML and JSON hold alike (mappings with string keys, lists, strings,
numbers, booleans, null) and dates, written `{"$date": "2024-05-01"}`; a file with anything else is
parsed every time, as is one that does not parse (its error is the YAML parser's, never cached).
The cache never makes a command fail: an entry that cannot be read, does not decode or was written
for another key is a miss, and one that cannot be written is not written.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import threading
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from trainrig.catalog import yaml_text
from trainrig.catalog.files import parse_yaml_text, read_text

__all__ = ["FORMAT", "cache_dir", "load_parsed_yaml"]

FORMAT = "trainrig-parsed-yaml-1"
"""Changes whenever what an entry holds, or how it is written, changes."""

_DATE = "$date"


def cache_dir() -> Path | None:
    """Where the entries are kept: `$XDG_CACHE_HOME/trainrig/catalog`, default `~/.cache/trainrig/catalog`;
    None (no caching) without an absolute XDG_CACHE_HOME or a home directory."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # the XDG rule: a relative value is ignored
        home = os.path.expanduser("~")
        if not os.path.isabs(home):  # no HOME and no password entry: "~" stays "~"
            return None
        base = os.path.join(home, ".cache")
    return Path(base) / "trainrig" / "catalog"


def load_parsed_yaml(path: Path, field: str) -> Any:
    """The data in the YAML file at `path`, as `files.load_data_file` gives it, from the cache when it
    holds this text's data; errors name the file under `field`, as load_data_file's do."""
    text = read_text(path, field)
    parser, where = _parser_digest(), cache_dir()
    if parser is None or where is None:
        return parse_yaml_text(text, os.fspath(path), field)
    key = hashlib.sha256((parser + text).encode()).hexdigest()
    entry = _entry(where, path)
    data = _read(entry, key)
    if data is not _MISS:
        return data
    data = parse_yaml_text(text, os.fspath(path), field)
    _write(entry, key, data)
    return data


@cache
def _parser_digest() -> str | None:
    """What the parse of a text depends on besides the text; None (no caching) if yaml_text's source is unreadable."""
    try:
        source = Path(yaml_text.__file__).read_bytes()
    except (OSError, TypeError):
        return None
    parts = (FORMAT, yaml.__version__, str(bool(getattr(yaml, "__with_libyaml__", False))),
             hashlib.sha256(source).hexdigest())
    return "\0".join(parts) + "\0"


def _entry(where: Path, path: Path) -> Path:
    # named by the file and its directory: two installs (or checkouts) keep apart entries
    directory = hashlib.sha256(os.fsencode(path.parent.absolute())).hexdigest()[:16]
    return where / f"{path.stem}-{directory}.json"


_MISS = object()


def _read(entry: Path, key: str) -> Any:
    try:
        stored = json.loads(entry.read_bytes(), object_hook=_decode)
    except (OSError, ValueError, TypeError, RecursionError):  # unreadable, not JSON, or not ours
        return _MISS
    if not isinstance(stored, dict) or (stored.get("format"), stored.get("key")) != (FORMAT, key):
        return _MISS
    return stored.get("data", _MISS)


def _write(entry: Path, key: str, data: Any) -> None:
    try:
        text = json.dumps({"format": FORMAT, "key": key, "data": _encode(data)}, ensure_ascii=False)
    except _NotCacheable:
        return
    temporary = entry.with_name(f"{entry.name}.{os.getpid()}-{threading.get_ident()}.tmp")  # one per writer
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, entry)  # whole or not at all: a reader never sees half an entry
    except OSError:
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)


class _NotCacheable(Exception):
    """The data holds something JSON would not give back as it was."""


def _encode(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        if not all(type(k) is str for k in value) or _DATE in value:
            raise _NotCacheable
        return {k: _encode(v) for k, v in value.items()}
    if kind is list:
        return [_encode(v) for v in value]
    if value is None or kind in (str, int, float, bool):
        return value
    if kind is dt.date:
        return {_DATE: value.isoformat()}
    raise _NotCacheable  # a datetime, bytes, a set …: parsed every time


def _decode(mapping: dict[str, Any]) -> Any:
    if len(mapping) == 1 and _DATE in mapping:
        return dt.date.fromisoformat(mapping[_DATE])
    return mapping
