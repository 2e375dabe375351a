"""Reading the files users hand trainrig (job, profile, offer, case and catalog files) safely.

Each file must be a regular file (a FIFO would block the read forever, a directory cannot be read)
of at most MAX_FILE_BYTES, in UTF-8. Whatever is wrong ends in one TrainrigError that names the
file as the user wrote it and the field it came from; nothing here raises OSError or
UnicodeDecodeError.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any

import yaml

from trainrig.catalog.yaml_text import MAX_DEPTH, YAMLLimitError, load_yaml
from trainrig.errors import TrainrigError

__all__ = ["MAX_FILE_BYTES", "read_text", "load_data_file", "parse_yaml_text", "yaml_where"]

# 4 MiB: twelve times the largest packaged file (calibration/qwen.yaml, 321 KB), and small enough
# that parsing it stays around a second with libyaml.
MAX_FILE_BYTES = 4 * 2**20

_NOT_REGULAR = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def read_text(path: str | os.PathLike, field: str) -> str:
    """The UTF-8 text of the regular file at `path`, or a TrainrigError naming it under `field`."""
    shown = os.fspath(path)
    try:
        # O_NONBLOCK: opening a FIFO returns at once instead of waiting for a writer
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        raise TrainrigError(field, _open_problem(shown, error)) from None
    try:
        _check_regular(os.fstat(fd), shown, field)
        data = _read_capped(fd, shown, field)
    finally:
        os.close(fd)
    return _decode(data, shown, field)


def _open_problem(shown: str, error: OSError) -> str:
    if error.errno == errno.ENOENT:
        if os.path.lexists(shown):
            return f"{shown} is a symbolic link to a file that does not exist."
        return f"file {shown} does not exist."
    if error.errno == errno.ELOOP:
        return f"{shown} is a symbolic link loop."
    if error.errno in (errno.EACCES, errno.EPERM):
        return f"{shown} cannot be read (permission denied)."
    return f"{shown} cannot be read ({error.strerror or error})."


def _check_regular(info: os.stat_result, shown: str, field: str) -> None:
    if stat.S_ISREG(info.st_mode):
        if info.st_size > MAX_FILE_BYTES:
            raise TrainrigError(field, _too_big(shown, info.st_size))
        return
    kind = next((name for test, name in _NOT_REGULAR if test(info.st_mode)), "not a regular file")
    raise TrainrigError(field, f"{shown} is {kind}, not a regular file.")


def _read_capped(fd: int, shown: str, field: str) -> bytes:
    # read one byte past the cap: the size stat gave may be stale (a growing log, /proc)
    chunks, total = [], 0
    while total <= MAX_FILE_BYTES:
        try:
            chunk = os.read(fd, MAX_FILE_BYTES + 1 - total)
        except OSError as error:
            raise TrainrigError(field, f"{shown} cannot be read ({error.strerror or error}).") from None
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    if total > MAX_FILE_BYTES:
        raise TrainrigError(field, _too_big(shown, total))
    return b"".join(chunks)


def _too_big(shown: str, size: int) -> str:
    return (f"{shown} is larger than {MAX_FILE_BYTES // 2**20} MiB ({size / 2**20:.1f} MiB or more); "
            "trainrig reads job, profile, offer and catalog files up to that size.")


def _decode(data: bytes, shown: str, field: str) -> str:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise TrainrigError(field, f"{shown} is UTF-16 text; save it as UTF-8.")
    if b"\x00" in data:
        raise TrainrigError(field, f"{shown} is a binary file, not UTF-8 text.")
    try:
        return data.decode("utf-8-sig")  # -sig: a UTF-8 byte-order mark is dropped, not parsed
    except UnicodeDecodeError as error:
        raise TrainrigError(field, f"{shown} is not UTF-8 text (byte 0x{data[error.start]:02x} at offset "
                                   f"{error.start}); save it as UTF-8.") from None


def load_data_file(path: str | os.PathLike, field: str) -> Any:
    """The data in a YAML file, or a JSON one when the name ends in `.json`, read and parsed safely.

    Duplicate keys are errors in both; YAML's limits (depth, alias expansion) are `yaml_text`'s."""
    shown = os.fspath(path)
    text = read_text(path, field)
    if Path(shown).suffix == ".json":
        return _load_json(text, shown, field)
    return parse_yaml_text(text, shown, field)


def parse_yaml_text(text: str, shown: str, field: str) -> Any:
    """The data in the YAML text of the file `shown`, or a TrainrigError naming it under `field`."""
    try:
        return load_yaml(text, source=shown)
    except YAMLLimitError as error:
        raise TrainrigError(field, error.message) from None
    except yaml.YAMLError as error:
        raise TrainrigError(field, f"{shown} is not valid YAML ({yaml_where(error)}).") from None


def _load_json(text: str, shown: str, field: str) -> Any:
    try:
        data = json.loads(text, object_pairs_hook=_unique_pairs)
    except json.JSONDecodeError as error:
        raise TrainrigError(field, f"{shown} is not valid JSON ({error.msg} at line {error.lineno}, "
                                   f"column {error.colno}).") from None
    except _DuplicateKey as error:
        raise TrainrigError(field, f"{shown} is not valid JSON (duplicate key '{error.key}').") from None
    except RecursionError:
        raise TrainrigError(field, f"{shown} nests deeper than {MAX_DEPTH} levels.") from None
    if _depth(data) > MAX_DEPTH:
        raise TrainrigError(field, f"{shown} nests deeper than {MAX_DEPTH} levels.")
    return data


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json keeps the last of two equal keys; a job file that says `n_gpus` twice is a mistake
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise _DuplicateKey(key)
        data[key] = value
    return data


def _depth(data: Any) -> int:
    """Nesting depth of parsed JSON (a scalar is 1), without recursion."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        value, depth = stack.pop()
        deepest = max(deepest, depth)
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        stack.extend((child, depth + 1) for child in children)
    return deepest


def yaml_where(error: yaml.YAMLError) -> str:
    """`found duplicate key 'a' at line 3, column 1`: PyYAML's problem and where it is."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or "syntax error"
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}" if mark else problem
