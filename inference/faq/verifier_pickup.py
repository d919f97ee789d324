"""The FAQ cache loads in the background: a worker answers before any of it is loaded.

What only the FAQ cache needs (the embedding model, the verifier, and the verifier's training
when it is missing) stays off the way to a worker's first answer. The worker runs `run` next to
its other tasks:

1. the embedding model is loaded in a thread (a lookup meanwhile waits for it there);
2. the decider is loaded (`runtime.build_faq_decider`, in a thread) and swapped in; until then
   the cache decides with `ExactRepeatDecision`: a question that repeats an entry's phrasing is
   answered, nothing else is guessed;
3. a verifier that is missing or stale (trained on other labelled pairs) is first trained in a
   child process at the lowest CPU priority, so answers go first:
   `python -m modelprep prepare --model faq-verifier` (a no-op when another worker
   sharing the data dir has just trained it: its build lock makes the second one wait). Each
   progress line is logged and becomes the waiting decider's status, which the worker reports
   with its FAQ syncs (the admin's FAQ list shows it). With training off
   (`INFERENCE_FAQ_VERIFIER_TRAIN=0`: prepared by another process on a shared volume) the folder
   is polled every `faq_verifier_poll_s` instead.

Nothing here stops the worker: a failure is logged and leaves exact repeats answering.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from inference.faq.cache import FaqCache
from inference.faq.deciders import ExactRepeatDecision, FaqDecider
from inference.models.errors import ModelNotReadyError
from inference.settings import WorkerSettings

logger = logging.getLogger(__name__)

LOWEST_PRIORITY = 19  # nice value of the training process: answers always go first


def prepare_command(*, model_dir: Path) -> list[str] | None:
    """The command that trains `model_dir`, or None where prepare cannot write it (prepare
    puts the verifier at `<data dir>/models/faq-verifier` only)."""
    if model_dir.name != "faq-verifier" or model_dir.parent.name != "models":
        return None
    data_dir = model_dir.parent.parent
    return [
        *(sys.executable, "-m", "modelprep", "prepare"),
        *("--data-dir", str(data_dir), "--model", "faq-verifier"),
    ]


def _lowest_priority() -> None:  # in the child, before exec
    os.nice(LOWEST_PRIORITY)


class VerifierPickup:
    """Loads `cache`'s embedder and decider; trains (or waits for) the verifier first when it
    is not prepared. `waiting` is the cache's decider meanwhile."""

    def __init__(
        self,
        *,
        cache: FaqCache,
        settings: WorkerSettings,
        waiting: ExactRepeatDecision,
        say: Callable[[str], None] = print,
    ) -> None:
        self._cache = cache
        self._settings = settings
        self._waiting = waiting
        self._say = say

    async def run(self) -> None:
        try:
            await self._load()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.exception("FAQ cache could not be loaded")
            self._status(f"the FAQ cache could not be loaded ({exc!r}); see the log")

    async def _load(self) -> None:
        started = time.monotonic()
        await asyncio.to_thread(self._cache.embedder.encode, ["warm up"])
        self._say(f"FAQ embedding model loaded in {time.monotonic() - started:.1f} s.")
        trained = False
        while True:
            try:
                decider = await asyncio.to_thread(self._decider)
            except ModelNotReadyError as exc:
                if trained:  # trained or failed: now wait for a folder to appear
                    await asyncio.sleep(self._settings.faq_verifier_poll_s)
                    continue
                trained = True
                self._status(exc.reason)
                await self._train_or_wait()
                continue
            self._cache.decider = decider
            self._say(f"FAQ verifier ready: the FAQ cache now uses {decider.describe()}.")
            return

    def _decider(self) -> FaqDecider:
        from inference.runtime import build_faq_decider

        return build_faq_decider(settings=self._settings, progress=self._say)

    def _status(self, text: str) -> None:
        self._waiting.status = text
        self._say(f"FAQ cache: exact repeats only until the verifier is ready: {text}")

    async def _train_or_wait(self) -> None:
        model_dir = self._settings.faq_verifier_dir
        if not self._settings.faq_verifier_train:
            self._status("waiting for one prepared elsewhere (INFERENCE_FAQ_VERIFIER_TRAIN=0)")
            return
        command = prepare_command(model_dir=model_dir)
        if command is None:
            self._status(
                f"INFERENCE_FAQ_VERIFIER_DIR={model_dir} is not where prepare trains; "
                "prepare one there, it is picked up when ready"
            )
            return
        await self._run_training(command)

    async def _run_training(self, command: list[str]) -> None:
        self._status("training it in the background (lowest CPU priority)")
        started = time.monotonic()
        child = await asyncio.create_subprocess_exec(
            *command,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            preexec_fn=_lowest_priority,
        )
        try:
            assert child.stdout is not None
            async for raw in child.stdout:
                line = raw.decode(errors="replace").strip()
                if line:
                    elapsed = time.monotonic() - started
                    self._waiting.status = f"training: {line} ({elapsed:.0f} s)"
                    logger.info("FAQ verifier %s", line)
                    self._say(f"FAQ verifier {line}")
            code = await child.wait()
        except asyncio.CancelledError:
            with contextlib.suppress(ProcessLookupError):
                child.kill()
            await child.wait()
            raise
        if code != 0:
            self._status(
                f"training failed (exit {code}; see the log above); run "
                f"`{' '.join(command[1:])}` to retry, it is picked up when ready"
            )
