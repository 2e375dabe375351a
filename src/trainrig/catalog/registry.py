"""Catalog files → frozen specs, with lookup by id or alias and "did you mean" for typos.

The package ships its data under `catalog/data/`; users add files of the same shape in their own
directories (`--catalog DIR` or `TRAINRIG_CATALOG=dir1:dir2`). A YAML file may hold any of the
sections in SECTIONS; a user entry with an id the package already has replaces the packaged one.

Anything else that would make a name mean two things is an error naming both files: an id defined
twice (except that one replacement), a name (id or alias) of one entry that is already a name of
another, a section name that is not one of SECTIONS (`gpu:` for `gpus:`), an offer naming a GPU or
link the catalog lacks. Files are read by `files.read_text` (regular UTF-8 files up to 4 MiB) and
parsed by `yaml_text.load_yaml` (depth and alias limits, duplicate keys refused).
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import ValidationError

from trainrig.catalog.files import load_data_file
from trainrig.catalog.parsed_cache import load_parsed_yaml
from trainrig.errors import TrainrigError, from_validation_error
from trainrig.specs.base import CatalogEntry

__all__ = ["Section", "Resolved", "normalize_name", "DATA_DIR", "SECTIONS", "catalog_dirs", "read_sections",
           "build_section", "check_offer_names"]

DATA_DIR = Path(__file__).parent / "data"
CATALOG_ENV = "TRAINRIG_CATALOG"
SECTIONS = ("gpus", "links", "cpus", "host_memory", "storage", "models", "offers", "frameworks")

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
    origins: dict[str, Path] = field(default_factory=dict)
    """The file each entry came from, for messages about it."""

    def add(self, entry: Entry, origin: Path | None = None) -> None:
        """Index `entry`; a TrainrigError when its id or a name is taken (see the module docstring)."""
        old = self.entries.get(entry.id)
        if old is not None:
            self._check_replacement(entry, origin)
            for name in self._names(old):
                self._index.pop(name, None)
        for name in self._names(entry):
            other = self._index.get(name)
            if other is not None and other != entry.id:
                raise TrainrigError("catalog", f"{_shown(origin)} {self.kind} '{entry.id}': the name '{name}' is "
                                               f"already {other} from {_shown(self.origins.get(other))}; rename one.")
        self.entries[entry.id] = entry
        self.origins[entry.id] = origin or DATA_DIR
        for name in self._names(entry):
            self._index[name] = entry.id

    def _check_replacement(self, entry: Entry, origin: Path | None) -> None:
        # a user file may replace a packaged entry on purpose; any other repeat of an id is a mistake
        first = self.origins.get(entry.id)
        if _is_packaged(first) and not _is_packaged(origin):
            return
        raise TrainrigError("catalog", f"{self.kind} id '{entry.id}' is defined twice, in {_shown(first)} and "
                                       f"{_shown(origin)}; keep one.")

    @staticmethod
    def _names(entry: CatalogEntry) -> set[str]:
        return {normalize_name(entry.id), *(normalize_name(alias) for alias in entry.aliases)}

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
        """The `trainrig` command that lists this section (cli/commands/catalog.py)."""
        return {"GPU": "gpus", "model": "models", "CPU": "catalog cpus", "host memory": "catalog host-memory",
                "storage": "catalog storage"}.get(self.kind, f"catalog {self.kind}s")


def catalog_dirs(extra: tuple[str, ...] = ()) -> tuple[Path, ...]:
    """The packaged data directory, then TRAINRIG_CATALOG's directories, then `extra` (last wins).

    A directory named twice (in the variable and by --catalog) is read once: its entries would
    otherwise collide with themselves."""
    env = tuple(p for p in os.environ.get(CATALOG_ENV, "").split(os.pathsep) if p)
    if not env and not extra:  # the common case, on every load_job: no file-system calls
        return (DATA_DIR,)
    dirs: dict[Path, Path] = {DATA_DIR.resolve(): DATA_DIR}
    for d in (Path(p) for p in (*env, *extra)):
        if not d.is_dir():
            problem = "is not a directory" if d.exists() else "does not exist"
            raise TrainrigError("catalog", f"directory {d} {problem}.")
        dirs.setdefault(d.resolve(), d)
    return tuple(dirs.values())


def read_sections(dirs: tuple[Path, ...]) -> dict[str, list[tuple[Path, dict[str, Any]]]]:
    """Every entry of every YAML file in `dirs`, grouped by section name, with the file it came from."""
    return _read_sections_cached(tuple(str(d) for d in dirs))


@lru_cache(maxsize=8)
def _read_sections_cached(dirs: tuple[str, ...]) -> dict[str, list[tuple[Path, dict[str, Any]]]]:
    sections: dict[str, list[tuple[Path, dict[str, Any]]]] = {}
    for directory in dirs:
        for path in sorted(Path(directory).glob("*.yaml")) + sorted(Path(directory).glob("*.yml")):
            content = _packaged_file(path) if _is_packaged(path) else _load_file(path)
            for name, items in content.items():
                sections.setdefault(name, []).extend((path, item) for item in items)
    return sections


@cache
def _packaged_file(path: Path) -> dict[str, list]:
    """A packaged file, parsed once per process however many sets of user directories join it, and
    its data kept in the user's cache until the file changes (`parsed_cache`)."""
    return _checked_content(load_parsed_yaml(path, "catalog") or {}, path)


def _load_file(path: Path) -> dict[str, list]:
    return _checked_content(load_data_file(path, "catalog") or {}, path)


def _checked_content(content: Any, path: Path) -> dict[str, list]:
    if not isinstance(content, dict):
        raise TrainrigError("catalog", f"{path} must be a mapping of sections to lists.")
    for name, items in content.items():
        if name not in SECTIONS:
            close = difflib.get_close_matches(str(name), SECTIONS, n=1)
            hint = f"did you mean {close[0]}?" if close else f"valid: {', '.join(SECTIONS)}."
            raise TrainrigError("catalog", f"section '{name}' in {path} is not a catalog section; {hint}")
        if not isinstance(items, list):
            raise TrainrigError("catalog", f"section '{name}' in {path} must be a list of entries.")
    return content


def build_section(kind: str, field_name: str, spec_type: type[Entry], raw: list[tuple[Path, dict]]) -> Section[Entry]:
    """Validate raw entries into specs; a bad entry names its file and field."""
    section: Section[Entry] = Section(kind, field_name)
    for path, item in raw:
        try:
            entry = spec_type.model_validate(item)
        except ValidationError as error:
            ident = item.get("id", "?") if isinstance(item, dict) else "?"
            detail = from_validation_error(error)
            raise TrainrigError("catalog", f"{path.name} entry '{ident}': {detail}") from None
        section.add(entry, path)
    return section


def check_offer_names(offers: Section, gpus: Section, links: Section) -> None:
    """Every offer's GPU and links are catalog names: else the planner would fail only when it
    reaches that offer, and `trainrig offers` would list an instance nothing can use."""
    for offer in offers:
        for name, section, what in ((offer.gpu, gpus, "gpu"), (offer.interconnect, links, "interconnect"),
                                    (offer.network, links, "network")):
            if name is None:
                continue
            try:
                section.get(name)
            except TrainrigError as error:
                raise TrainrigError("catalog", f"{_shown(offers.origins.get(offer.id))} offer '{offer.id}' "
                                               f"{what}: {error.message}") from None


def _is_packaged(path: Path | None) -> bool:
    return path is None or path.parent == DATA_DIR


def _shown(path: Path | None) -> str:
    """A file as messages name it: the path the user gave for theirs, `packaged x.yaml` for ours."""
    return f"packaged {path.name if path else 'catalog'}" if _is_packaged(path) else str(path)
