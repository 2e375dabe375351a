"""The one error type every bad input ends in.

A `TrainrigError` carries the offending field and one sentence that says what is wrong and what
would be valid. The CLI prints the sentence and exits with code 2; the web API turns it into a 422.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only the type: the CLI's error boundary must not load pydantic to start
    from pydantic import ValidationError

__all__ = ["TrainrigError", "from_validation_error"]


class TrainrigError(Exception):
    """Bad input: `field` names where it is, `str(error)` is one sentence for the user.

    Deliberately not a ValueError: pydantic would swallow a ValueError raised in a validator into
    its own error and lose the field; this one passes through validators unchanged.
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}" if field else message)


def from_validation_error(error: ValidationError, prefix: str = "") -> TrainrigError:
    """One sentence from pydantic's first complaint, naming the field by its dotted path."""
    errors = error.errors(include_url=False)
    # an unknown key usually explains a "missing" one (a typo): report it first
    first = next((e for e in errors if e.get("type") == "extra_forbidden"), errors[0])
    parts = [str(p) for p in first.get("loc", ()) if not str(p).startswith("function-")]
    field = ".".join(p for p in [prefix, *parts] if p)
    message = first.get("msg", "invalid value")
    message = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if first.get("type") == "extra_forbidden":
        message = "is not a known field"
    elif first.get("type") == "missing":
        message = "is required"
    value = first.get("input")
    if first.get("type") not in ("missing", "extra_forbidden") and _is_short(value):
        message = f"{message} (got {value!r})"
    return TrainrigError(field, message.rstrip(".") + ".")


def _is_short(value: object) -> bool:
    return isinstance(value, (int, float, str, bool)) and len(repr(value)) <= 60
