"""The widget's socket: a guest chats with its token; a bad token gets a clear close, no data.

Through the whole ASGI app (origin check, routing) with a real worker on a scripted engine.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User

from chatapp.asgi import application
from chatapp.conversations.models import Conversation, Message
from chatapp.prompts.models import PromptTemplateVersion
from chatapp.realtime.guests import GUEST_PROTOCOL
from chatapp.websites import services
from chatapp.websites.models import Site
from tests.chatapp.prompts.factories import SYSTEM
from tests.chatapp.websites.sites import HOST, site_made
from tests.conftest import Connect, RunningWorker
from tests.support.sockets import (
    answer_text,
    ask,
    draft_frame,
    open_socket,
    receive_until,
    resume_frame,
    send_frame,
)
from tests.support.templates import VALUES, ref, templated
from tests.support.waiting import until

pytestmark = pytest.mark.django_db(transaction=True)

OWN_ORIGIN = [(b"origin", b"http://localhost")]  # the panel is served by this product


async def guest_socket(site: Site, token: str | None) -> tuple[WebsocketCommunicator, Any]:
    offered = [GUEST_PROTOCOL, token] if token is not None else []
    ws = WebsocketCommunicator(
        application, f"/ws/guest/{site.key}/", headers=OWN_ORIGIN, subprotocols=offered
    )
    connected, protocol = await ws.connect()
    assert connected
    return ws, protocol


async def entered(site: Site) -> services.GuestEntry:
    return await sync_to_async(services.guest_enter)(site=site, origin=HOST, token=None)


async def test_a_guest_asks_and_the_answer_streams_into_its_own_conversation(
    scripted_worker: RunningWorker,
) -> None:
    site = await sync_to_async(site_made)()
    entry = await entered(site)
    ws, protocol = await guest_socket(site, entry.token)
    assert protocol == GUEST_PROTOCOL

    frames = await ask(ws, "how do I reset my password")

    assert frames[-1]["type"] == "chat.done"
    assert frames[-1]["status"] == "complete"
    assert answer_text(frames)
    owner = await sync_to_async(
        lambda: Conversation.objects.get(id=frames[0]["conversation_id"]).owner_id
    )()
    assert owner == entry.guest.user_id
    await ws.disconnect()


@pytest.mark.parametrize("problem", ["forged", "other_site", "none"])
async def test_a_bad_token_is_closed_in_words_and_nothing_is_stored(
    problem: str, scripted_worker: RunningWorker
) -> None:
    site, other = await sync_to_async(site_made)(), await sync_to_async(site_made)()
    token = {
        "forged": (await entered(site)).token[:-3] + "abc",
        "other_site": (await entered(other)).token,
        "none": None,
    }[problem]
    ws, _ = await guest_socket(site, token)

    closed = await ws.receive_output(timeout=5)

    assert closed["type"] == "websocket.close"
    assert closed["code"] == 4401
    assert closed.get("reason")
    assert await sync_to_async(Message.objects.count)() == 0


async def test_a_socket_of_a_disabled_site_is_closed_as_not_available(
    scripted_worker: RunningWorker,
) -> None:
    site = await sync_to_async(site_made)()
    token = (await entered(site)).token
    site.enabled = False
    await sync_to_async(site.save)()
    ws, _ = await guest_socket(site, token)
    closed = await ws.receive_output(timeout=5)
    assert (closed["type"], closed["code"]) == ("websocket.close", 4403)


async def test_a_staff_session_never_makes_a_guest_socket_the_staff_member(
    connect: Connect, alice: User, scripted_worker: RunningWorker
) -> None:
    site = await sync_to_async(site_made)()
    staff = await open_socket(connect, alice)  # alice's session cookie exists
    ws, _ = await guest_socket(site, None)  # no token: her cookie would not help either
    closed = await ws.receive_output(timeout=5)
    assert closed["code"] == 4401
    await staff.disconnect()


async def test_two_guests_never_see_each_others_answers(scripted_worker: RunningWorker) -> None:
    site = await sync_to_async(site_made)()
    first, second = await entered(site), await entered(site)
    ws_a, _ = await guest_socket(site, first.token)
    frames = await ask(ws_a, "my order number is SC-104233, where is it")
    ws_b, _ = await guest_socket(site, second.token)

    await ws_b.send_json_to(resume_frame(frames[0]["assistant_message_id"], 0))
    error = await ws_b.receive_json_from(timeout=5)

    assert (error["type"], error["code"]) == ("chat.error", "not_found")
    assert "SC-104233" not in str(error)
    await ws_a.disconnect()
    await ws_b.disconnect()


async def test_a_guest_past_its_sites_rate_is_told_when_to_try_again(
    scripted_worker: RunningWorker,
) -> None:
    site = await sync_to_async(site_made)(visitor_rate=1, visitor_rate_window_s=600)
    ws, _ = await guest_socket(site, (await entered(site)).token)
    await ask(ws, "first question")

    await ws.send_json_to(send_frame("second question", frame_id=str(uuid.uuid4())))
    refused = await ws.receive_json_from(timeout=5)

    assert (refused["type"], refused["code"]) == ("chat.error", "rate_limited")
    assert refused["retry_after_s"] >= 1
    # another visitor of the same site is not held back by this one
    other, _ = await guest_socket(site, (await entered(site)).token)
    assert (await ask(other, "my own first question"))[-1]["status"] == "complete"
    await ws.disconnect()
    await other.disconnect()


async def test_a_sites_default_template_gives_its_guests_questions_its_system_prompt(
    scripted_worker: RunningWorker, published: PromptTemplateVersion
) -> None:
    site = await sync_to_async(site_made)(default_template=published.template)
    ws, _ = await guest_socket(site, (await entered(site)).token)

    frames = await ask(ws, "where is my parcel")
    first = scripted_worker.engine.prompts[-1]
    await ask(ws, "and when will it come", conversation_id=frames[0]["conversation_id"])
    follow_up = scripted_worker.engine.prompts[-1]

    assert first.startswith(f"<|im_start|>system\n{SYSTEM}<|im_end|>\n")
    assert follow_up.startswith(f"<|im_start|>system\n{SYSTEM}<|im_end|>\n")
    # a site without one asks without it
    plain = await sync_to_async(site_made)()
    other, _ = await guest_socket(plain, (await entered(plain)).token)
    await ask(other, "where is my parcel")
    assert SYSTEM not in scripted_worker.engine.prompts[-1]
    await ws.disconnect()
    await other.disconnect()


async def test_a_guest_starts_only_with_its_sites_templates(
    scripted_worker: RunningWorker, published: PromptTemplateVersion
) -> None:
    offering = await sync_to_async(site_made)()
    await sync_to_async(offering.offered_templates.set)([published.template])
    other = await sync_to_async(site_made)()
    frame = templated(published, variables=VALUES)

    ws, _ = await guest_socket(offering, (await entered(offering)).token)
    await ws.send_json_to(frame)
    frames = await receive_until(ws, "chat.done")
    assert frames[-1]["status"] == "complete"
    assert scripted_worker.engine.prompts[-1].startswith(f"<|im_start|>system\n{SYSTEM}")

    stranger, _ = await guest_socket(other, (await entered(other)).token)
    await stranger.send_json_to(templated(published, variables=VALUES))
    refused = await stranger.receive_json_from(timeout=5)
    assert (refused["type"], refused["code"]) == ("chat.error", "not_found")
    assert await sync_to_async(Message.objects.count)() == 2  # the first guest's turn only
    await ws.disconnect()
    await stranger.disconnect()


async def test_a_guest_runs_no_more_answers_at_once_than_its_site_allows(
    scripted_worker: RunningWorker,
) -> None:
    site = await sync_to_async(site_made)(visitor_max_concurrent=1)
    token = (await entered(site)).token
    first_tab, second_tab = (
        (await guest_socket(site, token))[0],
        (await guest_socket(site, token))[0],
    )
    await first_tab.send_json_to(send_frame("[[slow]] " + "tell me about returns " * 20))
    assert (await first_tab.receive_json_from(timeout=5))["type"] == "chat.accepted"

    await second_tab.send_json_to(send_frame("one more"))
    refused = await second_tab.receive_json_from(timeout=5)

    assert (refused["type"], refused["code"]) == ("chat.error", "busy")
    assert refused["retry_after_s"] >= 1
    other, _ = await guest_socket(site, (await entered(site)).token)  # per visitor, not per site
    assert (await ask(other, "my own question"))[-1]["status"] == "complete"
    # the slow answer is stopped, not left running for the next test's relay to adopt
    await first_tab.send_json_to({"type": "chat.stop", "id": str(uuid.uuid4())})
    assert (await receive_until(first_tab, "chat.done"))[-1]["status"] == "stopped"
    for ws in (first_tab, second_tab, other):
        await ws.disconnect()


async def test_visitors_from_one_network_address_share_its_limits(
    scripted_worker: RunningWorker, settings: Any
) -> None:
    """A machine that clears its storage becomes a new visitor with fresh per-visitor limits;
    its address's limits still hold (behind one proxy: the last X-Forwarded-For entry is the
    client; the ones before it are its own word)."""
    settings.LOGIN_THROTTLE_PROXY_COUNT = 1
    site = await sync_to_async(site_made)(
        visitor_max_concurrent=1, address_max_concurrent=1, address_rate=3
    )

    async def visitor(address: str) -> WebsocketCommunicator:
        token = (await entered(site)).token
        ws = WebsocketCommunicator(
            application,
            f"/ws/guest/{site.key}/",
            headers=[*OWN_ORIGIN, (b"x-forwarded-for", f"10.9.8.7, {address}".encode())],
            subprotocols=[GUEST_PROTOCOL, token],
        )
        assert (await ws.connect())[0]
        return ws

    first, second = await visitor("203.0.113.7"), await visitor("203.0.113.7")
    elsewhere = await visitor("198.51.100.2")
    await first.send_json_to(send_frame("[[slow]] " + "tell me about returns " * 20))
    assert (await first.receive_json_from(timeout=5))["type"] == "chat.accepted"

    await second.send_json_to(send_frame("me too"))
    refused = await second.receive_json_from(timeout=5)
    assert (refused["type"], refused["code"]) == ("chat.error", "busy")
    assert refused["message"].startswith("Too many answers are in progress for your network.")
    assert (await ask(elsewhere, "my own question"))[-1]["status"] == "complete"

    await first.send_json_to({"type": "chat.stop", "id": str(uuid.uuid4())})
    assert (await receive_until(first, "chat.done"))[-1]["status"] == "stopped"
    # the refused question did not count: the slow one, then two more fill the rate of 3
    assert (await ask(second, "me too"))[-1]["status"] == "complete"
    assert (await ask(first, "and another"))[-1]["status"] == "complete"
    await second.send_json_to(send_frame("one more"))
    limited = await second.receive_json_from(timeout=5)
    assert (limited["type"], limited["code"]) == ("chat.error", "rate_limited")
    assert limited["message"].startswith("Too many questions are coming from your network.")
    assert 50 <= limited["retry_after_s"] <= 60
    for ws in (first, second, elsewhere):
        await ws.disconnect()


async def test_a_guests_first_draft_prefills_the_prompt_its_send_will_have(
    scripted_worker: RunningWorker, published: PromptTemplateVersion
) -> None:
    """Typing in the widget warms the prompt the question will be asked with: after the
    site's default template's system prompt, or the prefill is wasted."""
    engine = scripted_worker.engine
    site = await sync_to_async(site_made)(default_template=published.template)
    ws, _ = await guest_socket(site, (await entered(site)).token)
    question = "where is my parcel, it is late"

    await ws.send_json_to(draft_frame(question, None))
    await until(lambda: any(question in prompt for prompt in engine.prompts))
    [prefilled] = [prompt for prompt in engine.prompts if question in prompt]
    assert prefilled.startswith(f"<|im_start|>system\n{SYSTEM}<|im_end|>\n")

    await ask(ws, question)
    assert engine.prompts[-1] == prefilled
    await ws.disconnect()


async def test_a_guests_draft_from_a_template_its_site_does_not_offer_is_refused(
    scripted_worker: RunningWorker, published: PromptTemplateVersion
) -> None:
    site = await sync_to_async(site_made)()
    ws, _ = await guest_socket(site, (await entered(site)).token)
    prompts = len(scripted_worker.engine.prompts)
    draft = draft_frame("hello", None, template=ref(published))

    await ws.send_json_to(draft)

    refused = await ws.receive_json_from(timeout=5)
    assert (refused["type"], refused["code"], refused["id"]) == (
        "chat.error",
        "not_found",
        draft["id"],
    )
    assert await ws.receive_nothing(timeout=0.3)
    assert len(scripted_worker.engine.prompts) == prompts  # nothing was prefilled
    await ws.disconnect()
