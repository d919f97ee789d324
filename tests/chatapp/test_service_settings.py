"""The web process's CHAT_* and LOGIN_* settings: typed, bounded, and a bad value stops start-up
with the variable named (chatapp/settings/service.py)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from chatapp.settings.service import service_settings


def test_the_defaults_and_the_liveness_bounds_derived_from_the_heartbeat(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("CHAT_RELAY_HEARTBEAT_S", "CHAT_REAP_AFTER_S", "CHAT_ADMISSION_LEASE_S"):
        monkeypatch.delenv(name, raising=False)
    chat, login = service_settings()
    assert (chat.relay_heartbeat_s, chat.reap_after_s, chat.admission_lease_s) == (2, 8, 10)
    assert (chat.max_frame_bytes, chat.user_rate, chat.faq_enabled) == (65536, 30, True)
    assert (login.failure_limit, login.cooloff_s) == (10, 900)

    monkeypatch.setenv("CHAT_RELAY_HEARTBEAT_S", "3")
    chat, _ = service_settings()
    assert (chat.reap_after_s, chat.admission_lease_s) == (12, 15)


def test_values_from_the_environment_are_typed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHAT_STALL_TIMEOUT_S", "2.5")
    monkeypatch.setenv("CHAT_FAQ_ENABLED", "0")
    monkeypatch.setenv("LOGIN_FAILURE_LIMIT", "4")
    chat, login = service_settings()
    assert (chat.stall_timeout_s, chat.faq_enabled, login.failure_limit) == (2.5, False, 4)


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        ("CHAT_STALL_TIMEOUT_S", "ten", "CHAT_STALL_TIMEOUT_S"),
        ("CHAT_USER_RATE", "0", "CHAT_USER_RATE"),
        ("CHAT_MAX_FRAME_BYTES", "12", "CHAT_MAX_FRAME_BYTES"),
        ("LOGIN_COOLOFF_S", "-1", "LOGIN_COOLOFF_S"),
        ("CHAT_REAP_AFTER_S", "1", "CHAT_REAP_AFTER_S must be at least two"),
        # a certificate without its key (or the other way round) cannot serve TLS
        ("CHAT_TLS_CERT_FILE", "/etc/chat/cert.pem", "must be set together"),
        ("CHAT_TLS_KEY_FILE", "/etc/chat/key.pem", "must be set together"),
    ],
)
def test_a_bad_value_stops_start_up_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, said: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ImproperlyConfigured, match=said):
        service_settings()
