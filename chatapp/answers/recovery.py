"""Finishing answers whose owner is gone, from what their log says.

A web process that dies takes its relay with it, and the answers it owned would stay
"streaming" forever. Any relay (each web process runs one) periodically finds streaming
answers whose owner has not been heard from for a while and stores them from the log: the
logged end if there is one, otherwise `failed` (`interrupted`) with the text that was logged.
"""

from __future__ import annotations

import logging
import time
import uuid
from datetime import timedelta

from channels.db import database_sync_to_async
from django.utils import timezone

from chatapp.answers.entries import LoggedEnd, text_of
from chatapp.answers.log import AnswerLog
from chatapp.conversations import selectors, services
from chatapp.conversations.models import Message

logger = logging.getLogger(__name__)

INTERRUPTED_MESSAGE = (
    "The answer was interrupted (the server handling it went away). What arrived is kept; "
    "please ask again."
)


def outcome_of(end: LoggedEnd) -> services.AnswerOutcome:
    return services.AnswerOutcome(
        status=Message.Status(end.status),
        finish_reason=end.finish_reason,
        error_code=end.error_code,
        prompt_tokens=end.prompt_tokens,
        completion_tokens=end.completion_tokens,
        cached_prompt_tokens=end.cached_prompt_tokens,
        queue_wait_ms=end.queue_wait_ms,
        ttft_ms=end.ttft_ms,
        total_ms=end.total_ms,
        source=end.source,
        faq_entry_id=end.faq_entry_id,
    )


async def answer_abandon(*, log: AnswerLog, message_id: uuid.UUID) -> LoggedEnd:
    """Store an ownerless answer from its log; returns the end the watchers should see."""
    entries = await log.entries_after(message_id=message_id, seq=0) or []
    last = entries[-1] if entries else None
    if isinstance(last, LoggedEnd):
        end = last
    else:
        end = LoggedEnd(
            seq=len(entries) + 1,
            status="failed",
            error_code="interrupted",
            error_message=INTERRUPTED_MESSAGE,
        )
    await database_sync_to_async(services.answer_finish)(
        message_id=message_id, content=text_of(entries), outcome=outcome_of(end)
    )
    return end


async def orphaned_answers_finish(*, log: AnswerLog, stale_after_s: float) -> int:
    """Finish streaming answers whose relay has been silent for `stale_after_s`; how many."""
    started_before = timezone.now() - timedelta(seconds=stale_after_s)
    candidates = await database_sync_to_async(selectors.streaming_answer_ids)(
        started_before=started_before
    )
    finished = 0
    for message_id in candidates:
        owner = await log.ownership(message_id=message_id)
        if owner is not None and time.time() - owner.heartbeat_at < stale_after_s:
            continue
        logger.warning("answer %s lost its owner: storing it from the log", message_id)
        await answer_abandon(log=log, message_id=message_id)
        finished += 1
    return finished
