"""What runs on a worker, each in a slot: the one owner of its slots and request tasks.

A worker (`inference/worker.py`) holds a slot (`slots`) while it serves a request, and a
background slot too for background work (`background_slots`, at most `max_background` of the
slots, so background never fills the engine). `run` starts a request's task; when the task ends,
however it ends, its slots are freed and `on_finished` hears of it. Cancelling the task is the
abort path; `cancel` marks it as the client's own stop first.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from inference.answering import Progress
from inference.wire.protocol import GenerateRequest

logger = logging.getLogger(__name__)


@dataclass
class Active:
    """A request running on this worker."""

    request: GenerateRequest
    task: asyncio.Task[None]
    progress: Progress
    background: bool = False
    cancelled_by_client: bool = False


class ActiveRequests:
    def __init__(
        self, *, max_active: int, max_background: int, on_finished: Callable[[Active], None]
    ) -> None:
        self.slots = asyncio.Semaphore(max_active)
        self.background_slots = asyncio.Semaphore(max(1, min(max_background, max_active)))
        self._on_finished = on_finished
        self._running: dict[str, Active] = {}

    def __len__(self) -> int:
        return len(self._running)

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._running

    def ids(self) -> list[str]:
        return list(self._running)

    def entries(self) -> list[Active]:
        return list(self._running.values())

    @property
    def background(self) -> int:
        return sum(1 for active in list(self._running.values()) if active.background)

    def run(
        self,
        request: GenerateRequest,
        work: Coroutine[Any, Any, None],
        *,
        progress: Progress,
        background: bool,
        name: str,
    ) -> None:
        """Run `work` for `request` in the slot (and background slot, for background work) its
        caller took; both are freed when it ends."""
        task = asyncio.create_task(work, name=name)
        self._running[request.request_id] = Active(
            request=request, task=task, progress=progress, background=background
        )
        task.add_done_callback(functools.partial(self._finished, request.request_id))

    def cancel(self, request_id: str) -> bool:
        """The client stopped it: abort its task. False if it does not run here."""
        active = self._running.get(request_id)
        if active is None:
            return False
        active.cancelled_by_client = True
        active.task.cancel()
        return True

    def cancelled_by_client(self, request_id: str) -> bool:
        active = self._running.get(request_id)
        return active is not None and active.cancelled_by_client

    async def abort_all(self) -> list[Active]:
        """Cancel every running request and wait for each; returns what was running."""
        running = list(self._running.values())
        for active in running:
            active.task.cancel()
        for active in running:
            try:
                await active.task
            except asyncio.CancelledError:
                pass
            except Exception:
                logger.exception("request task failed during shutdown")
        return running

    def _finished(self, request_id: str, _task: asyncio.Task[None]) -> None:
        active = self._running.pop(request_id, None)
        self.slots.release()
        if active is None:
            return
        if active.background:
            self.background_slots.release()
        self._on_finished(active)
