"""typer's coercion of a parameter's value, built only for a parameter that was given one.

typer (0.2x) coerces each parameter's value through a pydantic TypeAdapter that it builds the first
time the parameter is processed (`_TyperParameter.get_runtime_param`), whether or not the user gave
the parameter: an option left out has the value None and still gets its adapter built, only to
return None. Of the estimate verb's 26 parameters, `trainrig estimate job.yaml --json` gives the job
file and --json (a flag, which typer never coerces), yet parsing it built an adapter for each of
the other 24 too (two for a list option). That is a few milliseconds once pydantic is loaded; most
of what a profile puts in typer's parse_args is pydantic's own import, which the first adapter
triggers and which the job's specs need anyway.

`defer_coercion(command)` gives every parameter of a command a stand-in for that coercion: an absent
value (None, or an empty list for a multi-value option) gets the answer typer's coercion gives it
(None; () for a multi-value parameter; [] for an empty list option), and any other value is handed to
typer's own coercion, built then. Errors, messages and values are typer's. `tests/cli/test_coercion.py`
pins the stand-in's answers against typer's for every parameter of every verb, and fails if a typer
release no longer has the hook (`_runtime_param`), in which case nothing is replaced here.
"""

from __future__ import annotations

from typing import Any

__all__ = ["defer_coercion", "AbsentValueCoercion"]


class AbsentValueCoercion:
    """Stands in for one parameter's typer coercion (a `RuntimeParam`) until a value needs it."""

    __slots__ = ()

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        multi_value = param.multiple or param.nargs == -1
        if value is None:  # what typer's RuntimeParam.coerce answers before it uses the adapter
            return () if multi_value else None
        if multi_value and value in ((), []) and param.type_descriptor.is_list:
            return []  # what the list adapter makes of no items
        param._runtime_param = None  # typer builds its own coercion now, keeps it, and coerces
        return param.get_runtime_param().coerce(value, param=param, ctx=ctx)


_ABSENT = AbsentValueCoercion()


def defer_coercion(command: Any) -> Any:
    """Give the parameters of `command` (and of the subcommands it holds) the stand-in; returns it."""
    for param in getattr(command, "params", ()):
        if _has_hook(param) and param._runtime_param is None:
            param._runtime_param = _ABSENT
    for subcommand in getattr(command, "commands", {}).values():
        defer_coercion(subcommand)
    return command


def _has_hook(param: Any) -> bool:
    """Whether `param` coerces the way this module expects: typer's lazily built `_runtime_param`."""
    return (hasattr(param, "_runtime_param") and callable(getattr(param, "get_runtime_param", None))
            and hasattr(param, "type_descriptor"))
