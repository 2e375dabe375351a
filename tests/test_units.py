"""Durations and money as words: ordinary values as before, extreme ones never as a wall of digits."""

from __future__ import annotations

import pytest

from trainrig.units import duration_text, money_text


@pytest.mark.parametrize(("seconds", "text"), [
    (0.85, "850 ms"), (12.4, "12.4 s"), (3.2 * 3600, "3.2 h"), (41.5 * 86400, "41.5 days"),
    (2970 * 86400, "2,970 days"), (20_000 * 86400, "54.8 years"), (1.2e14, "3.8 million years"),
])
def test_durations(seconds, text):
    assert duration_text(seconds) == text


@pytest.mark.parametrize(("usd", "text"), [
    (12345, "$12,345"), (9_990_000, "$9,990,000"), (42e6, "$42 million"), (5e9, "$5 billion"),
    (3.4e13, "$34 trillion"), (1.2e26, "$1.2e+26"),
])
def test_money(usd, text):
    assert money_text(usd) == text


def test_no_text_is_long_whatever_the_value():
    for value in (1e3, 1e9, 1e15, 1e30, 1e300):
        assert len(duration_text(value)) <= 24 and len(money_text(value)) <= 24
