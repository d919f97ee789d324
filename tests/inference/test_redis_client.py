"""The one factory for short-command Redis clients, against a Redis that stops answering.

A half-open connection (the peer neither answers nor closes: a frozen Redis, a dropped NAT
entry, a pulled cable) is faked with a TCP server that accepts and reads but never writes.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from redis.exceptions import TimeoutError as RedisTimeoutError

from chatapp.web import health
from inference.wire import redis_client as factory
from inference.wire.embedded_redis import embedded_redis_url
from inference.wire.transport import redis_layer_config

REDIS_URL = "redis://127.0.0.1:6379/11"


@pytest.fixture
def silent_redis() -> Iterator[str]:
    """The URL of a server whose kernel completes the TCP handshake and buffers what the
    client sends, while nothing ever accepts, reads or answers."""
    with socket.create_server(("127.0.0.1", 0), backlog=16) as listener:
        yield f"redis://127.0.0.1:{listener.getsockname()[1]}/0"


async def test_a_command_to_a_redis_that_never_answers_fails_within_the_bound(
    silent_redis: str,
) -> None:
    client = factory.redis_client(silent_redis)
    started = time.monotonic()
    try:
        with pytest.raises(RedisTimeoutError):
            # the outer bound only keeps a regression from hanging the test run
            await asyncio.wait_for(client.ping(), timeout=60)
    finally:
        await client.aclose()
    elapsed = time.monotonic() - started
    assert elapsed <= factory.COMMAND_DEADLINE_S + 1.0
    # each try waited for its own socket timeout: the bound is not met by failing at once
    assert elapsed >= factory.SOCKET_TIMEOUT_S


def test_an_empty_url_is_the_embedded_redis_with_the_same_bounds() -> None:
    kwargs = factory.redis_client("").connection_pool.connection_kwargs
    assert kwargs["path"] == embedded_redis_url().removeprefix("unix://")
    assert kwargs["socket_timeout"] == factory.SOCKET_TIMEOUT_S
    assert "socket_keepalive" not in kwargs  # a unix socket has no TCP keepalive
    assert kwargs["decode_responses"] is True


def test_every_connection_has_timeouts_keepalive_and_health_checks() -> None:
    client = factory.redis_client(REDIS_URL, decode_responses=False)
    kwargs = client.connection_pool.connection_kwargs
    assert kwargs["socket_timeout"] == factory.SOCKET_TIMEOUT_S
    assert kwargs["socket_connect_timeout"] == factory.SOCKET_TIMEOUT_S
    assert kwargs["socket_keepalive"] is True
    assert kwargs["socket_keepalive_options"] == factory.keepalive_options()
    assert kwargs["health_check_interval"] == factory.HEALTH_CHECK_INTERVAL_S
    assert kwargs["decode_responses"] is False
    if hasattr(socket, "TCP_KEEPIDLE"):  # Linux: a dead peer is noticed in about 45 s
        assert factory.keepalive_options()[socket.TCP_KEEPIDLE] == 30


@pytest.mark.redis
@pytest.mark.parametrize("decode", [True, False])
async def test_the_client_talks_to_a_real_redis(decode: bool) -> None:
    client = factory.redis_client(REDIS_URL, decode_responses=decode)
    try:
        await client.set("redis-client-test", "value", ex=5)
        value = await client.get("redis-client-test")
        assert value == ("value" if decode else b"value")
        await client.delete("redis-client-test")
    finally:
        await client.aclose()


def test_the_health_probe_of_a_redis_that_never_answers_is_down_in_time(
    settings: Any, silent_redis: str
) -> None:
    settings.REDIS_URL = silent_redis
    started = time.monotonic()
    assert health.redis_ok(timeout_s=1.0) is False
    assert time.monotonic() - started < 2.0


def test_the_channel_layer_keeps_no_socket_timeout_but_gets_keepalive() -> None:
    (host,) = redis_layer_config(redis_url=REDIS_URL)["hosts"]
    # channels_redis blocks 5 s in BRPOP: a read timeout would break idle consumers
    assert host["socket_timeout"] is None
    assert host["socket_connect_timeout"] == factory.SOCKET_TIMEOUT_S
    assert host["socket_keepalive"] is True
    assert host["socket_keepalive_options"] == factory.keepalive_options()
