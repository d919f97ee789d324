"""An API request's answer, through the same pipeline as a chat message.

Admission (with the key's own rate and concurrency), then the turn is stored as a new
conversation of the key's user, then this process's answer relay owns the answer exactly as it
owns a WebSocket answer: it sends the request to the workers, logs every entry, fails answers no
worker produces (`no_worker`, `worker_lost`, queue timeout), writes the message once and frees
the admission slot when it ends. The API request only *watches*, on a channel of its own,
like a socket does; closing it early (the client went away) stops the answer, which aborts the
engine request.

Where API answers end (for metrics): `ApiAnswer.entries` yields the `LoggedEnd`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from pydantic import ValidationError

from chatapp.admission.limiter import AdmissionLimits, Refused
from chatapp.answers.entries import LogEntry, LoggedEnd
from chatapp.answers.messages import AnswerEntry, AttachAnswer
from chatapp.answers.recovery import answer_abandon
from chatapp.answers.runtime import AnswerRuntime, admission_limits, answer_runtime
from chatapp.apikeys.models import ApiKey
from chatapp.conversations import services
from chatapp.openai_api.errors import refused
from chatapp.openai_api.prompting import ApiPrompt
from inference.protocol import (
    BACKGROUND_CHANNEL,
    BACKGROUND_PRIORITY,
    INTERACTIVE_PRIORITY,
    REQUEST_CHANNEL,
    GenerateRequest,
)

logger = logging.getLogger(__name__)


def key_limits(key: ApiKey) -> AdmissionLimits:
    """The service's limits with the key's own rate and concurrency."""
    return replace(
        admission_limits(),
        user_rate=key.rate_limit,
        user_rate_window_s=float(key.rate_window_s),
        user_max_concurrent=key.max_concurrent,
    )


def key_user(key: ApiKey) -> str:
    """Admission counts each key on its own, apart from its user's chat."""
    return f"apikey:{key.pk}"


@dataclass
class ApiAnswer:
    runtime: AnswerRuntime
    message_id: uuid.UUID
    channel: str  # where the relay sends this answer's entries
    ended: bool = False

    async def entries(self) -> AsyncIterator[LogEntry]:
        """Entries in seq order, ending with the `LoggedEnd`. Lost entries (a full or
        restarted channel layer) are replayed by the relay from its memory."""
        layer = get_channel_layer()
        next_seq = 1
        resyncing = False
        # The relay says it is alive every CHAT_RELAY_HEARTBEAT_S; silence means it died.
        silence_s = settings.CHAT_STALL_TIMEOUT_S + 2 * settings.CHAT_RELAY_HEARTBEAT_S
        last_heard = time.monotonic()
        while True:
            waited = time.monotonic() - last_heard
            if waited >= silence_s:
                logger.warning(
                    "relay silent for answer %s: storing it from its log", self.message_id
                )
                self.ended = True
                yield await answer_abandon(log=self.runtime.log, message_id=self.message_id)
                return
            try:
                async with asyncio.timeout(silence_s - waited):
                    raw = await layer.receive(self.channel)
            except TimeoutError:
                continue
            except Exception as exc:  # Redis restarting: keep trying until the silence limit
                logger.warning("receive for answer %s failed: %s", self.message_id, exc)
                await asyncio.sleep(0.2)
                continue
            last_heard = time.monotonic()
            if raw.get("type") == "answer.alive":  # AnswerAlive: the relay is still there
                continue
            try:
                entry = AnswerEntry.model_validate(raw).entry
            except ValidationError:
                continue
            if entry.seq < next_seq:
                continue  # replayed and live copies overlap
            if entry.seq > next_seq:
                if not resyncing:
                    resyncing = True
                    await layer.send(
                        self.runtime.relay.channel,
                        AttachAnswer(
                            message_id=self.message_id, watcher=self.channel, after_seq=next_seq - 1
                        ).to_channel(),
                    )
                continue
            resyncing = False
            next_seq += 1
            if isinstance(entry, LoggedEnd):
                self.ended = True
                yield entry
                return
            yield entry

    async def close(self) -> None:
        """The client is gone (or done reading): stop the answer if it still generates."""
        if not self.ended:
            self.ended = True
            with contextlib.suppress(Exception):
                await self.runtime.relay.stop(self.message_id, code="client_disconnected")


async def answer_start(*, key: ApiKey, prompt: ApiPrompt, background: bool) -> ApiAnswer:
    """Admit, store and start the answer; raises `ApiError` (429/503) when refused."""
    runtime = await answer_runtime()
    request_id = str(uuid.uuid4())
    user_key = key_user(key)
    decision = await runtime.admission.acquire(
        request_id=request_id,
        user_key=user_key,
        capacity=await runtime.registry.capacity(),
        limits=key_limits(key),
    )
    if isinstance(decision, Refused):
        raise refused(decision)
    try:
        turn = await database_sync_to_async(services.turn_start)(
            sender=key.user,
            conversation_id=None,
            client_message_id=uuid.uuid4(),
            text=prompt.question,
            template_version=prompt.template_version,
        )
        channel = await get_channel_layer().new_channel()
    except BaseException:
        with contextlib.suppress(Exception):
            await runtime.admission.release(request_id=request_id, user_key=user_key)
        raise
    relay = runtime.relay
    request = GenerateRequest(
        request_id=request_id,
        reply_channel=relay.channel,
        system=prompt.system,
        messages=prompt.turns,
        sampling=prompt.sampling,
        priority=BACKGROUND_PRIORITY if background else INTERACTIVE_PRIORITY,
        submitted_at=time.time(),
        faq_lookup=prompt.faq_lookup,
        # OpenAI's behaviour unless the client opted in: a conversation over the context is a
        # 400 context_length_exceeded, never silently cut
        trim_history=prompt.trim_history,
    )
    message_id = turn.assistant_message.id
    # From here the relay owns the answer and frees the admission slot when it ends.
    await relay.start(
        message_id=message_id,
        user_key=user_key,
        watcher=channel,
        request=request,
        request_channel=BACKGROUND_CHANNEL if background else REQUEST_CHANNEL,
    )
    return ApiAnswer(runtime=runtime, message_id=message_id, channel=channel)
