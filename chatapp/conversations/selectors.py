"""Reads for conversations. Every read is scoped to its owner."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db.models import Q, QuerySet

from chatapp.conversations.models import Conversation, Message
from chatapp.faq.models import FaqEntry
from chatapp.prompts.models import PromptTemplateVersion


@dataclass(frozen=True, slots=True)
class Turn:
    role: str
    content: str


def conversation_get(*, owner: User, conversation_id: uuid.UUID) -> Conversation | None:
    return Conversation.objects.filter(owner=owner, id=conversation_id).first()


def conversation_messages(*, conversation: Conversation) -> QuerySet[Message]:
    return conversation.messages.order_by("created_at")


def conversation_history(
    *, conversation: Conversation, up_to: Message, max_messages: int
) -> list[Turn]:
    """The turns the model may see: finished, non-empty messages up to and including `up_to`.

    Failed or empty answers are left out so the model never continues a broken turn. A very
    long conversation is cut in steps of half of `max_messages`, never by one message a turn,
    so the history the worker gets (and trims to the model's context in its own steps, see
    `inference/prompt_builder.py`) starts at the same message for many turns in a row.
    """
    return _history_rows(conversation, up_to=up_to, max_messages=max_messages).turns(
        max_messages=max_messages
    )


# what each turn of the history is read with: the suggestions of an answer say whether the
# question after it asks one of them (`GenerationContext.repeats_suggestion`)
_TURN_FIELDS = ("role", "content", "suggested_entries")


@dataclass(frozen=True, slots=True)
class _Rows:
    # (role, content, suggested_entries), oldest first: the newest rows, after `skipped` older
    # ones that were not read (outside the window the model sees)
    rows: list[tuple[str, str, Any]]
    skipped: int = 0

    def turns(self, *, max_messages: int) -> list[Turn]:
        total = self.skipped + len(self.rows)
        start = _history_start(total, max_messages=max_messages) - self.skipped
        return alternating(
            [Turn(role=role, content=content) for role, content, _ in self.rows[start:]]
        )

    @property
    def first_question(self) -> bool:
        return self.skipped == 0 and len(self.rows) == 1 and self.rows[0][0] == "user"

    def repeats_suggestion(self) -> bool:
        """The last message is a question that repeats (ignoring case and spacing) one the
        answer right before it suggested ("Did you mean ...?")."""
        if len(self.rows) < 2 or self.rows[-1][0] != "user" or self.rows[-2][0] != "assistant":
            return False
        asked = _plain(self.rows[-1][1])
        offered = self.rows[-2][2] if isinstance(self.rows[-2][2], list) else []
        return any(
            isinstance(entry, dict) and _plain(str(entry.get("question", ""))) == asked
            for entry in offered
        )


def alternating(turns: Sequence[Turn]) -> list[Turn]:
    """User and assistant turns alternating, starting with the user: many chat templates
    (Gemma, Mistral, Llama-2 style) raise otherwise. Failed or empty answers are not shown to
    the model, so the questions around one are merged into one turn, and a window that starts
    with an answer drops it."""
    out: list[Turn] = []
    for turn in turns:
        if not out and turn.role != "user":
            continue
        if out and out[-1].role == turn.role:
            out[-1] = Turn(role=turn.role, content=f"{out[-1].content}\n\n{turn.content}")
        else:
            out.append(turn)
    return out


def _plain(text: str) -> str:
    return " ".join(text.casefold().split())


def _history_rows(
    conversation: Conversation,
    *,
    max_messages: int,
    up_to: Message | None = None,
    before: Message | None = None,
    to_come: int = 0,
) -> _Rows:
    """The window of rows the model will see, once `to_come` more are added: a count, then
    only the window's rows (a conversation of thousands of messages is not read whole on
    the database thread every socket shares). `up_to`, `before`: that message and the ones
    before it, or only those before it."""
    rows = _shown_to_the_model(conversation)
    if up_to is not None:
        rows = rows.filter(created_at__lte=up_to.created_at)
    if before is not None:
        rows = rows.filter(created_at__lt=before.created_at)
    skipped = _history_start(rows.count() + to_come, max_messages=max_messages)
    return _Rows(rows=list(rows.values_list(*_TURN_FIELDS)[skipped:]), skipped=skipped)


def _shown_to_the_model(conversation: Conversation) -> QuerySet[Message]:
    return (
        conversation.messages.exclude(status__in=(Message.Status.FAILED, Message.Status.STREAMING))
        .exclude(content="")
        .order_by("created_at")
    )


def _history_start(total: int, *, max_messages: int) -> int:
    step = max(max_messages // 2, 1)
    return step * max(0, -(-(total - max_messages) // step))  # ceil, in whole steps


@dataclass(frozen=True, slots=True)
class GenerationContext:
    turns: list[Turn]
    system_prompt: str | None
    sampling: dict[str, Any]
    template_id: int | None
    # the question repeats one the answer before it suggested: an FAQ entry's own question
    repeats_suggestion: bool = False
    # nothing was shown to the model before this question (not the same as one turn: the
    # questions around a failed answer are merged into one turn, `alternating`)
    first_question: bool = False

    @property
    def standalone(self) -> bool:
        """The question stands alone: safe to answer from the FAQ cache. That is the first
        turn, or a question the answer before it offered as a suggestion (the customer
        clicked "Did you mean ...?"): an FAQ entry's own question, which means the same
        whatever came before it.

        Any other follow-up ("and how long does that take?") depends on earlier turns, which
        an embedding of the last message cannot see, so it always goes to the model.
        """
        return self.first_question or self.repeats_suggestion


def generation_context(
    *, conversation_id: uuid.UUID, up_to: Message, max_messages: int
) -> GenerationContext:
    """Everything the worker needs for the next answer: history, system prompt, sampling."""
    conversation = Conversation.objects.select_related("template_version").get(id=conversation_id)
    return _context(
        rows=_history_rows(conversation, up_to=up_to, max_messages=max_messages),
        max_messages=max_messages,
        version=conversation.template_version,
    )


def next_turn_context(
    *,
    owner: User,
    conversation_id: uuid.UUID | None,
    text: str,
    template_version: PromptTemplateVersion | None,
    max_messages: int,
) -> GenerationContext | None:
    """What `generation_context` will read once `text` is stored as the conversation's next
    question, read before it is (a new conversation reads nothing), so the worker request
    can be queued while the turn is written. None: no such conversation of the owner's."""
    question: tuple[str, str, Any] = ("user", text, [])
    if conversation_id is None:
        return _context(
            rows=_Rows(rows=[question]), max_messages=max_messages, version=template_version
        )
    conversation = (
        Conversation.objects.select_related("template_version")
        .filter(owner=owner, id=conversation_id)
        .first()
    )
    if conversation is None:
        return None
    history = _history_rows(conversation, max_messages=max_messages, to_come=1)
    return _context(
        rows=_Rows(rows=[*history.rows, question], skipped=history.skipped),
        max_messages=max_messages,
        version=conversation.template_version,
    )


def edited_turn_context(
    *, conversation: Conversation, question: Message, text: str, max_messages: int
) -> GenerationContext:
    """What `generation_context` will read for `question` once an edit replaced its text with
    `text` (and deleted what came after it), read before the edit is stored, so the worker
    request can be queued while it is written."""
    history = _history_rows(conversation, before=question, max_messages=max_messages, to_come=1)
    return _context(
        rows=_Rows(rows=[*history.rows, ("user", text, [])], skipped=history.skipped),
        max_messages=max_messages,
        version=conversation.template_version,
    )


def _context(
    *, rows: _Rows, max_messages: int, version: PromptTemplateVersion | None
) -> GenerationContext:
    return GenerationContext(
        turns=rows.turns(max_messages=max_messages),
        system_prompt=version.system_prompt if version else None,
        sampling=dict(version.sampling) if version else {},
        template_id=version.template_id if version else None,
        repeats_suggestion=rows.repeats_suggestion(),
        first_question=rows.first_question,
    )


def answer_suggestions(*, messages: Sequence[Message]) -> dict[uuid.UUID, list[dict[str, Any]]]:
    """The suggestions ("Did you mean ...?") of these answers that may still be offered: an
    entry deleted or disabled since is left out (it would not answer from the FAQ)."""
    wanted = {
        entry["entry_id"]
        for m in messages
        for entry in m.suggested_entries or []
        if isinstance(entry, dict) and isinstance(entry.get("entry_id"), int)
    }
    if not wanted:
        return {}
    offered = set(FaqEntry.objects.filter(pk__in=wanted, enabled=True).values_list("pk", flat=True))
    return {
        m.id: [
            {"entry_id": entry["entry_id"], "question": str(entry.get("question", ""))}
            for entry in m.suggested_entries or []
            if isinstance(entry, dict) and entry.get("entry_id") in offered
        ]
        for m in messages
        if m.suggested_entries
    }


@dataclass(frozen=True, slots=True)
class StreamingRun:
    message_id: uuid.UUID
    run_id: uuid.UUID
    started_at: datetime


def streaming_runs_query(
    *, started_before: datetime, after: StreamingRun | None = None
) -> QuerySet[Message]:
    """Runs still streaming that started before the given time, oldest first, from just after
    `after` (None: from the oldest), read by the reaper (index answer_streaming_run)."""
    query = Message.objects.filter(
        status=Message.Status.STREAMING,
        run_started_at__lt=started_before,
        run_id__isnull=False,
    )
    if after is not None:
        query = query.filter(
            Q(run_started_at__gt=after.started_at)
            | Q(run_started_at=after.started_at, id__gt=after.message_id)
        )
    return query.order_by("run_started_at", "id")


def streaming_runs(
    *, started_before: datetime, after: StreamingRun | None, limit: int
) -> list[StreamingRun]:
    """The first `limit` of `streaming_runs_query`."""
    query = streaming_runs_query(started_before=started_before, after=after)
    rows = query.values_list("id", "run_id", "run_started_at")[:limit]
    return [
        StreamingRun(message_id=message_id, run_id=run_id, started_at=started_at)
        for message_id, run_id, started_at in rows
        if run_id is not None and started_at is not None
    ]


def answer_get(*, owner: User, message_id: uuid.UUID) -> Message | None:
    """One of the owner's assistant messages."""
    return Message.objects.filter(
        id=message_id, role=Message.Role.ASSISTANT, conversation__owner=owner
    ).first()


def conversation_list(*, owner: User, limit: int = 50) -> list[dict[str, str]]:
    """The owner's conversations, newest first, as the page and the API show them."""
    rows = Conversation.objects.filter(owner=owner).order_by("-updated_at")[:limit]
    return [
        {"id": str(c.id), "title": c.title, "updated_at": c.updated_at.isoformat()} for c in rows
    ]


def page_history(*, conversation: Conversation) -> list[dict[str, Any]]:
    """A conversation's messages as the chat page and the widget's panel render them (a
    person's message with their first name: docs/handoff.md)."""
    messages = list(conversation_messages(conversation=conversation).select_related("sender"))
    suggestions = answer_suggestions(messages=messages)
    return [
        {
            "id": str(m.id),
            "role": m.role,
            "content": m.content,
            "status": m.status,
            "source": m.source,
            "feedback": m.feedback,
            # "Did you mean ...?" under a model answer (entries still enabled)
            "suggested_entries": suggestions.get(m.id, []),
            "sender": _person(m),
        }
        for m in messages
    ]


def _person(m: Message) -> str | None:
    if m.role != Message.Role.AGENT or m.sender is None:
        return None
    return person_name(m.sender)


def person_name(user: User) -> str:
    """How a person of the team is named to customers: their first name."""
    return user.first_name or user.get_username()


def conversation_latest(*, owner: User) -> Conversation | None:
    return Conversation.objects.filter(owner=owner).order_by("-updated_at").first()
