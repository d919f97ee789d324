"""Number formats of the latency dashboard's server-rendered tables (latency.ts has the same)."""

from __future__ import annotations

from django import template

register = template.Library()

NO_DATA = "\N{EN DASH}"


@register.filter
def percent(rate: float | None) -> str:
    """0.4567 -> "45.7 %"; no data -> NO_DATA."""
    return NO_DATA if rate is None else f"{rate * 100:.1f} %"


@register.filter
def number(value: float | None) -> str:
    """A latency or rate: whole above 100, one decimal above 1 (12.0 -> "12"), two significant
    digits below (a quiet hour's 0.034 answers a minute); no data -> NO_DATA."""
    if value is None:
        return NO_DATA
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 1:
        return f"{value:.1f}".removesuffix(".0")
    return f"{value:.2g}"
