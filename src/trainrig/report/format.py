"""Number formatting shared by every table: units, N/A for what is missing."""

from __future__ import annotations

NA = "N/A"


def na(value: float | None, fmt: str = "{:,.1f}") -> str:
    """A number, or N/A when it is missing: never -1, never 0 for unknown."""
    return NA if value is None else fmt.format(value)


def params_text(n: float) -> str:
    """8030261248 → `8.03B`."""
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g}{unit}"
    return str(int(n))


def duration_text(seconds: float | None) -> str:
    """Seconds in the largest sensible unit: `850 ms`, `12.4 s`, `3.2 h`, `41.5 days`."""
    if seconds is None:
        return NA
    if seconds < 1:
        return f"{_three_digits(seconds * 1e3)} ms"
    for unit, scale in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 2 * scale:
            return f"{_three_digits(seconds / scale)} {unit}"
    return f"{_three_digits(seconds)} s"


def _three_digits(value: float) -> str:
    """Three significant digits without exponent notation: 0.0123, 12.3, 2,970."""
    return f"{value:,.0f}" if value >= 1000 else f"{value:.3g}"


def money_text(usd: float | None) -> str:
    return NA if usd is None else f"${usd:,.0f}"
