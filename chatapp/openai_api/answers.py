"""An API request's answer, through the same pipeline as a chat message.

Admission (with the key's own rate and concurrency), then the turn is stored as a new
conversation of the key's user, then this process's answer relay owns the run exactly as it
owns a WebSocket answer (`chatapp.answers.runs`). The API request only *watches*, on a
channel of its own, with the same `RunFollower` as a socket (`chatapp.answers.follower`):
entries in seq order, a gap replayed by the owner, an owner that goes silent checked on and,
only once it is known dead, its run ended from the log; so the text returned is always the
text stored. Closing the request early (the client went away) stops the run, which aborts the
engine request.

`Idempotency-Key`: a retry of a request with the same key (per API key) starts nothing; it
returns the first request's answer, streamed from its log or read from the stored row. Such a
request's answer is generated to the end even if its client goes away (the client said it will
retry), so a retry after a dropped connection gets the whole answer, never the part made
before the drop as if it were complete.

Where API answers end (for metrics): `ApiAnswer.entries` yields the `LoggedEnd`.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth.models import User

from chatapp.admission.limiter import AdmissionLimits, Refused
from chatapp.answers import runs
from chatapp.answers.entries import LogEntry, LoggedDelta, LoggedEnd
from chatapp.answers.follower import RunFollower, RunWatch, StoredAnswer, followed
from chatapp.answers.messages import DetachAnswer
from chatapp.answers.recovery import owner_state
from chatapp.answers.runtime import AnswerRuntime, admission_limits_of
from chatapp.apikeys.models import ApiKey
from chatapp.openai_api.errors import ApiError, refused
from chatapp.openai_api.prompting import ApiPrompt
from inference.wire.protocol import (
    BACKGROUND_CHANNEL,
    BACKGROUND_PRIORITY,
    INTERACTIVE_PRIORITY,
    REQUEST_CHANNEL,
    GenerateRequest,
)

logger = logging.getLogger(__name__)

# uuid5 namespace of idempotency keys: (API key, Idempotency-Key) -> the turn's client id
_IDEMPOTENCY = uuid.UUID("5b1f0d5e-3c61-4d8a-9d2e-6a0e4f3b7c21")
IDEMPOTENCY_KEY_MAX = 255
SESSION_ID_MAX = 64  # X-Session-ID; stored prefixed with the key, within the 100 a request holds


def key_limits(key: ApiKey) -> AdmissionLimits:
    """The service's limits with the key's own rate and concurrency."""
    return admission_limits_of(
        rate=key.rate_limit, rate_window_s=key.rate_window_s, max_concurrent=key.max_concurrent
    )


def key_user(key: ApiKey) -> str:
    """Admission counts each key on its own, apart from its user's chat."""
    return f"apikey:{key.pk}"


@dataclass
class ApiAnswer:
    runtime: AnswerRuntime
    watch: RunWatch
    channel: str  # where the relay sends this run's entries
    user: User
    ended: bool = False
    retryable: bool = False  # it has an Idempotency-Key: leaving does not stop the answer

    @property
    def message_id(self) -> uuid.UUID:
        return self.watch.message_id

    async def entries(self) -> AsyncIterator[LogEntry]:
        """Entries in seq order, ending with the `LoggedEnd`."""
        layer = get_channel_layer()
        watch = self.watch
        follower = RunFollower.of_user(
            watch,
            user=self.user,
            orphans=self.runtime.relay.orphans,
            watcher=self.channel,
            send=_send_quietly,
        )
        shown = ""  # the text yielded so far (a stored row is what it must add up to)
        async for item in followed(follower, lambda: layer.receive(self.channel)):
            if isinstance(item, StoredAnswer):
                self.ended = True
                if item.content.startswith(shown) and len(item.content) > len(shown):
                    yield LoggedDelta(seq=watch.next_seq, text=item.content[len(shown) :])
                yield item.end
                return
            if isinstance(item, LoggedEnd):
                self.ended = True
                yield item
                return
            if isinstance(item, LoggedDelta):
                shown += item.text
                yield item

    async def _send_owner(self, message: dict[str, Any]) -> None:
        if self.watch.owner:
            await _send_quietly(self.watch.owner, message)

    async def close(self) -> None:
        """The client is gone (or done reading): stop the run if it still generates, or, when
        the client will retry, only stop watching it."""
        if self.ended:
            return
        self.ended = True
        with contextlib.suppress(Exception):
            if self.retryable:
                detach = DetachAnswer(
                    message_id=self.message_id, run_id=self.watch.run_id, watcher=self.channel
                )
                await self._send_owner(detach.to_channel())
            else:
                await self.runtime.relay.stop(self.watch.run_id, code="client_disconnected")


async def _send_quietly(channel: str, message: dict[str, Any]) -> None:
    """To the run's owner; a failed send is found by the silence check."""
    with contextlib.suppress(Exception):
        await get_channel_layer().send(channel, message)


def idempotency_client_id(*, key: ApiKey, idempotency_key: str) -> uuid.UUID:
    return uuid.uuid5(_IDEMPOTENCY, f"{key.pk}:{idempotency_key}")


async def answer_start(
    *,
    key: ApiKey,
    prompt: ApiPrompt,
    background: bool,
    idempotency_key: str | None = None,
    session_id: str | None = None,
) -> ApiAnswer:
    """Admit, store and start the answer; raises `ApiError` (429/503, 409 for an
    Idempotency-Key reused with another question). With an Idempotency-Key seen before, nothing
    new starts: the answer of the first request is followed."""
    client_id = (
        idempotency_client_id(key=key, idempotency_key=idempotency_key)
        if idempotency_key is not None
        else uuid.uuid4()
    )
    user_key = key_user(key)
    channel = await get_channel_layer().new_channel()
    retryable = idempotency_key is not None

    def request_of(run_id: uuid.UUID, reply_channel: str) -> GenerateRequest:
        return GenerateRequest(
            request_id=str(run_id),
            reply_channel=reply_channel,
            system=prompt.system,
            messages=prompt.turns,
            sampling=prompt.sampling,
            priority=BACKGROUND_PRIORITY if background else INTERACTIVE_PRIORITY,
            submitted_at=time.time(),
            faq_lookup=prompt.faq_lookup,
            # OpenAI's behaviour unless the client opted in: a conversation over the context is
            # a 400 context_length_exceeded, never silently cut
            trim_history=prompt.trim_history,
            session_id=session_id,
        )

    # Queued before its turn is stored, like a chat send; from then on the relay owns the run
    # and frees the admission slot when it ends.
    started = await runs.send_run_start(
        question=runs.NewQuestion(
            sender=key.user,
            conversation_id=None,
            client_message_id=client_id,
            text=prompt.question,
            template_version=prompt.template_version,
        ),
        user_key=user_key,
        watcher=channel,
        request_of=request_of,
        request_channel=BACKGROUND_CHANNEL if background else REQUEST_CHANNEL,
        limits=key_limits(key),
        finish_unwatched=retryable,
    )
    if isinstance(started, Refused):
        raise refused(started)
    turn, runtime = started.turn, started.runtime
    watch = RunWatch(
        message_id=turn.assistant_message.id, run_id=started.run_id, owner="", client_id=client_id
    )
    answer = ApiAnswer(
        runtime=runtime, watch=watch, channel=channel, user=key.user, retryable=retryable
    )
    if started.repeated:
        if turn.user_message.content != prompt.question:
            answer.ended = True  # nothing of ours to stop
            raise ApiError(
                status=409,
                code="idempotency_key_reused",
                param="Idempotency-Key",
                message="This Idempotency-Key was already used for a different request.",
            )
        owner = await runtime.log.ownership(run_id=started.run_id)
        if owner_state(owner, silent_after_s=settings.CHAT_REAP_AFTER_S) == "alive":
            assert owner is not None
            watch.owner = owner.relay_channel
            await answer._send_owner(watch.attach(watcher=channel).to_channel())
        return answer
    watch.owner = runtime.relay.channel
    return answer
