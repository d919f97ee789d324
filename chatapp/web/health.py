"""What `/healthz` checks: the dependencies without which this web process cannot serve.

The database always; Redis when it is configured (channel layer, stream logs, admission). Each
check is bounded by a short timeout so a hung dependency makes the probe fail, not hang.
"""

from __future__ import annotations

from django.conf import settings
from django.db import connection


def database_ok() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            return bool(cursor.fetchone() == (1,))
    except Exception:
        return False


def redis_ok(*, timeout_s: float = 2.0) -> bool | None:
    """None when this deployment has no Redis (the embedded default)."""
    if not settings.REDIS_URL:
        return None
    import redis

    client = redis.Redis.from_url(
        settings.REDIS_URL, socket_timeout=timeout_s, socket_connect_timeout=timeout_s
    )
    try:
        return bool(client.ping())
    except Exception:
        return False
    finally:
        client.close()
