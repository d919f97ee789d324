"""Step-by-step progress lines with timings, for a build that takes a minute."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Progress = Callable[[str], None]


class Steps:
    """Prints `[label] step ...` when a step starts and `... done in 1.2s` when it ends."""

    def __init__(self, *, label: str, progress: Progress) -> None:
        self._label = label
        self._progress = progress
        self._started = time.perf_counter()

    def say(self, message: str) -> None:
        self._progress(f"[{self._label}] {message}")

    @contextmanager
    def step(self, title: str) -> Iterator[None]:
        self.say(f"{title} ...")
        started = time.perf_counter()
        yield
        self.say(f"{title}: done in {time.perf_counter() - started:.1f}s")

    def elapsed_s(self) -> float:
        return time.perf_counter() - self._started
