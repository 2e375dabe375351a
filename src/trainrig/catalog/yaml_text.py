"""YAML as people write numbers: `2e12` and `1.0e11` are floats, as in YAML 1.2 and JSON.

PyYAML follows YAML 1.1, whose float pattern needs a decimal point and a signed exponent, so it
reads `tokens: 1.0e11` as the string "1.0e11". Every YAML file trainrig reads goes through here.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

__all__ = ["load_yaml"]


class _Loader(yaml.SafeLoader):
    """SafeLoader plus YAML 1.2's exponent floats."""


_EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")
_Loader.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT_FLOAT, list("-+0123456789"))


def load_yaml(text: str) -> Any:
    """Parse YAML text with the safe loader, reading exponent notation as floats."""
    return yaml.load(text, Loader=_Loader)  # noqa: S506 — a SafeLoader subclass
