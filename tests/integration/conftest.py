"""Real parts: vLLM on the tiny locally built model (one engine per test session), Redis."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from channels.layers import InMemoryChannelLayer

from inference.models import tiny_model_dir
from inference.settings import EngineSettings, data_dir_from_env
from modelprep.tiny import build_tiny_model
from tests.integration.stack import databases, workdir  # noqa: F401 (fixtures)


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    data_dir = data_dir_from_env()
    build_tiny_model(data_dir=data_dir, progress=lambda _line: None)  # no-op once built
    return tiny_model_dir(data_dir=data_dir)


def tiny_engine_settings(model_dir: Path) -> EngineSettings:
    return EngineSettings(
        model_dir=model_dir,
        data_dir=data_dir_from_env(),
        max_num_seqs=8,
        max_num_batched_tokens=4096,
        max_model_len=2048,
        kv_cache_gib=1.0,
        enforce_eager=True,
    )


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def vllm_engine(tiny_model: Path) -> AsyncIterator[object]:
    """Started once: vLLM binds to the event loop it first serves, so it lives all session."""
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from inference.engines.vllm import VllmEngine

    engine = VllmEngine.create(settings=tiny_engine_settings(tiny_model))
    yield engine
    engine.shutdown()
    await asyncio.sleep(0)


@contextlib.asynccontextmanager
async def _vllm_worker_running(engine: object, layer: object) -> AsyncIterator[object]:
    """An inference worker on `engine` (vLLM) and the channel layer `layer`, running."""
    from inference.wire.transport import Transport
    from inference.worker import InferenceWorker
    from tests.inference.worker_events import running
    from tests.support.workers import worker_settings

    worker = InferenceWorker(
        engine=engine,  # type: ignore[arg-type]
        transport=Transport(layer=layer),  # type: ignore[arg-type]
        settings=worker_settings(engine="vllm"),
    )
    async with running(worker):
        yield worker


@pytest_asyncio.fixture(loop_scope="session")
async def vllm_worker(vllm_engine: object) -> AsyncIterator[object]:
    """An inference worker on the session's engine, on the in-memory channel layer."""
    from channels.layers import get_channel_layer

    async with _vllm_worker_running(vllm_engine, get_channel_layer()) as worker:
        yield worker


@pytest_asyncio.fixture(loop_scope="session")
async def vllm_layer(vllm_engine: object) -> AsyncIterator[InMemoryChannelLayer]:
    """An in-memory channel layer of the test's own, served by an inference worker on the
    session's engine."""
    layer = InMemoryChannelLayer()
    async with _vllm_worker_running(vllm_engine, layer):
        yield layer
