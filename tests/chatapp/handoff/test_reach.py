"""What a waiting customer is told about the team: away outside their website's hours, nobody
online with no console open, and a person soon otherwise; the hours come with the handoff's
row, not a query of their own."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from chatapp.handoff import selectors, services
from chatapp.handoff.reach import as_told
from chatapp.handoff.selectors import HandoffView
from chatapp.websites import services as websites
from chatapp.websites.hours import TeamHours, spans_parsed, time_zone
from tests.chatapp.handoff.people import conversation_made
from tests.chatapp.websites.sites import HOST, site_made

OFFICE = TeamHours(spans_parsed("Mon-Fri 09:00-17:30"), time_zone("Europe/Berlin"))
SATURDAY = datetime(2025, 6, 7, 12, 0, tzinfo=UTC)
WEDNESDAY = datetime(2025, 6, 4, 12, 0, tzinfo=UTC)
AWAY = (
    "The team is away until Monday 09:00 (Europe/Berlin). Leave your email address and we "
    "will write back, or keep waiting here."
)
NOBODY = (
    "Nobody from the team is online right now. Leave your email address and we will write "
    "back, or keep waiting here."
)


def waiting(hours: TeamHours | None, contact_email: str = "") -> HandoffView:
    return HandoffView(
        uuid.uuid4(), 1, "waiting", 1, None, contact_email=contact_email, team_hours=hours
    )


@pytest.mark.parametrize(
    ("hours", "consoles_open", "now", "nobody_online", "notice"),
    [
        (OFFICE, True, SATURDAY, True, AWAY),  # away, though a console is open
        (OFFICE, False, SATURDAY, True, AWAY),
        (OFFICE, True, WEDNESDAY, False, "A person will join shortly. You are next in line."),
        (OFFICE, False, WEDNESDAY, True, NOBODY),
        (None, True, SATURDAY, False, "A person will join shortly. You are next in line."),
        (None, False, SATURDAY, True, NOBODY),  # not from a website: only presence counts
    ],
)
def test_a_waiting_customer_is_told_whether_a_person_can_come(
    hours: TeamHours | None, consoles_open: bool, now: datetime, nobody_online: bool, notice: str
) -> None:
    told = as_told(waiting(hours), consoles_open=consoles_open, now=now)
    assert (told.nobody_online, told.notice) == (nobody_online, notice)


def test_an_address_left_is_thanked_for_outside_hours_too() -> None:
    told = as_told(waiting(OFFICE, contact_email="a@b.example"), consoles_open=True, now=SATURDAY)
    assert told.notice == "Thank you! The team will write to you at a@b.example."


def test_only_a_waiting_customer_is_told() -> None:
    held = HandoffView(uuid.uuid4(), 1, "with_agent", None, "Dana", team_hours=OFFICE)
    told = as_told(held, consoles_open=False, now=SATURDAY)
    assert (told.nobody_online, told.away_until, told.notice) == (
        False,
        "",
        "Dana joined the conversation.",
    )


@pytest.mark.django_db
def test_the_hours_come_with_the_waiting_line_in_one_query() -> None:
    site = site_made(opening_hours="Mon-Fri 09:00-17:30", time_zone="Europe/Berlin")
    guest = websites.guest_enter(site=site, origin=HOST, token=None).guest
    staff = User.objects.create_user("carol", password="pw-carol-123")
    for customer in (guest.user, staff):
        conversation = conversation_made(customer)
        services.handoff_request(customer=customer, conversation_id=conversation.id)

    with CaptureQueriesContext(connection) as queries:
        from_site, from_staff = selectors.waiting_views()
    assert len(queries) == 1
    assert from_site.team_hours == site.team_hours
    assert from_staff.team_hours is None
    view = selectors.conversation_handoff(from_site.conversation_id)
    assert view.team_hours == site.team_hours
