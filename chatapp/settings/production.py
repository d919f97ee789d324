"""Production: fail fast on missing configuration; secure cookies behind a TLS proxy.

TLS ends at the reverse proxy in front of daphne; the proxy must set `X-Forwarded-Proto`.
Only `/healthz` and `/metrics` answer plain HTTP: container healthchecks and Prometheus reach
the web service directly on the private network.
"""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

from chatapp.settings.base import *  # noqa: F403


def _required(name: str) -> str:
    value = os.environ.get(name, "").strip()
    if not value:
        raise ImproperlyConfigured(f"{name} must be set in production")
    return value


def _list(name: str) -> list[str]:
    items = [item.strip() for item in _required(name).split(",") if item.strip()]
    if not items:
        raise ImproperlyConfigured(f"{name} must list at least one value")
    return items


def _secret_key() -> str:
    key = _required("SECRET_KEY")
    # Django signs sessions, CSRF tokens and password resets with it: a short one is guessable.
    if len(key) < 50 or len(set(key)) < 5:
        raise ImproperlyConfigured(
            "SECRET_KEY must be at least 50 random characters, e.g. "
            "python -c 'import secrets; print(secrets.token_urlsafe(50))'"
        )
    return key


def _bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in {"1", "true", "yes", "on"}:
        return True
    if raw in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, got {raw!r}")


DEBUG = False
SECRET_KEY = _secret_key()
ALLOWED_HOSTS = _list("ALLOWED_HOSTS")
CSRF_TRUSTED_ORIGINS = _list("CSRF_TRUSTED_ORIGINS")
for _origin in CSRF_TRUSTED_ORIGINS:
    if not _origin.startswith(("https://", "http://")):
        raise ImproperlyConfigured(
            f"CSRF_TRUSTED_ORIGINS entries need a scheme (https://chat.example.com): {_origin!r}"
        )

SESSION_COOKIE_SECURE = True
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_SECURE = True
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = _bool("SECURE_SSL_REDIRECT", True)
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]
SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "31536000"))
SECURE_HSTS_INCLUDE_SUBDOMAINS = _bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
STATIC_ROOT = os.environ.get("STATIC_ROOT", str(DATA_DIR / "staticfiles"))  # noqa: F405
# TLS ends at a reverse proxy (above), so the client's address is the last X-Forwarded-For
# entry, not REMOTE_ADDR (the proxy's): without this one address limit would lock out everyone.
LOGIN_THROTTLE_PROXY_COUNT = (
    LOGIN.throttle_proxy_count if "LOGIN_THROTTLE_PROXY_COUNT" in os.environ else 1  # noqa: F405
)
