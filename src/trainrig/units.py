"""Durations and money in words, for tables and for sentences alike (pure: no I/O)."""

from __future__ import annotations

__all__ = ["duration_text", "money_text", "NA", "GIB"]

NA = "N/A"
GIB = 2.0**30
"""Bytes in a GiB: memory is reported in binary units, as GPU and host memory is built."""


SECONDS_PER_YEAR = 365.25 * 86400
_LARGE = (("trillion", 1e12), ("billion", 1e9), ("million", 1e6))


def duration_text(seconds: float | None) -> str:
    """Seconds in the largest sensible unit: `850 ms`, `12.4 s`, `3.2 h`, `41.5 days`, `2,970 days`,
    and past 10,000 days in years (`36.5 years`, `3.7 million years`), never a 9-digit day count."""
    if seconds is None:
        return NA
    if seconds < 1:
        return f"{_three_digits(seconds * 1e3)} ms"
    if seconds >= 10_000 * 86400:
        return f"{_large_number(seconds / SECONDS_PER_YEAR)} years"
    for unit, scale in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 2 * scale:
            return f"{_three_digits(seconds / scale)} {unit}"
    return f"{_three_digits(seconds)} s"


def money_text(usd: float | None, missing: str = NA) -> str:
    """`$12,345`, `$4.2 million`, or `missing` where no price is known; never a 20-digit amount."""
    if usd is None:
        return missing
    return f"${usd:,.0f}" if abs(usd) < 1e7 else f"${_large_number(usd)}"


def _large_number(value: float) -> str:
    """`36.5`, `9,999`, `3.7 million`, `1.2 billion`, `4.5 trillion`, `1.2e+18` past a thousand trillion."""
    if value >= 1e15:
        return f"{value:.2g}"
    for word, scale in _LARGE:
        if value >= scale:
            return f"{_three_digits(value / scale)} {word}"
    return _three_digits(value)


def _three_digits(value: float) -> str:
    """Three significant digits without exponent notation: 0.0123, 12.3, 2,970."""
    return f"{value:,.0f}" if value >= 1000 else f"{value:.3g}"
