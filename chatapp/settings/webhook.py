"""The handoff webhook's settings (docs/handoff.md#webhook), declared once with their bounds.

Read from `CHAT_HANDOFF_WEBHOOK_*` when the settings module loads. No URL: no webhook (nothing
is written or sent). A URL without a secret, or one that is not http(s), stops start-up with an
ImproperlyConfigured naming the variable: an unsigned webhook would let anybody who learns the
receiver's address forge events.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured
from pydantic import Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# Shorter secrets can be guessed offline from one signed delivery.
MIN_SECRET_CHARS = 16


class HandoffWebhookSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="CHAT_HANDOFF_WEBHOOK_", frozen=True, extra="ignore"
    )

    url: str = ""
    secret: str = Field("", repr=False)
    # One delivery attempt waits this long for the receiver (connect, then its answer).
    timeout_s: float = Field(5, gt=0, le=60)
    # A delivery not accepted after this many attempts is given up (status "failed" in admin).
    attempts: int = Field(10, ge=1, le=50)

    @model_validator(mode="after")
    def _url_needs_a_secret(self) -> HandoffWebhookSettings:
        if not self.url:
            return self
        if urlsplit(self.url).scheme not in ("http", "https"):
            raise ValueError(f"CHAT_HANDOFF_WEBHOOK_URL must be an http(s) URL (got {self.url!r})")
        if len(self.secret) < MIN_SECRET_CHARS:
            raise ValueError(
                "CHAT_HANDOFF_WEBHOOK_URL is set, so CHAT_HANDOFF_WEBHOOK_SECRET must be too "
                f"(at least {MIN_SECRET_CHARS} characters): deliveries are signed with it"
            )
        return self

    @property
    def enabled(self) -> bool:
        return bool(self.url)


def webhook_settings() -> HandoffWebhookSettings:
    """Read from the environment; a bad value is an ImproperlyConfigured naming it."""
    try:
        return HandoffWebhookSettings()
    except ValidationError as exc:
        raise ImproperlyConfigured(_described(exc)) from None


def _described(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors():
        if error["type"] == "value_error":  # our own check: its message names the variable
            problems.append(str(error["ctx"]["error"]))
            continue
        where = ".".join(str(part) for part in error["loc"])
        problems.append(
            f"CHAT_HANDOFF_WEBHOOK_{where.upper()}: {error['msg']} (got {error.get('input')!r})"
        )
    return "; ".join(problems)
