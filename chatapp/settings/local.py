"""The embedded default for `make run`: one process, SQLite, in-memory channel layer."""

from __future__ import annotations

import os
import secrets

from chatapp.settings.base import *  # noqa: F403
from chatapp.settings.base import DATA_DIR


def _local_secret_key() -> str:
    # A per-install key kept in the data dir: never hard-coded, stable across restarts.
    path = DATA_DIR / "secret_key"
    if not path.exists():
        DATA_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = os.environ.get("SECRET_KEY") or _local_secret_key()
# Debug pages only for the embedded default (`make run`, one process on this machine): with an
# external Redis or database this is the multi-process topology, which others can reach.
_DEBUG = os.environ.get("DEBUG", "auto")
DEBUG = _DEBUG == "1" or (
    _DEBUG == "auto" and not (os.environ.get("REDIS_URL") or os.environ.get("DATABASE_URL"))
)
ALLOWED_HOSTS = ALLOWED_HOSTS or ["localhost", "127.0.0.1", "[::1]"]  # noqa: F405
