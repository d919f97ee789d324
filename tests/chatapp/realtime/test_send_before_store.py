"""A question's request is queued before its turn is written (`runs.send_run_start`): the
write is off the first token's path, and nothing is lost or doubled either way it goes.

Through the full ASGI app with the scripted worker; the write is made slow or failing by
wrapping `services.turn_start`, the one place a send's rows are written.
"""

from __future__ import annotations

import asyncio
import time
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
from tests.support.sockets import answer_text, ask, open_socket, receive_until, send_frame

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
