"""`chat.client_timing`: the browser's time to first token, stored and observed once."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User

from chatapp.conversations.models import Message
from tests.chatapp.metrics.samples import Changes, s, value, wait_for_value
from tests.conftest import Connect, RunningWorker
from tests.support.sockets import ask, open_socket, receive_until, regenerate_frame

pytestmark = pytest.mark.django_db(transaction=True)

COUNT = "chat:client_time_to_first_token_seconds_count"
SUM = "chat:client_time_to_first_token_seconds_sum"


def timing(message_id: str, ttft_ms: Any) -> dict[str, Any]:
    return {
        "type": "chat.client_timing",
        "id": str(uuid.uuid4()),
        "message_id": message_id,
        "ttft_ms": ttft_ms,
    }


async def answered(ws: WebsocketCommunicator, text: str = "hello there") -> str:
    frames = await ask(ws, text)
    return str(frames[0]["assistant_message_id"])


async def stored_ttft(message_id: str) -> float | None:
    message = await sync_to_async(Message.objects.get)(id=message_id)
    return message.client_ttft_ms


async def still_usable(ws: WebsocketCommunicator) -> None:
    assert (await ask(ws, "still there?"))[-1]["status"] == "complete"


async def test_a_report_is_stored_and_observed_once(
    connect: Connect, alice: User, scripted_worker: RunningWorker
) -> None:
    ws = await open_socket(connect, alice)
    message_id = await answered(ws)
    before = value(COUNT)
    changes = Changes(s(SUM))

    await ws.send_json_to(timing(message_id, 142.5))
    await wait_for_value(COUNT, before + 1)  # no reply on success
    assert changes.delta(SUM) == pytest.approx(0.1425)
    assert await stored_ttft(message_id) == 142.5

    second = timing(message_id, 99)
    await ws.send_json_to(second)
    error = await ws.receive_json_from(timeout=5)
    assert (error["type"], error["code"], error["id"]) == ("chat.error", "invalid", second["id"])
    assert "already reported" in error["message"]
    assert value(COUNT) == before + 1
    assert await stored_ttft(message_id) == 142.5
    await still_usable(ws)


async def test_another_users_answer_is_refused(
    connect: Connect, alice: User, bob: User, scripted_worker: RunningWorker
) -> None:
    alice_ws = await open_socket(connect, alice)
    message_id = await answered(alice_ws)
    bob_ws = await open_socket(connect, bob)
    before = value(COUNT)

    for target in (message_id, str(uuid.uuid4())):
        await bob_ws.send_json_to(timing(target, 120))
        error = await bob_ws.receive_json_from(timeout=5)
        assert (error["code"], error["message_id"]) == ("not_found", target)
    # nor a question of one's own: only answers have a time to first token
    frames = await ask(alice_ws, "another")
    await alice_ws.send_json_to(timing(frames[0]["user_message_id"], 120))
    assert (await alice_ws.receive_json_from(timeout=5))["code"] == "not_found"

    assert value(COUNT) == before
    assert await stored_ttft(message_id) is None
    await still_usable(bob_ws)


@pytest.mark.parametrize("ttft_ms", [0, -5, 600_000.5, "120", None, True, 1e309])
async def test_values_out_of_range_are_refused(
    connect: Connect, alice: User, scripted_worker: RunningWorker, ttft_ms: Any
) -> None:
    ws = await open_socket(connect, alice)
    message_id = await answered(ws)
    before = value(COUNT)
    await ws.send_json_to(timing(message_id, ttft_ms))
    error = await ws.receive_json_from(timeout=5)
    assert (error["type"], error["code"]) == ("chat.error", "invalid")
    assert "ttft_ms" in error["message"]
    assert value(COUNT) == before
    assert await stored_ttft(message_id) is None
    # the bounds themselves are fine
    await ws.send_json_to(timing(message_id, 600_000))
    await wait_for_value(COUNT, before + 1)


async def test_a_regenerated_answer_is_measured_again(
    connect: Connect, alice: User, scripted_worker: RunningWorker
) -> None:
    ws = await open_socket(connect, alice)
    message_id = await answered(ws)
    await ws.send_json_to(timing(message_id, 300))
    await ws.send_json_to(regenerate_frame(message_id, bypass_faq=False))
    await receive_until(ws, "chat.done")
    assert await stored_ttft(message_id) is None
    before = value(COUNT)
    await ws.send_json_to(timing(message_id, 80))
    await wait_for_value(COUNT, before + 1)
    assert await stored_ttft(message_id) == 80
