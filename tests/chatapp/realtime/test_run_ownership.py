"""One run per frame: a repeated regenerate or edit frame follows the run the first one started,
and a refused frame costs the user nothing. Through the full ASGI app, scripted engine."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth.models import User
from pytest_django.fixtures import Settings

from chatapp.conversations.models import Message
from tests.conftest import Connect, RunningWorker
from tests.support.sockets import (
    answer_text,
    ask,
    edit_frame,
    open_socket,
    receive_until,
    regenerate_frame,
)

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_repeated_regenerate_frame_runs_once(
    connect: Connect, alice: User, scripted_worker: RunningWorker
) -> None:
    ws = await open_socket(connect, alice)
    answer_id = (await ask(ws, "first question"))[0]["assistant_message_id"]
    frame = regenerate_frame(answer_id)
    await ws.send_json_to(frame)
    await receive_until(ws, "chat.done")
    await ws.disconnect()  # the browser never saw it: it reconnects and sends the frame again

    again = await open_socket(connect, alice)
    await again.send_json_to(frame)
    frames = await receive_until(again, "chat.done")

    assert frames[0]["type"] == "chat.accepted"
    assert frames[0]["assistant_message_id"] == answer_id
    assert answer_text(frames) == "You said: first question"
    assert len(scripted_worker.engine.prompts) == 2  # the send and one regenerate, not two


async def test_a_repeated_edit_frame_runs_once(
    connect: Connect, alice: User, scripted_worker: RunningWorker
) -> None:
    ws = await open_socket(connect, alice)
    accepted = (await ask(ws, "a question"))[0]
    frame = edit_frame(accepted["user_message_id"], "an edited question")
    await ws.send_json_to(frame)
    await receive_until(ws, "chat.done")
    await ws.send_json_to(frame)  # a retry on the same socket, after the answer ended
    frames = await receive_until(ws, "chat.done")

    assert frames[0]["type"] == "chat.accepted"
    assert answer_text(frames) == "You said: an edited question"
    assert len(scripted_worker.engine.prompts) == 2
    stored = await Message.objects.filter(id=accepted["assistant_message_id"]).aget()
    assert stored.content == "You said: an edited question"


async def test_refused_regenerate_and_edit_frames_do_not_use_up_the_rate_window(
    connect: Connect, alice: User, scripted_worker: RunningWorker, settings: Settings
) -> None:
    settings.CHAT_USER_RATE = 2
    ws = await open_socket(connect, alice)
    for frame in (
        regenerate_frame(str(uuid.uuid4())),
        edit_frame(str(uuid.uuid4()), "no such question"),
        regenerate_frame(str(uuid.uuid4())),
    ):
        await ws.send_json_to(frame)
        refused = await ws.receive_json_from(timeout=5)
        assert (refused["type"], refused["code"]) == ("chat.error", "not_found"), refused

    for question in ("one", "two"):  # the user's whole rate is still there
        frames = await ask(ws, question)
        assert answer_text(frames) == f"You said: {question}"
