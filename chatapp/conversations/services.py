"""Writes for conversations: starting a turn and finishing an answer, each atomic."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from chatapp.conversations.models import Conversation, Message
from chatapp.errors import ApplicationError, ConflictError, NotFoundError
from chatapp.faq import services as faq_services
from chatapp.faq.models import FaqEntry, FaqSuggestion
from chatapp.prompts.models import PromptTemplateVersion
from inference.wire.protocol import AnswerStats

TITLE_CHARS = 60


@dataclass(frozen=True, slots=True)
class TurnStart:
    conversation: Conversation
    user_message: Message
    assistant_message: Message
    created: bool  # False: a retry of an earlier frame; nothing new was written

    @property
    def run_id(self) -> uuid.UUID:
        """The run generating the answer (for a retry: the run the first frame started)."""
        run_id = self.assistant_message.run_id
        assert run_id is not None, "every answer row written since migration 0006 has a run"
        return run_id


def turn_existing(*, sender: User, client_message_id: uuid.UUID) -> TurnStart | None:
    """The turn an earlier send with this client id started, if any (a retried send)."""
    user_message = (
        Message.objects.select_related("conversation")
        .filter(sender=sender, client_message_id=client_message_id)
        .first()
    )
    if user_message is None:
        return None
    assistant = Message.objects.get(reply_to=user_message)
    return TurnStart(
        conversation=user_message.conversation,
        user_message=user_message,
        assistant_message=assistant,
        created=False,
    )


@dataclass(frozen=True, slots=True)
class TurnIds:
    """The ids a turn's rows get, drawn before it is stored (its request is queued first)."""

    conversation: uuid.UUID  # used only when the turn starts a conversation
    user_message: uuid.UUID
    assistant_message: uuid.UUID

    @classmethod
    def new(cls) -> TurnIds:
        return cls(
            conversation=uuid.uuid4(), user_message=uuid.uuid4(), assistant_message=uuid.uuid4()
        )


def turn_start(
    *,
    sender: User,
    conversation_id: uuid.UUID | None,
    client_message_id: uuid.UUID,
    text: str,
    run_id: uuid.UUID,
    template_version: PromptTemplateVersion | None = None,
    ids: TurnIds | None = None,
) -> TurnStart:
    """Store the user's message and an empty assistant message that run `run_id` will fill,
    with `ids` when given.

    Idempotent on (sender, client_message_id): a retried send returns the first turn (and its
    run, not `run_id`).
    """
    ids = ids or TurnIds.new()
    existing = turn_existing(sender=sender, client_message_id=client_message_id)
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            if conversation_id is None:
                conversation = Conversation.objects.create(
                    id=ids.conversation,
                    owner=sender,
                    title=_title_from(text),
                    template_version=template_version,
                )
            else:
                found = (
                    Conversation.objects.select_for_update()
                    .filter(owner=sender, id=conversation_id)
                    .first()
                )
                if found is None:
                    raise NotFoundError("This conversation does not exist or is not yours.")
                conversation = found
                conversation.save(update_fields=["updated_at"])
            user_message = Message.objects.create(
                id=ids.user_message,
                conversation=conversation,
                role=Message.Role.USER,
                content=text,
                sender=sender,
                client_message_id=client_message_id,
            )
            assistant = _answer_create(
                conversation,
                user_message,
                run_id=run_id,
                client_id=client_message_id,
                answer_id=ids.assistant_message,
            )
    except IntegrityError:
        # A concurrent retry with the same client id won the race: return its turn.
        raced = turn_existing(sender=sender, client_message_id=client_message_id)
        if raced is None:
            raise
        return raced
    return TurnStart(
        conversation=conversation,
        user_message=user_message,
        assistant_message=assistant,
        created=True,
    )


@transaction.atomic
def answer_finish(
    *,
    message_id: uuid.UUID,
    run_id: uuid.UUID,
    content: str,
    status: Message.Status,
    finish_reason: str = "",
    error_code: str = "",
    stats: AnswerStats,
) -> bool:
    """Write run `run_id`'s finished answer once. False (nothing written) if the run already
    ended, or the row has moved on to another run (a regenerate or edit since)."""
    stats = _without_deleted_faq_entries(stats)
    updated = Message.objects.filter(
        id=message_id, run_id=run_id, status=Message.Status.STREAMING
    ).update(
        content=content,
        status=status,
        finish_reason=finish_reason,
        error_code=error_code,
        finished_at=timezone.now(),
        **stats.model_dump(),  # the stats' names are the row's columns
    )
    if updated and stats.faq_entry_id is not None:
        faq_services.faq_hit_record(entry_id=stats.faq_entry_id)
    if updated and stats.faq_near_entry_id is not None and stats.source == "model":
        question = Message.objects.filter(reply=message_id).values_list("id", "content").first()
        if question is not None:
            faq_services.faq_suggestion_record(
                entry_id=stats.faq_near_entry_id,
                question=question[1],
                message_id=question[0],
                source=FaqSuggestion.Source.NEAR_MISS,
            )
    return updated == 1


def _without_deleted_faq_entries(stats: AnswerStats) -> AnswerStats:
    """An entry deleted while its answer streamed must not make the answer unstorable; one
    deleted or disabled meanwhile is not offered as a suggestion (it would not answer)."""
    suggested = {s.entry_id for s in stats.suggested_entries}
    named = {i for i in (stats.faq_entry_id, stats.faq_near_entry_id) if i is not None}
    if not named and not suggested:
        return stats
    rows = list(FaqEntry.objects.filter(pk__in=named | suggested).values_list("pk", "enabled"))
    alive = {pk for pk, _ in rows}
    offered = {pk for pk, enabled in rows if enabled}
    return stats.model_copy(
        update={
            "faq_entry_id": stats.faq_entry_id if stats.faq_entry_id in alive else None,
            "faq_near_entry_id": (
                stats.faq_near_entry_id if stats.faq_near_entry_id in alive else None
            ),
            "suggested_entries": [s for s in stats.suggested_entries if s.entry_id in offered],
        }
    )


@dataclass(frozen=True, slots=True)
class Rerun:
    """A regenerate (`text` None: the answer `message_id` generated again) or an edit (the
    question `message_id` replaced by `text` and answered again), asked by frame `client_id`."""

    sender: User
    message_id: uuid.UUID
    client_id: uuid.UUID
    text: str | None = None


@dataclass(frozen=True, slots=True)
class RerunTarget:
    """The rows a rerun will change, as read before it does (`rerun_target`)."""

    conversation: Conversation
    question: Message
    answer: Message | None  # None: an edited question whose answer row is gone


def rerun_target(
    rerun: Rerun, *, conversation: Conversation | None = None
) -> TurnStart | RerunTarget:
    """What the rerun may change, or the turn an earlier frame of its client id started (a
    repeat: nothing new starts). Raises NotFoundError / ApplicationError for a rerun the user
    may not do (not theirs; still streaming; a regenerate of an answer that is not the
    newest). Read without a lock to plan the run, and again under the conversation's lock by
    the write (`rerun_store`), which alone decides."""
    messages = Message.objects.select_related("conversation", "reply_to").filter(
        id=rerun.message_id, conversation__owner=rerun.sender
    )
    if conversation is not None:
        messages = messages.filter(conversation=conversation)
    if rerun.text is None:
        answer = messages.filter(role=Message.Role.ASSISTANT).first()
        if answer is None or answer.reply_to is None:
            raise NotFoundError("No such answer in your conversations.")
        question = answer.reply_to
    else:
        question_or_none = messages.filter(role=Message.Role.USER).first()
        if question_or_none is None:
            raise NotFoundError("No such question in your conversations.")
        question = question_or_none
        answer = Message.objects.filter(reply_to=question).first()
    if answer is not None and answer.run_client_id == rerun.client_id:
        return TurnStart(
            conversation=question.conversation,
            user_message=question,
            assistant_message=answer,
            created=False,
        )
    if rerun.text is None:
        assert answer is not None
        if answer.status == Message.Status.STREAMING:
            raise ApplicationError("This answer is still streaming.")
        if question.conversation.messages.filter(created_at__gt=answer.created_at).exists():
            raise ApplicationError("Only the newest answer can be asked again.")
    elif question.conversation.messages.filter(status=Message.Status.STREAMING).exists():
        raise ConflictError("An answer is still streaming; stop it first.")
    return RerunTarget(conversation=question.conversation, question=question, answer=answer)


def rerun_store(rerun: Rerun, *, run_id: uuid.UUID, answer_id: uuid.UUID) -> TurnStart:
    """Store a rerun for run `run_id`: the answer cleared to be generated again into the same
    row (`answer_id` for an edited question whose answer row is gone); for an edit, the
    question replaced and every message after it deleted (the conversation continues from the
    edited question).

    The conversation is locked first, so a send from another tab either lands before (and
    the rerun is refused) or after. Idempotent on the rerun's client id: a repeated frame
    returns the run the first one started.
    """
    role = Message.Role.ASSISTANT if rerun.text is None else Message.Role.USER
    with transaction.atomic():
        conversation = _conversation_lock(
            Message.objects.filter(id=rerun.message_id, role=role, conversation__owner=rerun.sender)
        )
        target = rerun_target(rerun, conversation=conversation)
        if isinstance(target, TurnStart):
            return target
        question, answer = target.question, target.answer
        if rerun.text is not None:
            later = conversation.messages.filter(created_at__gt=question.created_at)
            if answer is not None:
                later = later.exclude(pk=answer.pk)
            later.delete()
            question.content = rerun.text
            question.save(update_fields=["content"])
        if answer is None:
            answer = _answer_create(
                conversation,
                question,
                run_id=run_id,
                client_id=rerun.client_id,
                answer_id=answer_id,
            )
        else:
            _answer_clear(answer, run_id=run_id, client_id=rerun.client_id)
        conversation.save(update_fields=["updated_at"])
    return TurnStart(
        conversation=conversation, user_message=question, assistant_message=answer, created=True
    )


def _conversation_lock(messages: QuerySet[Message]) -> Conversation:
    """Lock the conversation of the (one) message in `messages`, or refuse as not found.

    Every write that adds or removes turns takes this lock first (in one order: conversation,
    then messages), so two tabs' writes to one conversation run one after the other.
    """
    conversation_id = messages.values_list("conversation_id", flat=True).first()
    conversation = (
        Conversation.objects.select_for_update().filter(id=conversation_id).first()
        if conversation_id is not None
        else None
    )
    if conversation is None:
        raise NotFoundError("No such message in your conversations.")
    return conversation


def _answer_create(
    conversation: Conversation,
    question: Message,
    *,
    run_id: uuid.UUID,
    client_id: uuid.UUID,
    answer_id: uuid.UUID | None = None,
) -> Message:
    """The empty answer to `question` that run `run_id` (started by frame `client_id`) fills."""
    return Message.objects.create(
        id=answer_id or uuid.uuid4(),
        conversation=conversation,
        role=Message.Role.ASSISTANT,
        status=Message.Status.STREAMING,
        reply_to=question,
        run_id=run_id,
        run_started_at=timezone.now(),
        run_client_id=client_id,
    )


def _answer_clear(message: Message, *, run_id: uuid.UUID, client_id: uuid.UUID) -> None:
    Message.objects.filter(pk=message.pk).update(
        run_id=run_id,
        run_started_at=timezone.now(),
        run_client_id=client_id,
        content="",
        status=Message.Status.STREAMING,
        finish_reason="",
        error_code="",
        source="model",
        faq_entry=None,
        feedback="",
        finished_at=None,
        client_ttft_ms=None,  # the new answer gets its own measurement
    )
    message.refresh_from_db()


def answer_client_ttft_record(*, sender: User, message_id: uuid.UUID, ttft_ms: float) -> None:
    """Store the browser-measured time to first token of one of the sender's answers, once.

    A second report for the same answer (until it is generated again) is refused, so a
    replayed or forged frame cannot count twice.
    """
    answers = Message.objects.filter(
        id=message_id, role=Message.Role.ASSISTANT, conversation__owner=sender
    )
    if answers.filter(client_ttft_ms__isnull=True).update(client_ttft_ms=ttft_ms) == 1:
        return
    if not answers.exists():
        raise NotFoundError("No such answer in your conversations.")
    raise ApplicationError("The time to first token of this answer was already reported.")


def message_feedback(*, sender: User, message_id: uuid.UUID, rating: str) -> Message:
    """Record a thumbs up/down; a thumbs-down on a FAQ answer is counted on the entry."""
    with transaction.atomic():
        message = (
            Message.objects.select_for_update(of=("self",))
            .filter(id=message_id, role=Message.Role.ASSISTANT, conversation__owner=sender)
            .first()
        )
        if message is None:
            raise NotFoundError("No such answer in your conversations.")
        if message.feedback == rating:
            return message  # a repeated click counts once
        message.feedback = rating
        message.save(update_fields=["feedback"])
        if rating == "down" and message.faq_entry_id is not None:
            since = timezone.now() - timedelta(seconds=settings.CHAT_FAQ_THUMBS_DOWN_WINDOW_S)
            recent = Message.objects.filter(
                faq_entry_id=message.faq_entry_id, feedback="down", created_at__gte=since
            ).count()
            faq_services.faq_thumbs_down_record(entry_id=message.faq_entry_id, recent=recent)
    return message


def _title_from(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1].rstrip() + "…"
