"""Reading the process-wide Prometheus registry in tests: values and how much they moved."""

from __future__ import annotations

import asyncio

from prometheus_client import REGISTRY

Series = tuple[str, tuple[tuple[str, str], ...]]


def value(name: str, **labels: str) -> float:
    """A sample's current value; 0 for a series not created yet."""
    return REGISTRY.get_sample_value(name, labels) or 0.0


class Changes:
    """Snapshot some series now; `delta()` says how much each moved since."""

    def __init__(self, *series: tuple[str, dict[str, str]]) -> None:
        self._series: list[Series] = [
            (name, tuple(sorted(labels.items()))) for name, labels in series
        ]
        self._before = {s: value(s[0], **dict(s[1])) for s in self._series}

    def delta(self, name: str, **labels: str) -> float:
        series: Series = (name, tuple(sorted(labels.items())))
        return value(name, **labels) - self._before[series]


def s(name: str, **labels: str) -> tuple[str, dict[str, str]]:
    return name, labels


async def wait_for_value(name: str, expected: float, timeout: float = 5.0, **labels: str) -> None:
    for _ in range(int(timeout / 0.02)):
        if value(name, **labels) == expected:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{name}{labels} is {value(name, **labels)}, wanted {expected}")
