"""A widget guest asking for a person outside its website's team hours is told when the team is
back and may leave an email address, though an agent's console is open; inside them it waits
for the person as usual.

Through the whole ASGI app with a real worker on a scripted engine, on today's real clock: the
site's hours are set around it (a span three days on is closed now whatever the time).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from chatapp.asgi import application
from chatapp.realtime.guests import GUEST_PROTOCOL
from chatapp.websites import services
from chatapp.websites.hours import DAY_NAMES, time_zone
from chatapp.websites.models import Site
from tests.chatapp.handoff.people import agent_made
from tests.chatapp.websites.sites import HOST, site_made
from tests.conftest import RunningWorker, _session_cookie
from tests.support.sockets import ask, handoff_frame, next_of

pytestmark = pytest.mark.django_db(transaction=True)

ZONE = "Europe/Berlin"
DAY = [name[:3] for name in DAY_NAMES]


def weekday_in(days: int) -> int:
    return (datetime.now(time_zone(ZONE)) + timedelta(days=days)).weekday()


@pytest.fixture
async def desk() -> AsyncIterator[WebsocketCommunicator]:
    """An agent's console, open: somebody of the team is online."""
    dana = await sync_to_async(agent_made)("dana", "Dana")
    cookie = await sync_to_async(_session_cookie)(dana)
    ws = WebsocketCommunicator(
        application,
        "/ws/agent/",
        headers=[(b"origin", b"http://localhost"), (b"cookie", f"sessionid={cookie}".encode())],
    )
    connected, _ = await ws.connect()
    assert connected
    assert (await ws.receive_json_from(timeout=5))["type"] == "agent.queue"
    yield ws
    with contextlib.suppress(Exception):
        await ws.disconnect()


async def guest_asking(site: Site) -> tuple[WebsocketCommunicator, str]:
    """A visitor of `site` on its panel's socket who asked the assistant once."""
    entry = await sync_to_async(services.guest_enter)(site=site, origin=HOST, token=None)
    ws = WebsocketCommunicator(
        application,
        f"/ws/guest/{site.key}/",
        headers=[(b"origin", b"http://localhost")],
        subprotocols=[GUEST_PROTOCOL, entry.token],
    )
    connected, _ = await ws.connect()
    assert connected
    conversation_id = (await ask(ws, "is my order on its way?"))[0]["conversation_id"]
    return ws, conversation_id


async def test_outside_the_team_hours_a_guest_is_told_when_the_team_is_back(
    scripted_worker: RunningWorker, desk: WebsocketCommunicator
) -> None:
    opens = weekday_in(3)  # not today, nor tomorrow should the test run over midnight
    site = await sync_to_async(site_made)(opening_hours=f"{DAY[opens]} 09:00-17:00", time_zone=ZONE)
    guest, conversation_id = await guest_asking(site)

    await guest.send_json_to(handoff_frame(conversation_id))
    state = await next_of(guest, "chat.handoff_state")
    away = (
        f"The team is away until {DAY_NAMES[opens]} 09:00 ({ZONE}). Leave your email address "
        "and we will write back, or keep waiting here."
    )
    assert (state["state"], state["nobody_online"], state["notice"]) == ("waiting", True, away)

    # the panel reconnecting is told the same
    sync = {"type": "chat.sync", "id": str(uuid.uuid4()), "conversation_id": conversation_id}
    await guest.send_json_to(sync)
    again = await next_of(guest, "chat.handoff_state")
    assert (again["nobody_online"], again["notice"]) == (True, away)

    # the address is left as with nobody online, and the console lists it waiting
    await guest.send_json_to(handoff_frame(conversation_id, "contact", email="a@b.example"))
    left = await next_of(guest, "chat.handoff_state")
    assert left["notice"] == "Thank you! The team will write to you at a@b.example."
    queue = await next_of(desk, "agent.queue")
    while not queue["items"][0]["contact_email"]:  # earlier news of the same ask
        queue = await next_of(desk, "agent.queue")
    [item] = queue["items"]
    assert (item["state"], item["site"], item["contact_email"]) == (
        "waiting",
        "Shop",
        "a@b.example",
    )
    await guest.disconnect()


async def test_inside_the_team_hours_a_guest_waits_for_the_person_online(
    scripted_worker: RunningWorker, desk: WebsocketCommunicator
) -> None:
    today, tomorrow = weekday_in(0), weekday_in(1)
    site = await sync_to_async(site_made)(
        opening_hours=f"{DAY[today]},{DAY[tomorrow]} 00:00-24:00", time_zone=ZONE
    )
    guest, conversation_id = await guest_asking(site)

    await guest.send_json_to(handoff_frame(conversation_id))
    state = await next_of(guest, "chat.handoff_state")
    assert (state["state"], state["nobody_online"], state["notice"]) == (
        "waiting",
        False,
        "A person will join shortly. You are next in line.",
    )
    await guest.disconnect()
