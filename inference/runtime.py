"""Assemble and run a worker: pick the engine, wire the transport, handle shutdown."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from inference.engines.base import Engine, EngineError
from inference.faq.cache import FaqCache
from inference.faq.deciders import ExactRepeatDecision, FaqDecider, VerifierDecision
from inference.faq.verifier import FaqVerifier
from inference.prefix_check import prefix_report
from inference.settings import EngineSettings, OpenAIEngineSettings, WorkerSettings
from inference.wire.registry import WorkerRegistry
from inference.wire.transport import ChannelLayer, Transport
from inference.worker import InferenceWorker

logger = logging.getLogger(__name__)


def build_engine(
    *,
    worker_settings: WorkerSettings,
    engine_settings: EngineSettings | None = None,
    openai_settings: OpenAIEngineSettings | None = None,
    progress: Callable[[str], None] = print,
) -> Engine:
    """Create the configured engine. vLLM loads the model here: tens of seconds on CPU; the
    OpenAI-compatible engine asks its server what it serves and loads only the tokenizer.

    Call it from inside the event loop that will use the engine (vLLM binds its output
    handler to the loop it starts in).
    """
    if worker_settings.engine == "scripted":
        from inference.engines.scripted import ScriptedEngine

        progress("Using the scripted test engine (not a model).")
        return ScriptedEngine(delay_s=0.02)
    try:
        settings = engine_settings or EngineSettings.from_env()
        server = None
        if worker_settings.engine == "openai":
            server = openai_settings or OpenAIEngineSettings.from_env()
    except ValueError as exc:  # a malformed setting: named, before anything loads
        raise EngineError(str(exc)) from exc
    engine: Engine
    if server is not None:
        from inference.engines.openai_compatible import OpenAICompatibleEngine

        progress(
            f"Using the OpenAI-compatible server at {server.url} "
            f"(prompts rendered with {settings.model_dir.name}'s tokenizer)..."
        )
        served = OpenAICompatibleEngine.create(settings=server, engine_settings=settings)
        progress(f"Streaming model {served.model!r} from {server.url}.")
        engine = served
    else:
        from inference.engines.vllm import VllmEngine

        progress(f"Loading {settings.model_dir.name} into vLLM (this takes a while on CPU)...")
        started = time.monotonic()
        engine = VllmEngine.create(settings=settings)
        progress(f"Model loaded in {time.monotonic() - started:.1f} s.")
    report = prefix_report(engine.prompt_builder)
    if report.stable:
        progress(f"Chat template: {report.detail}.")
    else:  # serving still works, only slower: say so loudly, with the fix
        logger.warning("chat template defeats prefix caching: %s", report.detail)
        progress(f"WARNING: {report.detail}")
    return engine


def build_faq_cache(
    *, settings: WorkerSettings, progress: Callable[[str], None] = print
) -> FaqCache | None:
    """The FAQ cache, empty-handed: nothing only the FAQ needs is loaded on the way to the
    worker's first answer. `cache.until_ready` (the worker runs it) loads the embedding model
    and the decider in the background; until the verifier is in, the cache answers exact
    repeats only, and a verifier that is missing or stale is trained first
    (`verifier_pickup.py`)."""
    if not settings.faq:
        return None
    from inference.faq.embedder import shared_embedder
    from inference.faq.verifier_pickup import VerifierPickup

    waiting = ExactRepeatDecision()
    cache = FaqCache(embedder=shared_embedder(), decider=waiting)
    cache.until_ready = VerifierPickup(
        cache=cache, settings=settings, waiting=waiting, say=progress
    ).run
    return cache


def build_faq_decider(
    *, settings: WorkerSettings, progress: Callable[[str], None] = print
) -> FaqDecider:
    """The verifier, loaded now (seconds); `ModelNotReadyError` names the command to run when
    it is not prepared (or was trained on other labelled pairs than the repository's)."""
    from inference.models.verifier_check import ensure_verifier_ready

    ensure_verifier_ready(model_dir=settings.faq_verifier_dir)
    started = time.monotonic()
    verifier = FaqVerifier(model_dir=settings.faq_verifier_dir)
    verifier.probabilities([("warm up", "warm up")])
    progress(
        f"FAQ verifier loaded in {time.monotonic() - started:.1f} s (threshold "
        f"{verifier.info.threshold:.3f}, cosine floor {verifier.info.cosine_floor:.2f})."
    )
    return VerifierDecision(verifier=verifier)


def start_worker(
    *,
    engine: Engine,
    layer: ChannelLayer,
    settings: WorkerSettings,
    faq: FaqCache | None = None,
    registry: WorkerRegistry | None = None,
) -> tuple[InferenceWorker, asyncio.Task[None]]:
    worker = InferenceWorker(
        engine=engine,
        transport=Transport(layer=layer),
        settings=settings,
        faq=faq,
        registry=registry,
    )
    task = asyncio.create_task(worker.run(), name="inference-worker")
    task.add_done_callback(_log_exit)
    return worker, task


def _log_exit(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error("inference worker stopped", exc_info=task.exception())
