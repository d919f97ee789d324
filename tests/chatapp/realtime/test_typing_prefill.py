"""Typing prefill: the page's chat.draft makes a worker run the conversation's prompt with
the draft as its next question (one token, background), so by Send it is in the prefix cache.

Through the full ASGI app with the scripted worker, whose engine records every prompt it
was given: the prefill's prompt must be exactly the prompt of the question sent after it.
"""

from __future__ import annotations

import time
import uuid

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from prometheus_client import REGISTRY

from chatapp.conversations.models import Message
from chatapp.prompts.models import PromptTemplateVersion
from inference.wire.protocol import BACKGROUND_CHANNEL, ChatTurn, PrefillRequest
from tests.conftest import Connect, RunningWorker
from tests.support.embedded import embedded_queue
from tests.support.sockets import ask, draft_frame, open_socket, receive_until, send_frame
from tests.support.templates import RENDERED, VALUES, published, ref, templated
from tests.support.waiting import until

__all__ = ["published"]  # a fixture

pytestmark = pytest.mark.django_db(transaction=True)

FOLLOW_UP = "and how long does delivery to Norway take?"


def prefills(outcome: str) -> float:
    return REGISTRY.get_sample_value("inference_typing_prefills_total", {"outcome": outcome}) or 0


async def test_a_draft_prefills_the_exact_prompt_of_the_question_sent_after_it(
    connect: Connect, alice: User, scripted_worker: RunningWorker
) -> None:
    engine = scripted_worker.engine
    ws = await open_socket(connect, alice)
    first = await ask(ws, "do you ship to Norway?")
    conversation_id = first[0]["conversation_id"]
    ran = prefills("run")
    rows = await sync_to_async(Message.objects.count)()

    await ws.send_json_to(draft_frame(FOLLOW_UP, conversation_id))
    await until(lambda: len(engine.prompts) == 2 and prefills("run") == ran + 1)
    assert prefills("run") == ran + 1
    prefilled = engine.prompts[1]
    assert "do you ship to Norway?" in prefilled
    assert FOLLOW_UP in prefilled
    assert engine.requests[1].max_tokens == 1
    assert await ws.receive_nothing(timeout=0.2)  # no reply to a draft
    assert await sync_to_async(Message.objects.count)() == rows  # never stored

    await ask(ws, FOLLOW_UP, conversation_id=conversation_id)
    assert engine.prompts[2] == prefilled  # the cache holds all of it by Send


async def test_a_templates_first_message_prefills_the_prompt_its_send_will_have(
    connect: Connect, alice: User, scripted_worker: RunningWorker, published: PromptTemplateVersion
) -> None:
    """Variables filled in: the page sends the message it shows with the template reference;
    the prefill runs it after the template's system prompt, exactly as the send will."""
    engine = scripted_worker.engine
    ws = await open_socket(connect, alice)
    await ws.send_json_to(draft_frame(RENDERED, None, template=ref(published)))
    await until(lambda: any(RENDERED in p for p in engine.prompts))
    [at] = [i for i, p in enumerate(engine.prompts) if RENDERED in p]
    prefilled = engine.prompts[at]
    assert published.system_prompt in prefilled
    assert engine.requests[at].max_tokens == 1
    assert await ws.receive_nothing(timeout=0.2)

    await ws.send_json_to(templated(published, variables=VALUES))
    await receive_until(ws, "chat.done")
    assert engine.prompts[-1] == prefilled


async def test_a_draft_from_an_unpublished_template_or_on_a_follow_up_is_refused(
    connect: Connect, alice: User, scripted_worker: RunningWorker, published: PromptTemplateVersion
) -> None:
    ws = await open_socket(connect, alice)
    unknown = draft_frame(RENDERED, None, template={**ref(published), "version": 99})
    await ws.send_json_to(unknown)
    error = await ws.receive_json_from(timeout=5)
    assert (error["type"], error["code"], error["id"]) == (
        "chat.error",
        "template_unknown",
        unknown["id"],
    )
    follow_up = draft_frame(RENDERED, str(uuid.uuid4()), template=ref(published))
    await ws.send_json_to(follow_up)
    error = await ws.receive_json_from(timeout=5)
    assert (error["type"], error["code"]) == ("chat.error", "invalid")


async def test_a_draft_for_someone_elses_conversation_is_refused(
    connect: Connect, alice: User, bob: User, scripted_worker: RunningWorker
) -> None:
    bobs = await open_socket(connect, bob)
    conversation_id = (await ask(bobs, "bob's private question"))[0]["conversation_id"]
    ws = await open_socket(connect, alice)
    frame = draft_frame("let me read bob's chat please", conversation_id)
    await ws.send_json_to(frame)
    error = await ws.receive_json_from(timeout=5)
    assert (error["type"], error["code"], error["id"]) == ("chat.error", "not_found", frame["id"])
    assert len(scripted_worker.engine.prompts) == 1  # bob's question only


async def test_a_worker_answering_chat_drops_drafts_and_stale_drafts_are_dropped(
    connect: Connect, alice: User, bob: User, scripted_worker: RunningWorker
) -> None:
    """A prefill must never delay a real question: none runs beside chat, none runs late."""
    engine = scripted_worker.engine
    busy, stale = prefills("dropped_busy"), prefills("dropped_stale")
    ws = await open_socket(connect, alice)
    await ws.send_json_to(send_frame("[[slow]] " + " ".join(["word"] * 30)))
    await receive_until(ws, "chat.delta")  # alice's answer streams
    other = await open_socket(connect, bob)
    await other.send_json_to(draft_frame("where is my parcel right now?", None))
    await until(lambda: prefills("dropped_busy") == busy + 1)
    assert prefills("dropped_busy") == busy + 1
    await receive_until(ws, "chat.done")

    old = PrefillRequest(
        request_id="prefill-old",
        messages=[ChatTurn(role="user", content="typed a minute ago")],
        submitted_at=time.time() - 60,
    )
    await embedded_queue().put(BACKGROUND_CHANNEL, old.to_channel())
    await until(lambda: prefills("dropped_stale") == stale + 1)
    assert prefills("dropped_stale") == stale + 1
    assert [p for p in engine.prompts if "typed a minute ago" in p] == []
    assert not [p for p in engine.prompts if "where is my parcel right now?" in p]


async def test_drafts_are_bounded_per_socket_and_in_the_queue(
    connect: Connect, alice: User, settings: object
) -> None:
    """Issue 31 defect 3: a script sending drafts as fast as the frame budget allows queued a
    prefill (with the conversation's history) for each, without bound, even with no worker
    reading the queue. A socket's drafts have a small budget of their own (past it they are
    dropped: a draft is a hint, nothing is lost), and no more than a few wait in a queue."""
    from chatapp.answers.runs import DRAFTS_QUEUED_MAX

    settings.CHAT_USER_DRAFT_EVERY_S = 0  # type: ignore[attr-defined]  # per user: the next test
    queue = embedded_queue()
    ws = await open_socket(connect, alice)
    for i in range(10):
        await ws.send_json_to(draft_frame(f"a draft of a question, take {i}", None))
    assert await ws.receive_nothing(timeout=0.3)  # dropped quietly, no error frames
    assert await queue.depth(BACKGROUND_CHANNEL) == 3  # the socket's draft burst

    settings.CHAT_SOCKET_DRAFT_BURST = 100  # type: ignore[attr-defined]
    other = await open_socket(connect, alice)
    for i in range(20):
        await other.send_json_to(draft_frame(f"another draft, take {i}", None))
    assert await other.receive_nothing(timeout=0.3)
    assert await queue.depth(BACKGROUND_CHANNEL) == DRAFTS_QUEUED_MAX


async def test_one_users_drafts_are_bounded_over_all_their_sockets(
    connect: Connect, alice: User, bob: User, settings: object
) -> None:
    """Issue 31 defect 3: each socket had its own draft budget, so a user with many tabs (or a
    script opening sockets) queued a prefill per socket. A user's drafts are now bounded over
    all their sockets and web processes (`CHAT_USER_DRAFT_EVERY_S`); another user's are not
    touched by it."""
    settings.CHAT_USER_DRAFT_EVERY_S = 60  # type: ignore[attr-defined]
    queue = embedded_queue()
    tabs = [await open_socket(connect, alice) for _ in range(4)]
    for n, tab in enumerate(tabs):
        await tab.send_json_to(draft_frame(f"a question typed in tab {n}", None))
    for tab in tabs:
        assert await tab.receive_nothing(timeout=0.2)  # dropped quietly, no error frames
    assert await queue.depth(BACKGROUND_CHANNEL) == 1
    bobs = await open_socket(connect, bob)
    await bobs.send_json_to(draft_frame("bob types too", None))
    assert await bobs.receive_nothing(timeout=0.2)
    assert await queue.depth(BACKGROUND_CHANNEL) == 2
