"""Waiting for something another task does, in the tests' event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def until(condition: Callable[[], object], timeout_s: float = 5.0) -> None:
    """Returns once `condition()` holds or `timeout_s` has passed: the caller asserts what it
    needs afterwards, so a failure names the condition that did not hold."""
    for _ in range(round(timeout_s / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
