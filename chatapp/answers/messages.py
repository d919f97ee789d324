"""Channel-layer messages between the watchers of a run and the relay that owns it.

A watcher (a socket, an API request) may sit in any web process; the relay that started a
run owns it until it ends. Every message names the run, not only the message: a regenerate
or edit starts a new run in the same message, and a watcher of the old run must never be
shown the new one's text as if it were the rest of the old. `type` doubles as the Channels
handler name (`answer.entry` -> `answer_entry`).
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from chatapp.answers.entries import LoggedDelta, LoggedEnd


class _Message(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    message_id: uuid.UUID
    run_id: uuid.UUID

    def to_channel(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


# ---- watcher -> owning relay --------------------------------------------------------------


class AttachAnswer(_Message):
    """Watch a run: the relay sends every entry after `after_seq`, then live ones."""

    type: Literal["answer.attach"] = "answer.attach"
    watcher: str
    after_seq: int = Field(ge=0)


class DetachAnswer(_Message):
    type: Literal["answer.detach"] = "answer.detach"
    watcher: str


class StopAnswer(_Message):
    type: Literal["answer.stop"] = "answer.stop"


RelayControl = AttachAnswer | DetachAnswer | StopAnswer
relay_control_adapter: TypeAdapter[RelayControl] = TypeAdapter(
    Annotated[RelayControl, Field(discriminator="type")]
)

# ---- relay -> watchers ----------------------------------------------------------------------


class AnswerEntry(_Message):
    type: Literal["answer.entry"] = "answer.entry"
    entry: Annotated[LoggedDelta | LoggedEnd, Field(discriminator="kind")]


class AnswerAlive(_Message):
    """The owning relay still runs this (sent every heartbeat while it does)."""

    type: Literal["answer.alive"] = "answer.alive"


class AnswerStarted(_Message):
    """A worker started generating the answer (it is prefilling): sent to the watchers, so a
    page can say so while it waits for the first token."""

    type: Literal["answer.started"] = "answer.started"


class AnswerGone(_Message):
    """Reply to an attach for a run this relay no longer runs (it has ended)."""

    type: Literal["answer.gone"] = "answer.gone"


RelayReply = AnswerEntry | AnswerAlive | AnswerStarted | AnswerGone
relay_reply_adapter: TypeAdapter[RelayReply] = TypeAdapter(
    Annotated[RelayReply, Field(discriminator="type")]
)
