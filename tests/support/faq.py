"""A worker with the real FAQ embedding model (`embedder`, `faq_worker`) and FAQ entries.

The worker runs the scripted engine (so a model answer is recognisable: "You said: ...") and
a real FaqCache deciding with the shipped, prepared verifier (`faq_decider`: prepared once
per session if `make test` has not already); entries reach it the way they do in production:
Celery (eager here) embeds them and broadcasts to the workers' group, and a snapshot is
served at worker start-up.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from chatapp.faq import services as faq_services
from chatapp.faq.models import FaqEntry
from chatapp.faq.snapshots import serve_snapshots
from inference.engines.scripted import ScriptedEngine
from inference.faq.cache import FaqCache
from inference.faq.deciders import FaqDecider, VerifierDecision
from inference.faq.embedder import shared_embedder
from inference.faq.verifier import FaqVerifier
from inference.models.paths import default_data_dir
from inference.wire.transport import Transport
from inference.worker import InferenceWorker
from modelprep.faq_verifier import prepare_faq_verifier
from tests.support.workers import worker_settings

ANSWER = "Go to Settings > Security and choose 'Reset password'. We email you a link."


class FaqWorker:
    def __init__(self, worker: InferenceWorker, cache: FaqCache) -> None:
        self.worker = worker
        self.cache = cache

    async def wait_for_entries(self, count: int) -> None:
        for _ in range(200):
            if len(self.cache.index) == count:
                return
            await asyncio.sleep(0.02)
        raise AssertionError(f"index has {len(self.cache.index)} entries, wanted {count}")

    async def entry_cached(self, **fields: Any) -> FaqEntry:
        """An entry saved as the admin saves one (`entry_create`), once this worker holds it."""
        held = len(self.cache.index)
        entry = await sync_to_async(entry_create)(**fields)
        await self.wait_for_entries(held + 1)
        return entry


@pytest.fixture(scope="session")
def embedder() -> Any:
    embedder = shared_embedder()
    embedder.encode(["load the model once per session"])
    return embedder


@pytest.fixture(scope="session")
def prepared_verifier() -> FaqVerifier:
    """The shipped verifier, as `make test` prepared it (trained here if it has not)."""
    verifier = FaqVerifier(model_dir=prepare_faq_verifier(data_dir=default_data_dir()))
    verifier.load()
    return verifier


@pytest.fixture(scope="session")
def faq_decider(prepared_verifier: FaqVerifier) -> FaqDecider:
    return VerifierDecision(verifier=prepared_verifier)


@contextlib.asynccontextmanager
async def faq_worker_running(embedder: Any, decider: FaqDecider) -> AsyncIterator[FaqWorker]:
    """A scripted worker with a FAQ cache deciding with `decider`, and the snapshot server it
    loads its entries from at start; both stopped on leaving."""
    cache = FaqCache(embedder=embedder, decider=decider)
    worker = InferenceWorker(
        engine=ScriptedEngine(),
        transport=Transport(layer=get_channel_layer()),
        settings=worker_settings(faq=True),
        faq=cache,
    )
    tasks = [asyncio.create_task(serve_snapshots()), asyncio.create_task(worker.run())]
    try:
        await worker.ready.wait()
        yield FaqWorker(worker, cache)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@pytest.fixture
async def faq_worker(embedder: Any, faq_decider: FaqDecider) -> AsyncIterator[FaqWorker]:
    async with faq_worker_running(embedder, faq_decider) as running:
        yield running


def entry_create(**fields: Any) -> FaqEntry:
    values: dict[str, Any] = {
        "question": "How do I reset my password?",
        "alternates": "I forgot my password\nCan't log in, need a new password",
        "answer": ANSWER,
    }
    values.update(fields)
    entry = FaqEntry.objects.create(**values)
    faq_services.faq_entry_changed(entry_id=entry.pk)  # what the admin's save does
    return entry
