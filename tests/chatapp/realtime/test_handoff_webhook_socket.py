"""A slow helpdesk never slows the sockets: with the handoff webhook's receiver taking seconds
per delivery, a customer's ask, their message and an agent's claim are still answered at once
(attempts run off the sockets' shared sync thread), and every event still arrives, in order.

Through the whole ASGI app with a real worker on a scripted engine and a real HTTP receiver.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from pytest_django.fixtures import Settings as SettingsWrapper

from chatapp.asgi import application
from chatapp.handoff import webhook_runner
from chatapp.handoff.models import Handoff
from tests.chatapp.handoff.people import agent_made
from tests.chatapp.handoff.receiver import SECRET, Receiver, running_receiver
from tests.conftest import Connect, RunningWorker, _session_cookie
from tests.support.sockets import (
    ask,
    claim_frame,
    handoff_frame,
    next_of,
    open_socket,
    send_frame,
    state_becomes,
)

pytestmark = pytest.mark.django_db(transaction=True)

# The receiver's time per delivery. The three steps below take well under a second here (a
# few under load); delivered inline they would take three times this.
SLOW_S = 3.0


@pytest.fixture
def slow_receiver(settings: SettingsWrapper) -> Iterator[Receiver]:
    with running_receiver() as receiver:
        receiver.delay_s = SLOW_S
        settings.CHAT_HANDOFF_WEBHOOK_URL = receiver.url
        settings.CHAT_HANDOFF_WEBHOOK_SECRET = SECRET
        settings.CHAT_HANDOFF_WEBHOOK_TIMEOUT_S = 5.0
        yield receiver
        webhook_runner.thread_drained(timeout_s=30)


async def test_the_sockets_answer_at_once_while_the_receiver_is_slow(
    connect: Connect, alice: User, scripted_worker: RunningWorker, slow_receiver: Receiver
) -> None:
    dana = await sync_to_async(agent_made)("dana", "Dana")
    customer = await open_socket(connect, alice)
    conversation_id = (await ask(customer, "my parcel is broken"))[0]["conversation_id"]

    started = time.monotonic()
    await customer.send_json_to(handoff_frame(conversation_id))
    await state_becomes(customer, "waiting")
    await customer.send_json_to(send_frame("it arrived crushed", conversation_id=conversation_id))
    await next_of(customer, "chat.human")
    cookie = await sync_to_async(_session_cookie)(dana)
    desk = WebsocketCommunicator(
        application,
        "/ws/agent/",
        headers=[(b"origin", b"http://localhost"), (b"cookie", f"sessionid={cookie}".encode())],
    )
    assert (await desk.connect())[0]
    handoff = await sync_to_async(Handoff.objects.get)()
    await desk.send_json_to(claim_frame(handoff.pk))
    await state_becomes(customer, "with_agent")
    elapsed = time.monotonic() - started
    # three events stored, none delivered yet: the receiver is still on the first
    assert elapsed < SLOW_S, f"the sockets waited on the webhook ({elapsed:.2f} s)"
    assert slow_receiver.accepted() == []

    slow_receiver.delay_s = 0  # the first delivery is still slow; the rest need not be
    got = await sync_to_async(slow_receiver.wait_accepted)(3, timeout_s=20)
    assert [r.event for r in got] == ["handoff.requested", "handoff.message", "handoff.claimed"]
    assert all(r.signed for r in got)
    await desk.disconnect()
    await customer.disconnect()
