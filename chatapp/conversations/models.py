"""Conversations and their messages. An assistant message is written once, when it ends."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class Conversation(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations"
    )
    title = models.CharField(max_length=200, blank=True)
    # The published template the conversation started from: its system prompt is the fixed
    # prefix of every turn (None: the model's default prompt).
    template_version = models.ForeignKey(
        "prompts.PromptTemplateVersion",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="conversations",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("-updated_at",)
        indexes = (models.Index(fields=("owner", "-updated_at")),)

    def __str__(self) -> str:
        return self.title or f"Conversation {self.id}"


class Message(models.Model):
    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"
        AGENT = "agent"  # a person of the team, holding the conversation (chatapp/handoff)

    class Status(models.TextChoices):
        STREAMING = "streaming"
        COMPLETE = "complete"
        STOPPED = "stopped"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="messages"
    )
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.COMPLETE)
    sender = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
    )
    # Client-generated id of the `chat.send` that created a user message: a retry with the
    # same id returns this message instead of starting a second generation.
    client_message_id = models.UUIDField(null=True, blank=True)
    reply_to = models.OneToOneField(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="reply"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    finish_reason = models.CharField(max_length=16, blank=True)
    error_code = models.CharField(max_length=32, blank=True)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    cached_prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    queue_wait_ms = models.FloatField(null=True, blank=True)
    ttft_ms = models.FloatField(null=True, blank=True)
    total_ms = models.FloatField(null=True, blank=True)
    # Time to first token as the sender's browser measured it (send to first painted token),
    # reported once by a `chat.client_timing` frame; None until reported.
    client_ttft_ms = models.FloatField(null=True, blank=True)
    # "faq": the answer came from an admin-approved FAQ entry, not the model.
    source = models.CharField(max_length=8, default="model")
    faq_entry = models.ForeignKey(
        "faq.FaqEntry", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # A model answer to a question that came close to this FAQ entry without being answered
    # from it: the question is listed as a suggested phrasing of the entry (FaqSuggestion).
    faq_near_entry = models.ForeignKey(
        "faq.FaqEntry", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # A model answer to a question the FAQ decision was unsure about: the likely entries,
    # [{"entry_id", "question"}] (`inference.wire.protocol.SuggestedEntry`), offered under the
    # answer as "Did you mean ...?"; sending one's question back is answered from that entry.
    suggested_entries = models.JSONField(default=list, blank=True)
    feedback = models.CharField(max_length=8, blank=True)
    # Its first inference worker died mid-answer and it went on on another (migration).
    resumed = models.BooleanField(default=False)
    # The run generating (or last generated) this answer: a regenerate or edit starts a new run
    # in the same row. Every write of the answer names its run, so a late write of an earlier
    # run (a stale relay, a reaper that read an old log) lands on no row.
    run_id = models.UUIDField(null=True, blank=True)
    run_started_at = models.DateTimeField(null=True, blank=True)
    # Client id of the frame that started the run (send, regenerate, edit): a repeated frame
    # with the same id follows this run instead of starting another.
    run_client_id = models.UUIDField(null=True, blank=True)

    class Meta:
        ordering = ("created_at",)
        constraints = (
            models.UniqueConstraint(
                fields=("sender", "client_message_id"),
                name="unique_client_message_per_sender",
            ),
        )
        indexes = (
            # The latency dashboard reads finished answers by time, newest first.
            models.Index(
                fields=("-finished_at",),
                name="answer_finished_at",
                condition=models.Q(role="assistant"),
            ),
            # The orphan reaper of every web process reads streaming runs by start time.
            models.Index(
                fields=("run_started_at",),
                name="answer_streaming_run",
                condition=models.Q(status="streaming"),
            ),
        )

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:40]}"
