"""The one way to open an asyncio Redis client for short idempotent commands.

An empty URL is the embedded default: this process's own Redis (`embedded_redis.py`).

Used by the registry, admission, the answer logs, the request queue and the health probe; a
blocking command (XREADGROUP BLOCK) needs a client without a read timeout
(`socket_timeout_s=None`), since a read here gives up after `SOCKET_TIMEOUT_S`.

- Timeouts: without them a half-open connection (a Redis that stops answering without closing
  the TCP connection: frozen, failed over, a dropped NAT entry) blocks a command forever, and
  with it whatever loop sent it (heartbeats, housekeeping).
- TCP keepalive, with explicit probe timings (the OS default waits two hours before the first
  probe), so a connection whose peer vanished is noticed even while it sits idle in the pool.
- A health check (PING) before a command on a connection idle longer than
  `HEALTH_CHECK_INTERVAL_S`, so a stale pooled connection is replaced before it fails a command.
- Two quick retries on a ConnectionError, each on a fresh connection: a pooled connection that
  died with a Redis restart fails its next command, and without a retry that would reach the
  caller; callers only send commands that are safe to run twice. A timeout is not retried:
  redis-py nests the connect handshake's retries inside the command's, so retrying timeouts
  would turn one silent Redis into (RETRIES + 1)² socket timeouts (measured: 18 s at 2 s).
  The connection that timed out is dropped, so the next command starts on a fresh one.
  During an outage the error reaches the caller, a silent Redis within `COMMAND_DEADLINE_S`.
- The pool blocks: a burst of callers waits (up to `POOL_TIMEOUT_S`) for a free connection
  instead of failing with "Too many connections" (the plain pool's limit is 100).
"""

from __future__ import annotations

import socket
from typing import Any

import redis.asyncio as redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from inference.wire.embedded_redis import embedded_redis_url

SOCKET_TIMEOUT_S = 2.0  # connect, and each reply; these commands take milliseconds
HEALTH_CHECK_INTERVAL_S = 30
# Celery's broker (kombu): its BRPOP waits up to 1 s on the server, so a read gets more room.
BROKER_SOCKET_TIMEOUT_S = 5.0
RETRIES = 2
BACKOFF_CAP_S = 0.2
POOL_TIMEOUT_S = 5
MAX_CONNECTIONS = 50
# The longest a command waits on a Redis that stops answering: a connect that hangs, or a
# connect that succeeds and a reply that never comes (a half-open connection).
COMMAND_DEADLINE_S = 2 * SOCKET_TIMEOUT_S


def keepalive_options() -> dict[int, int]:
    """First probe after 30 s idle, then every 5 s, dead after 3 unanswered: ~45 s.

    Only the options this platform has (Linux: all three; macOS names the first
    TCP_KEEPALIVE); redis-py before 8 passes none, leaving the OS's two-hour default.
    """
    wanted = (("TCP_KEEPIDLE", 30), ("TCP_KEEPINTVL", 5), ("TCP_KEEPCNT", 3))
    options: dict[int, int] = {}
    for name, value in wanted:
        option = getattr(socket, name, None)
        if option is None and name == "TCP_KEEPIDLE":
            option = getattr(socket, "TCP_KEEPALIVE", None)
        if option is not None:
            options[option] = value
    return options


def redis_client(
    redis_url: str,
    *,
    decode_responses: bool = True,
    socket_timeout_s: float | None = SOCKET_TIMEOUT_S,
) -> redis.Redis:
    """A client whose every command either answers or fails within `COMMAND_DEADLINE_S`.

    `socket_timeout_s`: None only for a client of blocking reads that the server answers
    within their BLOCK time (the request queue's XREADGROUP).
    """
    redis_url = redis_url or embedded_redis_url()
    # TCP keepalive: a unix socket (the embedded Redis) has no peer to vanish, nor the option
    tcp: dict[str, Any] = (
        {}
        if redis_url.startswith("unix:")
        else {
            "socket_keepalive": True,
            "socket_keepalive_options": keepalive_options(),
        }
    )
    return redis.Redis.from_pool(
        redis.BlockingConnectionPool.from_url(
            redis_url,
            max_connections=MAX_CONNECTIONS,
            timeout=POOL_TIMEOUT_S,
            decode_responses=decode_responses,
            socket_connect_timeout=SOCKET_TIMEOUT_S,
            socket_timeout=socket_timeout_s,
            **tcp,
            health_check_interval=HEALTH_CHECK_INTERVAL_S,
            retry=Retry(
                ExponentialWithJitterBackoff(cap=BACKOFF_CAP_S, base=0.02),
                RETRIES,
                supported_errors=(RedisConnectionError,),
            ),
        )
    )
