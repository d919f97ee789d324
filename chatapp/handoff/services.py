"""Writes for handoff: a customer asks for a person or stops waiting; an agent claims, transfers,
releases or closes; either side writes a message while a person holds the conversation.

Every change goes through `states.after` and is stored with an event (who, when) in one
transaction, with the webhook's outbox row when it is on (`webhook_outbox`). Claiming is one
conditional UPDATE: of two agents claiming at once, exactly one row changes, so exactly one
wins and the other is told who did.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.utils import timezone

from chatapp.conversations.models import Conversation, Message
from chatapp.errors import ApplicationError, ConflictError, NotFoundError
from chatapp.handoff import states, webhook_outbox
from chatapp.handoff.agents import is_agent
from chatapp.handoff.models import OPEN_STATES, Handoff, HandoffEvent


class NotAgent(ApplicationError):
    code = "forbidden"

    def __init__(self) -> None:
        super().__init__("Only agents may do this.")


class ClaimLost(ConflictError):
    """Another agent claimed the conversation first."""

    def __init__(self, holder: str | None) -> None:
        who = holder or "Another agent"
        super().__init__(f"{who} already took this conversation.")
        self.holder = holder


@dataclass(frozen=True, slots=True)
class AgentReply:
    message: Message
    # the person's first message since the customer asked: how long the customer waited
    first_response_s: float | None


def _after(handoff: Handoff | None, action: states.Action) -> states.State:
    """The state `action` leads the handoff to (None: nobody asked, the assistant answers), or
    ConflictError saying why not."""
    current: states.State = "bot" if handoff is None else handoff.state  # type: ignore[assignment]
    return _refused(states.after(current, action))


def _refused(result: states.State | states.NotAllowed) -> states.State:
    if isinstance(result, states.NotAllowed):
        raise ConflictError(result.message)
    return result


def _event(handoff: Handoff, action: str, actor: User, detail: str = "") -> None:
    """A change (a states.Action, or "contact": an email address left) with who and when."""
    HandoffEvent.objects.create(
        handoff=handoff, action=action, state=handoff.state, actor=actor, detail=detail[:500]
    )
    webhook_outbox.change_record(handoff, action=action, actor=actor)


def _owned(customer: User, conversation_id: uuid.UUID) -> Conversation:
    conversation = (
        Conversation.objects.select_for_update().filter(id=conversation_id, owner=customer).first()
    )
    if conversation is None:
        raise NotFoundError("No such conversation.")
    return conversation


def open_handoff(conversation_id: uuid.UUID) -> Handoff | None:
    return (
        Handoff.objects.select_related("agent")
        .filter(conversation_id=conversation_id, state__in=OPEN_STATES)
        .first()
    )


@dataclass(frozen=True, slots=True)
class Asked:
    handoff: Handoff
    new: bool  # False: the customer had asked already (a double click, a second tab)


def handoff_request(
    *, customer: User, conversation_id: uuid.UUID, reason: str = Handoff.Reason.ASKED
) -> Asked:
    """The customer asks for a person. Asking again while waiting or held returns the open
    handoff (a double click, a second tab): one ask, one place in line."""
    with transaction.atomic():
        _owned(customer, conversation_id)  # locks the conversation: asks are one at a time
        existing = open_handoff(conversation_id)
        if existing is not None:
            return Asked(existing, new=False)
        handoff = Handoff.objects.create(
            conversation_id=conversation_id,
            state=_after(None, "request"),
            reason=reason,
        )
        _event(handoff, "request", customer)
    return Asked(handoff, new=True)


def handoff_request_in_words(
    *, customer: User, conversation_id: uuid.UUID, text: str, client_id: uuid.UUID
) -> tuple[Asked, Message]:
    """The customer asked for a person in words ("I want a human"): the ask made as the button
    makes it, and their message stored for the person to read (not answered by the assistant),
    in one transaction."""
    with transaction.atomic():
        asked = handoff_request(
            customer=customer, conversation_id=conversation_id, reason=Handoff.Reason.TYPED
        )
        message = _message_store(
            conversation_id=conversation_id,
            sender=customer,
            role=Message.Role.USER,
            text=text,
            client_id=client_id,
        )
    return asked, message


def handoff_cancel(*, customer: User, conversation_id: uuid.UUID) -> Handoff:
    """The customer stops waiting: back to the assistant."""
    with transaction.atomic():
        _owned(customer, conversation_id)
        handoff = open_handoff(conversation_id)
        state = _after(handoff, "cancel")  # refused when nobody is asked for
        assert handoff is not None
        handoff.state = state
        handoff.ended_at = timezone.now()
        handoff.save(update_fields=["state", "ended_at"])
        _event(handoff, "cancel", customer)
    return handoff


def handoff_contact(*, customer: User, conversation_id: uuid.UUID, email: str) -> Handoff:
    """While waiting (nobody online), the customer leaves an email address to be written to."""
    email = email.strip()
    try:
        validate_email(email)
    except ValidationError:
        raise ApplicationError("That does not look like an email address.") from None
    with transaction.atomic():
        _owned(customer, conversation_id)
        handoff = open_handoff(conversation_id)
        if handoff is None or handoff.state != "waiting":
            raise ConflictError("Nobody is being waited for.")
        handoff.contact_email = email
        handoff.save(update_fields=["contact_email"])
        _event(handoff, "contact", customer, detail=email)
    return handoff


def handoff_claim(*, agent: User, handoff_id: int) -> Handoff:
    """The agent takes a waiting conversation; ClaimLost if another agent was first."""
    if not is_agent(agent):
        raise NotAgent()
    with transaction.atomic():
        won = Handoff.objects.filter(id=handoff_id, state="waiting").update(
            state="with_agent", agent=agent, claimed_at=timezone.now()
        )
        handoff = Handoff.objects.select_related("agent").filter(id=handoff_id).first()
        if handoff is None:
            raise NotFoundError("No such handoff.")
        if not won:
            if handoff.state == "with_agent" and handoff.agent is not None:
                raise ClaimLost(_name(handoff.agent))
            _after(handoff, "claim")  # says why: closed, back with the assistant
            raise ClaimLost(None)  # it changed hands between the update and the read
        _event(handoff, "claim", agent)
    return handoff


def _held(agent: User, handoff_id: int) -> Handoff:
    """The handoff, locked, unless another agent holds it."""
    if not is_agent(agent):
        raise NotAgent()
    # `of`: lock the handoff row only (PostgreSQL refuses FOR UPDATE on the nullable side of
    # the agent join)
    handoff = (
        Handoff.objects.select_for_update(of=("self",))
        .select_related("agent")
        .filter(id=handoff_id)
        .first()
    )
    if handoff is None:
        raise NotFoundError("No such handoff.")
    if handoff.state == "with_agent" and handoff.agent_id != agent.pk:
        raise ConflictError(f"{_name(handoff.agent)} holds this conversation.")
    return handoff


def handoff_transfer(*, agent: User, handoff_id: int, to_agent: User) -> Handoff:
    if not is_agent(to_agent):
        raise ConflictError(f"{_name(to_agent)} is not an agent.")
    with transaction.atomic():
        handoff = _held(agent, handoff_id)
        handoff.state = _after(handoff, "transfer")
        handoff.agent = to_agent
        handoff.save(update_fields=["state", "agent"])
        _event(handoff, "transfer", agent, detail=_name(to_agent))
    return handoff


def handoff_release(*, agent: User, handoff_id: int) -> Handoff:
    """Back to the assistant: it answers the next question, with the whole conversation."""
    return _end(agent, handoff_id, "release", "")


def handoff_close(*, agent: User, handoff_id: int, resolution: str) -> Handoff:
    return _end(agent, handoff_id, "close", resolution.strip())


def _end(agent: User, handoff_id: int, action: states.Action, resolution: str) -> Handoff:
    with transaction.atomic():
        handoff = _held(agent, handoff_id)
        handoff.state = _after(handoff, action)
        handoff.ended_at = timezone.now()
        handoff.resolution = resolution
        handoff.save(update_fields=["state", "ended_at", "resolution"])
        _event(handoff, action, agent, detail=resolution)
    return handoff


def agent_message_store(
    *, agent: User, handoff_id: int, text: str, client_id: uuid.UUID
) -> AgentReply:
    """The holding agent's reply, stored before it is delivered; the same client id again
    returns the stored message (a resend after a reconnect is not doubled)."""
    with transaction.atomic():
        handoff = _held(agent, handoff_id)
        if handoff.state != "with_agent":
            raise ConflictError("Take the conversation before replying.")
        answered_before = Message.objects.filter(
            conversation_id=handoff.conversation_id,
            role=Message.Role.AGENT,
            created_at__gte=handoff.requested_at,
        ).exists()
        message = _message_store(
            conversation_id=handoff.conversation_id,
            sender=agent,
            role=Message.Role.AGENT,
            text=text,
            client_id=client_id,
        )
    first = None
    if not answered_before:
        first = (message.created_at - handoff.requested_at).total_seconds()
    return AgentReply(message, first)


def customer_message_store(
    *, customer: User, conversation_id: uuid.UUID, text: str, client_id: uuid.UUID
) -> Message | None:
    """The customer's message while a person is asked for or holds the conversation: stored,
    not answered by the assistant. None when the assistant answers this conversation."""
    with transaction.atomic():
        _owned(customer, conversation_id)
        if open_handoff(conversation_id) is None:
            return None
        return _message_store(
            conversation_id=conversation_id,
            sender=customer,
            role=Message.Role.USER,
            text=text,
            client_id=client_id,
        )


def _message_store(
    *, conversation_id: uuid.UUID, sender: User, role: str, text: str, client_id: uuid.UUID
) -> Message:
    existing = Message.objects.filter(sender=sender, client_message_id=client_id).first()
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            message = Message.objects.create(
                conversation_id=conversation_id,
                role=role,
                content=text,
                sender=sender,
                client_message_id=client_id,
            )
    except IntegrityError:  # the same frame, handled at once by another process
        return Message.objects.get(sender=sender, client_message_id=client_id)
    Conversation.objects.filter(id=conversation_id).update(updated_at=timezone.now())
    webhook_outbox.message_record(message)  # new only: a resend is not sent twice
    return message


def _name(user: User | None) -> str:
    if user is None:
        return "Another agent"
    return user.get_full_name() or user.get_username()
