"""What `/healthz` checks: the dependencies without which this web process cannot serve.

The database always; Redis when it is configured (channel layer, stream logs, admission). Each
check is bounded by a short timeout so a hung dependency makes the probe fail, not hang.
"""

from __future__ import annotations

import asyncio

from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import connection

from inference.wire.redis_client import redis_client


def database_ok() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            return bool(cursor.fetchone() == (1,))
    except Exception:
        return False


def redis_ok(*, timeout_s: float = 2.0) -> bool:
    """The deployment's Redis, or the embedded default's own, answers."""
    try:
        return bool(async_to_sync(_redis_ping)(settings.REDIS_URL, timeout_s))
    except Exception:
        return False


async def _redis_ping(redis_url: str, timeout_s: float) -> bool:
    # The same client as every other short command (timeouts, keepalive): a fresh one per
    # probe, since a pool belongs to the event loop it was made on.
    client = redis_client(redis_url)
    try:
        return bool(await asyncio.wait_for(client.ping(), timeout=timeout_s))
    finally:
        await client.aclose()
