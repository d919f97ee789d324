"""Tell the sockets a handoff concerns what changed (channel layer groups; across web
processes with the Redis layer). The change is stored first: a socket that misses an event
(reconnecting) gets it from the database with `chat.sync` / `agent.open`.

- `conversation_group(id)`: every socket showing the conversation, the customer's tabs and
  the agents', gets its messages and who answers it now.
- AGENTS: every agent console, told that the queue changed (each reads it again).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.utils import timezone

from chatapp.conversations.models import Message
from chatapp.handoff import reach, selectors
from chatapp.handoff.models import Handoff
from chatapp.handoff.presence import Presence

AGENTS = "handoff.agents"


def conversation_group(conversation_id: uuid.UUID) -> str:
    return f"handoff.conversation.{conversation_id.hex}"


def state_event(view: selectors.HandoffView) -> dict[str, Any]:
    """`view` as the sockets are told it (its notice in words)."""
    return {
        "type": "handoff.state",
        "conversation_id": str(view.conversation_id),
        "handoff_id": view.handoff_id,
        "state": view.state,
        "notice": view.notice,
        "position": view.position,
        "agent": view.agent,
        "agent_id": view.agent_id,  # for the consoles: whose it is
        "nobody_online": view.nobody_online,
        "contact_email": view.contact_email or None,
    }


async def message_sent(message: Message, *, client_id: uuid.UUID | None) -> None:
    """A person's (or the waiting customer's) message, stored: to every socket showing it."""
    await _send(
        conversation_group(message.conversation_id),
        {
            "type": "handoff.message",
            "conversation_id": str(message.conversation_id),
            "client_id": None if client_id is None else str(client_id),
            "message": await database_sync_to_async(selectors.message_item)(message),
        },
    )
    await _send(AGENTS, {"type": "handoff.queue"})  # its last message changed


async def handoff_changed(handoff: Handoff) -> int:
    """Who answers the conversation changed: its sockets are told, every waiting customer
    gets their new place in line, and the consoles read the queue again. Returns how many
    customers wait now."""
    changed, waiting = await database_sync_to_async(_views_to_tell)(handoff)
    others = (v for v in waiting if v.handoff_id != handoff.pk)
    for view in await as_told([changed, *others]):
        await _send(conversation_group(view.conversation_id), state_event(view))
    await _send(AGENTS, {"type": "handoff.queue"})
    return len(waiting)


async def consoles_changed() -> None:
    """An agent console opened or closed: waiting customers are told whether anybody of the
    team is online."""
    waiting = await database_sync_to_async(selectors.waiting_views)()
    for view in await as_told(waiting):
        await _send(conversation_group(view.conversation_id), state_event(view))


async def as_told(views: Iterable[selectors.HandoffView]) -> list[selectors.HandoffView]:
    """`views` with whether their waiting customers can expect a person now (their site's
    team hours, the consoles open on every web process): `chatapp/handoff/reach.py`."""
    consoles_open = not await nobody_online()
    now = timezone.now()
    return [reach.as_told(v, consoles_open=consoles_open, now=now) for v in views]


async def nobody_online() -> bool:
    """No agent console is open on any web process."""
    presence = Presence(settings.REDIS_URL)
    try:
        return await presence.consoles_open() == 0
    finally:
        await presence.aclose()


def _views_to_tell(
    handoff: Handoff,
) -> tuple[selectors.HandoffView, list[selectors.HandoffView]]:
    return selectors.conversation_handoff(handoff.conversation_id), selectors.waiting_views()


async def _send(group: str, event: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is not None:
        await layer.group_send(group, event)


async def typing(conversation_id: uuid.UUID, *, by: str, agent: str | None = None) -> None:
    """Someone is writing in the conversation: `by` "customer" or "agent" (with the agent's
    first name). Not stored: a missed one costs nothing."""
    await _send(
        conversation_group(conversation_id),
        {
            "type": "handoff.typing",
            "conversation_id": str(conversation_id),
            "by": by,
            "agent": agent,
        },
    )
