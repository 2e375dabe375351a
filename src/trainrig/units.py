"""Durations and money in words, for tables and for sentences alike (pure: no I/O)."""

from __future__ import annotations

__all__ = ["duration_text", "money_text", "NA", "GIB"]

NA = "N/A"
GIB = 2.0**30
"""Bytes in a GiB: memory is reported in binary units, as GPU and host memory is built."""


def duration_text(seconds: float | None) -> str:
    """Seconds in the largest sensible unit: `850 ms`, `12.4 s`, `3.2 h`, `41.5 days`, `2,970 days`."""
    if seconds is None:
        return NA
    if seconds < 1:
        return f"{_three_digits(seconds * 1e3)} ms"
    for unit, scale in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 2 * scale:
            return f"{_three_digits(seconds / scale)} {unit}"
    return f"{_three_digits(seconds)} s"


def money_text(usd: float | None, missing: str = NA) -> str:
    """`$12,345`, or `missing` where no price is known."""
    return missing if usd is None else f"${usd:,.0f}"


def _three_digits(value: float) -> str:
    """Three significant digits without exponent notation: 0.0123, 12.3, 2,970."""
    return f"{value:,.0f}" if value >= 1000 else f"{value:.3g}"
