"""Reads for handoff: a conversation's state as its customer sees it, and the agents' queue."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.db.models import Exists, OuterRef, Q, Subquery
from django.utils import timezone

from chatapp.conversations.models import Message
from chatapp.conversations.selectors import person_name
from chatapp.handoff import states
from chatapp.handoff.models import OPEN_STATES, Handoff
from chatapp.websites.hours import TeamHours

# Selected with a handoff: its conversation's website (through the guest), so the team hours
# come in the same query.
_WITH_SITE = "conversation__owner__guest__site"


@dataclass(frozen=True, slots=True)
class HandoffView:
    conversation_id: uuid.UUID
    handoff_id: int | None
    state: states.State
    position: int | None  # in line, 1 = next; only while waiting
    agent: str | None  # the person holding it
    agent_id: int | None = None
    contact_email: str = ""  # left while nobody was online
    # waiting, and no person will come soon: no agent console is open
    # (chatapp/handoff/presence.py) or the team is away (chatapp/handoff/reach.py)
    nobody_online: bool = False
    team_hours: TeamHours | None = None  # its website's; None: not from a website
    away_until: str = ""  # outside the team hours: when the team is back, in words

    @property
    def notice(self) -> str:
        return states.notice(
            self.state,
            position=self.position,
            agent=self.agent,
            nobody_online=self.nobody_online,
            contact_email=self.contact_email,
            away_until=self.away_until,
        )


def agent_name(handoff: Handoff) -> str | None:
    return None if handoff.agent is None else person_name(handoff.agent)


def team_hours(handoff: Handoff) -> TeamHours | None:
    """The hours of the website the conversation came from (None: not from a website). Read
    from the rows selected with the handoff (`_WITH_SITE`): no query of its own."""
    guest = getattr(handoff.conversation.owner, "guest", None)  # None: not a guest
    return None if guest is None else guest.site.team_hours


def handoff_view(handoff: Handoff) -> HandoffView:
    position = None
    if handoff.state == "waiting":  # in the queue's order: by time asked, then by id
        at = handoff.requested_at
        position = Handoff.objects.filter(
            Q(requested_at__lt=at) | Q(requested_at=at, id__lte=handoff.pk), state="waiting"
        ).count()
    return HandoffView(
        conversation_id=handoff.conversation_id,
        handoff_id=handoff.pk,
        state=handoff.state,  # type: ignore[arg-type]
        position=position,
        agent=agent_name(handoff),
        agent_id=handoff.agent_id if handoff.state == "with_agent" else None,
        contact_email=handoff.contact_email,
        team_hours=team_hours(handoff),
    )


def waiting_views() -> list[HandoffView]:
    """Every waiting customer's view, in line order (one query)."""
    waiting = (
        Handoff.objects.filter(state="waiting")
        .select_related(_WITH_SITE)
        .order_by("requested_at", "id")
    )
    return [
        HandoffView(
            h.conversation_id,
            h.pk,
            "waiting",
            place,
            None,
            contact_email=h.contact_email,
            team_hours=team_hours(h),
        )
        for place, h in enumerate(waiting, start=1)
    ]


def conversation_handoff(conversation_id: uuid.UUID) -> HandoffView:
    """Who answers the conversation now (the assistant when nobody was asked for)."""
    latest = (
        Handoff.objects.select_related("agent", _WITH_SITE)
        .filter(conversation_id=conversation_id)
        .order_by("-requested_at", "-id")
        .first()
    )
    if latest is None:
        return HandoffView(conversation_id, None, "bot", None, None)
    return handoff_view(latest)


def person_involved(conversation_id: uuid.UUID) -> bool:
    """Whether a person is asked for or holds the conversation (the assistant is silent)."""
    return Handoff.objects.filter(conversation_id=conversation_id, state__in=OPEN_STATES).exists()


def person_involved_in(message_id: uuid.UUID) -> bool:
    """Whether a person is asked for or holds the conversation of message `message_id`."""
    return Handoff.objects.filter(
        conversation__messages__id=message_id, state__in=OPEN_STATES
    ).exists()


def queue(*, agent_id: int | None = None) -> list[dict[str, Any]]:
    """The open handoffs for the console: waiting ones by how long they have waited (longest
    first), then those with a person; each with its site, first question and last message."""
    mine = Message.objects.filter(conversation=OuterRef("conversation_id"))
    rows = (
        Handoff.objects.filter(state__in=OPEN_STATES)
        .select_related("agent", "conversation__owner__guest__site")
        .annotate(
            first_question=Subquery(
                mine.filter(role=Message.Role.USER).order_by("created_at").values("content")[:1]
            ),
            last_message=Subquery(mine.order_by("-created_at").values("content")[:1]),
        )
        .order_by("requested_at", "id")
    )
    now = timezone.now()
    handoffs = list(rows)
    near = near_entries({h.conversation_id for h in handoffs})
    out: list[dict[str, Any]] = []
    for h in handoffs:
        owner = h.conversation.owner
        guest = getattr(owner, "guest", None)
        out.append(
            {
                "handoff_id": h.pk,
                "conversation_id": str(h.conversation_id),
                "state": h.state,
                "waited_s": round((now - h.requested_at).total_seconds(), 1),
                "site": guest.site.name if guest is not None else None,
                "customer": "Website visitor"
                if guest is not None
                else h.conversation.owner.get_username(),
                "first_question": (getattr(h, "first_question", None) or "")[:200],
                "last_message": (getattr(h, "last_message", None) or "")[:200],
                "agent": agent_name(h),
                "mine": agent_id is not None and h.agent_id == agent_id,
                "contact_email": h.contact_email or None,
                "reason": h.reason,
                "near_entries": near.get(h.conversation_id, []),
            }
        )
    return out


NEAR_ENTRIES_SHOWN = 3


def near_entries(conversation_ids: set[uuid.UUID]) -> dict[uuid.UUID, list[str]]:
    """The FAQ entries (their questions) each conversation's questions came close to, were
    answered from, or were offered ("Did you mean ...?"), oldest first, each once, at most
    NEAR_ENTRIES_SHOWN: where the person may find the answer. One query for all."""
    rows = (
        Message.objects.filter(conversation_id__in=conversation_ids, role=Message.Role.ASSISTANT)
        .filter(
            Q(faq_entry__isnull=False) | Q(faq_near_entry__isnull=False) | ~Q(suggested_entries=[])
        )
        .order_by("created_at")
        .values_list(
            "conversation_id",
            "faq_entry__question",
            "faq_near_entry__question",
            "suggested_entries",
        )
    )
    found: dict[uuid.UUID, list[str]] = {}
    for conversation_id, answered, near, suggested in rows:
        questions = found.setdefault(conversation_id, [])
        for question in (answered, near, *(s.get("question") for s in suggested or [])):
            if question and question not in questions and len(questions) < NEAR_ENTRIES_SHOWN:
                questions.append(question)
    return found


def transcript(
    conversation_id: uuid.UUID, *, after: uuid.UUID | None = None
) -> list[dict[str, Any]]:
    """The conversation's messages (those after message `after`, when given) as both sides
    render them: stored order, each once."""
    messages = (
        Message.objects.filter(conversation_id=conversation_id)
        .select_related("sender")
        .annotate(answered=Exists(Message.objects.filter(reply_to=OuterRef("pk"))))
    )
    if after is not None:
        pivot = Message.objects.filter(id=after, conversation_id=conversation_id).first()
        if pivot is not None:
            messages = messages.filter(created_at__gt=pivot.created_at)
    return [
        message_item(m, held=not getattr(m, "answered", True))
        for m in messages.order_by("created_at", "id")
    ]


def message_item(m: Message, *, held: bool = True) -> dict[str, Any]:
    """`held`: a customer's message no assistant answer replies to (written while a person
    was asked for or held the conversation)."""
    sender = None
    if m.role == Message.Role.AGENT and m.sender is not None:
        sender = person_name(m.sender)
    return {
        "id": str(m.id),
        "role": m.role,
        "content": m.content,
        "status": m.status,
        "source": m.source,
        "sender": sender,
        "created_at": m.created_at.isoformat(),
        "held": held and m.role == Message.Role.USER,
    }
