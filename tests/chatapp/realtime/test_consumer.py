"""The chat socket through the full ASGI app, with a worker on the in-memory channel layer.

The worker runs the scripted engine (echoes the question word by word) so these tests are
fast and exact; the real vLLM path is covered in tests/integration.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User

from chatapp.conversations.models import Conversation, Message
from tests.conftest import Connect, RunningWorker
from tests.support.embedded import embedded_queue
from tests.support.sockets import (
    answer_text,
    ask,
    edit_frame,
    first_reply,
    open_socket,
    receive_delta,
    receive_until,
    send_frame,
)
from tests.support.waiting import until

pytestmark = pytest.mark.django_db(transaction=True)


async def test_answer_streams_and_is_stored_once(
    connect: Connect, alice: User, scripted_worker: RunningWorker
) -> None:
    ws = await open_socket(connect, alice)
    question = "how do I reset my password please tell me now"
    frames = await ask(ws, question)

    accepted = frames[0]
    assert accepted["type"] == "chat.accepted"
    deltas = [f for f in frames if f["type"] == "chat.delta"]
    assert answer_text(frames) == f"You said: {question}"
    assert [d["seq"] for d in deltas] == list(range(1, len(deltas) + 1))
    # coalesced: fewer frames than words
    assert len(deltas) < len(answer_text(frames).split())
    done = frames[-1]
    assert done["status"] == "complete"
    assert done["usage"]["completion_tokens"] == len(answer_text(frames).split())
    assert done["timings"]["ttft_ms"] is not None

    stored: list[Message] = await sync_to_async(
        lambda: list(
            Message.objects.filter(conversation_id=accepted["conversation_id"]).order_by(
                "created_at"
            )
        )
    )()
    assert [(m.role, m.status) for m in stored] == [("user", "complete"), ("assistant", "complete")]
    assert stored[0].content == question
    assert stored[1].content == answer_text(frames)
    assert str(stored[1].id) == accepted["assistant_message_id"]


async def test_follow_up_sends_the_conversation_history(
    connect: Connect, alice: User, scripted_worker: RunningWorker
) -> None:
    ws = await open_socket(connect, alice)
    first = await ask(ws, "first question")
    conversation_id = first[0]["conversation_id"]

    second = await ask(ws, "second question", conversation_id=conversation_id)

    assert second[0]["conversation_id"] == conversation_id
    prompt = scripted_worker.engine.prompts[-1]
    assert (
        prompt.index("first question")
        < prompt.index("You said: first question")
        < prompt.index("second question")
    )
    assert answer_text(second) == "You said: second question"
    count = await sync_to_async(Message.objects.filter(conversation_id=conversation_id).count)()
    assert count == 4


async def test_stop_aborts_generation_and_keeps_partial_answer(
    connect: Connect, alice: User, scripted_worker: RunningWorker
) -> None:
    ws = await open_socket(connect, alice)
    words = " ".join(f"w{i}" for i in range(60))
    accepted = await first_reply(ws, f"[[slow]] {words}")
    first_delta = await receive_delta(ws)
    assert first_delta["type"] == "chat.delta"

    await ws.send_json_to({"type": "chat.stop", "id": str(uuid.uuid4())})
    frames = [first_delta, *await receive_until(ws, "chat.done")]

    assert frames[-1]["status"] == "stopped"
    assert frames[-1]["finish_reason"] == "abort"
    partial = answer_text(frames)
    assert 0 < len(partial.split()) < 60
    assert scripted_worker.engine.stats().running_requests == 0
    assert scripted_worker.worker.active_requests == 0
    message = await sync_to_async(Message.objects.get)(id=accepted["assistant_message_id"])
    assert (message.status, message.content) == ("stopped", partial)


async def test_a_dropped_socket_leaves_the_answer_running_for_the_grace_period_then_aborts(
    connect: Connect, alice: User, scripted_worker: RunningWorker, settings: Any
) -> None:
    settings.CHAT_DISCONNECT_GRACE_S = 0.8
    ws = await open_socket(connect, alice)
    accepted = await first_reply(ws, "[[slow]] " + " ".join(["word"] * 200))
    assert (await receive_delta(ws))["type"] == "chat.delta"
    await ws.disconnect()

    await asyncio.sleep(0.4)  # within the grace period: still generating for a refresh
    assert scripted_worker.worker.active_requests == 1
    await until(lambda: scripted_worker.worker.active_requests == 0)
    assert scripted_worker.worker.active_requests == 0
    assert scripted_worker.engine.stats().running_requests == 0
    # the relay stores the row once the worker has confirmed the abort, a moment later
    message = await sync_to_async(Message.objects.get)(id=accepted["assistant_message_id"])
    for _ in range(100):
        if message.status != "streaming":
            break
        await asyncio.sleep(0.05)
        await sync_to_async(message.refresh_from_db)()
    assert message.status == "stopped"
    assert message.error_code == "client_disconnected"
    assert message.content.startswith("You said:")


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        ("{not json", "bad_json"),
        (json.dumps({"type": "chat.dance", "id": str(uuid.uuid4())}), "unknown_type"),
        (json.dumps([1, 2, 3]), "unknown_type"),
        (json.dumps({"type": "chat.send", "id": "not-a-uuid", "text": "hi"}), "invalid"),
        (json.dumps({"type": "chat.send", "id": str(uuid.uuid4()), "text": ""}), "invalid"),
        (
            json.dumps({"type": "chat.send", "id": str(uuid.uuid4()), "text": "x" * 70_000}),
            "too_large",
        ),
        (
            json.dumps({"type": "chat.send", "id": str(uuid.uuid4()), "text": "x" * 9_000}),
            "too_large",
        ),
    ],
)
async def test_bad_frames_get_a_typed_error_and_the_socket_stays_usable(
    connect: Connect, alice: User, scripted_worker: RunningWorker, payload: str, code: str
) -> None:
    ws = await open_socket(connect, alice)
    await ws.send_to(text_data=payload)
    error = await ws.receive_json_from(timeout=5)
    assert error["type"] == "chat.error"
    assert error["code"] == code
    assert error["message"]

    frames = await ask(ws, "still there?")
    assert answer_text(frames) == "You said: still there?"


@pytest.mark.parametrize(
    "frame",
    [
        {"text": "nul\x00inside"},
        {"text": "\x00"},
    ],
)
async def test_a_message_with_a_nul_character_is_refused_and_nothing_is_stored(
    connect: Connect, alice: User, scripted_worker: RunningWorker, frame: dict[str, str]
) -> None:
    """PostgreSQL's text cannot hold NUL: a clear `invalid` before anything is queued or
    stored, not "something went wrong" after the answer started."""
    ws = await open_socket(connect, alice)
    sent = send_frame(frame["text"])
    await ws.send_json_to(sent)
    error = await ws.receive_json_from(timeout=5)
    assert (error["type"], error["code"], error["id"]) == ("chat.error", "invalid", sent["id"])
    assert "NUL" in error["message"]
    assert await ws.receive_nothing(timeout=0.3)
    assert await sync_to_async(Message.objects.count)() == 0
    assert scripted_worker.engine.prompts == []


async def test_binary_frames_are_refused_with_a_typed_error(
    connect: Connect, alice: User, scripted_worker: RunningWorker
) -> None:
    ws = await open_socket(connect, alice)
    await ws.send_to(bytes_data=b"\x00\x01")
    error = await ws.receive_json_from(timeout=5)
    assert (error["type"], error["code"]) == ("chat.error", "invalid")


async def test_retried_send_never_starts_a_second_generation(
    connect: Connect, alice: User, scripted_worker: RunningWorker
) -> None:
    ws = await open_socket(connect, alice)
    frame = send_frame("only once")
    await ws.send_json_to(frame)
    first = await receive_until(ws, "chat.done")
    await ws.send_json_to(frame)
    again = await receive_until(ws, "chat.done")

    assert len(scripted_worker.engine.prompts) == 1
    assert again[0]["assistant_message_id"] == first[0]["assistant_message_id"]
    assert answer_text(again) == answer_text(first)
    assert await sync_to_async(Message.objects.count)() == 2


async def test_a_retried_send_gets_its_answer_even_when_no_new_one_would_be_admitted(
    connect: Connect, alice: User, scripted_worker: RunningWorker
) -> None:
    """The retry is not looked up before admission (that would cost every send a database
    round); when admission refuses, the answer it already has is shown instead."""
    ws = await open_socket(connect, alice)
    frame = send_frame("only once")
    await ws.send_json_to(frame)
    first = await receive_until(ws, "chat.done")
    scripted_worker.task.cancel()  # no worker left: a new send is refused no_worker
    for _ in range(100):
        if not scripted_worker.task.done():
            await asyncio.sleep(0.01)
    await ws.send_json_to(send_frame("a new question"))
    refused = await receive_until(ws, "chat.error")
    assert refused[-1]["code"] == "no_worker"

    await ws.send_json_to(frame)
    again = await receive_until(ws, "chat.done")
    assert [f["type"] for f in again if f["type"] == "chat.error"] == []
    assert again[0]["assistant_message_id"] == first[0]["assistant_message_id"]
    assert answer_text(again) == answer_text(first)


async def test_second_send_while_streaming_is_refused_as_busy(
    connect: Connect, alice: User, scripted_worker: RunningWorker
) -> None:
    ws = await open_socket(connect, alice)
    await ws.send_json_to(send_frame("[[slow]] one two three four five six seven"))
    await ws.receive_json_from(timeout=5)  # accepted
    other = send_frame("impatient")
    await ws.send_json_to(other)
    frames = await receive_until(ws, "chat.error")
    assert frames[-1]["code"] == "busy"
    assert frames[-1]["id"] == other["id"]
    await receive_until(ws, "chat.done")


async def test_someone_elses_conversation_is_not_found(
    connect: Connect, alice: User, bob: User, scripted_worker: RunningWorker
) -> None:
    conversation = await sync_to_async(Conversation.objects.create)(owner=bob, title="bob's")
    ws = await open_socket(connect, alice)
    error = await first_reply(ws, "let me in", conversation_id=str(conversation.id))
    assert (error["type"], error["code"]) == ("chat.error", "not_found")
    assert await sync_to_async(Message.objects.count)() == 0


async def test_engine_failure_mid_answer_is_reported_and_stored_as_failed(
    connect: Connect, alice: User, scripted_worker: RunningWorker
) -> None:
    ws = await open_socket(connect, alice)
    await ws.send_json_to(send_frame("[[fail]] please break"))
    frames = await receive_until(ws, "chat.error")
    assert frames[-1]["code"] == "engine"
    message = await sync_to_async(Message.objects.get)(id=frames[0]["assistant_message_id"])
    assert message.status == "failed"


async def test_a_conversation_too_long_for_the_model_says_so_and_the_socket_goes_on(
    connect: Connect, alice: User, scripted_worker: RunningWorker
) -> None:
    scripted_worker.engine.max_prompt_tokens = 12
    ws = await open_socket(connect, alice)
    await ws.send_json_to(send_frame(" ".join(["order"] * 20)))
    frames = await receive_until(ws, "chat.error")
    assert frames[-1]["code"] == "too_long"
    assert "Start a new conversation" in frames[-1]["message"]
    message = await sync_to_async(Message.objects.get)(id=frames[0]["assistant_message_id"])
    assert (message.status, message.error_code) == ("failed", "too_long")

    assert (await ask(ws, "short"))[-1]["status"] == "complete"


async def test_no_worker_is_reported_at_once_and_nothing_is_stored(
    connect: Connect, alice: User
) -> None:
    ws = await open_socket(connect, alice)
    error = await first_reply(ws, "anyone home?")
    assert (error["type"], error["code"]) == ("chat.error", "no_worker")
    assert error["retry_after_s"] >= 1
    assert await sync_to_async(Message.objects.count)() == 0  # the browser keeps the text


async def test_a_queued_request_waits_for_busy_workers_but_not_forever(
    connect: Connect, alice: User, settings: Any
) -> None:

    from inference.wire.protocol import REQUEST_CHANNEL
    from inference.wire.registry import worker_registry

    settings.CHAT_ACCEPT_TIMEOUT_S = 0.3
    settings.CHAT_QUEUE_TIMEOUT_S = 1.5
    registry = worker_registry(redis_url="")
    await registry.announce(worker_id="wedged", capacity=4, ttl_s=30)  # alive, never pulls
    try:
        ws = await open_socket(connect, alice)
        accepted = await first_reply(ws, "anyone home?")
        # past the accept timeout, but a live worker may still take it: keep waiting
        assert await ws.receive_nothing(timeout=0.8)
        error = await ws.receive_json_from(timeout=5)
        assert (error["type"], error["code"]) == ("chat.error", "busy")
        message = await sync_to_async(Message.objects.get)(id=accepted["assistant_message_id"])
        assert message.status == "failed"
    finally:
        await registry.withdraw(worker_id="wedged")
    # and the request nobody took is off the queue: no worker starts it later
    await _until_queue_empty(REQUEST_CHANNEL)


async def _until_queue_empty(queue: str) -> None:
    await asyncio.sleep(0.05)  # the withdrawal runs beside the end's write
    assert await embedded_queue().depth(queue) == 0


@pytest.mark.parametrize("lost", ["a middle delta", "the last delta"])
async def test_an_answer_whose_deltas_were_lost_in_transit_is_never_stored_complete(
    connect: Connect, alice: User, lost: str
) -> None:
    """A worker sends seq 1..4 but one delta never reaches the relay (a channel layer can drop
    a message): the answer ends `interrupted` with the text that arrived, never `complete`."""
    from channels.layers import get_channel_layer

    from inference.wire.protocol import REQUEST_CHANNEL, Accepted, Delta, GenerateRequest
    from inference.wire.registry import worker_registry
    from tests.support.wire import done

    layer = get_channel_layer()
    registry = worker_registry(redis_url="")
    await registry.announce(worker_id="by-hand", capacity=4, ttl_s=30)
    try:
        ws = await open_socket(connect, alice)
        await ws.send_json_to(send_frame("count to three"))
        taken = await embedded_queue().take(REQUEST_CHANNEL, consumer="test")
        request = GenerateRequest.model_validate(taken.message)
        reply, rid = request.reply_channel, request.request_id
        events: list[Any] = [
            Accepted(request_id=rid, worker_channel="worker.by-hand", queue_wait_ms=0.0),
            Delta(request_id=rid, seq=1, text="one", tokens=1),
            Delta(request_id=rid, seq=2, text=" two", tokens=1),
            Delta(request_id=rid, seq=3, text=" three", tokens=1),
            done(rid, 4, prompt_tokens=5, completion_tokens=3),
        ]
        del events[2 if lost == "a middle delta" else 3]
        for event in events:
            await layer.send(reply, event.to_channel())
        frames = await receive_until(ws, "chat.error")
        assert frames[-1]["code"] == "interrupted"
        message = await sync_to_async(Message.objects.get)(id=frames[0]["assistant_message_id"])
        assert (message.status, message.error_code) == ("failed", "interrupted")
        assert message.content == ("one" if lost == "a middle delta" else "one two")
    finally:
        await registry.withdraw(worker_id="by-hand")


async def test_a_worker_that_vanishes_before_taking_the_request_gives_no_worker(
    connect: Connect, alice: User, settings: Any
) -> None:

    from inference.wire.protocol import REQUEST_CHANNEL
    from inference.wire.registry import worker_registry

    settings.CHAT_ACCEPT_TIMEOUT_S = 0.3
    registry = worker_registry(redis_url="")
    await registry.announce(worker_id="doomed", capacity=4, ttl_s=30)
    ws = await open_socket(connect, alice)
    await ws.send_json_to(send_frame("anyone home?"))
    await ws.receive_json_from(timeout=5)
    await registry.withdraw(worker_id="doomed")
    frames = await receive_until(ws, "chat.error")
    assert frames[-1]["code"] == "no_worker"
    await _until_queue_empty(REQUEST_CHANNEL)


async def test_anonymous_users_are_refused(connect: Connect) -> None:
    ws = await connect(None)
    connected, code = await ws.connect()
    assert not connected
    assert code == 4401


async def test_foreign_origins_are_refused(connect: Connect, alice: User) -> None:
    ws = await connect(alice, origin=b"http://evil.example")
    connected, _ = await ws.connect()
    assert not connected


async def test_a_worker_that_dies_mid_answer_is_detected_and_the_answer_kept_as_failed(
    connect: Connect,
    alice: User,
    scripted_worker: RunningWorker,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings.CHAT_STALL_TIMEOUT_S = 0.6
    ws = await open_socket(connect, alice)
    accepted = await first_reply(ws, "[[slow]] " + " ".join(["word"] * 80))
    first = await receive_delta(ws)
    assert first["type"] == "chat.delta"

    scripted_worker.vanish()  # like kill -9: no error, no done, no heartbeat
    started = asyncio.get_running_loop().time()
    frames = [first, *await receive_until(ws, "chat.error", timeout=5)]
    assert frames[-1]["code"] == "worker_lost"
    assert asyncio.get_running_loop().time() - started < 3
    message = await sync_to_async(Message.objects.get)(id=accepted["assistant_message_id"])
    assert message.status == "failed"
    assert message.error_code == "worker_lost"
    assert message.content == answer_text(frames)
    assert message.content


async def test_a_long_silent_prefill_is_not_taken_for_a_dead_worker(
    connect: Connect, alice: User, scripted_worker: RunningWorker, settings: Any
) -> None:
    settings.CHAT_STALL_TIMEOUT_S = 0.5  # the engine is silent for 1 s; heartbeats every 0.1 s
    ws = await open_socket(connect, alice)
    frames = await ask(ws, "[[stall]] patience")
    assert answer_text(frames) == "You said: [[stall]] patience"


async def test_a_first_token_later_than_its_deadline_ends_the_wait_with_a_typed_error(
    connect: Connect, alice: User, scripted_worker: RunningWorker, settings: Any
) -> None:
    """The worker is alive (heartbeats) but the engine says nothing for 1 s: past the
    deadline the page gets `timeout`, not an endless spinner, and the engine request ends."""
    settings.CHAT_FIRST_TOKEN_TIMEOUT_S = 0.4
    ws = await open_socket(connect, alice)
    started = asyncio.get_running_loop().time()
    await ws.send_json_to(send_frame("[[stall]] patience"))
    frames = await receive_until(ws, "chat.error")
    waited = asyncio.get_running_loop().time() - started
    assert frames[-1]["code"] == "timeout"
    assert "did not start answering within 0.4 s" in frames[-1]["message"]
    assert [f for f in frames if f["type"] == "chat.delta"] == []
    assert 0.4 <= waited < 1.0  # before the stalled engine's first token would have come
    message = await sync_to_async(Message.objects.get)(id=frames[0]["assistant_message_id"])
    assert (message.status, message.error_code) == ("failed", "timeout")
    await until(lambda: scripted_worker.worker.active_requests == 0, timeout_s=2)
    assert scripted_worker.worker.active_requests == 0


async def test_edit_and_resend_replaces_the_question_and_drops_what_came_after(
    connect: Connect, alice: User, scripted_worker: RunningWorker
) -> None:
    ws = await open_socket(connect, alice)
    first = await ask(ws, "first question")
    conversation_id = first[0]["conversation_id"]
    await ask(ws, "second question", conversation_id=conversation_id)

    edit = edit_frame(first[0]["user_message_id"], "first question, reworded")
    await ws.send_json_to(edit)
    frames = await receive_until(ws, "chat.done")

    assert frames[0]["type"] == "chat.accepted"
    assert frames[0]["user_message_id"] == first[0]["user_message_id"]
    assert frames[0]["assistant_message_id"] == first[0]["assistant_message_id"]
    assert answer_text(frames) == "You said: first question, reworded"

    def stored_messages() -> list[tuple[str, str]]:
        rows = Message.objects.filter(conversation_id=conversation_id).order_by("created_at")
        return list(rows.values_list("role", "content"))

    stored = await sync_to_async(stored_messages)()
    assert stored == [
        ("user", "first question, reworded"),
        ("assistant", "You said: first question, reworded"),
    ]


async def test_editing_someone_elses_question_changes_nothing(
    connect: Connect, alice: User, bob: User, scripted_worker: RunningWorker
) -> None:
    ws = await open_socket(connect, alice)
    frames = await ask(ws, "alice asks")
    intruder = await open_socket(connect, bob)
    await intruder.send_json_to(edit_frame(frames[0]["user_message_id"], "bob was here"))
    error = await intruder.receive_json_from(timeout=5)
    assert (error["type"], error["code"]) == ("chat.error", "not_found")
    question = await sync_to_async(Message.objects.get)(id=frames[0]["user_message_id"])
    assert question.content == "alice asks"
