"""Conversations made as the socket makes them, without a socket."""

from __future__ import annotations

import uuid

from django.contrib.auth.models import User

from chatapp.conversations import services
from chatapp.conversations.models import Conversation, Message
from chatapp.conversations.services import answer_finish
from inference.wire.protocol import AnswerStats


def first_turn(user: User, text: str) -> services.TurnStart:
    """A new conversation of `user`'s, asking `text`: the question and its streaming answer."""
    return services.turn_start(
        sender=user,
        conversation_id=None,
        client_message_id=uuid.uuid4(),
        text=text,
        run_id=uuid.uuid4(),
    )


def model_answered(user: User, question: str, stats: AnswerStats) -> Message:
    """A new conversation of `user`'s: `question` and the model's answer with `stats`, stored
    as the relay stores an answer (`answer_finish`)."""
    conversation = Conversation.objects.create(owner=user)
    asked = Message.objects.create(
        conversation=conversation, role=Message.Role.USER, content=question
    )
    run_id = uuid.uuid4()
    answer = Message.objects.create(
        conversation=conversation,
        role=Message.Role.ASSISTANT,
        status=Message.Status.STREAMING,
        reply_to=asked,
        run_id=run_id,
    )
    stored = answer_finish(
        message_id=answer.id,
        run_id=run_id,
        content="A model answer.",
        status=Message.Status.COMPLETE,
        stats=stats,
    )
    assert stored
    answer.refresh_from_db()
    return answer
