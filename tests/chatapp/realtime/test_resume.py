"""Reconnect and resume: a new socket continues an answer exactly where the browser left it.

Through the full ASGI app with the scripted engine (it echoes the question a word at a time,
slowly with `[[slow]]`), so the expected text is known and every seq can be checked.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User

from chatapp.answers.runtime import answer_runtime
from chatapp.conversations.models import Message
from tests.conftest import Connect, RunningWorker
from tests.support.sockets import (
    answer_text,
    ask,
    first_reply,
    open_socket,
    receive_delta,
    receive_until,
    resume_frame,
    send_frame,
)

pytestmark = pytest.mark.django_db(transaction=True)

WORDS = " ".join(f"w{i}" for i in range(60))
QUESTION = f"[[slow]] {WORDS}"
FULL_ANSWER = f"You said: {QUESTION}"


def assert_contiguous(frames: list[dict[str, Any]], first_seq: int) -> None:
    seqs = [f["seq"] for f in frames if f["type"] == "chat.delta"]
    assert seqs == list(range(first_seq, first_seq + len(seqs))), seqs


async def test_a_refresh_mid_stream_resumes_with_no_gap_and_no_duplicate(
    connect: Connect, alice: User, scripted_worker: RunningWorker
) -> None:
    first = await open_socket(connect, alice)
    accepted = await first_reply(first, QUESTION)
    seen = [await receive_delta(first) for _ in range(3)]
    assert [f["type"] for f in seen] == ["chat.delta"] * 3
    await first.disconnect()  # the page reloads

    second = await open_socket(connect, alice)
    await second.send_json_to(resume_frame(accepted["assistant_message_id"], seen[-1]["seq"]))
    rest = await receive_until(second, "chat.done", timeout=10)

    assert_contiguous(rest, first_seq=seen[-1]["seq"] + 1)
    assert answer_text(seen) + answer_text(rest) == FULL_ANSWER
    assert rest[-1]["status"] == "complete"
    assert len(scripted_worker.engine.prompts) == 1  # resumed, not asked again
    message = await sync_to_async(Message.objects.get)(id=accepted["assistant_message_id"])
    assert (message.status, message.content) == ("complete", FULL_ANSWER)


async def test_a_browser_that_lost_everything_resumes_from_zero(
    connect: Connect, alice: User, scripted_worker: RunningWorker
) -> None:
    first = await open_socket(connect, alice)
    accepted = await first_reply(first, QUESTION)
    await first.receive_json_from(timeout=5)
    await first.disconnect()

    second = await open_socket(connect, alice)
    await second.send_json_to(resume_frame(accepted["assistant_message_id"], 0))
    frames = await receive_until(second, "chat.done", timeout=10)
    assert_contiguous(frames, first_seq=1)
    assert answer_text(frames) == FULL_ANSWER


async def test_resuming_an_answer_that_ended_meanwhile_gives_the_rest_and_its_end(
    connect: Connect, alice: User, scripted_worker: RunningWorker
) -> None:
    first = await open_socket(connect, alice)
    accepted = await first_reply(first, "[[slow]] short one")
    head = await receive_delta(first)
    await first.disconnect()
    message_id = accepted["assistant_message_id"]
    for _ in range(100):  # the answer finishes while nobody watches (within the grace)
        message = await sync_to_async(Message.objects.get)(id=message_id)
        if message.status != "streaming":
            break
        await asyncio.sleep(0.05)
    assert message.status == "complete"

    second = await open_socket(connect, alice)
    await second.send_json_to(resume_frame(message_id, head["seq"]))
    rest = await receive_until(second, "chat.done")
    assert_contiguous(rest, first_seq=head["seq"] + 1)
    assert head["text"] + answer_text(rest) == "You said: [[slow]] short one"


async def test_resume_after_the_log_expired_sends_the_stored_text_as_a_snapshot(
    connect: Connect, alice: User, scripted_worker: RunningWorker
) -> None:
    ws = await open_socket(connect, alice)
    frames = await ask(ws, "remember me")
    message_id = frames[0]["assistant_message_id"]
    runtime = await answer_runtime()
    # as if the log had expired: nothing left to replay from
    run_id = await Message.objects.filter(id=message_id).values_list("run_id", flat=True).aget()
    assert run_id is not None
    await runtime.log.rewrite(run_id=run_id, relay_channel="gone", user_key="", entries=[])

    await ws.send_json_to(resume_frame(message_id, 1))
    snapshot = await ws.receive_json_from(timeout=5)
    done = await ws.receive_json_from(timeout=5)
    assert snapshot == {
        "type": "chat.snapshot",
        "message_id": message_id,
        "content": "You said: remember me",
    }
    assert (done["type"], done["status"]) == ("chat.done", "complete")


async def test_nobody_can_resume_someone_elses_answer(
    connect: Connect, alice: User, bob: User, scripted_worker: RunningWorker
) -> None:
    ws = await open_socket(connect, alice)
    accepted = await first_reply(ws, QUESTION)

    intruder = await open_socket(connect, bob)
    await intruder.send_json_to(resume_frame(accepted["assistant_message_id"], 0))
    error = await intruder.receive_json_from(timeout=5)
    assert (error["type"], error["code"]) == ("chat.error", "not_found")
    stop = {"type": "chat.stop", "id": str(uuid.uuid4()), "message_id": error["message_id"]}
    await intruder.send_json_to(stop)
    assert (await intruder.receive_json_from(timeout=5))["code"] == "not_found"
    assert await intruder.receive_nothing(timeout=0.3)
    frames = await receive_until(ws, "chat.done", timeout=10)
    assert frames[-1]["status"] == "complete"  # bob's stop did nothing


async def test_a_retried_send_from_another_socket_joins_the_running_answer(
    connect: Connect, alice: User, scripted_worker: RunningWorker
) -> None:
    frame = send_frame(QUESTION)
    first = await open_socket(connect, alice)
    await first.send_json_to(frame)
    accepted = await first.receive_json_from(timeout=5)
    await first.receive_json_from(timeout=5)

    second = await open_socket(connect, alice)  # the browser retries after a network blip
    await second.send_json_to(frame)
    again = await receive_until(second, "chat.done", timeout=10)
    assert again[0]["assistant_message_id"] == accepted["assistant_message_id"]
    assert_contiguous(again[1:], first_seq=1)
    assert answer_text(again) == FULL_ANSWER
    assert len(scripted_worker.engine.prompts) == 1
    assert await sync_to_async(Message.objects.count)() == 2


async def test_stop_from_another_tab_stops_the_answer_everywhere(
    connect: Connect, alice: User, scripted_worker: RunningWorker
) -> None:
    first = await open_socket(connect, alice)
    accepted = await first_reply(first, QUESTION)
    message_id = accepted["assistant_message_id"]
    other = await open_socket(connect, alice)
    await other.send_json_to(resume_frame(message_id, 0))
    await other.receive_json_from(timeout=5)
    await other.send_json_to(
        {"type": "chat.stop", "id": str(uuid.uuid4()), "message_id": message_id}
    )

    for ws in (first, other):
        frames = await receive_until(ws, "chat.done", timeout=5)
        assert frames[-1]["status"] == "stopped"
    message = await sync_to_async(Message.objects.get)(id=message_id)
    assert message.status == "stopped"
    assert scripted_worker.worker.active_requests == 0
