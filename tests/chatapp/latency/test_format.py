"""The summary table's number formats (frontend/src/latencyseries.ts formats the same way)."""

from __future__ import annotations

import pytest

from chatapp.latency.templatetags.latency_format import NO_DATA, number, percent


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (12.0, "12"),
        (12.34, "12.3"),
        (1234.5678, "1235"),
        (0.0336, "0.034"),  # a quiet hour's answers per minute is not "0"
        (0.5, "0.5"),
        (0.0, "0"),
        (None, NO_DATA),
    ],
)
def test_numbers(value: float | None, text: str) -> None:
    assert number(value) == text


def test_percentages() -> None:
    assert percent(0.4567) == "45.7 %"
    assert percent(1.0) == "100.0 %"
    assert percent(None) == NO_DATA
