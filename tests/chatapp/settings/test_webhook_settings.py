"""The handoff webhook's settings: unset is off; a URL needs a secret (start-up stops, naming
the variable, rather than sending unsigned events)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from chatapp.settings.webhook import webhook_settings

URL = "CHAT_HANDOFF_WEBHOOK_URL"
SECRET = "CHAT_HANDOFF_WEBHOOK_SECRET"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (URL, SECRET, "CHAT_HANDOFF_WEBHOOK_TIMEOUT_S", "CHAT_HANDOFF_WEBHOOK_ATTEMPTS"):
        monkeypatch.delenv(name, raising=False)


def test_unset_is_no_webhook() -> None:
    assert not webhook_settings().enabled


def test_a_url_with_a_secret_is_a_webhook(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(URL, "https://helpdesk.example.com/hooks/chat")
    monkeypatch.setenv(SECRET, "s" * 32)
    webhook = webhook_settings()
    assert webhook.enabled
    assert "s" * 32 not in repr(webhook)  # the secret stays out of logs and tracebacks


def test_a_url_without_a_secret_stops_start_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(URL, "https://helpdesk.example.com/hooks/chat")
    with pytest.raises(ImproperlyConfigured, match=SECRET):
        webhook_settings()
    monkeypatch.setenv(SECRET, "short")
    with pytest.raises(ImproperlyConfigured, match="at least 16 characters"):
        webhook_settings()


def test_a_url_that_is_not_http_or_a_bad_number_stops_start_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(SECRET, "s" * 32)
    monkeypatch.setenv(URL, "ftp://helpdesk.example.com/")
    with pytest.raises(ImproperlyConfigured, match="http"):
        webhook_settings()
    monkeypatch.setenv(URL, "https://helpdesk.example.com/")
    monkeypatch.setenv("CHAT_HANDOFF_WEBHOOK_ATTEMPTS", "0")
    with pytest.raises(ImproperlyConfigured, match="CHAT_HANDOFF_WEBHOOK_ATTEMPTS"):
        webhook_settings()
