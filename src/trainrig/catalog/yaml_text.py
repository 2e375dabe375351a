"""YAML as people write numbers, parsed fast and within limits. Every YAML text trainrig reads goes
through `load_yaml`: job files, hardware profiles, offer files, the catalog, `--what-if` values.

- `2e12` and `1.0e11` are floats, as in YAML 1.2 and JSON. PyYAML follows YAML 1.1, whose float
  pattern needs a decimal point and a signed exponent, so it would read `tokens: 1.0e11` as a string.
- libyaml's C parser (`yaml.CSafeLoader`) is used when PyYAML was built with it, about ten times
  faster than the pure-Python one; the same resolvers and checks apply, so the data is the same.
- Limits, checked on the parsed node graph before any value is built: at most MAX_DEPTH levels of
  nesting, and at most MAX_VALUES values and MAX_CHARS characters of text once aliases are
  expanded. Aliases share nodes, so a few hundred bytes of nested aliases ("billion laughs") stand
  for billions of values; anything that walks the data (validation, JSON output) would expand them.
- A key written twice in one mapping is an error: PyYAML would silently keep the last one.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from trainrig.errors import TrainrigError

__all__ = ["load_yaml", "YAMLLimitError", "MAX_DEPTH", "MAX_VALUES", "MAX_CHARS"]

MAX_DEPTH = 100
MAX_VALUES = 1_000_000
MAX_CHARS = 16_000_000

_MERGE_TAG = "tag:yaml.org,2002:merge"
_EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")


class YAMLLimitError(TrainrigError):
    """A YAML document past one of the limits above (too deep, or aliases expanding too far)."""

    def __init__(self, source: str, problem: str) -> None:
        super().__init__("", f"{source or 'the YAML text'} {problem}")


class _Checks:
    """What both loaders add to PyYAML's safe loader: unique keys (exponent floats are added below)."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict:
        _check_unique_keys(self, node)
        return super().construct_mapping(node, deep)  # type: ignore[misc]


class _PureLoader(_Checks, yaml.SafeLoader):
    """The pure-Python loader; its composer recurses, so depth is capped while composing."""

    _depth = 0
    source = ""

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        # a few hundred levels deep (500 here) the recursive composer would raise RecursionError
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise YAMLLimitError(self.source, f"nests deeper than {MAX_DEPTH} levels.")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


_FastLoader: type | None = None
if getattr(yaml, "__with_libyaml__", False):

    class _FastLoader(_Checks, yaml.CSafeLoader):  # type: ignore[no-redef]
        """libyaml's parser (which caps nesting at 1000 itself) with PyYAML's Python constructor."""


for _loader in (_PureLoader, _FastLoader):
    if _loader is not None:
        _loader.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT_FLOAT, list("-+0123456789"))


def load_yaml(text: str, source: str = "") -> Any:
    """Parse YAML text with a safe loader, reading exponent notation as floats.

    `source` (a path as the user gave it, or a field) names the text in a YAMLLimitError; syntax
    errors and duplicate keys stay `yaml.YAMLError`s, which callers turn into their own sentence."""
    loader = (_FastLoader or _PureLoader)(text)
    loader.source = source
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        # no `&` anywhere means no anchor, so no alias: the graph is a tree, checked more cheaply
        (check_limits if "&" in text else _check_tree)(node, source)
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as error:
        if "maximum nesting depth" in str(error.problem):  # libyaml's own cap, at 1000 levels
            raise YAMLLimitError(source, f"nests deeper than {MAX_DEPTH} levels.") from None
        raise
    finally:
        loader.dispose()


def check_limits(root: Node, source: str = "") -> None:
    """Raise YAMLLimitError when the document, aliases expanded, is too deep or too large.

    One walk over the distinct nodes: a node reached again through an alias adds the size of its
    whole subtree (remembered from its first visit), so the cost is linear in what was written."""
    sizes: dict[int, tuple[int, int, int]] = {}  # id(node) → (values, chars, height) of its subtree
    on_path: set[int] = set()
    totals = [0, 0]
    stack: list[tuple[Node, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, finished = stack.pop()
        key = id(node)
        if finished:
            sizes[key] = _subtree_size(node, sizes)
            on_path.discard(key)
            continue
        if key in on_path:
            raise YAMLLimitError(source, "has an alias that contains itself, which would never end.")
        seen = sizes.get(key)
        values, chars, height = seen if seen else (1, _chars(node), 1)
        _count(totals, values, chars, depth + height - 1, source)
        if seen or isinstance(node, ScalarNode):
            if not seen:
                sizes[key] = (1, chars, 1)
            continue
        on_path.add(key)
        stack.append((node, depth, True))
        stack.extend((child, depth + 1, False) for child in _children(node))


def _check_tree(root: Node, source: str = "") -> None:
    """check_limits for a document without aliases: each node is counted once, no memo needed."""
    values = chars = 0
    stack: list[tuple[Node, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        values += 1
        if isinstance(node, ScalarNode):
            chars += len(node.value)
            continue
        children = _children(node)
        if children and depth >= MAX_DEPTH:
            raise YAMLLimitError(source, f"nests deeper than {MAX_DEPTH} levels.")
        stack.extend((child, depth + 1) for child in children)
    _count([0, 0], values, chars, 1, source)


def _count(totals: list[int], values: int, chars: int, depth: int, source: str) -> None:
    totals[0] += values
    totals[1] += chars
    if depth > MAX_DEPTH:
        raise YAMLLimitError(source, f"nests deeper than {MAX_DEPTH} levels.")
    if totals[0] > MAX_VALUES:
        raise YAMLLimitError(source, f"holds more than {MAX_VALUES:,} values (aliases expanded).")
    if totals[1] > MAX_CHARS:
        raise YAMLLimitError(source, f"holds more than {MAX_CHARS:,} characters of text (aliases expanded).")


def _subtree_size(node: Node, sizes: dict[int, tuple[int, int, int]]) -> tuple[int, int, int]:
    children = [sizes[id(child)] for child in _children(node)]
    return (1 + sum(c[0] for c in children), sum(c[1] for c in children),
            1 + max((c[2] for c in children), default=0))


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return node.value
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _chars(node: Node) -> int:
    return len(node.value) if isinstance(node, ScalarNode) else 0


def _check_unique_keys(loader: Any, node: MappingNode) -> None:
    seen: set = set()
    for key_node, _ in node.value:
        if key_node.tag == _MERGE_TAG:  # `<<: *base` then a key of base's: an override, on purpose
            continue
        key = loader.construct_object(key_node)  # remembered: the real construction reuses it
        try:
            duplicate = key in seen
        except TypeError:  # an unhashable key: PyYAML itself reports it
            continue
        if duplicate:
            raise ConstructorError("while constructing a mapping", node.start_mark,
                                   f"found duplicate key '{key}'", key_node.start_mark)
        seen.add(key)
