"""Typed frames of the agent console's socket (`/ws/agent/`, docs/handoff.md)."""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

from pydantic import Field, TypeAdapter

from chatapp.realtime.schemas import DB_INT_MAX, ConversationMessage, ErrorCode, Frame

HandoffId = Annotated[int, Field(ge=1, le=DB_INT_MAX)]


class ClaimFrame(Frame):
    """Take a waiting conversation (`agent.handoff` to all, or `agent.error` busy naming
    who was first)."""

    type: Literal["agent.claim"]
    id: uuid.UUID
    handoff_id: HandoffId


class OpenFrame(Frame):
    """Show a conversation: its transcript after `after_message_id` (all when null), then
    its live messages and changes."""

    type: Literal["agent.open"]
    id: uuid.UUID
    conversation_id: uuid.UUID
    after_message_id: uuid.UUID | None = None


class ReplyFrame(Frame):
    """A reply to the customer of a conversation the agent holds; stored, then delivered.
    The same `id` again is the same reply (after a reconnect), never a second."""

    type: Literal["agent.send"]
    id: uuid.UUID
    handoff_id: HandoffId
    text: str = Field(min_length=1)


class ReleaseFrame(Frame):
    """Back to the assistant."""

    type: Literal["agent.release"]
    id: uuid.UUID
    handoff_id: HandoffId


class CloseFrame(Frame):
    type: Literal["agent.close"]
    id: uuid.UUID
    handoff_id: HandoffId
    resolution: str = Field(default="", max_length=500)


class TransferFrame(Frame):
    type: Literal["agent.transfer"]
    id: uuid.UUID
    handoff_id: HandoffId
    to_agent: str = Field(min_length=1, max_length=150)  # a username


class DraftStopFrame(Frame):
    """The agent started writing their own reply: stop the model's draft of it."""

    type: Literal["agent.draft_stop"]
    id: uuid.UUID
    conversation_id: uuid.UUID


class AgentTypingClientFrame(Frame):
    """The agent is writing a reply in a conversation they hold: the customer sees
    "Dana is typing…". Sent every 2 s at most while typing; nothing is stored."""

    type: Literal["agent.typing"]
    id: uuid.UUID
    conversation_id: uuid.UUID


AnyAgentClientFrame = (
    ClaimFrame
    | OpenFrame
    | ReplyFrame
    | ReleaseFrame
    | CloseFrame
    | TransferFrame
    | DraftStopFrame
    | AgentTypingClientFrame
)
agent_client_frame_adapter: TypeAdapter[AnyAgentClientFrame] = TypeAdapter(
    Annotated[AnyAgentClientFrame, Field(discriminator="type")]
)
AGENT_CLIENT_FRAME_TYPES = frozenset(
    {
        "agent.claim",
        "agent.open",
        "agent.send",
        "agent.release",
        "agent.close",
        "agent.transfer",
        "agent.draft_stop",
        "agent.typing",
    }
)


class QueueItem(Frame):
    handoff_id: int
    conversation_id: uuid.UUID
    state: Literal["waiting", "with_agent"]
    waited_s: float
    site: str | None
    customer: str
    first_question: str
    last_message: str
    agent: str | None
    mine: bool
    contact_email: str | None  # left while nobody was online: write back there
    # asked: the button; typed: in words; offered: the assistant's offer (docs/handoff.md)
    reason: Literal["asked", "typed", "offered"]
    # the FAQ entries (questions) the conversation came close to: where the answer may be
    near_entries: list[str] = Field(default_factory=list, max_length=3)


class QueueFrame(Frame):
    """The open handoffs: waiting ones, longest wait first, then those with a person."""

    type: Literal["agent.queue"] = "agent.queue"
    items: list[QueueItem]


class TranscriptFrame(Frame):
    type: Literal["agent.transcript"] = "agent.transcript"
    id: uuid.UUID  # the agent.open it answers
    conversation_id: uuid.UUID
    handoff_id: int | None
    state: Literal["bot", "waiting", "with_agent", "closed"]
    agent: str | None
    mine: bool  # held by this agent
    messages: list[ConversationMessage]


class AgentMessageFrame(Frame):
    """A message in a conversation the console shows (the customer's or an agent's); `id`:
    the agent.send it answers, on the sending socket."""

    type: Literal["agent.message"] = "agent.message"
    id: uuid.UUID | None = None
    conversation_id: uuid.UUID
    message: ConversationMessage


class AgentHandoffFrame(Frame):
    """Who answers a conversation the console shows changed."""

    type: Literal["agent.handoff"] = "agent.handoff"
    conversation_id: uuid.UUID
    handoff_id: int | None
    state: Literal["bot", "waiting", "with_agent", "closed"]
    agent: str | None
    mine: bool  # held by this agent


class AgentDraftFrame(Frame):
    """The model's draft of a reply to the customer's last message, as it is written: `text`
    is the next piece (empty at the end). `status`: `streaming`, then `done`, `stopped`
    (agent.draft_stop, a reply sent), `failed`, or `busy` (no engine free: no draft)."""

    type: Literal["agent.draft"] = "agent.draft"
    conversation_id: uuid.UUID
    draft_id: uuid.UUID
    text: str
    status: Literal["streaming", "done", "stopped", "failed", "busy"]
    # with `done`: "faq", the draft is an admin-approved FAQ entry's answer, not the model's
    source: Literal["model", "faq"] = "model"


class CustomerTypingFrame(Frame):
    """The customer of a conversation the console shows is writing (shown a few seconds)."""

    type: Literal["agent.customer_typing"] = "agent.customer_typing"
    conversation_id: uuid.UUID


class AgentErrorFrame(Frame):
    type: Literal["agent.error"] = "agent.error"
    id: uuid.UUID | None = None
    code: ErrorCode
    message: str


AnyAgentServerFrame = (
    QueueFrame
    | TranscriptFrame
    | AgentMessageFrame
    | AgentHandoffFrame
    | AgentDraftFrame
    | CustomerTypingFrame
    | AgentErrorFrame
)
agent_server_frame_adapter: TypeAdapter[AnyAgentServerFrame] = TypeAdapter(
    Annotated[AnyAgentServerFrame, Field(discriminator="type")]
)
