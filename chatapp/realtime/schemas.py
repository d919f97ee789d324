"""Typed WebSocket frames between the browser and the web process (docs/protocol.md).

Client frames are validated here; every server frame is one member of `ServerFrame`.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

ErrorCode = Literal[
    "bad_json",
    "too_large",
    "unknown_type",
    "invalid",
    "not_found",
    "busy",
    "no_worker",
    "engine",
    "internal",
]


class _Frame(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def to_json(self) -> str:
        return self.model_dump_json()


class SendFrame(_Frame):
    type: Literal["chat.send"]
    id: uuid.UUID
    conversation_id: uuid.UUID | None = None
    text: str = Field(min_length=1)


class StopFrame(_Frame):
    type: Literal["chat.stop"]
    id: uuid.UUID
    message_id: uuid.UUID | None = None


ClientFrame = Annotated[SendFrame | StopFrame, Field(discriminator="type")]
client_frame_adapter: TypeAdapter[SendFrame | StopFrame] = TypeAdapter(ClientFrame)
CLIENT_FRAME_TYPES = frozenset({"chat.send", "chat.stop"})


class AcceptedFrame(_Frame):
    type: Literal["chat.accepted"] = "chat.accepted"
    id: uuid.UUID
    conversation_id: uuid.UUID
    user_message_id: uuid.UUID
    assistant_message_id: uuid.UUID


class DeltaFrame(_Frame):
    type: Literal["chat.delta"] = "chat.delta"
    message_id: uuid.UUID
    seq: int
    text: str


class Usage(_Frame):
    prompt_tokens: int | None
    completion_tokens: int | None
    cached_prompt_tokens: int | None


class Timings(_Frame):
    queue_wait_ms: float | None
    ttft_ms: float | None
    total_ms: float | None


class DoneFrame(_Frame):
    type: Literal["chat.done"] = "chat.done"
    message_id: uuid.UUID
    status: Literal["complete", "stopped"]
    finish_reason: str
    usage: Usage
    timings: Timings


class ErrorFrame(_Frame):
    type: Literal["chat.error"] = "chat.error"
    id: uuid.UUID | None = None
    message_id: uuid.UUID | None = None
    code: ErrorCode
    message: str


ServerFrame = Annotated[
    AcceptedFrame | DeltaFrame | DoneFrame | ErrorFrame, Field(discriminator="type")
]
server_frame_adapter: TypeAdapter[AcceptedFrame | DeltaFrame | DoneFrame | ErrorFrame] = (
    TypeAdapter(ServerFrame)
)


def client_id_of(raw: Any) -> uuid.UUID | None:
    """Best effort: the `id` of a frame that failed validation, so the error can echo it."""
    if isinstance(raw, dict):
        try:
            return uuid.UUID(str(raw.get("id")))
        except ValueError:
            return None
    return None
