"""The worker's container healthcheck: unhealthy until the model is loaded, healthy while the
worker heartbeats, unhealthy again once it stops."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from channels.layers import InMemoryChannelLayer

from inference.engines.scripted import ScriptedEngine
from inference.healthcheck import main
from inference.wire.transport import Transport
from inference.worker import InferenceWorker
from tests.inference.worker_events import running
from tests.support.embedded import fresh_registry
from tests.support.workers import worker_settings


async def test_the_health_file_is_fresh_only_while_the_worker_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    health = tmp_path / "run" / "worker.alive"
    assert main(["--file", str(health)]) == 1
    assert "not ready yet" in capsys.readouterr().err

    worker = InferenceWorker(
        engine=ScriptedEngine(),
        transport=Transport(layer=InMemoryChannelLayer()),
        settings=worker_settings(heartbeat_s=0.05, health_file=str(health)),
        registry=fresh_registry(),
    )
    async with running(worker, ready_timeout_s=5):
        for _ in range(100):
            if health.exists():
                break
            await asyncio.sleep(0.02)
        assert main(["--file", str(health), "--max-age-s", "1"]) == 0
        assert "healthy" in capsys.readouterr().out
        # heartbeats keep it fresh: backdate it and watch the worker touch it again
        os.utime(health, (time.time() - 60, time.time() - 60))
        await asyncio.sleep(0.3)
        assert main(["--file", str(health), "--max-age-s", "1"]) == 0

    os.utime(health, (time.time() - 60, time.time() - 60))  # a stopped worker never touches it
    await asyncio.sleep(0.2)
    assert main(["--file", str(health), "--max-age-s", "1"]) == 1
    assert "last heartbeat" in capsys.readouterr().err


def test_without_a_health_file_the_check_says_how_to_configure_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("INFERENCE_HEALTH_FILE", raising=False)
    assert main([]) == 2
    assert "INFERENCE_HEALTH_FILE" in capsys.readouterr().err
