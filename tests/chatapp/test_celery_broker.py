"""The Celery broker connection: bounded like every other short-command Redis client."""

from __future__ import annotations

from chatapp.celery import app
from inference.wire import redis_client


def test_the_broker_connection_has_timeouts_and_keepalive() -> None:
    # A web process publishes tasks synchronously (`.delay()` after a commit): on a half-open
    # broker connection without a socket timeout that publish, and its thread, waits forever.
    options = app.conf.broker_transport_options
    assert options["socket_timeout"] == redis_client.BROKER_SOCKET_TIMEOUT_S
    # kombu's BRPOP waits 1 s on the server: the read timeout must leave it room
    assert options["socket_timeout"] > 1
    assert options["socket_connect_timeout"] == redis_client.SOCKET_TIMEOUT_S
    assert options["socket_keepalive"] is True
    assert options["socket_keepalive_options"] == redis_client.keepalive_options()
