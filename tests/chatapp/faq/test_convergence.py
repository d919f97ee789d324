"""A worker's FAQ set converges on the database's even when the channel layer drops messages.

Real objects: the web side's snapshot responder, the FAQ services (what the admin's save
calls) and an `InferenceWorker` with a real `FaqCache`, on an in-memory channel layer that
drops chosen messages (the channel layer is at-most-once: a group_send can be lost, and so
can a request sent while no web process is reading). The embedder is a deterministic stand-in
(the same text, the same vector), so a question asked verbatim is an exact FAQ hit.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from asgiref.sync import sync_to_async
from channels.layers import InMemoryChannelLayer

from chatapp.faq import events, services, snapshots
from inference.engines.scripted import ScriptedEngine
from inference.faq.cache import FaqCache
from inference.faq.deciders import ExactRepeatDecision
from inference.faq.embedder import Embedder
from inference.settings import WorkerSettings
from inference.wire.protocol import (
    FAQ_SNAPSHOT_CHANNEL,
    REQUEST_CHANNEL,
    ChatTurn,
    FaqLookup,
    GenerateRequest,
)
from inference.wire.transport import Transport
from inference.worker import InferenceWorker
from tests.support.embedded import embedded_queue, fresh_registry
from tests.support.faq_standin import QUESTION, StandInEmbedder, entry_create

pytestmark = pytest.mark.django_db(transaction=True)

RESYNC_S = 0.2
# what a test waits for a converged answer: several resyncs, still far below the default 30 s
CONVERGE_S = 3.0


Drop = Callable[[str, str, dict[str, Any]], bool]


@dataclass
class LossyLayer:
    """An in-memory layer that drops the sends and group sends `drop` picks."""

    inner: InMemoryChannelLayer = field(default_factory=InMemoryChannelLayer)
    drop: Drop = field(default=lambda _kind, _to, _message: False)
    dropped: list[tuple[str, str, str]] = field(default_factory=list)

    def _dropped(self, kind: str, to: str, message: dict[str, Any]) -> bool:
        if self.drop(kind, to, message):
            self.dropped.append((kind, to, str(message.get("type"))))
            return True
        return False

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        if not self._dropped("send", channel, message):
            await self.inner.send(channel, message)

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        if not self._dropped("group_send", group, message):
            await self.inner.group_send(group, message)

    async def receive(self, channel: str) -> dict[str, Any]:
        return cast(dict[str, Any], await self.inner.receive(channel))

    async def new_channel(self, prefix: str = "specific.") -> str:
        return cast(str, await self.inner.new_channel(prefix))

    async def group_add(self, group: str, channel: str) -> None:
        await self.inner.group_add(group, channel)

    async def group_discard(self, group: str, channel: str) -> None:
        await self.inner.group_discard(group, channel)


def drop_snapshot_requests(kind: str, to: str, _message: dict[str, Any]) -> bool:
    return kind == "send" and to == FAQ_SNAPSHOT_CHANNEL


def drop_removals(kind: str, _to: str, message: dict[str, Any]) -> bool:
    return kind == "group_send" and message.get("type") == "faq.remove"


@pytest.fixture
def layer(monkeypatch: pytest.MonkeyPatch) -> LossyLayer:
    lossy = LossyLayer()
    # the web side's broadcasts and snapshot responder use this layer too
    monkeypatch.setattr(events, "get_channel_layer", lambda: lossy)
    monkeypatch.setattr(snapshots, "get_channel_layer", lambda: lossy)
    monkeypatch.setenv("INFERENCE_FAQ_RESYNC_S", str(RESYNC_S))
    return lossy


@dataclass
class Running:
    worker: InferenceWorker
    cache: FaqCache
    tasks: list[asyncio.Task[None]]


@pytest.fixture
async def start(layer: LossyLayer) -> AsyncIterator[Callable[[], Any]]:
    running: list[Running] = []

    async def _start() -> Running:
        cache = FaqCache(embedder=cast(Embedder, StandInEmbedder()), decider=ExactRepeatDecision())
        worker = InferenceWorker(
            engine=ScriptedEngine(),
            transport=Transport(layer=layer),
            settings=WorkerSettings(
                engine="scripted",
                request_channel=REQUEST_CHANNEL,
                max_active=4,
                coalesce_ms=15.0,
                coalesce_tokens=8,
                redis_url="",
                faq=True,
                heartbeat_s=0.1,
            ),
            faq=cache,
            registry=fresh_registry(),
        )
        tasks = [
            asyncio.create_task(snapshots.serve_snapshots()),
            asyncio.create_task(worker.run()),
        ]
        await asyncio.wait_for(worker.ready.wait(), 5)
        running.append(Running(worker, cache, tasks))
        return running[-1]

    yield _start
    for item in running:
        for task in item.tasks:
            task.cancel()
        await asyncio.gather(*item.tasks, return_exceptions=True)


async def ask(layer: LossyLayer, text: str = QUESTION) -> dict[str, Any]:
    """The worker's final event for a standalone question that may be answered from the FAQ."""
    reply = await layer.new_channel()
    request = GenerateRequest(
        request_id=uuid.uuid4().hex,
        reply_channel=reply,
        messages=[ChatTurn(role="user", content=text)],
        submitted_at=time.time(),
        faq_lookup=FaqLookup(scopes=["global"]),
    )
    await embedded_queue().put(REQUEST_CHANNEL, request.to_channel())
    while True:
        event = await asyncio.wait_for(layer.receive(reply), 5)
        if event["type"] in {"inference.done", "inference.error"}:
            return event


async def answered_from(layer: LossyLayer, source: str, *, within_s: float) -> float:
    """Ask until the answer comes from `source` ("faq" or "model"); the seconds it took."""
    started = time.monotonic()
    while True:
        done = await ask(layer)
        if done.get("source") == source:
            return time.monotonic() - started
        if time.monotonic() - started > within_s:
            raise AssertionError(f"still answered from {done.get('source')} after {within_s} s")
        await asyncio.sleep(0.05)


async def test_a_disabled_entry_whose_removal_broadcast_was_dropped_stops_being_served(
    layer: LossyLayer, start: Callable[[], Any]
) -> None:
    await start()
    entry = await sync_to_async(entry_create)()
    await sync_to_async(services.faq_entry_embed)(entry_id=entry.pk)  # the upsert broadcast
    await answered_from(layer, "faq", within_s=CONVERGE_S)

    layer.drop = drop_removals
    entry.enabled = False
    await sync_to_async(entry.save)()
    await sync_to_async(services.faq_entry_embed)(entry_id=entry.pk)
    assert ("group_send", "inference.faq", "faq.remove") in layer.dropped

    await answered_from(layer, "model", within_s=CONVERGE_S)


async def test_a_deleted_entry_whose_removal_broadcast_was_dropped_stops_being_served(
    layer: LossyLayer, start: Callable[[], Any]
) -> None:
    running = await start()
    entry = await sync_to_async(entry_create)()
    await answered_from(layer, "faq", within_s=CONVERGE_S)  # its upsert was never sent

    layer.drop = drop_removals
    entry_id = entry.pk
    await sync_to_async(entry.delete)()
    await sync_to_async(services.faq_entries_deleted)(entry_ids=[entry_id])  # as the admin does
    assert ("group_send", "inference.faq", "faq.remove") in layer.dropped

    await answered_from(layer, "model", within_s=CONVERGE_S)
    assert len(running.cache.index) == 0


async def test_a_worker_whose_snapshot_request_was_lost_still_loads_the_set(
    layer: LossyLayer, start: Callable[[], Any]
) -> None:
    await sync_to_async(entry_create)()
    lost = 0

    def lose_the_first_request(kind: str, to: str, message: dict[str, Any]) -> bool:
        nonlocal lost
        if drop_snapshot_requests(kind, to, message) and lost == 0:
            lost += 1
            return True
        return False

    layer.drop = lose_the_first_request
    await start()
    await answered_from(layer, "faq", within_s=CONVERGE_S)
    assert lost == 1


async def test_a_worker_that_cannot_confirm_its_set_stops_answering_from_it(
    layer: LossyLayer, start: Callable[[], Any]
) -> None:
    running = await start()
    entry = await sync_to_async(entry_create)()
    await answered_from(layer, "faq", within_s=CONVERGE_S)

    # No web side answers any more (every request lost), and the entry's removal is lost too:
    # the worker cannot know, so past the staleness bound it must stop trusting its set.
    layer.drop = lambda kind, to, message: (
        drop_snapshot_requests(kind, to, message) or drop_removals(kind, to, message)
    )
    entry_id = entry.pk
    await sync_to_async(entry.delete)()
    await sync_to_async(services.faq_entries_deleted)(entry_ids=[entry_id])  # as the admin does
    took = await answered_from(layer, "model", within_s=CONVERGE_S)
    assert took <= running.cache.max_stale_s + 2 * RESYNC_S + 0.5

    layer.drop = lambda _kind, _to, _message: False  # the web side is back
    await asyncio.sleep(3 * RESYNC_S)
    assert len(running.cache.index) == 0
    assert (await ask(layer))["source"] == "model"
