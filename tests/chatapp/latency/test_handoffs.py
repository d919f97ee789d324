"""The latency report's handoff numbers, on asks made through the handoff services."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User

from chatapp.conversations.models import Message
from chatapp.handoff import services
from chatapp.handoff.models import Handoff
from chatapp.latency.handoffs import first_response_waits
from chatapp.latency.selectors import WINDOWS, latency_report
from tests.chatapp.handoff.people import agent_made, conversation_made

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def asked(customer: User, *, at: datetime) -> Handoff:
    conversation = conversation_made(customer)
    Message.objects.filter(conversation=conversation).update(finished_at=at)
    handoff = services.handoff_request(customer=customer, conversation_id=conversation.id).handoff
    Handoff.objects.filter(pk=handoff.pk).update(requested_at=at)
    return Handoff.objects.get(pk=handoff.pk)


def replied(agent: User, handoff: Handoff, *, at: datetime) -> None:
    reply = services.agent_message_store(
        agent=agent, handoff_id=handoff.pk, text="Hello!", client_id=uuid.uuid4()
    )
    Message.objects.filter(pk=reply.message.pk).update(created_at=at)


def test_asks_rate_first_human_reply_and_how_asks_ended() -> None:
    dana = agent_made("dana", "Dana")
    customers = [User.objects.create_user(f"c{i}") for i in range(5)]
    # five conversations answered; three ask for a person
    quick, slow, unanswered = (asked(c, at=T0) for c in customers[:3])
    for customer in customers[3:]:
        conversation = conversation_made(customer)
        Message.objects.filter(conversation=conversation).update(finished_at=T0)
    for handoff in (quick, slow):
        services.handoff_claim(agent=dana, handoff_id=handoff.pk)
    replied(dana, quick, at=T0 + timedelta(seconds=20))
    replied(dana, quick, at=T0 + timedelta(seconds=90))  # not the first: not counted
    replied(dana, slow, at=T0 + timedelta(seconds=300))
    services.handoff_close(agent=dana, handoff_id=quick.pk, resolution="Refund sent")
    services.handoff_release(agent=dana, handoff_id=slow.pk)

    report = latency_report(window=WINDOWS["1h"], now=T0 + timedelta(minutes=10))

    h = report.handoffs
    assert (h.asks, h.conversations, h.rate, h.waiting_now) == (3, 5, 0.6, 1)
    assert (h.first_response_p50_s, h.first_response_p95_s, h.first_responses) == (20, 300, 2)
    assert h.outcomes == {"close": 1, "release": 1, "cancel": 0}
    assert h.resolutions == [("Refund sent", 1)]
    assert report.as_json()["handoffs"]["first_response_s"] == {"p50": 20, "p95": 300, "count": 2}
    assert unanswered.state == "waiting"


def test_asks_outside_the_window_are_not_counted() -> None:
    asked(User.objects.create_user("early"), at=T0 - timedelta(hours=2))
    report = latency_report(window=WINDOWS["1h"], now=T0)
    assert (report.handoffs.asks, report.handoffs.rate) == (0, None)
    assert report.handoffs.waiting_now == 1  # still waiting: "now" is not a window


def test_a_reply_belongs_to_the_ask_it_came_during() -> None:
    minute = timedelta(minutes=1)
    asks = [
        (1, "c", T0, T0 + minute, ""),  # cancelled before anybody replied
        (2, "c", T0 + 2 * minute, None, ""),  # asked again, replied after 30 s
    ]
    replies = {"c": [T0 + 2 * minute + timedelta(seconds=30)]}
    assert first_response_waits(asks, replies) == [30.0]
