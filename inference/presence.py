"""A worker's presence: it tells the registry, every heartbeat, that it is alive and what it
takes, and keeps what else says so fresh (its FAQ group membership, its health file).

Its announced capacity (running slots plus queue) is how the web tier bounds the queue and
tells "busy" from "no worker"; a draining worker announces 0 (admission stops counting it,
routing stops choosing it) yet stays announced: a worker that left the registry counts as dead,
and its answers would be moved to another worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from pathlib import Path

from inference.healthcheck import mark_alive
from inference.settings import WorkerSettings
from inference.wire import retry
from inference.wire.protocol import FAQ_WORKERS_GROUP
from inference.wire.registry import WorkerRegistry
from inference.wire.transport import Transport

logger = logging.getLogger(__name__)


class WorkerPresence:
    def __init__(
        self,
        *,
        registry: WorkerRegistry,
        transport: Transport,
        settings: WorkerSettings,
        running: Callable[[], int],
        draining: Callable[[], bool],
        faq_member: bool,
    ) -> None:
        self._registry = registry
        self._transport = transport
        self._settings = settings
        self._running = running  # requests running on the worker now
        self._draining = draining  # the worker is stopping: it takes nothing more
        self._faq_member = faq_member  # in the FAQ broadcast group

    async def announce_every_heartbeat(self, worker_id: str) -> None:
        while True:
            retry.stop_if_cancelled()
            try:
                await self.announce(worker_id)
                if self._faq_member:  # groups expire, and vanish with a Redis restart
                    await self._transport.group_add(FAQ_WORKERS_GROUP, worker_id)
                if self._settings.health_file:
                    mark_alive(Path(self._settings.health_file))
            except Exception as exc:
                logger.warning("announcing the worker failed (%s); retrying", exc)
            await asyncio.sleep(self._settings.heartbeat_s)

    async def announce(self, worker_id: str) -> None:
        """Alive; what it takes (nothing while draining) and its free slots."""
        s, draining = self._settings, self._draining()
        await self._registry.announce(
            worker_id=worker_id,
            capacity=0 if draining else s.max_active + s.max_queue,
            ttl_s=max(3.0, 3 * s.heartbeat_s),
            free=0 if draining else max(0, s.max_active - self._running()),
        )

    async def leave(self, worker_id: str) -> None:
        """Gone from the registry and the FAQ group (best effort: both expire on their own)."""
        with contextlib.suppress(Exception):
            await self._registry.withdraw(worker_id=worker_id)
        if self._faq_member:
            with contextlib.suppress(Exception):
                await self._transport.group_discard(FAQ_WORKERS_GROUP, worker_id)
