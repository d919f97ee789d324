"""The chat socket in process: a `WebsocketCommunicator` on the full ASGI app, and its frames."""

from __future__ import annotations

import uuid
from typing import Any

from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User

from tests.conftest import Connect


async def open_socket(connect: Connect, user: User | None) -> WebsocketCommunicator:
    communicator = await connect(user)
    connected, _ = await communicator.connect()
    assert connected
    return communicator


def send_frame(
    text: str, *, conversation_id: str | None = None, frame_id: str | None = None
) -> dict[str, Any]:
    return {
        "type": "chat.send",
        "id": frame_id or str(uuid.uuid4()),
        "conversation_id": conversation_id,
        "text": text,
    }


def draft_frame(text: str, conversation_id: str | None, **fields: Any) -> dict[str, Any]:
    return {
        "type": "chat.draft",
        "id": str(uuid.uuid4()),
        "conversation_id": conversation_id,
        "text": text,
        **fields,
    }


def edit_frame(message_id: str, text: str, frame_id: str | None = None) -> dict[str, Any]:
    return {
        "type": "chat.edit",
        "id": frame_id or str(uuid.uuid4()),
        "message_id": message_id,
        "text": text,
    }


def regenerate_frame(message_id: str, frame_id: str | None = None, **fields: Any) -> dict[str, Any]:
    return {
        "type": "chat.regenerate",
        "id": frame_id or str(uuid.uuid4()),
        "message_id": message_id,
        **fields,
    }


def feedback_frame(message_id: str, rating: str) -> dict[str, Any]:
    return {
        "type": "chat.feedback",
        "id": str(uuid.uuid4()),
        "message_id": message_id,
        "rating": rating,
    }


def resume_frame(message_id: str, last_seq: int = 0, frame_id: str | None = None) -> dict[str, Any]:
    return {
        "type": "chat.resume",
        "id": frame_id or str(uuid.uuid4()),
        "message_id": message_id,
        "last_seq": last_seq,
    }


async def first_reply(
    ws: WebsocketCommunicator, text: str, conversation_id: str | None = None
) -> dict[str, Any]:
    """Sends a question and returns the first frame the server answers it with (for an
    accepted question its `chat.accepted`)."""
    await ws.send_json_to(send_frame(text, conversation_id=conversation_id))
    frame: dict[str, Any] = await ws.receive_json_from(timeout=5)
    return frame


async def ask(
    ws: WebsocketCommunicator, text: str, conversation_id: str | None = None
) -> list[dict[str, Any]]:
    """Sends a question and returns its answer's frames, up to its `chat.done`."""
    await ws.send_json_to(send_frame(text, conversation_id=conversation_id))
    return await receive_until(ws, "chat.done")


async def receive_until(
    ws: WebsocketCommunicator, kind: str, timeout: float = 5
) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = []
    while True:
        frame = await ws.receive_json_from(timeout=timeout)
        frames.append(frame)
        if frame["type"] == kind:
            return frames
        if frame["type"] == "chat.error" and kind != "chat.error":
            raise AssertionError(f"unexpected error frame {frame}")


async def receive_delta(ws: WebsocketCommunicator, timeout: float = 5) -> dict[str, Any]:
    """The next `chat.delta`, past the `chat.started` that comes before an answer's first."""
    frame: dict[str, Any] = await ws.receive_json_from(timeout=timeout)
    if frame["type"] == "chat.started":
        frame = await ws.receive_json_from(timeout=timeout)
    return frame


def answer_text(frames: list[dict[str, Any]]) -> str:
    return "".join(f["text"] for f in frames if f["type"] == "chat.delta")


def handoff_frame(conversation_id: str, action: str = "request", **fields: Any) -> dict[str, Any]:
    """A customer's `chat.handoff` (ask for a person, cancel, leave a contact)."""
    return {
        "type": "chat.handoff",
        "id": str(uuid.uuid4()),
        "conversation_id": conversation_id,
        "action": action,
        **fields,
    }


def claim_frame(handoff_id: int) -> dict[str, Any]:
    """An agent's `agent.claim` of a waiting ask."""
    return {"type": "agent.claim", "id": str(uuid.uuid4()), "handoff_id": handoff_id}


async def next_of(ws: WebsocketCommunicator, kind: str) -> dict[str, Any]:
    """The next frame of `kind` (frames before it are skipped)."""
    return (await receive_until(ws, kind))[-1]


async def state_becomes(ws: WebsocketCommunicator, state: str) -> dict[str, Any]:
    """The customer's next chat.handoff_state in `state` (earlier ones, e.g. "somebody is
    online now" while waiting, are skipped)."""
    while (frame := await next_of(ws, "chat.handoff_state"))["state"] != state:
        pass
    return frame
