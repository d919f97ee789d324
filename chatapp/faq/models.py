"""Admin-approved FAQ answers that may be served without the model."""

from __future__ import annotations

from django.db import models

from inference.faq.index import GLOBAL_SCOPE, template_scope

# longer questions are not offered as phrasings: a paragraph is not an FAQ question
SUGGESTED_QUESTION_CHARS = 300


class FaqEntry(models.Model):
    question = models.CharField(max_length=500)
    alternates = models.TextField(
        blank=True, help_text="Other phrasings of the same question, one per line."
    )
    answer = models.TextField()
    template = models.ForeignKey(
        "prompts.PromptTemplate",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="faq_entries",
        help_text="Empty: global. Otherwise only conversations started from this template.",
    )
    enabled = models.BooleanField(default=True)
    is_example = models.BooleanField(
        default=False, help_text="Seeded by `make run` for a first try; delete it when done."
    )
    hit_count = models.PositiveIntegerField(default=0)
    last_hit_at = models.DateTimeField(null=True, blank=True)
    thumbs_down = models.PositiveIntegerField(default=0)
    # why it stopped answering on its own (thumbs-downs); cleared when an admin enables it
    paused_reason = models.CharField(max_length=200, blank=True, editable=False)
    # float32 vectors, one row per phrasing, computed by Celery from `embedded_phrasings`
    vectors = models.BinaryField(null=True, blank=True, editable=False)
    embedded_phrasings = models.JSONField(default=list, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("question",)
        verbose_name = "FAQ entry"
        verbose_name_plural = "FAQ entries"

    def __str__(self) -> str:
        return self.question

    @property
    def phrasings(self) -> list[str]:
        lines = [self.question, *self.alternates.splitlines()]
        return list(dict.fromkeys(line.strip() for line in lines if line.strip()))

    @property
    def scope(self) -> str:
        return template_scope(self.template_id) if self.template_id else GLOBAL_SCOPE


class FaqSuggestion(models.Model):
    """A question users asked that may be another phrasing of an entry, for an admin to add
    as an alternate (one click) or dismiss. One row per entry and question text (compared
    without case and extra spaces): asking it again counts, it does not list it twice."""

    class Source(models.TextChoices):
        NEAR_MISS = "near_miss", "came close, answered by the model"
        MARKED = "marked", "an admin marked the model's answer as this FAQ"

    entry = models.ForeignKey(FaqEntry, on_delete=models.CASCADE, related_name="suggestions")
    question = models.CharField(max_length=SUGGESTED_QUESTION_CHARS)
    key = models.CharField(max_length=SUGGESTED_QUESTION_CHARS, editable=False)
    source = models.CharField(max_length=16, choices=Source.choices)
    times_asked = models.PositiveIntegerField(default=1)
    # the latest asking: deleting that conversation deletes the suggestion with it
    message = models.ForeignKey("conversations.Message", on_delete=models.CASCADE, related_name="+")
    dismissed = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_asked_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("-times_asked", "-last_asked_at")
        verbose_name = "suggested phrasing"
        constraints = (
            models.UniqueConstraint(fields=("entry", "key"), name="unique_suggestion_per_entry"),
        )

    def __str__(self) -> str:
        return self.question
