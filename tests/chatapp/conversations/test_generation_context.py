"""The history the model sees alternates user and assistant, whatever happened to answers.

Chat templates of Gemma, Mistral and Llama-2 style raise on two user turns in a row (or a
first turn that is not the user's). A failed, empty or still-streaming answer is not shown to
the model, which used to leave two questions in a row: every later message of that
conversation was then refused `invalid` (issue 31, defect 7).
"""

from __future__ import annotations

import itertools
import uuid

import pytest
from django.contrib.auth.models import User

from chatapp.conversations import services
from chatapp.conversations.models import Conversation, Message
from chatapp.conversations.selectors import (
    GenerationContext,
    Turn,
    alternating,
    edited_turn_context,
    generation_context,
)

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


def _edited_both_ways(
    rows: list[tuple[str, str, str]],
    *,
    edit: int,
    text: str,
    max_messages: int,
    offers: dict[int, list[dict[str, object]]] | None = None,
) -> tuple[GenerationContext, GenerationContext]:
    """The context an edit of row `edit` to `text` plans with (read before it is stored), and
    the one `generation_context` reads once it is. `offers`: suggestions of answer rows."""
    conversation, _ = conversation_of(*rows)
    messages = list(conversation.messages.order_by("created_at"))
    for index, offered in (offers or {}).items():
        messages[index].suggested_entries = offered
        messages[index].save(update_fields=["suggested_entries"])
    for earlier, later in itertools.pairwise(messages):
        if earlier.role == "user" and later.role == "assistant":
            later.reply_to = earlier
            later.save(update_fields=["reply_to"])
    question = messages[edit]
    planned = edited_turn_context(
        conversation=conversation, question=question, text=text, max_messages=max_messages
    )
    rerun = services.Rerun(
        sender=conversation.owner, message_id=question.id, client_id=uuid.uuid4(), text=text
    )
    services.rerun_store(rerun, run_id=uuid.uuid4(), answer_id=uuid.uuid4())
    question.refresh_from_db()
    stored = generation_context(
        conversation_id=conversation.id, up_to=question, max_messages=max_messages
    )
    return planned, stored


@pytest.mark.parametrize(
    ("rows", "edit", "text", "max_messages"),
    [
        # a plain follow-up, later turns deleted by the edit
        (
            [
                ("user", "Hi", "complete"),
                ("assistant", "Hello!", "complete"),
                ("user", "Refund?", "complete"),
                ("assistant", "Sure.", "complete"),
                ("user", "When?", "complete"),
                ("assistant", "Soon.", "complete"),
            ],
            2,
            "Refund for order 42?",
            50,
        ),
        # a failed answer before it: the questions around it merge into one turn
        (
            [
                ("user", "Where is my order?", "complete"),
                ("assistant", "", "failed"),
                ("user", "Hello?", "complete"),
                ("assistant", "It ships today.", "complete"),
            ],
            2,
            "Hello? Anyone?",
            50,
        ),
        # a long conversation: the edit moves the window the model sees
        (
            [(role, f"{role} {n}", "complete") for n in range(7) for role in ("user", "assistant")],
            10,
            "the edited question",
            4,
        ),
        # the first question
        (
            [("user", "Where is my order?", "complete"), ("assistant", "Here.", "complete")],
            0,
            "x",
            50,
        ),
    ],
)
def test_an_edit_is_planned_with_the_context_it_will_be_answered_with(
    rows: list[tuple[str, str, str]], edit: int, text: str, max_messages: int
) -> None:
    """Issue 31, "one runs.start()": an edit's worker request is built before the edit is
    stored, from `edited_turn_context`; the model must see what a reload would show."""
    planned, stored = _edited_both_ways(rows, edit=edit, text=text, max_messages=max_messages)
    assert planned == stored
    assert planned.turns[-1].role == "user"
    assert planned.turns[-1].content.endswith(text)


def test_an_edit_to_the_question_the_answer_before_it_offered_stands_alone() -> None:
    planned, stored = _edited_both_ways(
        [
            ("user", "How do returns work?", "complete"),
            ("assistant", "Did you mean one of these?", "complete"),
            ("user", "returns", "complete"),
            ("assistant", "...", "complete"),
        ],
        edit=2,
        text="How do I return an item?",
        max_messages=50,
        offers={1: [{"entry_id": 1, "question": "How do I return an item?"}]},
    )
    assert planned == stored
    assert planned.standalone  # the FAQ cache may answer it, planned and stored alike
