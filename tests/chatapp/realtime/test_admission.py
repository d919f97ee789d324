"""Admission control on the chat socket: limits give a clear, typed "busy" with a retry-after,
and a refused message is never stored (the browser still has it)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.db import OperationalError

from chatapp.answers.runtime import answer_runtime
from chatapp.conversations.models import Message
from tests.conftest import Connect, RunningWorker
from tests.support.sockets import ask, first_reply, open_socket, receive_until, send_frame

pytestmark = pytest.mark.django_db(transaction=True)

SLOW = "[[slow]] " + " ".join(["word"] * 100)


async def test_one_user_cannot_run_more_answers_at_once_than_allowed(
    connect: Connect, alice: User, bob: User, scripted_worker: RunningWorker, settings: Any
) -> None:
    settings.CHAT_USER_MAX_CONCURRENT = 2
    tabs = [await open_socket(connect, alice) for _ in range(3)]
    for tab in tabs[:2]:
        await tab.send_json_to(send_frame(SLOW))
        assert (await tab.receive_json_from(timeout=5))["type"] == "chat.accepted"
    await tabs[2].send_json_to(send_frame("one more"))
    refused = await tabs[2].receive_json_from(timeout=5)
    assert (refused["type"], refused["code"]) == ("chat.error", "busy")
    assert refused["retry_after_s"] >= 1
    assert "2" in refused["message"]

    other_user = await open_socket(connect, bob)  # a limit per user, not for everyone
    assert (await ask(other_user, "my turn"))[-1]["status"] == "complete"

    await tabs[0].send_json_to({"type": "chat.stop", "id": str(uuid.uuid4())})
    await receive_until(tabs[0], "chat.done")
    await tabs[2].send_json_to(send_frame("one more"))  # a slot is free again
    assert (await receive_until(tabs[2], "chat.done"))[-1]["status"] == "complete"


async def test_past_the_rate_limit_the_user_is_told_when_to_try_again(
    connect: Connect, alice: User, scripted_worker: RunningWorker, settings: Any
) -> None:
    settings.CHAT_USER_RATE = 2
    settings.CHAT_USER_RATE_WINDOW_S = 60
    ws = await open_socket(connect, alice)
    for text in ("one", "two"):
        await ask(ws, text)
    refused = await first_reply(ws, "three")
    assert (refused["type"], refused["code"]) == ("chat.error", "rate_limited")
    assert 50 <= refused["retry_after_s"] <= 60
    assert await sync_to_async(Message.objects.filter(content="three").exists)() is False


async def test_when_every_worker_is_full_the_queue_is_bounded_and_users_get_busy(
    connect: Connect, alice: User, bob: User, scripted_worker: RunningWorker, settings: Any
) -> None:
    # the scripted worker announces max_active + max_queue; take all but one of it
    runtime = await answer_runtime()
    capacity = await runtime.registry.capacity()
    for n in range(capacity - 1):
        admitted = await runtime.admission.acquire(
            request_id=f"filler-{n}", user_key=f"filler-{n}", capacity=capacity
        )
        assert type(admitted).__name__ == "Admitted"
    ws = await open_socket(connect, alice)
    await ws.send_json_to(send_frame(SLOW))
    assert (await ws.receive_json_from(timeout=5))["type"] == "chat.accepted"

    late = await open_socket(connect, bob)
    refused = await first_reply(late, "am I queued forever?")
    assert (refused["code"], refused["retry_after_s"]) == ("busy", settings.CHAT_BUSY_RETRY_AFTER_S)
    assert "busy" in refused["message"].lower()

    await ws.send_json_to({"type": "chat.stop", "id": str(uuid.uuid4())})
    await receive_until(ws, "chat.done")
    assert await runtime.admission.outstanding() == capacity - 1  # the answer's slot is back


async def test_a_database_failure_gives_an_error_and_stores_nothing(
    connect: Connect,
    alice: User,
    scripted_worker: RunningWorker,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from chatapp.conversations import models

    def broken_create(*args: Any, **kwargs: Any) -> Any:
        raise OperationalError("server closed the connection unexpectedly")

    ws = await open_socket(connect, alice)
    with monkeypatch.context() as patch:
        patch.setattr(models.Message.objects, "create", broken_create)
        error = await first_reply(ws, "will this be lost?")
    # the database is away: a clear "try again shortly", not a server failure
    assert (error["type"], error["code"]) == ("chat.error", "unavailable")
    assert error["retry_after_s"] >= 1
    assert await sync_to_async(Message.objects.count)() == 0  # no half-written turn
    from chatapp.conversations.models import Conversation

    assert await sync_to_async(Conversation.objects.count)() == 0
    runtime = await answer_runtime()
    assert await runtime.admission.outstanding() == 0  # the admission slot was given back

    await ws.send_json_to(send_frame("will this be lost?"))  # the same socket works again
    assert (await receive_until(ws, "chat.done"))[-1]["status"] == "complete"
