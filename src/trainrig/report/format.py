"""Number formatting shared by every table: units, N/A for what is missing."""

from __future__ import annotations

from trainrig.units import NA, duration_text, money_text

__all__ = ["NA", "na", "params_text", "duration_text", "money_text"]


def na(value: float | None, fmt: str = "{:,.1f}") -> str:
    """A number, or N/A when it is missing: never -1, never 0 for unknown."""
    return NA if value is None else fmt.format(value)


def params_text(n: float) -> str:
    """8030261248 → `8.03B`."""
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g}{unit}"
    return str(int(n))
