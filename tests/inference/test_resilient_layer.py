"""The Redis channel layer a web process and a worker use, over a real Redis (db 14).

All process-local channels of a process (its relay's, every socket's) share one Redis inbox,
which one of their receivers reads for all of them. A socket that closes cancels its receive;
that must not cost another channel of the process a message, e.g. a delta for the relay.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from inference.wire.resilient_layer import ResilientRedisChannelLayer
from inference.wire.transport import redis_layer_config
from tests.support.net import free_port

pytestmark = pytest.mark.redis

REDIS_URL = "redis://127.0.0.1:6379/14"


@pytest.fixture
async def prefix() -> AsyncIterator[str]:
    name = f"test-layer-{uuid.uuid4().hex[:8]}"
    yield name
    await ResilientRedisChannelLayer(**_config(name)).flush()  # the keys under our prefix


def _config(prefix: str) -> dict[str, Any]:
    return {**redis_layer_config(redis_url=REDIS_URL), "prefix": prefix}


def _config_at(redis_url: str) -> dict[str, Any]:
    return {**redis_layer_config(redis_url=redis_url), "prefix": "test-layer-nowhere"}


def _send_from_another_process(prefix: str, channel: str, message: dict[str, Any]) -> None:
    """Send as a worker does, while this process's event loop is held (nothing read meanwhile)."""

    async def send() -> None:
        sender = ResilientRedisChannelLayer(**_config(prefix))
        await sender.send(channel, message)
        await sender.close_pools()

    thread = threading.Thread(target=asyncio.run, args=(send(),))
    thread.start()
    thread.join(10)
    time.sleep(0.1)  # and Redis's answer to a read waiting here reaches this process's socket


async def test_a_socket_closing_while_its_receive_reads_the_inbox_loses_no_relay_message(
    prefix: str,
) -> None:
    web = ResilientRedisChannelLayer(**_config(prefix))
    socket_channel = await web.new_channel()
    relay_channel = await web.new_channel()
    socket_receive = asyncio.create_task(web.receive(socket_channel))
    await asyncio.sleep(0.3)  # the socket's receive holds the read: it waits in Redis (BZPOPMIN)
    relay_receive = asyncio.create_task(web.receive(relay_channel))
    await asyncio.sleep(0.1)

    delta = {"type": "inference.delta", "request_id": "r1", "seq": 7, "text": "seven"}
    # Redis hands the delta to the waiting read at once; the socket closes before this
    # process has taken the reply off the wire (the loop is held until the cancel).
    _send_from_another_process(prefix, relay_channel, delta)
    socket_receive.cancel()

    assert await asyncio.wait_for(relay_receive, 5) == delta
    with pytest.raises(asyncio.CancelledError):
        await socket_receive
    await web.close_pools()


async def test_a_socket_closing_while_the_inbox_is_idle_leaves_it_readable_at_once(
    prefix: str,
) -> None:
    web = ResilientRedisChannelLayer(**_config(prefix))
    worker = ResilientRedisChannelLayer(**_config(prefix))
    socket_channel = await web.new_channel()
    relay_channel = await web.new_channel()
    socket_receive = asyncio.create_task(web.receive(socket_channel))
    await asyncio.sleep(0.3)
    relay_receive = asyncio.create_task(web.receive(relay_channel))
    await asyncio.sleep(0.1)
    socket_receive.cancel()  # nothing was on its way: the read it leaves behind waits on
    await asyncio.gather(socket_receive, return_exceptions=True)

    delta = {"type": "inference.delta", "request_id": "r1", "seq": 1, "text": "one"}
    await worker.send(relay_channel, delta)
    assert await asyncio.wait_for(relay_receive, 1) == delta  # not after a 5 s blocking read
    await web.close_pools()
    await worker.close_pools()


async def test_messages_keep_their_order_across_receives_cancelled_mid_read(
    prefix: str,
) -> None:
    web = ResilientRedisChannelLayer(**_config(prefix))
    worker = ResilientRedisChannelLayer(**_config(prefix))
    relay_channel = await web.new_channel()
    relay_receive = asyncio.create_task(web.receive(relay_channel))
    received: list[int] = []

    async def sockets_come_and_go() -> None:
        # Sockets whose receives are cancelled at random points of the shared read.
        while True:
            socket_receive = asyncio.create_task(web.receive(await web.new_channel()))
            await asyncio.sleep(0.001 * (len(received) % 5))
            socket_receive.cancel()
            await asyncio.gather(socket_receive, return_exceptions=True)

    churn = asyncio.create_task(sockets_come_and_go())
    try:
        for seq in range(1, 201):
            await worker.send(relay_channel, {"type": "inference.delta", "seq": seq})
            if relay_receive.done():
                received.append(relay_receive.result()["seq"])
                relay_receive = asyncio.create_task(web.receive(relay_channel))
        while len(received) < 200:
            received.append((await asyncio.wait_for(relay_receive, 5))["seq"])
            if len(received) < 200:
                relay_receive = asyncio.create_task(web.receive(relay_channel))
    finally:
        churn.cancel()
        await asyncio.gather(churn, return_exceptions=True)
        relay_receive.cancel()
        await asyncio.gather(relay_receive, return_exceptions=True)
    assert received == list(range(1, 201))
    await web.close_pools()
    await worker.close_pools()


async def test_a_message_for_a_channel_of_this_process_does_not_go_through_redis() -> None:
    """The relay and the socket it streams to share a web process: a delta for that socket is
    handed over in the process (no Redis round trips), in order, as a copy like Redis's. The
    proof: it arrives though this layer's Redis cannot be reached at all, while a message for
    another process's channel cannot be sent."""
    closed_port = free_port()
    web = ResilientRedisChannelLayer(**_config_at(f"redis://127.0.0.1:{closed_port}/0"))
    socket_channel = await web.new_channel()
    entries: list[dict[str, str]] = [{"text": f"t{seq}"} for seq in range(50)]
    sent = [{"type": "answer.entry", "seq": seq, "entry": entries[seq]} for seq in range(50)]
    for message in sent:
        await asyncio.wait_for(web.send(socket_channel, message), 1)
    entries[0]["text"] = "changed after sending"  # the receiver's copy is its own
    received = [await asyncio.wait_for(web.receive(socket_channel), 1) for _ in sent]
    assert [m["seq"] for m in received] == list(range(50))
    assert received[0]["entry"]["text"] == "t0"
    other_process = "specific." + "0" * 32 + "!abc"
    with pytest.raises(RedisConnectionError):  # this one needs Redis
        await asyncio.wait_for(web.send(other_process, sent[1]), 5)


async def test_a_socket_of_this_process_gets_local_and_remote_messages(prefix: str) -> None:
    web = ResilientRedisChannelLayer(**_config(prefix))
    worker = ResilientRedisChannelLayer(**_config(prefix))
    socket_channel = await web.new_channel()
    receive = asyncio.create_task(web.receive(socket_channel))
    await asyncio.sleep(0.2)  # it waits in Redis for the process inbox
    await web.send(socket_channel, {"type": "answer.entry", "seq": 1})  # from the relay here
    assert (await asyncio.wait_for(receive, 1))["seq"] == 1
    receive = asyncio.create_task(web.receive(socket_channel))
    await worker.send(socket_channel, {"type": "templates.changed", "etag": "x"})  # elsewhere
    assert (await asyncio.wait_for(receive, 5))["etag"] == "x"
    await web.close_pools()
    await worker.close_pools()


async def test_a_message_sent_here_never_reaches_a_receiver_of_a_named_channel(
    prefix: str,
) -> None:
    """A worker's pull of a shared queue (a named channel) reads Redis only: a message for a
    socket of the same process is that socket's."""
    web = ResilientRedisChannelLayer(**_config(prefix))
    worker = ResilientRedisChannelLayer(**_config(prefix))
    named = asyncio.create_task(web.receive("test.requests"))
    socket_channel = await web.new_channel()
    socket_receive = asyncio.create_task(web.receive(socket_channel))
    await asyncio.sleep(0.2)
    await web.send(socket_channel, {"type": "answer.entry", "seq": 1})
    assert (await asyncio.wait_for(socket_receive, 1))["seq"] == 1
    assert not named.done()
    await worker.send("test.requests", {"type": "inference.generate", "n": 1})
    assert (await asyncio.wait_for(named, 5))["n"] == 1
    await web.close_pools()
    await worker.close_pools()
