"""Point 1 (WebSocket): Alice can neither read, resume, steer nor change Bob's conversations.

Bob's data is made the way a user makes it: through his own socket, with the worker (scripted
engine) answering. Every frame of the protocol that names a conversation or a message is then
aimed by Alice at Bob's, both at a finished answer and at one still streaming (live in the
relay, the case where a careless attach would hand Alice the stream). Each must be refused
with a typed `not_found` naming Alice's frame, nothing Alice's socket receives may contain
Bob's text, and Bob's stored messages (and his live answer) must carry on untouched.

`not_found` is also the answer for a live conversation (never `busy`), so the reply does not
even tell Alice that Bob is generating right now.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User

from chatapp.conversations.models import Message
from chatapp.realtime.schemas import CLIENT_FRAME_TYPES
from tests.conftest import Connect, RunningWorker
from tests.security.support import Frame, frames_until_quiet, leaks, raw_socket
from tests.support.sockets import (
    edit_frame,
    feedback_frame,
    open_socket,
    receive_delta,
    receive_until,
    regenerate_frame,
    send_frame,
)
from tests.support.users import client_for

pytestmark = pytest.mark.django_db(transaction=True)

BOB_SECRET = "parcel-ZX5521-for-bob"  # in Bob's questions and so in the echoed answers
BOB_LIVE_WORDS = 10  # at 50 ms a word ([[slow]]) Bob's live answer streams for ~0.5 s


@dataclass(frozen=True)
class BobsTurn:
    conversation_id: str
    question_id: str
    client_message_id: str
    answer_id: str


async def bob_asks(ws: WebsocketCommunicator, text: str) -> BobsTurn:
    frame = send_frame(text)
    await ws.send_json_to(frame)
    accepted = await ws.receive_json_from(timeout=5)
    assert accepted["type"] == "chat.accepted", accepted
    return BobsTurn(
        conversation_id=accepted["conversation_id"],
        question_id=accepted["user_message_id"],
        client_message_id=frame["id"],
        answer_id=accepted["assistant_message_id"],
    )


def bobs_rows(conversation_id: str) -> list[tuple[Any, ...]]:
    return list(
        Message.objects.filter(conversation_id=conversation_id)
        .order_by("created_at")
        .values_list("id", "role", "content", "status", "feedback", "client_ttft_ms")
    )


# Each builder aims one frame at Bob's turn; `id` is Alice's own frame id.
HostileFrame = Callable[[BobsTurn], Frame]


def resume(turn: BobsTurn) -> Frame:
    return {"type": "chat.resume", "id": str(uuid.uuid4()), "message_id": turn.answer_id}


def stop(turn: BobsTurn) -> Frame:
    return {"type": "chat.stop", "id": str(uuid.uuid4()), "message_id": turn.answer_id}


def feedback(turn: BobsTurn) -> Frame:
    return feedback_frame(turn.answer_id, "down")


def edit(turn: BobsTurn) -> Frame:
    return edit_frame(turn.question_id, "alice rewrote this")


def regenerate(turn: BobsTurn) -> Frame:
    return regenerate_frame(turn.answer_id)


def send_into(turn: BobsTurn) -> Frame:
    return {
        "type": "chat.send",
        "id": str(uuid.uuid4()),
        "conversation_id": turn.conversation_id,
        "text": "alice joins in",
    }


def client_timing(turn: BobsTurn) -> Frame:
    return {
        "type": "chat.client_timing",
        "id": str(uuid.uuid4()),
        "message_id": turn.answer_id,
        "ttft_ms": 123.0,
    }


CASES = [resume, stop, feedback, edit, regenerate, send_into, client_timing]


@pytest.fixture
async def bob_socket(connect: Connect, bob: User) -> WebsocketCommunicator:
    return await open_socket(connect, bob)


@pytest.fixture
async def alice_socket(connect: Connect, alice: User) -> WebsocketCommunicator:
    return await open_socket(connect, alice)


def assert_refused(reply: Frame, frame: Frame) -> None:
    assert reply["type"] == "chat.error", f"{frame['type']} on Bob's data was not refused: {reply}"
    assert reply["code"] == "not_found", reply
    assert reply["id"] == frame["id"], "the refusal names Alice's frame"
    assert reply["message"]


@pytest.mark.parametrize("build", CASES, ids=lambda b: b.__name__)
async def test_frames_aimed_at_bobs_finished_answer_are_refused_and_leak_nothing(
    alice_socket: WebsocketCommunicator,
    bob_socket: WebsocketCommunicator,
    scripted_worker: RunningWorker,
    build: HostileFrame,
) -> None:
    turn = await bob_asks(bob_socket, f"where is my {BOB_SECRET} please")
    bobs_frames = await receive_until(bob_socket, "chat.done")
    assert leaks(bobs_frames, BOB_SECRET), "the test needs Bob's answer to hold the secret"
    before = await sync_to_async(bobs_rows)(turn.conversation_id)

    frame = build(turn)
    assert frame["type"] in CLIENT_FRAME_TYPES
    await alice_socket.send_json_to(frame)
    received = await frames_until_quiet(alice_socket)

    assert received, "Alice's frame got no answer at all"
    assert_refused(received[0], frame)
    assert len(received) == 1, f"more than the refusal reached Alice: {received}"
    assert not leaks(received, BOB_SECRET)
    assert await sync_to_async(bobs_rows)(turn.conversation_id) == before


@pytest.mark.parametrize("build", CASES, ids=lambda b: b.__name__)
async def test_frames_aimed_at_bobs_live_answer_are_refused_and_bob_keeps_streaming(
    alice_socket: WebsocketCommunicator,
    bob_socket: WebsocketCommunicator,
    scripted_worker: RunningWorker,
    build: HostileFrame,
) -> None:
    question = f"[[slow]] {BOB_SECRET} " + " ".join(["word"] * (BOB_LIVE_WORDS - 4))
    turn = await bob_asks(bob_socket, question)
    first = await receive_delta(bob_socket)
    assert first["type"] == "chat.delta"  # Bob's answer is live in the relay now

    frame = build(turn)
    await alice_socket.send_json_to(frame)
    reply = await alice_socket.receive_json_from(timeout=5)
    assert_refused(reply, frame)

    # Bob's answer goes on to its end, for Bob only, neither stopped nor changed by Alice.
    bobs_frames = [first, *await receive_until(bob_socket, "chat.done", timeout=10)]
    assert bobs_frames[-1]["status"] == "complete"
    answer = "".join(f["text"] for f in bobs_frames if f["type"] == "chat.delta")
    assert answer == f"You said: {question}"
    alices_frames = [reply, *await frames_until_quiet(alice_socket)]
    assert alices_frames == [reply], f"Bob's stream reached Alice: {alices_frames}"
    stored = await sync_to_async(Message.objects.get)(id=turn.answer_id)
    assert (stored.status, stored.content, stored.feedback, stored.client_ttft_ms) == (
        "complete",
        answer,
        "",
        None,
    )


async def test_reusing_bobs_client_message_id_starts_alices_own_turn(
    alice_socket: WebsocketCommunicator,
    bob_socket: WebsocketCommunicator,
    scripted_worker: RunningWorker,
) -> None:
    """The client id makes a retried send idempotent; it must be idempotent per sender only,
    or guessing (or seeing) Bob's id would replay Bob's answer to Alice."""
    turn = await bob_asks(bob_socket, f"track {BOB_SECRET}")
    await receive_until(bob_socket, "chat.done")

    await alice_socket.send_json_to(send_frame("alice asks", frame_id=turn.client_message_id))
    frames = await receive_until(alice_socket, "chat.done")

    accepted = frames[0]
    assert accepted["type"] == "chat.accepted"
    assert accepted["conversation_id"] != turn.conversation_id
    assert accepted["assistant_message_id"] != turn.answer_id
    assert "".join(f["text"] for f in frames if f["type"] == "chat.delta") == "You said: alice asks"
    assert not leaks(frames, BOB_SECRET)


async def test_a_socket_without_a_login_is_closed_before_any_frame(connect: Connect) -> None:
    ws = await connect(None)
    connected, close_code = await ws.connect()
    assert (connected, close_code) == (False, 4401)


def _logged_out_cookie(user: User) -> str:
    client = client_for(user)
    cookie = client.cookies["sessionid"].value
    client.post("/accounts/logout/")
    return cookie


@pytest.mark.parametrize("kind", ["forged", "logged-out"])
async def test_a_forged_or_logged_out_session_cookie_opens_no_socket(
    alice: User, kind: str
) -> None:
    cookie = "0" * 32 if kind == "forged" else await sync_to_async(_logged_out_cookie)(alice)
    ws = raw_socket([(b"origin", b"http://localhost"), (b"cookie", f"sessionid={cookie}".encode())])
    connected, close_code = await ws.connect()
    assert (connected, close_code) == (False, 4401)
