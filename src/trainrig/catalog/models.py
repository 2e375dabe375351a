"""`model:` of a job → ModelSpec: a preset name or alias, a Hugging Face config.json, or a mapping.

- A preset id or alias (`llama3-8b`, `meta-llama/Meta-Llama-3-8B`, `gpt3-xl`) looks the catalog up,
  case-insensitively, with "did you mean" for typos; the spec is named by the preset id.
- A `Path`, a string that names an existing file or directory, or a string ending in `.json` is a
  local Hugging Face config (a directory means its `config.json`); see `hf_config`. The spec is
  named by the config's `_name_or_path`, or else the file (or, for `config.json`, its directory).
- A mapping gives ModelSpec fields directly (`{n_layers: 32, hidden: 4096, ...}`); it is named
  "custom" unless it has a `name`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trainrig.catalog.hf_config import model_from_hf_config
from trainrig.errors import TrainrigError, from_validation_error
from trainrig.specs.model import ModelSpec

__all__ = ["load_model", "resolve_model"]

ModelSource = str | os.PathLike | Mapping[str, Any] | ModelSpec


def load_model(source: ModelSource, extra_dirs: tuple[str, ...] = ()) -> ModelSpec:
    """The ModelSpec `source` names: a preset name or alias, a config.json path, or a mapping."""
    return resolve_model(source, extra_dirs)[0]


def resolve_model(
    source: ModelSource, extra_dirs: tuple[str, ...] = ()
) -> tuple[ModelSpec, str | None]:
    """The ModelSpec, and a note when `source` was a preset alias ("'gpt3-xl' resolved to …")."""
    if isinstance(source, ModelSpec):
        return source, None
    if isinstance(source, Mapping):
        return _from_mapping(source), None
    if isinstance(source, os.PathLike):
        return model_from_hf_config(Path(source)), None
    if isinstance(source, str):
        return _from_string(source, tuple(str(d) for d in extra_dirs))
    raise TrainrigError(
        "model",
        "must be a preset name, a path to a Hugging Face config.json, or a mapping of model fields "
        f"(got {type(source).__name__}).",
    )


def _from_string(source: str, extra_dirs: tuple[str, ...]) -> tuple[ModelSpec, str | None]:
    path = Path(source).expanduser()
    if source.strip().lower().endswith(".json") or path.is_file():
        return model_from_hf_config(path), None
    if path.is_dir() and (path / "config.json").is_file():
        return model_from_hf_config(path), None
    from trainrig.catalog import load_catalog  # here, so the package may re-export this module

    try:
        resolved = load_catalog(extra_dirs).models.get(source)
    except TrainrigError as error:
        if path.is_dir():
            raise TrainrigError(
                "model",
                f"directory {path} has no config.json, and '{source}' is not a preset either; "
                f"{error.message}",
            ) from None
        raise
    preset = resolved.entry
    spec = preset.spec
    if spec.name != preset.id:
        spec = ModelSpec.model_validate(spec.model_dump() | {"name": preset.id})
    return spec, resolved.note


def _from_mapping(data: Mapping[str, Any]) -> ModelSpec:
    try:
        return ModelSpec.model_validate(dict(data))
    except ValidationError as error:
        raise from_validation_error(error, prefix="model") from None
