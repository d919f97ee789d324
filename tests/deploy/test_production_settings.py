"""Production settings: refuse to start misconfigured; behind the TLS proxy, HTTPS only.

Each case imports the settings in a fresh interpreter: they are read once per process, from the
environment, exactly as daphne, Celery and the worker images do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GOOD = {
    "SECRET_KEY": "k" * 20 + "3Fq9-ZpL0xY7wR2vN8mB4tH6jC1sD5gA0eU",
    "ALLOWED_HOSTS": "chat.example.com,web",
    "CSRF_TRUSTED_ORIGINS": "https://chat.example.com",
}

# Requests through the whole middleware stack with production settings; prints JSON.
PROBE = """
import json, django
django.setup()
from django.conf import settings
from django.test import Client
c = Client(HTTP_HOST="chat.example.com")
plain = c.get("/")
health = c.get("/healthz")
tls = c.get("/healthz", HTTP_X_FORWARDED_PROTO="https")
print(json.dumps({
    "debug": settings.DEBUG,
    "plain_status": plain.status_code, "plain_location": plain.get("Location", ""),
    "health_status": health.status_code,
    "hsts": tls.get("Strict-Transport-Security", ""),
    "cookies_secure": [settings.SESSION_COOKIE_SECURE, settings.CSRF_COOKIE_SECURE],
}))
"""


def _run(
    env: dict[str, str], tmp_path: Path, code: str = "import django; django.setup()"
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in GOOD and k != "REDIS_URL"}
    clean.update(
        DJANGO_SETTINGS_MODULE="chatapp.settings.production", CHAT_DATA_DIR=str(tmp_path), **env
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("missing", sorted(GOOD))
def test_a_missing_setting_stops_startup_and_names_it(missing: str, tmp_path: Path) -> None:
    env = {k: v for k, v in GOOD.items() if k != missing}
    result = _run(env, tmp_path)
    assert result.returncode != 0
    assert f"{missing} must be set in production" in result.stderr


@pytest.mark.parametrize(
    ("name", "value", "complaint"),
    [
        ("SECRET_KEY", "change-me", "at least 50 random characters"),
        ("SECRET_KEY", "a" * 64, "at least 50 random characters"),
        ("ALLOWED_HOSTS", " , ", "ALLOWED_HOSTS must list at least one value"),
        ("CSRF_TRUSTED_ORIGINS", "chat.example.com", "need a scheme"),
        ("SECURE_SSL_REDIRECT", "maybe", "SECURE_SSL_REDIRECT must be true or false"),
    ],
)
def test_a_weak_or_malformed_setting_stops_startup(
    name: str, value: str, complaint: str, tmp_path: Path
) -> None:
    result = _run({**GOOD, name: value}, tmp_path)
    assert result.returncode != 0
    assert complaint in result.stderr


def test_https_only_except_the_probes(tmp_path: Path) -> None:
    result = _run(GOOD, tmp_path, PROBE)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["debug"] is False
    assert seen["plain_status"] == 301
    assert seen["plain_location"] == "https://chat.example.com/"
    assert seen["health_status"] == 200  # container healthchecks speak plain HTTP
    assert seen["hsts"].startswith("max-age=31536000")
    assert seen["cookies_secure"] == [True, True]
