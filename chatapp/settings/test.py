"""Test settings: fast hashing, throwaway key, in-memory channel layer unless told otherwise."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from chatapp.settings.base import *  # noqa: F403

SECRET_KEY = "test-only-not-secret"  # noqa: S105
DEBUG = False
ALLOWED_HOSTS = ["localhost", "127.0.0.1", "testserver"]
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CHAT_ACCEPT_TIMEOUT_S = 5.0
CHAT_WARMUP_TIMEOUT_S = 5.0
CHAT_RELAY_HEARTBEAT_S = 0.5
CHAT_DISCONNECT_GRACE_S = 2.0
# The socket tests' handshakes carry Origin http://localhost and no Host header (the
# communicator sends only what it is given), so that origin is trusted here.
CSRF_TRUSTED_ORIGINS = ["http://localhost"]

# Tests use a SQLite file like `make run`, not Django's default in-memory shared-cache test
# database: that one locks whole tables, so a read while another thread stores an answer fails
# at once ("database table is locked") instead of seeing the last committed rows. One file per
# test run (two runs at once must not delete each other's).
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    DATABASES["default"]["TEST"] = {  # noqa: F405
        "NAME": str(Path(tempfile.gettempdir()) / f"instant-chat-test-{os.getpid()}.sqlite3")
    }
