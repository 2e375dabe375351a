"""Catalog files → frozen specs, with lookup by id or alias and "did you mean" for typos.

The package ships its data under `catalog/data/`; users add files of the same shape in their own
directories (`--catalog DIR` or `TRAINRIG_CATALOG=dir1:dir2`). A YAML file may hold any of the
sections `gpus`, `links`, `cpus`, `host_memory`, `storage`, `models`, `offers`; a user entry with an
id the package already has replaces the packaged one.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Generic, TypeVar

import yaml
from pydantic import ValidationError

from trainrig.catalog.yaml_text import load_yaml
from trainrig.errors import TrainrigError, from_validation_error
from trainrig.specs.base import CatalogEntry

__all__ = ["Section", "Resolved", "normalize_name", "DATA_DIR", "catalog_dirs", "read_sections"]

DATA_DIR = Path(__file__).parent / "data"
CATALOG_ENV = "TRAINRIG_CATALOG"

Entry = TypeVar("Entry", bound=CatalogEntry)


def normalize_name(name: str) -> str:
    """Case-, space- and underscore-insensitive key: `H100 SXM5_80gb` → `h100-sxm5-80gb`."""
    return "-".join(name.strip().lower().replace("_", " ").replace("-", " ").split())


@dataclass(frozen=True)
class Resolved(Generic[Entry]):
    """A lookup's answer: the entry, and a note when an alias chose among several parts."""

    entry: Entry
    note: str | None = None


@dataclass
class Section(Generic[Entry]):
    """All entries of one kind, indexed by normalized id and alias."""

    kind: str
    """Singular noun for messages: `GPU`, `link`, `model` …"""
    field_name: str
    """The job-file field users type the name into, for error messages."""
    entries: dict[str, Entry] = field(default_factory=dict)
    _index: dict[str, str] = field(default_factory=dict)

    def add(self, entry: Entry) -> None:
        old = self.entries.get(entry.id)
        if old is not None:
            for alias in old.aliases:
                self._index.pop(normalize_name(alias), None)
        self.entries[entry.id] = entry
        self._index[normalize_name(entry.id)] = entry.id
        for alias in entry.aliases:
            self._index.setdefault(normalize_name(alias), entry.id)

    def __iter__(self):
        return iter(self.entries.values())

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, name: str) -> Resolved[Entry]:
        """The entry called `name` (id or alias), or a TrainrigError that suggests close names."""
        key = normalize_name(name)
        entry_id = self._index.get(key)
        if entry_id is None:
            raise TrainrigError(self.field_name, self._unknown_message(name))
        entry = self.entries[entry_id]
        note = None if key == normalize_name(entry_id) else self._alias_note(name, entry)
        return Resolved(entry, note)

    def _unknown_message(self, name: str) -> str:
        close = difflib.get_close_matches(normalize_name(name), self._index, n=3, cutoff=0.5)
        ids = list(dict.fromkeys(self.entries[self._index[c]].id for c in close))
        if ids:
            hint = f"did you mean {' or '.join(ids)}?"
        elif len(self.entries) <= 12:  # a short list is its own best hint
            hint = f"valid: {', '.join(self.entries)}."
        else:
            hint = f"`trainrig {self.kind_plural}` lists them."
        return f"unknown {self.kind} '{name}'; {hint}"

    def _alias_note(self, name: str, entry: Entry) -> str:
        key = normalize_name(name)
        siblings = [e.id for e in self if e.id != entry.id and key in normalize_name(e.id)]
        note = f"'{name}' resolved to {entry.id} ({entry.name})"
        return note + (f"; other parts: {', '.join(siblings)}" if siblings else "")

    @property
    def kind_plural(self) -> str:
        return {"GPU": "gpus", "model": "models"}.get(self.kind, f"catalog {self.kind}s")


def catalog_dirs(extra: tuple[str, ...] = ()) -> tuple[Path, ...]:
    """The packaged data directory, then TRAINRIG_CATALOG's directories, then `extra` (last wins)."""
    env = tuple(p for p in os.environ.get(CATALOG_ENV, "").split(os.pathsep) if p)
    dirs = [DATA_DIR, *(Path(p) for p in env), *(Path(p) for p in extra)]
    for d in dirs[1:]:
        if not d.is_dir():
            raise TrainrigError("catalog", f"directory {d} does not exist.")
    return tuple(dirs)


def read_sections(dirs: tuple[Path, ...]) -> dict[str, list[tuple[Path, dict[str, Any]]]]:
    """Every entry of every YAML file in `dirs`, grouped by section name, with the file it came from."""
    return _read_sections_cached(tuple(str(d) for d in dirs))


@lru_cache(maxsize=8)
def _read_sections_cached(dirs: tuple[str, ...]) -> dict[str, list[tuple[Path, dict[str, Any]]]]:
    sections: dict[str, list[tuple[Path, dict[str, Any]]]] = {}
    for directory in dirs:
        for path in sorted(Path(directory).glob("*.yaml")) + sorted(Path(directory).glob("*.yml")):
            content = _load_yaml(path)
            for name, items in content.items():
                if not isinstance(items, list):
                    raise TrainrigError("catalog", f"section '{name}' in {path} must be a list of entries.")
                sections.setdefault(name, []).extend((path, item) for item in items)
    return sections


def _load_yaml(path: Path) -> dict[str, Any]:
    try:
        content = load_yaml(path.read_text()) or {}
    except yaml.YAMLError as error:
        raise TrainrigError("catalog", f"{path} is not valid YAML ({_yaml_where(error)}).") from None
    if not isinstance(content, dict):
        raise TrainrigError("catalog", f"{path} must be a mapping of sections to lists.")
    return content


def build_section(kind: str, field_name: str, spec_type: type[Entry], raw: list[tuple[Path, dict]]) -> Section[Entry]:
    """Validate raw entries into specs; a bad entry names its file and field."""
    section: Section[Entry] = Section(kind, field_name)
    for path, item in raw:
        try:
            section.add(spec_type.model_validate(item))
        except ValidationError as error:
            ident = item.get("id", "?") if isinstance(item, dict) else "?"
            detail = from_validation_error(error)
            raise TrainrigError("catalog", f"{path.name} entry '{ident}': {detail}") from None
    return section


def _yaml_where(error: yaml.YAMLError) -> str:
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or "syntax error"
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}" if mark else problem
