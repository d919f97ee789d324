"""A customer's side of handoff on the chat socket: asking for a person (`chat.handoff`),
following a conversation (`chat.sync`), and sends in a conversation a person is asked for or
holds, which are stored and passed on instead of being answered by the assistant.

The socket follows (joins the channel group of) each conversation it asks in, asks a person
for, or syncs, so the agent's messages and changes of who answers reach every tab of the
customer, on any web process.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from channels.db import database_sync_to_async
from django.contrib.auth.models import User

from chatapp.conversations.models import Conversation
from chatapp.errors import ApplicationError
from chatapp.handoff import events, intents, selectors, services
from chatapp.metrics import recording as metrics
from chatapp.realtime.schemas import (
    AgentTypingFrame,
    AnyServerFrame,
    ErrorFrame,
    HandoffFrame,
    HandoffStateFrame,
    HumanMessageFrame,
    SendFrame,
    SyncFrame,
    TypingFrame,
    conversation_message,
)

HELD = "A person of the team is handling this conversation: write to them instead."
Send = Callable[[AnyServerFrame], Awaitable[None]]
Refuse = Callable[[ErrorFrame], Awaitable[None]]


class CustomerHandoff:
    def __init__(self, *, user: User, layer: Any, channel_name: str, send: Send, refuse: Refuse):
        self._user = user
        self._layer = layer
        self._channel = channel_name
        self._send = send
        self._refuse = refuse
        self._following: set[uuid.UUID] = set()

    async def handoff(self, frame: HandoffFrame) -> None:
        changed = True
        try:
            if frame.action == "request":
                asked = await database_sync_to_async(services.handoff_request)(
                    customer=self._user,
                    conversation_id=frame.conversation_id,
                    reason=frame.reason,
                )
                handoff, changed = asked.handoff, asked.new
            elif frame.action == "contact":
                assert frame.email is not None  # the frame's schema
                handoff = await database_sync_to_async(services.handoff_contact)(
                    customer=self._user, conversation_id=frame.conversation_id, email=frame.email
                )
                changed = False  # who answers did not change
            else:
                handoff = await database_sync_to_async(services.handoff_cancel)(
                    customer=self._user, conversation_id=frame.conversation_id
                )
        except ApplicationError as exc:
            await self._refuse(ErrorFrame(code=_code(exc), message=exc.message, id=frame.id))
            return
        await self._follow(frame.conversation_id)
        waiting = await events.handoff_changed(handoff)
        if changed:  # asking again is the same ask
            metrics.handoff_changed(action=frame.action, waiting=waiting)

    async def sync(self, frame: SyncFrame) -> None:
        owned = await database_sync_to_async(
            Conversation.objects.filter(id=frame.conversation_id, owner=self._user).exists
        )()
        if not owned:
            await self._refuse(
                ErrorFrame(code="not_found", message="No such conversation.", id=frame.id)
            )
            return
        await self._follow(frame.conversation_id)  # before reading: nothing falls between
        view = await database_sync_to_async(selectors.conversation_handoff)(frame.conversation_id)
        if view.state == "waiting":
            [view] = await events.as_told([view])
        await self._send(_state_frame(events.state_event(view)))
        missed = await database_sync_to_async(selectors.transcript)(
            frame.conversation_id, after=frame.after_message_id
        )
        for item in missed:
            if item["role"] == "agent" or (item["role"] == "user" and item["held"]):
                await self._send(
                    HumanMessageFrame(
                        conversation_id=frame.conversation_id, message=conversation_message(item)
                    )
                )

    async def took(self, frame: SendFrame) -> bool:
        """Store a send in a conversation a person is asked for or holds, and pass it on
        (True); False: the assistant answers it."""
        if frame.conversation_id is None or frame.text is None:
            return False
        # one indexed read on every follow-up; the locking write only when a person is involved
        involved = await database_sync_to_async(selectors.person_involved)(frame.conversation_id)
        if not involved:
            if not intents.asks_for_person(frame.text):  # inline: a few hundredths of a ms
                return False
            return await self._asked_in_words(frame.conversation_id, frame.text, frame.id)
        try:
            message = await database_sync_to_async(services.customer_message_store)(
                customer=self._user,
                conversation_id=frame.conversation_id,
                text=frame.text,
                client_id=frame.id,
            )
        except ApplicationError:
            return False  # not the customer's: the send path says so in its own words
        if message is None:
            return False
        await self._follow(frame.conversation_id)
        await events.message_sent(message, client_id=frame.id)
        return True

    async def _asked_in_words(
        self, conversation_id: uuid.UUID, text: str, client_id: uuid.UUID
    ) -> bool:
        """A follow-up asking for a person ("I want a human", `intents.PERSON_ASKED`): the ask
        made as the button makes it, the message passed to the person (True); the assistant
        does not answer it."""
        try:
            asked, message = await database_sync_to_async(services.handoff_request_in_words)(
                customer=self._user, conversation_id=conversation_id, text=text, client_id=client_id
            )
        except ApplicationError:
            return False  # not the customer's: the send path says so in its own words
        await self._follow(conversation_id)
        await events.message_sent(message, client_id=client_id)
        waiting = await events.handoff_changed(asked.handoff)
        if asked.new:
            metrics.handoff_changed(action="request", waiting=waiting)
        return True

    async def refused_while_held(self, message_id: uuid.UUID, *, client_id: uuid.UUID) -> bool:
        """A regenerate or an edit would have the assistant answer where a person is asked for
        or holds the conversation: refused (True), the customer told why."""
        if not await database_sync_to_async(selectors.person_involved_in)(message_id):
            return False
        await self._refuse(ErrorFrame(code="busy", message=HELD, id=client_id))
        return True

    async def typing(self, frame: TypingFrame) -> None:
        """Passed on to the person, for a conversation this socket follows (its own: checked
        when it started following) and nothing else; never stored."""
        if frame.conversation_id in self._following:
            await events.typing(frame.conversation_id, by="customer")

    async def on_typing(self, event: dict[str, Any]) -> None:
        if event.get("by") == "agent":
            await self._send(
                AgentTypingFrame(
                    conversation_id=uuid.UUID(event["conversation_id"]),
                    agent=event.get("agent") or "A person",
                )
            )

    async def detach(self) -> None:
        for conversation_id in self._following:
            await self._layer.group_discard(
                events.conversation_group(conversation_id), self._channel
            )

    async def on_state(self, event: dict[str, Any]) -> None:
        await self._send(_state_frame(event))

    async def on_message(self, event: dict[str, Any]) -> None:
        client_id = event.get("client_id")
        await self._send(
            HumanMessageFrame(
                id=uuid.UUID(client_id) if client_id else None,
                conversation_id=uuid.UUID(event["conversation_id"]),
                message=conversation_message(event["message"]),
            )
        )

    async def _follow(self, conversation_id: uuid.UUID) -> None:
        if conversation_id not in self._following:
            self._following.add(conversation_id)
            await self._layer.group_add(events.conversation_group(conversation_id), self._channel)


def _state_frame(event: dict[str, Any]) -> HandoffStateFrame:
    return HandoffStateFrame(
        conversation_id=uuid.UUID(str(event["conversation_id"])),
        state=event["state"],
        notice=event["notice"],
        position=event["position"],
        agent=event["agent"],
        nobody_online=bool(event.get("nobody_online")),
        contact_email=event.get("contact_email"),
    )


def _code(exc: ApplicationError) -> Any:
    return exc.code if exc.code in ("not_found", "busy", "invalid", "forbidden") else "invalid"
