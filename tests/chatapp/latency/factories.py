"""Builders for latency tests: finished answers, as the relay stores them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.models import User

from chatapp.conversations.models import Conversation, Message


def answer_create(*, finished_at: datetime, **fields: Any) -> Message:
    """A question and its finished answer (complete, from the model, unless told otherwise)."""
    owner, _ = User.objects.get_or_create(username="latency-user")
    conversation = Conversation.objects.create(owner=owner, title="t")
    question = Message.objects.create(
        conversation=conversation, role=Message.Role.USER, content="q", sender=owner
    )
    values: dict[str, Any] = {
        "conversation": conversation,
        "role": Message.Role.ASSISTANT,
        "content": "a",
        "status": Message.Status.COMPLETE,
        "reply_to": question,
        "finished_at": finished_at,
        "source": "model",
    }
    values.update(fields)
    return Message.objects.create(**values)
