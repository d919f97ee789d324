"""A run's request is queued before its turn is written (`runs._queued_run_start`: a send, a
regenerate, an edit): the write is off the first token's path, and nothing is lost or doubled
either way it goes.

Through the full ASGI app with the scripted worker; the write is made slow or failing by
wrapping `services.turn_start`, the one place a send's rows are written.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.db import OperationalError

from chatapp.answers.runtime import answer_runtime
from chatapp.conversations import services
from chatapp.conversations.models import Message
from tests.conftest import Connect, RunningWorker
from tests.support.sockets import (
    answer_text,
    ask,
    edit_frame,
    open_socket,
    receive_until,
    regenerate_frame,
    send_frame,
)

pytestmark = pytest.mark.django_db(transaction=True)


def _wrapped(monkeypatch: pytest.MonkeyPatch, around: Callable[..., Any]) -> None:
    real = services.turn_start
    monkeypatch.setattr(services, "turn_start", lambda **kwargs: around(real, **kwargs))


async def test_an_answer_faster_than_the_write_of_its_question_is_stored_whole(
    connect: Connect, alice: User, scripted_worker: RunningWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    def slow(real: Callable[..., services.TurnStart], **kwargs: Any) -> services.TurnStart:
        time.sleep(0.4)  # the scripted answer is done long before
        return real(**kwargs)

    _wrapped(monkeypatch, slow)
    ws = await open_socket(connect, alice)
    frames = await ask(ws, "where is my parcel")
    assert frames[0]["type"] == "chat.accepted"  # before any of the answer, as always
    assert answer_text(frames) == "You said: where is my parcel"
    # the worker started before the question was stored
    assert frames[-1]["hops"]["queued_ms"] < frames[-1]["hops"]["stored_ms"]
    for _ in range(100):
        rows = await sync_to_async(
            lambda: list(Message.objects.order_by("created_at").values_list("role", "status"))
        )()
        if rows == [("user", "complete"), ("assistant", "complete")]:
            break
        await asyncio.sleep(0.02)
    answer = await sync_to_async(Message.objects.get)(id=frames[0]["assistant_message_id"])
    assert (answer.status, answer.content) == ("complete", answer_text(frames))


async def test_a_failed_write_refuses_the_question_stops_its_run_and_frees_its_slot(
    connect: Connect, alice: User, scripted_worker: RunningWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(real: Callable[..., services.TurnStart], **kwargs: Any) -> services.TurnStart:
        raise OperationalError("disk I/O error")

    _wrapped(monkeypatch, failing)
    ws = await open_socket(connect, alice)
    frame = send_frame("[[slow]] one two three four five six seven eight nine ten")
    await ws.send_json_to(frame)
    frames = await receive_until(ws, "chat.error")
    assert frames[-1]["id"] == frame["id"]
    assert [f["type"] for f in frames] == ["chat.error"]  # never accepted: the page keeps it
    assert await sync_to_async(Message.objects.count)() == 0
    runtime = await answer_runtime()
    # freed before the page hears (it may ask again at once), not when the abort lands
    assert await runtime.admission.outstanding() == 0
    for _ in range(200):  # the run that was queued is stopped and gone
        if runtime.relay.active_answers == 0 and scripted_worker.worker.active_requests == 0:
            break
        await asyncio.sleep(0.02)
    assert runtime.relay.active_answers == 0
    assert scripted_worker.worker.active_requests == 0

    monkeypatch.undo()  # the database is back: the same question is taken, and answered
    await ws.send_json_to(frame)
    again = await receive_until(ws, "chat.done")
    assert again[0]["type"] == "chat.accepted"
    assert answer_text(again).startswith("You said:")
    assert await sync_to_async(Message.objects.count)() == 2


def _rerun_wrapped(monkeypatch: pytest.MonkeyPatch, around: Callable[..., Any]) -> None:
    real = services.rerun_store
    monkeypatch.setattr(
        services, "rerun_store", lambda *args, **kwargs: around(real, *args, **kwargs)
    )


async def test_a_regenerate_and_an_edit_are_queued_before_they_are_stored(
    connect: Connect, alice: User, scripted_worker: RunningWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 31, "one runs.start()": regenerate and edit wrote first and queued after, one
    database write longer to the first token than a send; they start in the send's order."""
    ws = await open_socket(connect, alice)
    first = await ask(ws, "where is my parcel")
    answer_id, question_id = first[0]["assistant_message_id"], first[0]["user_message_id"]

    def slow(real: Callable[..., services.TurnStart], *args: Any, **kwargs: Any) -> Any:
        time.sleep(0.3)  # the scripted answer is done long before
        return real(*args, **kwargs)

    _rerun_wrapped(monkeypatch, slow)
    await ws.send_json_to(regenerate_frame(answer_id))
    again = await receive_until(ws, "chat.done")
    assert again[0]["type"] == "chat.accepted"
    assert answer_text(again) == "You said: where is my parcel"
    assert again[-1]["hops"]["queued_ms"] < again[-1]["hops"]["stored_ms"]

    await ws.send_json_to(edit_frame(question_id, "where is my order"))
    edited = await receive_until(ws, "chat.done")
    assert answer_text(edited) == "You said: where is my order"
    assert edited[-1]["hops"]["queued_ms"] < edited[-1]["hops"]["stored_ms"]
    rows = await sync_to_async(
        lambda: list(Message.objects.order_by("created_at").values_list("content", "status"))
    )()
    assert rows == [("where is my order", "complete"), ("You said: where is my order", "complete")]


async def test_an_edit_refused_at_its_write_stops_the_run_it_queued_and_changes_nothing(
    connect: Connect, alice: User, scripted_worker: RunningWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The read before the queue allowed the edit; another tab's question landed before the
    write (which alone decides, under the conversation's lock): the user is told, the run
    that was queued is stopped, and the conversation is as the other tab left it."""
    ws = await open_socket(connect, alice)
    first = await ask(ws, "where is my parcel")
    question_id = first[0]["user_message_id"]
    conversation_id = first[0]["conversation_id"]

    def another_tab_first(
        real: Callable[..., services.TurnStart], *args: Any, **kwargs: Any
    ) -> Any:
        services.turn_start(  # its answer streams now: an edit must wait for it
            sender=alice,
            conversation_id=uuid.UUID(conversation_id),
            client_message_id=uuid.uuid4(),
            text="and my refund?",
            run_id=uuid.uuid4(),
        )
        return real(*args, **kwargs)

    _rerun_wrapped(monkeypatch, another_tab_first)
    frame = edit_frame(question_id, "[[slow]] " + " ".join(["word"] * 60))
    await ws.send_json_to(frame)
    replies = await receive_until(ws, "chat.error")
    assert [r["type"] for r in replies] == ["chat.error"]
    assert replies[-1]["id"] == frame["id"]
    runtime = await answer_runtime()
    for _ in range(200):
        if runtime.relay.active_answers == 0 and scripted_worker.worker.active_requests == 0:
            break
        await asyncio.sleep(0.02)
    assert runtime.relay.active_answers == 0
    assert scripted_worker.worker.active_requests == 0
    contents = await sync_to_async(
        lambda: list(Message.objects.order_by("created_at").values_list("content", flat=True))
    )()
    assert contents[:3] == ["where is my parcel", "You said: where is my parcel", "and my refund?"]
