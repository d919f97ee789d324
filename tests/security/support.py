"""Helpers of the security suite: HTTP clients and sockets as a user would have them."""

from __future__ import annotations

import json
from typing import Any

from channels.testing import WebsocketCommunicator

from chatapp.asgi import application

Frame = dict[str, Any]


def raw_socket(headers: list[tuple[bytes, bytes]]) -> WebsocketCommunicator:
    """A socket on the real ASGI app with exactly these headers (no origin added)."""
    return WebsocketCommunicator(application, "/ws/chat/", headers=headers)


async def frames_until_quiet(ws: WebsocketCommunicator, *, quiet_s: float = 0.3) -> list[Frame]:
    """Everything the socket receives until it has been silent for `quiet_s`."""
    # receive_nothing, not a timed-out receive: a receive timeout cancels the application.
    frames: list[Frame] = []
    while not await ws.receive_nothing(timeout=quiet_s):
        frames.append(await ws.receive_json_from())
    return frames


def leaks(frames: list[Frame], secret: str) -> bool:
    return secret in json.dumps(frames, ensure_ascii=False)
