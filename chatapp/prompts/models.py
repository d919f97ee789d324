"""Prompt templates: an editable draft and immutable published versions."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models


class PromptTemplate(models.Model):
    """The draft an admin edits. Users only ever see published versions."""

    name = models.CharField(max_length=120, unique=True)
    description = models.CharField(max_length=300, blank=True)
    system_prompt = models.TextField(
        help_text="Static instructions shared by every conversation that uses this template. "
        "Keep volatile content (dates, times, names, {{variables}}) out of it: it must be "
        "byte-identical for every user so the model's prefix cache can reuse it."
    )
    body = models.TextField(
        help_text="The user's first message, with {{variable}} placeholders the user fills in."
    )
    variables: models.JSONField[list[dict[str, Any]]] = models.JSONField(
        default=list,
        blank=True,
        help_text='List of {"name", "label", "type": "string"|"integer"|"choice", '
        '"required", "max_length", "choices"}.',
    )
    sampling: models.JSONField[dict[str, Any]] = models.JSONField(
        default=dict,
        blank=True,
        help_text=(
            'Sampling overrides; what is left out takes the model\'s default: {"max_tokens": '
            'int, "temperature": float, "top_p": float, "repetition_penalty": float}.'
        ),
    )
    enabled = models.BooleanField(default=True, help_text="Disabled templates are not offered.")
    is_example = models.BooleanField(
        default=False, help_text="Seeded by `make run` for a first try; disable it when done."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("name",)

    def __str__(self) -> str:
        return self.name


class PromptTemplateVersion(models.Model):
    """One published, immutable snapshot of a template. Conversations point at one."""

    template = models.ForeignKey(PromptTemplate, on_delete=models.PROTECT, related_name="versions")
    version = models.PositiveIntegerField()
    sha256 = models.CharField(max_length=64)
    system_prompt = models.TextField()
    body = models.TextField()
    variables: models.JSONField[list[dict[str, Any]]] = models.JSONField(default=list)
    sampling: models.JSONField[dict[str, Any]] = models.JSONField(default=dict)
    published_at = models.DateTimeField(auto_now_add=True)
    published_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    # Prefix-cache warm-up (a one-token request with this version's system prefix)
    warmed_at = models.DateTimeField(null=True, blank=True)
    warm_prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    warm_error = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ("template", "-version")
        constraints = (
            models.UniqueConstraint(fields=("template", "version"), name="unique_template_version"),
        )

    def __str__(self) -> str:
        return f"{self.template.name} v{self.version}"
