"""How a worker takes requests off the queues, and what it does with one before serving it.

It takes from a list of queues in order, riding out a Redis restart, and at a stop hands back
what it took and did not accept, so another worker takes it at once. It accepts the request
(only the worker whose accept succeeds serves it; the accept is retried, it is idempotent) and
hands back what to run: a chat request or a typing prefill. What cannot be served is accepted
too, so no other worker takes it, and failed: a malformed request (logged by field, never by
value: the values are what a user wrote) and a request that already stopped `MAX_DELIVERIES`
workers (a poison request: it crashes or kills them).
"""

from __future__ import annotations

import asyncio
import logging

from pydantic import ValidationError

from inference.wire import retry
from inference.wire.protocol import (
    Error,
    GenerateRequest,
    PrefillRequest,
    worker_inbound_adapter,
)
from inference.wire.request_queue import RequestQueue, Taken, moved_queue, worker_queue
from inference.wire.transport import SendResult, Transport

logger = logging.getLogger(__name__)

# A request taken this many times without any taker accepting it stops workers (it crashes
# them, or kills them by memory): it is failed instead of handed to yet another worker.
MAX_DELIVERIES = 3


class RequestIntake:
    def __init__(self, *, queue: RequestQueue, transport: Transport) -> None:
        self._queue = queue
        self._transport = transport
        self._replies: set[asyncio.Task[SendResult]] = set()

    async def take(self, queues: list[str], *, consumer: str) -> Taken:
        """Take from the first of `queues` that has a request, waiting for one; a Redis
        restart is waited out (requests put meanwhile wait in Redis)."""
        return await retry.until_done(
            lambda: self._queue.take_any(queues, consumer=consumer),
            what=f"taking from {queues[-1]}",
        )

    async def hand_back_all(self, shared: tuple[str, ...], *, consumer: str) -> int:
        """Hand back every request `consumer` took from the `shared` queues (and from their
        moved and own queues) and did not accept; how many."""
        total = 0
        for queue in (
            *shared,
            *(moved_queue(q) for q in shared),
            *(worker_queue(q, consumer) for q in shared),
        ):
            try:
                total += await self._queue.hand_back_all(queue, consumer=consumer)
            except Exception as exc:  # another worker reclaims them after reclaim_after_s
                logger.warning("could not hand back requests taken from %s: %s", queue, exc)
        return total

    async def accept(self, taken: Taken) -> GenerateRequest | PrefillRequest | None:
        """The request to run, now this worker's; None when there is nothing to run (it was
        not this worker's any more, or it could not be served and was failed)."""
        try:
            message = worker_inbound_adapter.validate_python(taken.message)
        except ValidationError as exc:
            await self._accept(taken)  # off the queue: no worker can serve it
            self._reject_malformed(taken.message, exc)
            return None
        if isinstance(message, PrefillRequest):
            return message if await self._accept(taken) else None
        if not isinstance(message, GenerateRequest):
            await self._accept(taken)
            logger.warning("ignoring %s on the request queue", message.type)
            return None
        if taken.deliveries > MAX_DELIVERIES:
            if await self._accept(taken):
                self._reject_poison(message, deliveries=taken.deliveries)
            return None
        if not await self._accept(taken):
            logger.info("request %s is no longer queued for this worker", message.request_id)
            return None
        return message

    async def _accept(self, taken: Taken) -> bool:
        backoff = retry.SEND.start()
        for _ in range(5):
            try:
                return await self._queue.accept(taken)
            except Exception as exc:  # the accept is idempotent: try again
                logger.warning("accepting request %s failed (%s)", taken.entry_id, exc)
                await backoff.sleep()
        return False  # still pending here: another worker reclaims it after reclaim_after_s

    def _reject_poison(self, request: GenerateRequest, *, deliveries: int) -> None:
        logger.error(
            "request %s was taken %d times and never served: failing it",
            request.request_id,
            deliveries,
        )
        error = Error(
            request_id=request.request_id,
            seq=1,
            code="internal",
            message=f"this request stopped {deliveries - 1} inference workers; it was not run",
        )
        self._reply(request.reply_channel, error)

    def _reject_malformed(self, raw: dict[str, object], exc: ValidationError) -> None:
        reply, request_id = raw.get("reply_channel"), raw.get("request_id")
        # fields and what is wrong, never their values: those are what the user wrote
        problems = [
            f"{'.'.join(str(part) for part in error['loc'])}: {error['type']}"
            for error in exc.errors(include_input=False, include_context=False)[:3]
        ]
        logger.warning("malformed generate request: %s", "; ".join(problems))
        if isinstance(reply, str) and isinstance(request_id, str) and request_id:
            error = Error(
                request_id=request_id,
                seq=1,
                code="invalid_request",
                message=f"malformed request: {exc.error_count()} invalid field(s)",
            )
            self._reply(reply, error)

    def _reply(self, channel: str, error: Error) -> None:
        """Off the taking loop; held until sent (the loop keeps only weak references)."""
        task = asyncio.create_task(self._transport.send(channel, error))
        self._replies.add(task)
        task.add_done_callback(self._replies.discard)
