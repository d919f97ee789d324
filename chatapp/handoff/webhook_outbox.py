"""The handoff webhook's outbox: each change and message becomes a `WebhookDelivery` row in the
transaction that stores it, so an event is sent if and only if its change committed, even when
the process dies right after; the first attempt starts after commit (webhook_runner).

No `CHAT_HANDOFF_WEBHOOK_URL`: nothing is written.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from chatapp.conversations.models import Message
from chatapp.handoff import webhook_runner
from chatapp.handoff.models import OPEN_STATES, Handoff, WebhookDelivery
from chatapp.handoff.webhook_payloads import (
    Cancelled,
    Claimed,
    Closed,
    ContactLeft,
    MessageBody,
    MessageSent,
    Person,
    Released,
    Requested,
    Transferred,
    WebhookPayload,
    payload_adapter,
)


def webhook_enabled() -> bool:
    return bool(settings.CHAT_HANDOFF_WEBHOOK_URL)


def change_record(handoff: Handoff, *, action: str, actor: User) -> None:
    """A change of the handoff (a states.Action, or "contact"), already saved, by `actor`: call
    inside the change's transaction."""
    if not webhook_enabled():
        return
    _store(CHANGE_PAYLOADS[action](handoff, actor, _envelope(handoff)), handoff_id=handoff.pk)


def _transferred(handoff: Handoff, actor: User, common: dict[str, Any]) -> Transferred:
    assert handoff.agent is not None  # a transfer names who holds it now
    return Transferred(**common, from_agent=person(actor), agent=person(handoff.agent))


# Each change's body, by its action (every states.Action and "contact": tested).
CHANGE_PAYLOADS: dict[str, Callable[[Handoff, User, dict[str, Any]], WebhookPayload]] = {
    "request": lambda h, actor, common: Requested(
        **common, reason=h.reason, customer=person(actor)
    ),
    "cancel": lambda h, actor, common: Cancelled(**common),
    "claim": lambda h, actor, common: Claimed(**common, agent=person(actor)),
    "transfer": _transferred,
    "release": lambda h, actor, common: Released(**common, agent=person(actor)),
    "close": lambda h, actor, common: Closed(
        **common, agent=person(actor), resolution=h.resolution
    ),
    "contact": lambda h, actor, common: ContactLeft(**common, email=h.contact_email),
}


def message_record(message: Message) -> None:
    """A message newly stored while its conversation's handoff is open: call inside its
    transaction (a resent frame that stored nothing new is not recorded again)."""
    if not webhook_enabled():
        return
    handoff = Handoff.objects.filter(
        conversation_id=message.conversation_id, state__in=OPEN_STATES
    ).first()
    if handoff is None:  # the assistant answers this conversation: not the helpdesk's
        return
    by_agent = message.role == Message.Role.AGENT
    sender = message.sender
    body = MessageBody(
        id=message.id,
        author="agent" if by_agent else "customer",
        agent=person(sender) if by_agent and sender is not None else None,
        text=message.content,
        created_at=message.created_at,
    )
    _store(MessageSent(**_envelope(handoff), message=body), handoff_id=handoff.pk)


def deliveries_resend(delivery_ids: Iterable[int]) -> int:
    """Send these deliveries again from the first attempt (an admin's "send again" after the
    receiver was fixed); returns how many."""
    ids = list(delivery_ids)
    with transaction.atomic():
        count = WebhookDelivery.objects.filter(pk__in=ids).update(
            status=WebhookDelivery.Status.PENDING,
            attempts=0,
            next_attempt_at=timezone.now(),
            last_error="",
        )
        transaction.on_commit(lambda: _start(ids))
    return count


def _start(delivery_ids: list[int]) -> None:
    for pk in delivery_ids:
        webhook_runner.delivery_start(pk)


def person(user: User) -> Person:
    return Person(
        id=user.pk,
        username=user.get_username(),
        name=user.get_full_name() or user.get_username(),
    )


def _envelope(handoff: Handoff) -> dict[str, Any]:
    return {
        "id": uuid.uuid4(),
        "occurred_at": timezone.now(),
        "handoff_id": handoff.pk,
        "conversation_id": handoff.conversation_id,
        "state": handoff.state,
    }


def _store(payload: WebhookPayload, *, handoff_id: int) -> None:
    delivery = WebhookDelivery.objects.create(
        delivery_id=payload.id,
        event=payload.event,
        handoff_id=handoff_id,
        payload=payload_adapter.dump_python(payload, mode="json"),
        next_attempt_at=timezone.now(),
    )
    transaction.on_commit(lambda: webhook_runner.delivery_start(delivery.pk))
