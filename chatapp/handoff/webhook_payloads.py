"""What the handoff webhook sends: one JSON body per event, declared once here.

Every body has the same envelope (`id`: the delivery id, also sent as a header, on which
receivers dedupe; `event`; `occurred_at`; the handoff, its conversation and the state the
change led to) and the fields of its event. `webhook_examples.json` holds one golden example
of each, checked against these models by tests/chatapp/handoff/test_webhook_payloads.py and
shown in docs/handoff.md#webhook.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from chatapp.handoff.states import State

EXAMPLES_PATH = Path(__file__).with_name("webhook_examples.json")


class Person(BaseModel):
    """A customer or an agent: the account's id, its username and its name in words."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: int
    username: str
    name: str


class _Envelope(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: uuid.UUID  # the delivery id (header X-Chat-Delivery)
    occurred_at: datetime
    handoff_id: int
    conversation_id: uuid.UUID
    state: State  # the handoff's state after the change


class Requested(_Envelope):
    """The customer asked for a person (asking again while waiting is not a new ask)."""

    event: Literal["handoff.requested"] = "handoff.requested"
    reason: Literal["asked", "typed", "offered"]  # models.Handoff.Reason
    customer: Person


class Cancelled(_Envelope):
    """The customer stopped waiting: back to the assistant."""

    event: Literal["handoff.cancelled"] = "handoff.cancelled"


class Claimed(_Envelope):
    event: Literal["handoff.claimed"] = "handoff.claimed"
    agent: Person


class Transferred(_Envelope):
    event: Literal["handoff.transferred"] = "handoff.transferred"
    from_agent: Person
    agent: Person  # who holds it now


class Released(_Envelope):
    """The agent gave the conversation back to the assistant."""

    event: Literal["handoff.released"] = "handoff.released"
    agent: Person


class Closed(_Envelope):
    event: Literal["handoff.closed"] = "handoff.closed"
    agent: Person  # who closed it
    resolution: str


class ContactLeft(_Envelope):
    """Nobody of the team was online: the waiting customer left an address to write back to."""

    event: Literal["handoff.contact_left"] = "handoff.contact_left"
    email: str


class MessageBody(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: uuid.UUID
    author: Literal["customer", "agent"]
    agent: Person | None  # the agent who wrote it; None for the customer's
    text: str
    created_at: datetime


class MessageSent(_Envelope):
    """A message while a person is asked for or holds the conversation: the customer's or the
    agent's (the assistant's answers are not sent)."""

    event: Literal["handoff.message"] = "handoff.message"
    message: MessageBody


WebhookPayload = Annotated[
    Requested | Cancelled | Claimed | Transferred | Released | Closed | ContactLeft | MessageSent,
    Field(discriminator="event"),
]
payload_adapter: TypeAdapter[WebhookPayload] = TypeAdapter(WebhookPayload)

EventName = Literal[
    "handoff.requested",
    "handoff.cancelled",
    "handoff.claimed",
    "handoff.transferred",
    "handoff.released",
    "handoff.closed",
    "handoff.contact_left",
    "handoff.message",
]
