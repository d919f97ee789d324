"""The agent console's socket (`/ws/agent/`): the queue of customers asking for a person, the
transcripts an agent opens, and claim / reply / transfer / release / close.

Only agents (chatapp/handoff/agents.py) get in, and every frame checks again, so an agent
removed from the group is refused at their next action. A refused socket is accepted and
closed at once with 4403 and the reason (a close before accept reaches the page as a bare
1006). Changes are stored by chatapp.handoff.services and told to every socket concerned by
chatapp.handoff.events: the consoles (the queue) and the sockets showing the conversation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.contrib.auth.models import User

from chatapp.conversations.message_text import text_refusal
from chatapp.conversations.selectors import person_name
from chatapp.errors import ApplicationError
from chatapp.handoff import events, selectors, services
from chatapp.handoff.agents import is_agent
from chatapp.handoff.models import Handoff
from chatapp.handoff.presence import RENEW_EVERY_S, Presence
from chatapp.metrics import recording as metrics
from chatapp.realtime.agent_frames import (
    AGENT_CLIENT_FRAME_TYPES,
    AgentErrorFrame,
    AgentHandoffFrame,
    AgentMessageFrame,
    AgentTypingClientFrame,
    AnyAgentClientFrame,
    AnyAgentServerFrame,
    ClaimFrame,
    CloseFrame,
    CustomerTypingFrame,
    DraftStopFrame,
    OpenFrame,
    QueueFrame,
    QueueItem,
    ReleaseFrame,
    ReplyFrame,
    TranscriptFrame,
    TransferFrame,
    agent_client_frame_adapter,
)
from chatapp.realtime.console_drafts import ConsoleDrafts
from chatapp.realtime.frame_budget import FRAME, FrameBudget
from chatapp.realtime.intake import Refusal, frame_of
from chatapp.realtime.schemas import conversation_message

NOT_AGENT = 4403
logger = logging.getLogger(__name__)


class AgentConsumer(AsyncWebsocketConsumer):  # type: ignore[misc]  # channels is untyped
    agent: User
    budget: FrameBudget
    drafts: ConsoleDrafts | None = None
    presence: Presence | None = None
    present: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        user = self.scope.get("user")
        self._showing: set[uuid.UUID] = set()
        self._mine: set[uuid.UUID] = set()  # conversations this agent holds (their drafts)
        if not await database_sync_to_async(is_agent)(user):
            await self.accept()
            await self.close(code=NOT_AGENT, reason="Only agents may use the console.")
            return
        self.agent = user
        self.budget = FrameBudget.from_settings()
        self.presence = Presence(settings.REDIS_URL)
        await self.presence.here(self.channel_name)
        self.present = asyncio.create_task(self._stay_present())
        self.drafts = ConsoleDrafts(
            agent_id=user.pk, channel_name=self.channel_name, send=self._send_frame
        )
        await self.channel_layer.group_add(events.AGENTS, self.channel_name)
        await self.accept()
        for row in await self._queue_send():
            if row["mine"]:  # held before a reconnect: their messages and drafts go on here
                conversation_id = uuid.UUID(row["conversation_id"])
                self._mine.add(conversation_id)
                await self._show(conversation_id)
        await events.consoles_changed()  # waiting customers: somebody is online

    async def disconnect(self, code: int) -> None:
        if self.drafts is not None:
            await self.drafts.close()
        if self.presence is not None:
            if self.present is not None:
                self.present.cancel()
            await self.presence.gone(self.channel_name)
            await self.presence.aclose()
            await events.consoles_changed()
        await self.channel_layer.group_discard(events.AGENTS, self.channel_name)
        for conversation_id in getattr(self, "_showing", ()):
            await self.channel_layer.group_discard(
                events.conversation_group(conversation_id), self.channel_name
            )

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.budget.take(kind=FRAME, now=time.monotonic()) is not None:
            await self._send_frame(
                AgentErrorFrame(code="rate_limited", message="Too many frames; slow down.")
            )
            return
        read = frame_of(
            text_data,
            max_bytes=settings.CHAT_MAX_FRAME_BYTES,
            adapter=agent_client_frame_adapter,
            types=AGENT_CLIENT_FRAME_TYPES,
        )
        if isinstance(read, Refusal):
            await self._send_frame(
                AgentErrorFrame(code=read.code, message=read.message, id=read.client_id)
            )
            return
        frame = read.frame
        if not await database_sync_to_async(is_agent)(self.agent):  # every frame
            await self._send_frame(
                AgentErrorFrame(
                    code="forbidden", message="You are no longer an agent.", id=frame.id
                )
            )
            await self.close(code=NOT_AGENT)
            return
        try:
            await self._handle(frame)
        except ApplicationError as exc:
            code: Any = exc.code if exc.code in ("not_found", "busy", "forbidden") else "invalid"
            await self._send_frame(AgentErrorFrame(code=code, message=exc.message, id=frame.id))
        except Exception:  # the database or Redis failed under us: say so, keep the socket
            logger.exception("agent frame %s failed", frame.type)
            await self._send_frame(
                AgentErrorFrame(
                    code="internal",
                    message="Something went wrong on our side; nothing was changed. Try again.",
                    id=frame.id,
                )
            )

    async def _handle(self, frame: AnyAgentClientFrame) -> None:
        assert self.drafts is not None
        if isinstance(frame, OpenFrame):
            await self._open(frame)
            return
        if isinstance(frame, ReplyFrame):
            await self._reply(frame)
            return
        if isinstance(frame, DraftStopFrame):
            await self.drafts.stop(frame.conversation_id)
            return
        if isinstance(frame, AgentTypingClientFrame):
            if frame.conversation_id in self._mine:  # only where this agent holds it
                await events.typing(
                    frame.conversation_id, by="agent", agent=person_name(self.agent)
                )
            return
        handoff = await database_sync_to_async(self._change_store)(frame)
        await self._show(handoff.conversation_id)
        await self._held_now(handoff.conversation_id, handoff.agent_id, handoff.state)
        waiting = await events.handoff_changed(handoff)
        metrics.handoff_changed(action=frame.type.removeprefix("agent."), waiting=waiting)

    def _change_store(
        self, frame: ClaimFrame | ReleaseFrame | CloseFrame | TransferFrame
    ) -> Handoff:
        agent, handoff_id = self.agent, frame.handoff_id
        if isinstance(frame, ClaimFrame):
            return services.handoff_claim(agent=agent, handoff_id=handoff_id)
        if isinstance(frame, ReleaseFrame):
            return services.handoff_release(agent=agent, handoff_id=handoff_id)
        if isinstance(frame, CloseFrame):
            return services.handoff_close(
                agent=agent, handoff_id=handoff_id, resolution=frame.resolution
            )
        to_agent = User.objects.filter(username=frame.to_agent).first()
        if to_agent is None:
            raise ApplicationError(f"No agent {frame.to_agent!r}.")
        return services.handoff_transfer(agent=agent, handoff_id=handoff_id, to_agent=to_agent)

    async def _open(self, frame: OpenFrame) -> None:
        await self._show(frame.conversation_id)  # before reading: nothing falls between
        view = await database_sync_to_async(selectors.conversation_handoff)(frame.conversation_id)
        if view.handoff_id is None:
            raise ApplicationError("Nobody asked for a person in this conversation.")
        messages = await database_sync_to_async(selectors.transcript)(
            frame.conversation_id, after=frame.after_message_id
        )
        await self._send_frame(
            TranscriptFrame(
                id=frame.id,
                conversation_id=frame.conversation_id,
                handoff_id=view.handoff_id,
                state=view.state,
                agent=view.agent,
                mine=view.agent_id == self.agent.pk,
                messages=[conversation_message(m) for m in messages],
            )
        )

    async def _reply(self, frame: ReplyFrame) -> None:
        refusal = text_refusal(frame.text, max_chars=settings.CHAT_MAX_MESSAGE_CHARS)
        if refusal is not None:
            await self._send_frame(
                AgentErrorFrame(code=refusal.code, message=refusal.message, id=frame.id)
            )
            return
        assert self.drafts is not None
        reply = await database_sync_to_async(services.agent_message_store)(
            agent=self.agent, handoff_id=frame.handoff_id, text=frame.text, client_id=frame.id
        )
        await self.drafts.stop(reply.message.conversation_id)  # replied: the draft is done with
        await self._show(reply.message.conversation_id)
        await events.message_sent(reply.message, client_id=frame.id)
        if reply.first_response_s is not None:
            metrics.handoff_first_response(seconds=reply.first_response_s)

    async def _stay_present(self) -> None:
        """Renew this console's presence while it is open (chatapp/handoff/presence.py)."""
        assert self.presence is not None
        while True:
            await asyncio.sleep(RENEW_EVERY_S)
            with contextlib.suppress(Exception):  # the next renewal may work; the lease is long
                await self.presence.here(self.channel_name)

    async def _held_now(self, conversation_id: uuid.UUID, agent_id: int | None, state: str) -> None:
        """Whether this agent holds the conversation now: newly held, the model drafts the
        reply to the customer's last message; no longer held, its draft stops."""
        assert self.drafts is not None
        mine = state == "with_agent" and agent_id == self.agent.pk
        if mine and conversation_id not in self._mine:
            self._mine.add(conversation_id)
            await self._show(conversation_id)  # e.g. transferred here: its messages come here
            await self.drafts.start(conversation_id)
        elif not mine and conversation_id in self._mine:
            self._mine.discard(conversation_id)
            await self.drafts.stop(conversation_id)

    async def _show(self, conversation_id: uuid.UUID) -> None:
        if conversation_id not in self._showing:
            self._showing.add(conversation_id)
            await self.channel_layer.group_add(
                events.conversation_group(conversation_id), self.channel_name
            )

    # ---- events (chatapp/handoff/events.py) ---------------------------------------------

    async def handoff_queue(self, event: dict[str, Any]) -> None:
        rows = await self._queue_send()
        held = {uuid.UUID(row["conversation_id"]) for row in rows if row["mine"]}
        for conversation_id in held - self._mine:  # e.g. transferred to this agent
            await self._held_now(conversation_id, self.agent.pk, "with_agent")
        for conversation_id in self._mine - held:  # released, closed, transferred away
            await self._held_now(conversation_id, None, "bot")

    async def handoff_state(self, event: dict[str, Any]) -> None:
        conversation_id = uuid.UUID(event["conversation_id"])
        if conversation_id in self._showing:
            await self._send_frame(
                AgentHandoffFrame(
                    conversation_id=conversation_id,
                    handoff_id=event["handoff_id"],
                    state=event["state"],
                    agent=event["agent"],
                    mine=event.get("agent_id") == self.agent.pk,
                )
            )

    async def handoff_message(self, event: dict[str, Any]) -> None:
        conversation_id = uuid.UUID(event["conversation_id"])
        client_id = event.get("client_id")
        await self._send_frame(
            AgentMessageFrame(
                id=uuid.UUID(client_id) if client_id else None,
                conversation_id=conversation_id,
                message=conversation_message(event["message"]),
            )
        )
        # the customer wrote: draft the reply (after showing the message: not in its way)
        if event["message"]["role"] == "user" and conversation_id in self._mine:
            assert self.drafts is not None
            await self.drafts.start(conversation_id)

    async def handoff_typing(self, event: dict[str, Any]) -> None:
        conversation_id = uuid.UUID(event["conversation_id"])
        if event.get("by") == "customer" and conversation_id in self._showing:
            await self._send_frame(CustomerTypingFrame(conversation_id=conversation_id))

    async def _queue_send(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = await database_sync_to_async(selectors.queue)(
            agent_id=self.agent.pk
        )
        await self._send_frame(QueueFrame(items=[QueueItem(**row) for row in rows]))
        return rows

    # ---- the worker writing a reply draft (chatapp/realtime/console_drafts.py) ------------

    async def inference_accepted(self, event: dict[str, Any]) -> None:
        await self._worker_event(event)

    async def inference_heartbeat(self, event: dict[str, Any]) -> None:
        pass  # a draft is best effort: no liveness watch (a lost one ends with its lease)

    async def inference_delta(self, event: dict[str, Any]) -> None:
        await self._worker_event(event)

    async def inference_done(self, event: dict[str, Any]) -> None:
        await self._worker_event(event)

    async def inference_error(self, event: dict[str, Any]) -> None:
        await self._worker_event(event)

    async def _worker_event(self, event: dict[str, Any]) -> None:
        if self.drafts is not None:
            await self.drafts.on_worker(event)

    async def _send_frame(self, frame: AnyAgentServerFrame) -> None:
        await self.send(text_data=frame.to_json())
