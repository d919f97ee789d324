"""Channel-layer messages between sockets and the relay that owns an answer.

A socket may sit in any web process; the relay that started an answer owns it until it ends.
`type` doubles as the Channels handler name (`answer.entry` -> `answer_entry`).
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from chatapp.answers.entries import LoggedDelta, LoggedEnd


class _Message(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def to_channel(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


# ---- socket -> owning relay ------------------------------------------------------------


class AttachAnswer(_Message):
    """Watch an answer: the relay sends every entry after `after_seq`, then live ones."""

    type: Literal["answer.attach"] = "answer.attach"
    message_id: uuid.UUID
    watcher: str
    after_seq: int = Field(ge=0)


class DetachAnswer(_Message):
    type: Literal["answer.detach"] = "answer.detach"
    message_id: uuid.UUID
    watcher: str


class StopAnswer(_Message):
    type: Literal["answer.stop"] = "answer.stop"
    message_id: uuid.UUID


RelayControl = AttachAnswer | DetachAnswer | StopAnswer
relay_control_adapter: TypeAdapter[RelayControl] = TypeAdapter(
    Annotated[RelayControl, Field(discriminator="type")]
)

# ---- relay -> watching sockets ----------------------------------------------------------


class AnswerEntry(_Message):
    type: Literal["answer.entry"] = "answer.entry"
    message_id: uuid.UUID
    entry: Annotated[LoggedDelta | LoggedEnd, Field(discriminator="kind")]


class AnswerAlive(_Message):
    """The owning relay still tracks this answer (sent every few seconds while it runs)."""

    type: Literal["answer.alive"] = "answer.alive"
    message_id: uuid.UUID


class AnswerGone(_Message):
    """Reply to an attach for an answer this relay no longer tracks (it has ended)."""

    type: Literal["answer.gone"] = "answer.gone"
    message_id: uuid.UUID
