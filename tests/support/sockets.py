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
