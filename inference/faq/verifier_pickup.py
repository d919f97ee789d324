"""A worker whose FAQ verifier is not ready serves at once, and picks the verifier up later.

Training the verifier takes minutes of CPU (`verifier_training.py`), so it is not on the way to
a worker's first answer. Until it is ready the FAQ cache decides with `ExactRepeatDecision`
(a question that repeats an entry's phrasing is answered, nothing else is guessed), and this
task trains it in a child process at the lowest CPU priority, so answers go first:
`python -m inference.models prepare --model faq-verifier` (a no-op when another worker sharing
the data dir has just trained it; its build lock makes the second one wait). Each progress line
is logged and becomes the decider's status, which the worker reports to the web side with its
FAQ syncs (shown in the admin's FAQ list). When the folder is ready it is loaded off the event
loop and swapped in: the next lookup uses it, with no restart.

With training off (`INFERENCE_FAQ_VERIFIER_TRAIN=0`: prepared by another process, e.g. a
one-off job on a shared volume) the folder is polled instead.
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
from inference.faq.deciders import ExactRepeatDecision, VerifierDecision
from inference.faq.verifier import FaqVerifier
from inference.models.errors import ModelNotReadyError
from inference.models.faq_verifier import ensure_verifier_ready

logger = logging.getLogger(__name__)

LOWEST_PRIORITY = 19  # nice value of the training process: answers always go first


def prepare_command(*, model_dir: Path) -> list[str] | None:
    """The command that trains `model_dir`, or None where prepare cannot write it (prepare
    puts the verifier at `<data dir>/models/faq-verifier` only)."""
    if model_dir.name != "faq-verifier" or model_dir.parent.name != "models":
        return None
    data_dir = model_dir.parent.parent
    return [
        *(sys.executable, "-m", "inference.models", "prepare"),
        *("--data-dir", str(data_dir), "--model", "faq-verifier"),
    ]


def _lowest_priority() -> None:  # in the child, before exec
    os.nice(LOWEST_PRIORITY)


class VerifierPickup:
    """Trains (or waits for) the verifier at `model_dir`, then puts it into `cache`."""

    def __init__(
        self,
        *,
        cache: FaqCache,
        waiting: ExactRepeatDecision,
        model_dir: Path,
        train: bool,
        poll_s: float = 15.0,
        say: Callable[[str], None] = print,
    ) -> None:
        self._cache = cache
        self._waiting = waiting
        self._model_dir = model_dir
        self._train = train
        self._poll_s = poll_s
        self._say = say

    async def run(self) -> None:
        """Until the verifier is in the cache; cancelling it stops a training child. A failure
        is logged and leaves exact repeats answering: it never stops the worker."""
        try:
            await self._pick_up()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.exception("FAQ verifier pickup failed")
            self._status(f"the verifier could not be loaded ({exc!r}); see the log")

    async def _pick_up(self) -> None:
        command = prepare_command(model_dir=self._model_dir) if self._train else None
        if command is not None:
            await self._run_training(command)
        elif self._train:
            self._status(
                f"INFERENCE_FAQ_VERIFIER_DIR={self._model_dir} is not where prepare trains; "
                "prepare one there, it is picked up when ready"
            )
        else:
            self._status("waiting for one prepared elsewhere (INFERENCE_FAQ_VERIFIER_TRAIN=0)")
        while True:  # a folder another process writes: nothing to wait on but the disk
            if self._ready():
                break
            await asyncio.sleep(self._poll_s)
        started = time.monotonic()
        verifier = FaqVerifier(model_dir=self._model_dir)
        await asyncio.to_thread(verifier.probabilities, [("warm up", "warm up")])
        self._cache.decider = VerifierDecision(verifier=verifier)
        self._say(
            f"FAQ verifier ready, loaded in {time.monotonic() - started:.1f} s: the FAQ cache "
            f"now answers paraphrases too ({self._cache.decider.describe()})."
        )

    def _ready(self) -> bool:
        try:
            ensure_verifier_ready(model_dir=self._model_dir)
        except ModelNotReadyError:
            return False
        return True

    def _status(self, text: str) -> None:
        self._waiting.status = text
        self._say(f"FAQ cache: exact repeats only until the verifier is ready: {text}")

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
                    self._waiting.status = f"training: {line} ({time.monotonic() - started:.0f} s)"
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
