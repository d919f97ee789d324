"""The history the model sees alternates user and assistant, whatever happened to answers.

Chat templates of Gemma, Mistral and Llama-2 style raise on two user turns in a row (or a
first turn that is not the user's). A failed, empty or still-streaming answer is not shown to
the model, which used to leave two questions in a row: every later message of that
conversation was then refused `invalid` (issue 31, defect 7).
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from chatapp.conversations.models import Conversation, Message
from chatapp.conversations.selectors import Turn, alternating, generation_context

pytestmark = pytest.mark.django_db


def conversation_of(*rows: tuple[str, str, str]) -> tuple[Conversation, Message]:
    owner = User.objects.create_user("alternation")
    conversation = Conversation.objects.create(owner=owner)
    last = None
    for role, content, status in rows:
        last = Message.objects.create(
            conversation=conversation, role=role, content=content, status=status
        )
    assert last is not None
    return conversation, last


def test_a_failed_answer_does_not_leave_two_questions_in_a_row() -> None:
    conversation, last = conversation_of(
        ("user", "Where is my order?", "complete"),
        ("assistant", "", "failed"),
        ("user", "Hello? Where is it?", "complete"),
    )
    context = generation_context(conversation_id=conversation.id, up_to=last, max_messages=50)
    assert context.turns == [Turn(role="user", content="Where is my order?\n\nHello? Where is it?")]
    # one turn, but a follow-up ("Hello? Where is it?"): the model answers, not the FAQ cache
    assert not context.standalone


def test_an_empty_answer_between_follow_ups_is_merged_over_and_the_rest_kept() -> None:
    conversation, last = conversation_of(
        ("user", "Hi", "complete"),
        ("assistant", "Hello! How can I help?", "complete"),
        ("user", "Refund please", "complete"),
        ("assistant", "", "stopped"),
        ("user", "For order 42", "complete"),
    )
    context = generation_context(conversation_id=conversation.id, up_to=last, max_messages=50)
    assert [t.role for t in context.turns] == ["user", "assistant", "user"]
    assert context.turns[-1].content == "Refund please\n\nFor order 42"


def test_the_window_never_starts_with_an_answer() -> None:
    turns = [Turn("assistant", "a0"), Turn("user", "u1"), Turn("assistant", "a1")]
    assert alternating([*turns, Turn("user", "u2")]) == [
        Turn("user", "u1"),
        Turn("assistant", "a1"),
        Turn("user", "u2"),
    ]
    assert alternating([Turn("user", "u"), Turn("user", "v"), Turn("user", "w")]) == [
        Turn("user", "u\n\nv\n\nw")
    ]
    assert alternating([]) == []


def test_the_first_question_stands_alone() -> None:
    conversation, last = conversation_of(("user", "Where is my order?", "complete"))
    context = generation_context(conversation_id=conversation.id, up_to=last, max_messages=50)
    assert context.standalone


def test_a_long_conversations_context_reads_only_the_window_the_model_sees() -> None:
    """Issue 31 defect 1: the context read had no LIMIT, so a send into a conversation of
    thousands of messages read them all on the database thread every socket shares. Only the
    window (at most `max_messages`) is read now, and it is the same window as before."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from chatapp.conversations.selectors import next_turn_context

    conversation, last = conversation_of(
        *[("user" if i % 2 == 0 else "assistant", f"m{i}", "complete") for i in range(300)]
    )
    with CaptureQueriesContext(connection) as queries:
        context = generation_context(conversation_id=conversation.id, up_to=last, max_messages=50)
    # 300 messages, cut in steps of 25: the window starts at message 250
    assert [t.content for t in context.turns] == [f"m{i}" for i in range(250, 300)]
    assert not context.first_question
    fetched = [q["sql"] for q in queries.captured_queries if '"content" AS' in q["sql"]]
    assert len(fetched) == 1
    assert "OFFSET 250" in fetched[0]

    follow_up = next_turn_context(
        owner=conversation.owner,
        conversation_id=conversation.id,
        text="and then?",
        template_version=None,
        max_messages=50,
    )
    assert follow_up is not None
    # 301 with the new question: the window moves on to message 275 (an answer: dropped)
    assert [t.content for t in follow_up.turns] == [
        *(f"m{i}" for i in range(276, 300)),
        "and then?",
    ]
