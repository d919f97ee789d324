"""The reply drafts of one agent console socket (chatapp/answers/reply_drafts.py): at most one
per conversation the agent holds, started when the customer writes (or the agent takes the
conversation), streamed to the console as `agent.draft`, stopped when the agent writes or
sends their own reply, and every engine slot given back when the socket closes."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from chatapp.admission.limiter import Refused
from chatapp.answers.reply_drafts import Draft, reply_draft_end, reply_draft_start
from chatapp.realtime.agent_frames import AgentDraftFrame
from inference.wire.protocol import Accepted, Delta, Done, Error, worker_event_adapter

Send = Callable[[AgentDraftFrame], Awaitable[None]]


@dataclass
class _Running:
    draft: Draft
    worker_channel: str | None = None


class ConsoleDrafts:
    def __init__(self, *, agent_id: int, channel_name: str, send: Send) -> None:
        self._agent_id = agent_id
        self._channel = channel_name
        self._send = send
        self._running: dict[uuid.UUID, _Running] = {}  # by conversation

    async def start(self, conversation_id: uuid.UUID) -> None:
        """Draft the reply to the conversation's last customer message (a draft of an older
        one stops: it answers a question the customer has moved on from)."""
        await self.stop(conversation_id)
        started = await reply_draft_start(
            agent_id=self._agent_id, conversation_id=conversation_id, reply_channel=self._channel
        )
        if isinstance(started, Refused):
            await self._send(
                AgentDraftFrame(
                    conversation_id=conversation_id, draft_id=uuid.uuid4(), text="", status="busy"
                )
            )
        elif started is not None:
            self._running[conversation_id] = _Running(started)

    async def stop(self, conversation_id: uuid.UUID) -> None:
        running = self._running.pop(conversation_id, None)
        if running is None:
            return
        await reply_draft_end(running.draft, worker_channel=running.worker_channel, stop=True)
        await self._send(
            AgentDraftFrame(
                conversation_id=conversation_id,
                draft_id=running.draft.draft_id,
                text="",
                status="stopped",
            )
        )

    async def close(self) -> None:
        for running in list(self._running.values()):
            await reply_draft_end(running.draft, worker_channel=running.worker_channel, stop=True)
        self._running.clear()

    async def on_worker(self, message: dict[str, Any]) -> None:
        """A worker's event about one of this socket's drafts (a stopped one's are dropped)."""
        try:
            event = worker_event_adapter.validate_python(message)
        except ValidationError:
            return
        found = next(
            (r for r in self._running.values() if str(r.draft.draft_id) == event.request_id), None
        )
        if found is None:
            return
        conversation_id = found.draft.conversation_id
        if isinstance(event, Accepted):
            found.worker_channel = event.worker_channel
        elif isinstance(event, Delta):
            await self._send(
                AgentDraftFrame(
                    conversation_id=conversation_id,
                    draft_id=found.draft.draft_id,
                    text=event.text,
                    status="streaming",
                )
            )
        elif isinstance(event, Done | Error):
            del self._running[conversation_id]
            await reply_draft_end(found.draft, worker_channel=None, stop=False)
            await self._send(
                AgentDraftFrame(
                    conversation_id=conversation_id,
                    draft_id=found.draft.draft_id,
                    text="",
                    status="done" if isinstance(event, Done) else "failed",
                    source=event.source if isinstance(event, Done) else "model",
                )
            )
