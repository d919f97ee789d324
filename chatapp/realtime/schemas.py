"""Typed WebSocket frames between the browser and the web process (docs/protocol.md).

Client frames are validated here; every server frame is one member of `ServerFrame`.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    TypeAdapter,
    model_validator,
)

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
    "template_unknown",
    "worker_lost",
    "interrupted",
    "rate_limited",
    "too_long",
    "unavailable",
    "timeout",
    "forbidden",
]

ERROR_CODES: frozenset[str] = frozenset(get_args(ErrorCode))
HEX64 = r"^[0-9a-f]{64}$"


class Frame(BaseModel):
    """A frame: immutable, no field it does not declare."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def to_json(self) -> str:
        return self.model_dump_json()


DB_INT_MAX = 2**31 - 1  # larger ids cannot exist, and the database refuses to look them up


class TemplateRef(Frame):
    id: int = Field(ge=1, le=DB_INT_MAX)
    version: int = Field(ge=1, le=DB_INT_MAX)
    sha256: str = Field(pattern=HEX64)


class SendFrame(Frame):
    type: Literal["chat.send"]
    id: uuid.UUID
    conversation_id: uuid.UUID | None = None
    text: str | None = Field(default=None, min_length=1)
    template: TemplateRef | None = None
    variables: dict[str, StrictStr | StrictInt] | None = None
    patch: str | None = None
    result_sha256: str | None = Field(default=None, pattern=HEX64)

    @model_validator(mode="after")
    def _text_or_template(self) -> SendFrame:
        if self.template is None:
            if self.text is None:
                raise ValueError("text is required without a template")
            if self.variables is not None or self.patch is not None:
                raise ValueError("variables and patch need a template")
        if self.patch is not None and self.result_sha256 is None:
            raise ValueError("a patch needs result_sha256")
        if self.patch is not None and self.text is not None:
            raise ValueError("send either a patch or the full text, not both")
        return self


class StopFrame(Frame):
    type: Literal["chat.stop"]
    id: uuid.UUID
    message_id: uuid.UUID | None = None


class RegenerateFrame(Frame):
    """Answer the newest question again; `bypass_faq` is "Ask the assistant instead"."""

    type: Literal["chat.regenerate"]
    id: uuid.UUID
    message_id: uuid.UUID
    bypass_faq: bool = False


class FeedbackFrame(Frame):
    type: Literal["chat.feedback"]
    id: uuid.UUID
    message_id: uuid.UUID
    rating: Literal["up", "down"]


class EditFrame(Frame):
    """Edit-and-resend: replace one of your questions; later messages are removed and the
    question is answered again into its answer's message."""

    type: Literal["chat.edit"]
    id: uuid.UUID
    message_id: uuid.UUID
    text: str = Field(min_length=1)


class ResumeFrame(Frame):
    """Continue showing an answer after a reconnect: everything after `last_seq`, then live."""

    type: Literal["chat.resume"]
    id: uuid.UUID
    message_id: uuid.UUID
    last_seq: int = Field(default=0, ge=0, le=1_000_000)


CLIENT_TTFT_MAX_MS = 600_000.0  # ten minutes: anything longer is not a measurement


class ClientTimingFrame(Frame):
    """The browser's time to first token of one of your answers: from sending the frame that
    asked for it to painting its first token. Reported once per answer (for metrics)."""

    type: Literal["chat.client_timing"]
    id: uuid.UUID
    message_id: uuid.UUID
    ttft_ms: float = Field(gt=0, le=CLIENT_TTFT_MAX_MS, allow_inf_nan=False, strict=True)


class DraftFrame(Frame):
    """What the user is typing as the next question of a conversation (None: a new chat),
    so a worker can prefill its prompt before Send (typing prefill). With `template`, the
    first message of a new conversation from that template, its variables filled in: `text`
    is the message as the page shows it, prefilled after the template's system prompt (the
    reference's sha256 is not checked: a draft derives nothing from the browser's copy).
    No reply unless it is refused; never stored or logged."""

    type: Literal["chat.draft"]
    id: uuid.UUID
    conversation_id: uuid.UUID | None = None
    text: str = Field(min_length=1)
    template: TemplateRef | None = None

    @model_validator(mode="after")
    def _template_starts_a_conversation(self) -> DraftFrame:
        if self.template is not None and self.conversation_id is not None:
            raise ValueError("a template can only start a new conversation")
        return self


class HandoffFrame(Frame):
    """Ask for a person in a conversation (`request`: the same again while waiting or held
    is one ask), stop waiting (`cancel`), or, while nobody of the team is online, leave an
    email address to be written to (`contact`, with `email`). Answered with
    `chat.handoff_state`."""

    type: Literal["chat.handoff"]
    id: uuid.UUID
    conversation_id: uuid.UUID
    action: Literal["request", "cancel", "contact"]
    email: str | None = Field(default=None, max_length=254)
    # a request the customer made from the page's offer (after a thumbs-down), or on their own
    reason: Literal["asked", "offered"] = "asked"

    @model_validator(mode="after")
    def _email_with_contact(self) -> HandoffFrame:
        if (self.action == "contact") != (self.email is not None):
            raise ValueError("`email` comes with action `contact`, and only with it")
        return self


class SyncFrame(Frame):
    """The page shows `conversation_id` (loaded, or reconnected): who answers it now
    (`chat.handoff_state`), the messages stored after `after_message_id` that people wrote
    (`chat.human`, each once; all of them when null), then the live ones."""

    type: Literal["chat.sync"]
    id: uuid.UUID
    conversation_id: uuid.UUID
    after_message_id: uuid.UUID | None = None


class TypingFrame(Frame):
    """The customer is writing in a conversation a person is asked for or holds: the person
    sees "typing…" (`agent.customer_typing`). The page sends one every 2 s at most while
    typing; nothing is stored."""

    type: Literal["chat.typing"]
    id: uuid.UUID
    conversation_id: uuid.UUID


AnyClientFrame = (
    SendFrame
    | HandoffFrame
    | SyncFrame
    | TypingFrame
    | DraftFrame
    | StopFrame
    | RegenerateFrame
    | FeedbackFrame
    | ResumeFrame
    | EditFrame
    | ClientTimingFrame
)
ClientFrame = Annotated[AnyClientFrame, Field(discriminator="type")]
client_frame_adapter: TypeAdapter[AnyClientFrame] = TypeAdapter(ClientFrame)
CLIENT_FRAME_TYPES = frozenset(
    {
        "chat.send",
        "chat.stop",
        "chat.regenerate",
        "chat.feedback",
        "chat.resume",
        "chat.edit",
        "chat.client_timing",
        "chat.draft",
        "chat.handoff",
        "chat.sync",
        "chat.typing",
    }
)


class AcceptedFrame(Frame):
    type: Literal["chat.accepted"] = "chat.accepted"
    id: uuid.UUID
    conversation_id: uuid.UUID
    user_message_id: uuid.UUID
    assistant_message_id: uuid.UUID


class DeltaFrame(Frame):
    type: Literal["chat.delta"] = "chat.delta"
    message_id: uuid.UUID
    seq: int
    text: str


class Usage(Frame):
    prompt_tokens: int | None
    completion_tokens: int | None
    cached_prompt_tokens: int | None


class Timings(Frame):
    queue_wait_ms: float | None
    ttft_ms: float | None
    total_ms: float | None


class FirstTokenHops(Frame):
    """Where the answer's time to first token went on the server, in ms. The web process's
    marks count from when it read the frame that asked for the answer (its clock); the
    worker's from when it started serving the request (its clock). None: not measured (an
    answer this socket did not start, or a step it never reached)."""

    admitted_ms: float | None = None
    stored_ms: float | None = None
    queued_ms: float | None = None
    relay_first_delta_ms: float | None = None
    socket_first_delta_ms: float | None = None
    worker_prompt_ms: float | None = None
    worker_engine_first_token_ms: float | None = None
    worker_first_delta_sent_ms: float | None = None


class SuggestedEntry(Frame):
    """An FAQ entry the answer's question may have meant ("Did you mean ...?"): sending
    `question` as the next message answers it from that entry."""

    entry_id: int
    question: str


class DoneFrame(Frame):
    type: Literal["chat.done"] = "chat.done"
    message_id: uuid.UUID
    status: Literal["complete", "stopped"]
    finish_reason: str
    usage: Usage
    timings: Timings
    source: Literal["model", "faq"] = "model"
    faq_entry_id: int | None = None
    # its first worker died mid-answer and it went on on another one (shown with the stats)
    resumed: bool = False
    hops: FirstTokenHops | None = None
    # a model answer to a question the FAQ decision was unsure about: the likely entries
    suggested_entries: list[SuggestedEntry] = Field(default_factory=list, max_length=2)
    # the answer says it cannot help, or the question asked for a person: offer one
    offer_person: bool = False


class StartedFrame(Frame):
    """A worker started the answer: it is reading the question (prefill) and its first token
    follows. Before it (after `chat.accepted`) the answer waits in the queue."""

    type: Literal["chat.started"] = "chat.started"
    message_id: uuid.UUID


class SnapshotFrame(Frame):
    """The whole text of an answer so far; replaces what the browser shows for it. Sent on a
    resume when the stream log can no longer give exactly the missing part."""

    type: Literal["chat.snapshot"] = "chat.snapshot"
    message_id: uuid.UUID
    content: str


class ResendFullFrame(Frame):
    type: Literal["chat.resend_full"] = "chat.resend_full"
    id: uuid.UUID
    reason: Literal["base_mismatch", "patch_failed", "hash_mismatch"]


class FeedbackRecordedFrame(Frame):
    type: Literal["chat.feedback_recorded"] = "chat.feedback_recorded"
    id: uuid.UUID
    message_id: uuid.UUID
    rating: Literal["up", "down"]


class TemplatesChangedFrame(Frame):
    type: Literal["templates.changed"] = "templates.changed"
    etag: str


class HandoffStateFrame(Frame):
    """Who answers the conversation now, and what the customer is told, in words."""

    type: Literal["chat.handoff_state"] = "chat.handoff_state"
    conversation_id: uuid.UUID
    state: Literal["bot", "waiting", "with_agent", "closed"]
    notice: str
    position: int | None = None  # in line, 1 = next; only while waiting
    agent: str | None = None  # the first name of the person holding it
    nobody_online: bool = False  # waiting, and no agent console is open
    contact_email: str | None = None  # the address the customer left while nobody was


class ConversationMessage(Frame):
    id: uuid.UUID
    role: Literal["user", "assistant", "agent"]
    content: str
    sender: str | None = None  # a person's first name (role "agent")
    created_at: str  # ISO 8601


def conversation_message(item: dict[str, Any]) -> ConversationMessage:
    """A message as chatapp.handoff.selectors.message_item gives it."""
    return ConversationMessage(
        id=uuid.UUID(item["id"]),
        role=item["role"],
        content=item["content"],
        sender=item["sender"],
        created_at=item["created_at"],
    )


class HumanMessageFrame(Frame):
    """A message written while a person is asked for or holds the conversation: the
    customer's (to the customer's own tabs, `id` = its `chat.send` id on the sending socket)
    or the agent's. Stored before it is sent; a page shows each message id once."""

    type: Literal["chat.human"] = "chat.human"
    id: uuid.UUID | None = None
    conversation_id: uuid.UUID
    message: ConversationMessage


class AgentTypingFrame(Frame):
    """The person holding the conversation is writing (shown a few seconds)."""

    type: Literal["chat.agent_typing"] = "chat.agent_typing"
    conversation_id: uuid.UUID
    agent: str  # their first name


class ErrorFrame(Frame):
    type: Literal["chat.error"] = "chat.error"
    id: uuid.UUID | None = None
    message_id: uuid.UUID | None = None
    code: ErrorCode
    message: str
    # busy, rate_limited, no_worker, unavailable: when trying again makes sense
    retry_after_s: float | None = None


AnyServerFrame = (
    AcceptedFrame
    | StartedFrame
    | DeltaFrame
    | DoneFrame
    | SnapshotFrame
    | ErrorFrame
    | ResendFullFrame
    | TemplatesChangedFrame
    | FeedbackRecordedFrame
    | HandoffStateFrame
    | HumanMessageFrame
    | AgentTypingFrame
)
ServerFrame = Annotated[AnyServerFrame, Field(discriminator="type")]
server_frame_adapter: TypeAdapter[AnyServerFrame] = TypeAdapter(ServerFrame)


def client_id_of(raw: Any) -> uuid.UUID | None:
    """Best effort: the `id` of a frame that failed validation, so the error can echo it."""
    if isinstance(raw, dict):
        try:
            return uuid.UUID(str(raw.get("id")))
        except ValueError:
            return None
    return None
