"""Production: fail fast on missing configuration; secure cookies behind a TLS proxy."""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

from chatapp.settings.base import *  # noqa: F403


def _required(name: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        raise ImproperlyConfigured(f"{name} must be set in production")
    return value


SECRET_KEY = _required("SECRET_KEY")
ALLOWED_HOSTS = _required("ALLOWED_HOSTS").split(",")
CSRF_TRUSTED_ORIGINS = _required("CSRF_TRUSTED_ORIGINS").split(",")
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "31536000"))
SECURE_CONTENT_TYPE_NOSNIFF = True
STATIC_ROOT = os.environ.get("STATIC_ROOT", str(DATA_DIR / "staticfiles"))  # noqa: F405
