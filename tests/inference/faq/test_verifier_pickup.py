"""The FAQ cache loads in the background: the embedder, then the verifier; a worker without its
verifier answers exact repeats, trains it in a niced child process (or waits for one prepared
elsewhere), and swaps it in without a restart."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from inference.faq.cache import FaqCache
from inference.faq.deciders import ExactRepeatDecision
from inference.faq.embedder import DIMENSIONS, Embedder
from inference.faq.verifier import FaqVerifier
from inference.faq.verifier_pickup import VerifierPickup, _lowest_priority, prepare_command
from modelprep import faq_verifier
from modelprep.faq_verifier import training_source
from tests.support.faq import prepared_verifier
from tests.support.workers import worker_settings

__all__ = ["prepared_verifier"]  # the session fixture, used here


class CountingEmbedder:
    """Stands in for the embedding model: these tests are about what loads when."""

    def __init__(self) -> None:
        self.calls = 0

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        return np.zeros((len(texts), DIMENSIONS), dtype=np.float32)


def pickup_for(
    model_dir: Path, *, train: bool, said: list[str] | None = None
) -> tuple[VerifierPickup, FaqCache, ExactRepeatDecision]:
    waiting = ExactRepeatDecision()
    cache = FaqCache(embedder=cast(Embedder, CountingEmbedder()), decider=waiting, resync_s=1.0)
    settings = worker_settings(
        faq=True,
        faq_verifier_dir=model_dir,
        faq_verifier_train=train,
        faq_verifier_poll_s=0.05,
    )
    sink = said if said is not None else []
    pickup = VerifierPickup(cache=cache, settings=settings, waiting=waiting, say=sink.append)
    return pickup, cache, waiting


async def until(condition: Any, timeout: float) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_a_verifier_prepared_elsewhere_is_picked_up_without_a_restart(
    tmp_path: Path, prepared_verifier: FaqVerifier
) -> None:
    model_dir = tmp_path / "data" / "models" / "faq-verifier"
    said: list[str] = []
    pickup, cache, waiting = pickup_for(model_dir, train=False, said=said)
    task = asyncio.create_task(pickup.run())
    await until(lambda: "prepared elsewhere" in waiting.status, timeout=30)
    assert cast(CountingEmbedder, cache.embedder).calls == 1  # loaded first, in any case
    await asyncio.sleep(0.3)
    assert cache.decider is waiting  # nothing there yet: still exact repeats only
    assert "exact repeats of an entry's phrasings only" in cache.decider.describe()
    shutil.copytree(prepared_verifier.model_dir, model_dir)
    await asyncio.wait_for(task, timeout=60)
    assert cache.decider.name == "verifier"
    assert cache.decider.describe().startswith("the learned verifier (threshold ")
    assert any(line.startswith("FAQ verifier ready") for line in said)


async def test_a_prepared_verifier_is_loaded_in_the_background_without_training(
    prepared_verifier: FaqVerifier,
) -> None:
    said: list[str] = []
    pickup, cache, _ = pickup_for(prepared_verifier.model_dir, train=True, said=said)
    await asyncio.wait_for(pickup.run(), timeout=60)
    assert cache.decider.name == "verifier"
    assert not any("training" in line for line in said)


async def test_a_missing_verifier_is_trained_in_a_child_process_then_swapped_in(
    tmp_path: Path, prepared_verifier: FaqVerifier, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the real prepare command runs; it takes the trained folder from the model cache (as CI
    # does) instead of training for minutes
    monkeypatch.setenv("CHAT_MODEL_CACHE", str(tmp_path / "cache"))
    cached = faq_verifier._cached_folder(training_source())
    assert cached is not None
    shutil.copytree(prepared_verifier.model_dir, cached)
    said: list[str] = []
    pickup, cache, _ = pickup_for(
        tmp_path / "data" / "models" / "faq-verifier", train=True, said=said
    )
    await asyncio.wait_for(pickup.run(), timeout=120)
    assert cache.decider.name == "verifier"
    assert any("copied the verifier trained on these inputs" in line for line in said)
    assert said.index(next(s for s in said if s.startswith("FAQ verifier ready"))) == len(said) - 1


async def test_a_failed_training_keeps_exact_repeats_and_says_how_to_retry(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "models").write_text("not a folder")  # prepare cannot write here
    pickup, cache, waiting = pickup_for(data_dir / "models" / "faq-verifier", train=True)
    task = asyncio.create_task(pickup.run())
    try:
        await until(lambda: "training failed" in waiting.status, timeout=120)
        assert "prepare --data-dir" in waiting.status
        assert cache.decider is waiting
        assert not task.done()  # it keeps looking; the worker is never stopped by it
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_training_runs_at_the_lowest_cpu_priority() -> None:
    niceness = subprocess.run(
        [sys.executable, "-c", "import os; print(os.nice(0))"],
        preexec_fn=_lowest_priority,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert int(niceness) == 19


def test_prepare_trains_only_where_it_puts_the_verifier(tmp_path: Path) -> None:
    command = prepare_command(model_dir=tmp_path / "models" / "faq-verifier")
    assert command is not None
    assert command[-4:] == ["--data-dir", str(tmp_path), "--model", "faq-verifier"]
    assert prepare_command(model_dir=tmp_path / "elsewhere") is None
