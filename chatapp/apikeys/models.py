"""API keys for the OpenAI-compatible API: only a hash of each key is stored.

A key is `ick_<prefix>_<secret>`: the prefix (8 hex characters, shown in admin) finds the row,
the SHA-256 of the whole key proves it. The secret has 256 bits of entropy, so a fast hash is
enough (nothing to brute-force); the full key exists only in the admin's response that created
it.
"""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

KEY_PREFIX = "ick_"


def key_hash(raw_key: str) -> str:
    return hashlib.sha256(raw_key.encode()).hexdigest()


class ApiKey(models.Model):
    class Priority(models.TextChoices):
        INTERACTIVE = "interactive"
        BACKGROUND = "background"

    name = models.CharField(max_length=100, help_text="What the key is for, e.g. 'helpdesk bot'.")
    # Answers are stored as this user's conversations (their list in the chat page shows them).
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys"
    )
    prefix = models.CharField(max_length=8, unique=True, editable=False)
    key_hash = models.CharField(max_length=64, editable=False)
    priority = models.CharField(
        max_length=16,
        choices=Priority.choices,
        default=Priority.INTERACTIVE,
        help_text="Background requests run behind chat (a few per worker at once).",
    )
    rate_limit = models.PositiveIntegerField(
        default=60,
        validators=[MinValueValidator(1)],
        help_text="Requests the key may start per window.",
    )
    rate_window_s = models.PositiveIntegerField(
        default=60,
        validators=[MinValueValidator(1), MaxValueValidator(86_400)],
        help_text="The rate window, in seconds.",
    )
    max_concurrent = models.PositiveIntegerField(
        default=4,
        validators=[MinValueValidator(1)],
        help_text="Answers the key may have generating at once.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ("-created_at",)
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.name} (ick_{self.prefix}_…)"

    @property
    def active(self) -> bool:
        return self.revoked_at is None
