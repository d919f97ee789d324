"""Running a prompt through the engine for its prefix cache only: one request, nothing sent.

Used by a starting worker's warm-up (`inference/start_warmup.py`), by typing prefill
(`PrefillRequest`, run by the worker in a background slot), and after an answer whose
conversation's next turn will start its history at a new cut (`trim_prefill`): the worker
queues that trimmed prompt as a `PrefillRequest` on its own background queue, so the next
turn, routed back to it, finds it in the prefix cache instead of re-reading its whole history.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

from prometheus_client import Counter

from inference.active_requests import ActiveRequests
from inference.answering import Progress
from inference.engine_request import engine_request_of
from inference.engines.base import Engine
from inference.generation_config import GenerationDefaults
from inference.prompt_builder import PromptBuilder
from inference.wire.protocol import PREFILL_MAX_AGE_S, GenerateRequest, PrefillRequest
from inference.wire.request_queue import RequestQueue

logger = logging.getLogger(__name__)

TYPING_PREFILLS = Counter(
    "inference_typing_prefills",
    "Typing prefills a worker took, by what became of them: run, dropped_stale (older than "
    "PREFILL_MAX_AGE_S), dropped_busy (the worker was answering chat), failed.",
    ["outcome"],
)
TRIM_PREFILLS = Counter(
    "inference_trim_prefills",
    "Prefills of a conversation's next trimmed prompt a worker queued when an answer ended "
    "(then run or dropped like a typing prefill).",
)
# The request ids of those prefills start with this (logs, the typing prefill's counter)
TRIM_PREFILL_PREFIX = "trim-"


def prefill_start(
    message: PrefillRequest, *, engine: Engine, active: ActiveRequests, background: bool
) -> bool:
    """Run a typing prefill in the background slot its worker took, unless it is stale or chat
    runs there: it must never delay a real question. Its draft is not logged. True if it runs."""
    if time.time() - message.submitted_at > PREFILL_MAX_AGE_S:
        TYPING_PREFILLS.labels(outcome="dropped_stale").inc()
        return False
    if len(active) > active.background:
        TYPING_PREFILLS.labels(outcome="dropped_busy").inc()
        return False
    request = message.as_generate()
    if request.request_id in active:
        return False
    active.run(
        request,
        _prefill_counted(engine, request),
        progress=Progress(),
        background=background,
        name=f"prefill-{request.request_id}",
    )
    return True


async def _prefill_counted(engine: Engine, request: GenerateRequest) -> None:
    try:
        await engine_prefill(engine=engine, request=request)
    except Exception as exc:  # an optimisation: the question itself will be answered
        TYPING_PREFILLS.labels(outcome="failed").inc()
        logger.warning("typing prefill %s failed: %s", request.request_id, type(exc).__name__)
        return
    TYPING_PREFILLS.labels(outcome="run").inc()


async def engine_prefill(*, engine: Engine, request: GenerateRequest) -> None:
    """Render `request`'s prompt and run it to its end (it asks for a token or two)."""
    engine_request = await asyncio.to_thread(
        engine_request_of, request, builder=engine.prompt_builder, defaults=engine.defaults
    )
    async for _delta in engine.stream(engine_request):
        pass


class TrimPrefills:
    """Queues, when an answer ends, its conversation's next trimmed prompt's prefill."""

    def __init__(self, *, engine: Engine, queue: RequestQueue) -> None:
        self._engine = engine
        self._queue = queue
        self._tasks: set[asyncio.Task[None]] = set()  # held until done (weak refs otherwise)

    def after(self, request: GenerateRequest, progress: Progress, *, to: str) -> None:
        """An answer ended: if its conversation's next turn will start its history at a new
        cut, queue that trimmed prompt's prefill on `to` (the worker's own background queue:
        the next turn is routed back there), run like a typing prefill: the next turn finds
        its history in the prefix cache instead of re-reading all of it (`trim_prefill`)."""
        if not progress.done_sent or progress.finish_reason == "abort":
            return
        task = asyncio.create_task(
            queue_trim_prefill(
                request,
                answer="".join(progress.answer),
                engine=self._engine,
                queue=self._queue,
                to=to,
            ),
            name=f"trim-prefill-{request.request_id}",
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


async def queue_trim_prefill(
    request: GenerateRequest, *, answer: str, engine: Engine, queue: RequestQueue, to: str
) -> None:
    """Queue `trim_prefill` of the answered `request` on `to` (its worker's own background
    queue), if there is one; a failure only costs the next turn a longer prefill."""
    try:
        prefill = await asyncio.to_thread(
            trim_prefill,
            request,
            answer=answer,
            builder=engine.prompt_builder,
            defaults=engine.defaults,
        )
        if prefill is None:
            return
        await queue.put(to, prefill.to_channel())
    except Exception as exc:  # an optimisation: the next turn is answered all the same
        logger.warning("no trim prefill after %s: %s", request.request_id, exc)
        return
    TRIM_PREFILLS.inc()
    logger.info(
        "queued %s: the next turn of %s keeps its last %d messages",
        prefill.request_id,
        request.session_id,
        len(prefill.messages),
    )


def trim_prefill(
    request: GenerateRequest,
    *,
    answer: str,
    builder: PromptBuilder,
    defaults: GenerationDefaults,
) -> PrefillRequest | None:
    """What to prefill once `answer` to `request` has been sent: the next turn's prompt up to
    its question (the system prompt and the history it will keep) when that turn will start
    its history at a cut no earlier prompt started at (`PromptBuilder.next_history`); None
    when its prompt is this one and the answer (already cached), or for a request that has no
    next turn here (no conversation, no trimming, a migrated answer, no answer text).
    Renders and tokenizes the whole history: run it off the event loop."""
    if (
        request.session_id is None
        or not request.trim_history
        or request.continue_from is not None
        or not request.messages
        or request.messages[-1].role != "user"
        or not answer.strip()
    ):
        return None
    history = builder.next_history(
        system=request.system,
        messages=request.messages,
        answer=answer,
        max_tokens=request.sampling.max_tokens or defaults.max_tokens,
    )
    if history is None:
        return None
    return PrefillRequest(
        request_id=f"{TRIM_PREFILL_PREFIX}{uuid.uuid4()}",
        system=request.system,
        messages=history,
        submitted_at=time.time(),
        session_id=request.session_id,
    )
