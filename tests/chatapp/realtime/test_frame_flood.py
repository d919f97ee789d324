"""A socket cannot flood the server: past its frame budget, and sooner for `chat.resume` (each
one may replay a whole answer log), frames are refused with `rate_limited` and a retry-after,
and the socket stays open. Full ASGI app, scripted engine."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.contrib.auth.models import User
from pytest_django.fixtures import Settings

from tests.conftest import Connect, RunningWorker
from tests.support.sockets import (
    answer_text,
    ask,
    open_socket,
    receive_until,
    resume_frame,
)

pytestmark = pytest.mark.django_db(transaction=True)


async def test_resumes_past_their_budget_are_refused(
    connect: Connect, alice: User, scripted_worker: RunningWorker, settings: Settings
) -> None:
    settings.CHAT_SOCKET_RESUME_BURST = 3
    settings.CHAT_SOCKET_RESUMES_PER_S = 0.2
    ws = await open_socket(connect, alice)
    message_id = (await ask(ws, "a long answer to replay"))[0]["assistant_message_id"]

    replies: list[list[dict[str, Any]]] = []
    for _ in range(4):
        frame_id = str(uuid.uuid4())
        await ws.send_json_to(resume_frame(message_id, frame_id=frame_id))
        frames = await receive_until(ws, "chat.done") if len(replies) < 3 else []
        if not frames:
            frames = [await ws.receive_json_from(timeout=5)]
        replies.append(frames)

    assert all(answer_text(r) == "You said: a long answer to replay" for r in replies[:3])
    refused = replies[3][0]
    assert (refused["type"], refused["code"]) == ("chat.error", "rate_limited"), refused
    assert refused["retry_after_s"] >= 1


async def test_a_frame_flood_is_refused_and_the_socket_stays_usable(
    connect: Connect, alice: User, scripted_worker: RunningWorker, settings: Settings
) -> None:
    settings.CHAT_SOCKET_FRAME_BURST = 5
    settings.CHAT_SOCKET_FRAMES_PER_S = 50
    ws = await open_socket(connect, alice)
    for _ in range(8):
        await ws.send_to(text_data="not json")
    codes = [(await ws.receive_json_from(timeout=5))["code"] for _ in range(8)]

    assert codes[:5] == ["bad_json"] * 5
    assert codes[5:] == ["rate_limited"] * 3
    await ws.receive_nothing(timeout=0.2)  # 50 frames a second: the budget refills
    assert answer_text(await ask(ws, "still here")) == "You said: still here"
