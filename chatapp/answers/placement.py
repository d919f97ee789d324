"""Where a run's request waits and which worker serves it: the relay's queue and registry side.

A request goes to its conversation's last worker (routing affinity) or the shared queue; one
that worker does not take in time moves to the shared queue; one Redis lost (a restart without
persistence) is queued again; and a run whose worker died goes on on another worker from the
text already streamed (a migration), on the moved answers' queue, ahead of newer questions.
The relay (`relay.py`) owns the runs and decides when; this module does the queue and registry
I/O for it.
"""

from __future__ import annotations

import logging
import time
import uuid

from chatapp.answers.entries import text_of
from chatapp.answers.run_state import Run
from chatapp.metrics import recording as metrics
from inference.wire.affinity import AffinityMap, route
from inference.wire.protocol import GenerateRequest
from inference.wire.registry import WorkerRegistry
from inference.wire.request_queue import RequestQueue, moved_queue

logger = logging.getLogger(__name__)


class RunPlacement:
    def __init__(
        self,
        *,
        queue: RequestQueue,
        registry: WorkerRegistry,
        affinity: AffinityMap | None,
        max_migrations: int,
    ) -> None:
        self._queue = queue
        self._registry = registry
        self._affinity = affinity  # None: no routing affinity
        self._max_migrations = max_migrations

    async def queue(self, run: Run) -> None:
        """Queue the run's request where it should wait; raises if it cannot be queued."""
        queue = await route(
            queue=run.shared_queue,
            session_id=run.session_id,
            affinity=self._affinity,
            registry=self._registry,
        )
        entry_id = await self._queue.put(queue, run.request)
        run.queued, run.queued_message = (queue, entry_id), run.request

    def on_own_queue(self, run: Run) -> bool:
        """Waiting on one worker's own queue (routing affinity), not a shared one."""
        return run.queued is not None and run.queued[0] not in (
            run.shared_queue,
            moved_queue(run.shared_queue),
        )

    @property
    def remembers(self) -> bool:
        """Conversations are routed back to their last worker (routing affinity is on)."""
        return self._affinity is not None

    async def remember(self, session_id: str, worker_channel: str) -> None:
        if self._affinity is None:
            return
        try:
            await self._affinity.remember(session_id, worker_channel)
        except Exception as exc:  # the next turn goes to any worker: slower, not wrong
            logger.warning("could not remember the worker of session %s: %s", session_id, exc)

    async def move_to_shared(self, run: Run) -> None:
        """A request its conversation's worker did not take in time goes to every worker."""
        assert run.queued is not None
        queue, entry_id = run.queued
        if not await self._queue.withdraw(queue, entry_id):
            return  # that worker accepted it meanwhile: its `accepted` is on the way
        if run.worker_channel is not None or run.ending:
            return
        run.queued = (run.shared_queue, await self._queue.put(run.shared_queue, run.request))
        run.queued_message = run.request
        logger.info("run %s: moved from %s to the shared queue", run.run_id, queue)

    async def withdraw(self, run_id: uuid.UUID, queue: str, entry_id: str) -> None:
        try:
            await self._queue.withdraw(queue, entry_id)
        except Exception as exc:  # a worker that takes it later is sent a cancel on `accepted`
            logger.warning("could not take run %s off the queue: %s", run_id, exc)

    async def requeue_lost(self, runs: list[Run]) -> None:
        """Put again the requests no worker took that Redis lost (it restarted without
        persistence): otherwise they would wait for nothing and end `no_worker` or `busy`.
        The relay calls it on its timeouts loop, like `move_to_shared`, so the two never race."""
        for run in [r for r in runs if r.queued and r.worker_channel is None]:
            assert run.queued is not None
            queue, entry_id = run.queued
            if run.ending or not await self._queue.lost(queue, entry_id):
                continue
            run.queued = (queue, await self._queue.put(queue, run.queued_message))
            logger.warning("run %s: its queued request was lost; queued again", run.run_id)

    async def workers_gone(self, runs: list[Run]) -> set[str]:
        """Workers of running answers that left the registry (killed: they stopped announcing
        themselves), so their answers migrate within a few worker heartbeats instead of
        waiting for the stall timeout."""
        serving = {r.worker_channel for r in runs if r.worker_channel}
        if not serving or not self._max_migrations:
            return set()
        try:
            live = await self._registry.live_workers()
        except Exception:  # the stall timeout still catches them
            return set()
        if not live:
            # nobody at all: the registry was lost (Redis restarted without persistence), not
            # every worker at once; they announce themselves again within a heartbeat, and
            # the stall timeout still catches a worker that really died
            return set()
        return {worker for worker in serving if worker not in live}

    async def migrate(self, run: Run) -> bool:
        """Go on with a run whose worker died on another worker, from the text already
        streamed (it is the open assistant turn of the new prompt, and the new worker counts
        on from the next seq), so the user sees one answer with no gap and no repeat. False
        when it cannot (stopped, migrated too often, a half-written JSON answer, nobody to
        take it)."""
        if run.stop_code is not None or run.migrations >= self._max_migrations or not run.request:
            return False
        try:
            live = await self._registry.live_workers()
        except Exception:
            return False
        # a worker that is draining (capacity 0) takes nothing: it is no other worker
        others = {w for w, capacity in live.items() if capacity > 0} - {run.worker_channel}
        if not others:  # nobody else could take it: it fails with the text it has
            return False
        original = GenerateRequest.model_validate(run.request)
        if original.sampling.response_format is not None and text_of(run.entries):
            # a structured answer cannot go on from half a document (the new worker's grammar
            # starts a second one): it fails clearly, as Dynamo does
            return False
        limit = original.sampling.max_tokens
        if limit and limit - run.completion_tokens < 1:
            return False  # it had said all it was allowed to
        if run.worker_channel is not None:
            run.left_behind[run.upstream_id] = run.worker_channel
        run.migrations += 1
        request = original.model_copy(  # the same sampling: the worker counts what is left
            update={
                "request_id": run.upstream_id,
                "continue_from": text_of(run.entries),
                "first_seq": run.next_seq,
                "continued_tokens": run.completion_tokens,
                "faq_lookup": None,
                "submitted_at": time.time(),
            }
        )
        lost = run.worker_channel
        run.worker_channel = None
        run.last_event = time.monotonic()
        try:  # ahead of the questions that came after it
            moved = moved_queue(run.shared_queue)
            run.queued_message = request.to_channel()
            run.queued = (moved, await self._queue.put(moved, run.queued_message))
        except Exception as exc:
            logger.warning("could not queue the migration of run %s: %s", run.run_id, exc)
            return False  # fails as worker_lost
        metrics.answer_migrated()
        logger.warning(
            "worker %s of run %s was lost after %d entries: going on on another worker",
            lost,
            run.run_id,
            len(run.entries),
        )
        return True
