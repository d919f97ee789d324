"""The configurations under test, each started, measured and stopped in turn.

* `full`: the app as shipped (`manage.py serve`, the embedded default: daphne + the worker +
  its vLLM engine in one process, SQLite, in-memory channel layer): FAQ cache, prefix
  caching and delta coalescing on.
* `baseline`: the same app with those three off: `CHAT_FAQ_ENABLED=0` and `INFERENCE_FAQ=0`
  (no lookup, no embedder), `VLLM_PREFIX_CACHING=0`, `INFERENCE_COALESCE_MS=0` with
  `INFERENCE_COALESCE_TOKENS=1` (every engine delta is sent as it comes).
* `nofaq`: `full` without the FAQ cache (what the lookup before every standalone question
  costs a model answer).
* `api`: `full` driven over the app's own OpenAI-compatible API (`/v1/chat/completions`
  with an API key; template requests by reference, `template` + variables) by the same
  client as `vllm`.
* `vllm`: vLLM's own OpenAI server (`python -m vllm.entrypoints.openai.api_server`) on the
  same model folder with the same engine sizes (`EngineSettings.from_env`: max_num_seqs,
  max_num_batched_tokens, max_model_len, KV cache GiB, block size, eager, dtype, priority
  scheduling, CHAT_TEMPLATE), prefix caching on, driven over `/v1/chat/completions` with the
  same messages: vLLM renders them with the model's chat template, which for ordinary text
  gives exactly the worker's prompt tokens (the report counts the matches).
* `external`: an OpenAI-compatible server that is already running (`--external-url`), e.g.
  the app's own `/v1/chat/completions`; the bench starts nothing. With `--external-api
  completions` it gets the prompt text the worker would build (the model folder's tokenizer
  and chat template, `bench.prompts.tokenizer_prompt_builder`).

Sampling is the same everywhere and explicit (`bench.prompts.BenchSampling`: the model's
`generation_config.json` defaults, max_tokens from `--max-tokens`): vLLM's server gets
temperature, top_p, top_k, repetition_penalty, max_tokens and the model's stop strings in
every request; the app gets max_tokens as `CHAT_MAX_TOKENS`, the template it publishes
carries the same temperature/top_p/repetition_penalty, and its other requests take the
model's defaults from the same file (its worker applies the model's stop strings itself).

Both app configurations run on a throwaway data dir (fresh SQLite) with the compile caches of
the real one, the per-user rate limit raised (the bench's users are synthetic; one socket and
one user per request in flight), and `CHAT_MAX_TOKENS` = the run's max_tokens.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import httpx

from bench import harness
from bench.faq_ttft import FAQS
from bench.load.clients import (
    Client,
    OpenAIClient,
    SocketPool,
    WebSocketClient,
    fetch_template_ref,
    sequential,
)
from bench.load.workload import TEMPLATE_NAME, WorkItem
from bench.prompts import BenchSampling
from inference.settings import EngineSettings

ConfigName = Literal["full", "baseline", "nofaq", "api", "vllm", "external"]
CONFIG_NAMES: tuple[ConfigName, ...] = ("full", "baseline", "nofaq", "api", "vllm", "external")
CONFIG_LABELS: dict[str, str] = {
    "full": "our app, everything on (FAQ cache, prefix caching, coalescing 15 ms / 8 tokens)",
    "baseline": "our app, FAQ cache, prefix caching and coalescing off",
    "nofaq": "our app, everything on but the FAQ cache (what the lookup costs)",
    "api": "our app as `full`, over its OpenAI-compatible API (/v1/chat/completions, API key)",
    "vllm": "vLLM's own OpenAI server, same model and engine sizes, prefix caching on",
    "external": "an OpenAI-compatible server already running (--external-url)",
}
NO_FAQ_ENV = {"CHAT_FAQ_ENABLED": "0", "INFERENCE_FAQ": "0"}
BASELINE_ENV = {
    **NO_FAQ_ENV,
    "VLLM_PREFIX_CACHING": "0",
    "INFERENCE_COALESCE_MS": "0",
    "INFERENCE_COALESCE_TOKENS": "1",
}
SERVED_MODEL_NAME = "bench"
FAQ_READY_TIMEOUT_S = 90.0


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    model_dir: Path
    cache_dir: Path
    sampling: BenchSampling
    max_sockets: int
    ready_timeout_s: float
    results_stem: Path
    external_url: str = ""
    external_api: Literal["completions", "chat"] = "chat"
    external_model: str = ""
    external_api_key: str = ""
    external_vllm: bool = False  # send vLLM's sampling extensions to the external server


@dataclass(kw_only=True)
class Target:
    """A configuration ready to measure."""

    name: str
    client: Client
    startup_s: float
    log_path: Path | None
    # (prefix-cache hit tokens, query tokens) so far, from the server's /metrics; None for
    # the app, whose answers report their own cached tokens
    prefix_cache_counters: Callable[[], Awaitable[tuple[float, float] | None]] | None = None


def engine_settings(*, model_dir: Path) -> EngineSettings:
    """The engine sizes both the app and vLLM's server get (environment overrides apply)."""
    return EngineSettings.from_env().model_copy(update={"model_dir": model_dir})


# ---- the app ---------------------------------------------------------------------------------


def app_env(*, name: str, data_dir: Path, options: RunOptions) -> dict[str, str]:
    dropped = {"REDIS_URL", "DATABASE_URL", "CHAT_MAX_TOKENS", "INFERENCE_ENGINE", *BASELINE_ENV}
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    cache = options.cache_dir
    env |= {
        "DJANGO_SETTINGS_MODULE": "chatapp.settings.local",
        "CHAT_DATA_DIR": str(data_dir),
        "MODEL": str(options.model_dir),
        "VLLM_CACHE_ROOT": str(cache / "vllm"),
        "TORCHINDUCTOR_CACHE_DIR": str(cache / "torchinductor"),
        "TRITON_CACHE_DIR": str(cache / "triton"),
        "HF_HOME": str(cache / "huggingface"),
        "INFERENCE_FAQ_VERIFIER_DIR": os.environ.get(
            "INFERENCE_FAQ_VERIFIER_DIR", str(harness.PREPARED_VERIFIER_DIR)
        ),
        "DEBUG": "0",
        "PYTHONUNBUFFERED": "1",
        "CHAT_MAX_TOKENS": str(options.sampling.max_tokens),
        "CHAT_USER_RATE": "100000",
    }
    if name == "baseline":
        env |= BASELINE_ENV
    elif name == "nofaq":
        env |= NO_FAQ_ENV
    return env


@dataclass(frozen=True, kw_only=True)
class Seeded:
    cookies: list[str]
    api_key: str | None


def seed_app(
    *, env: Mapping[str, str], users: int, faq: bool, api_key: bool, sampling: BenchSampling
) -> Seeded:
    """Migrate, create the users' sessions, the FAQ entries, the template (with the run's
    sampling) and an API key (in a subprocess with the server's environment)."""
    args = [sys.executable, "-m", "bench.load.seed", "--users", str(users), "--template"]
    args += ["--template-sampling", json.dumps(sampling.template_sampling())]
    if faq:
        args.append("--faq")
    if api_key:
        args.append("--api-key")
    result = subprocess.run(
        args,
        cwd=harness.REPO_ROOT,
        env={**env, "CHAT_WARMUP_TIMEOUT_S": "0.2"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    if result.returncode != 0:
        raise RuntimeError(f"seeding failed:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}")
    seeded = json.loads(result.stdout.strip().splitlines()[-1])
    return Seeded(cookies=list(seeded["cookies"]), api_key=seeded["api_key"])


async def wait_for_log(server: harness.ServerProcess, text: str, *, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in server.log_text():
        server.check_alive()
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {text!r} in {server.log_path} after {timeout_s:.0f} s")
        await asyncio.sleep(0.25)


async def wait_for_faq(client: Client) -> None:
    """The worker loads the FAQ entries from a snapshot after it starts: ask an entry's own
    question until the FAQ answers it."""
    item = WorkItem(index=-1, kind="faq", text=FAQS[0].question, faq_index=0)
    deadline = time.monotonic() + FAQ_READY_TIMEOUT_S
    while True:
        (outcome,) = await sequential(client, [item])
        if outcome.source == "faq":
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the FAQ never answered {item.text!r}: {outcome}")
        await asyncio.sleep(1.0)


@contextlib.asynccontextmanager
async def app_target(*, name: str, options: RunOptions) -> AsyncIterator[Target]:
    started = time.monotonic()
    data_dir = Path(tempfile.mkdtemp(prefix=f"load-{name}-"))
    env = app_env(name=name, data_dir=data_dir, options=options)
    seeded = await asyncio.to_thread(
        seed_app,
        env=env,
        users=options.max_sockets,
        faq=name in ("full", "api"),
        api_key=name == "api",
        sampling=options.sampling,
    )
    cookies = seeded.cookies
    port = harness.free_port()
    log_path = options.results_stem.with_name(f"{options.results_stem.name}.{name}.server.log")
    server = harness.ServerProcess(
        args=[sys.executable, "manage.py", "serve", "--port", str(port)], env=env, log_path=log_path
    )
    server.start()
    base_url = f"http://127.0.0.1:{port}"
    pool = SocketPool(url=f"ws://127.0.0.1:{port}/ws/chat/", origin=base_url, cookies=cookies)
    api: OpenAIClient | None = None
    try:
        await wait_for_log(server, "Ready:", timeout_s=options.ready_timeout_s)
        template = await fetch_template_ref(
            base_url=base_url, cookie=cookies[0], name=TEMPLATE_NAME
        )
        client: Client
        if name == "api":
            assert seeded.api_key is not None
            client = api = OpenAIClient(
                base_url=base_url,
                model=options.model_dir.name,  # the API serves the model folder's name
                api="chat",
                sampling=options.sampling,
                vllm=False,  # it applies the model's own stops and repetition penalty
                api_key=seeded.api_key,
                template_id=template.id,
            )
        else:
            await pool.open(min(8, options.max_sockets))
            client = WebSocketClient(pool=pool, template=template)
        if name in ("full", "api") and env.get("CHAT_FAQ_ENABLED", "1") != "0":
            await wait_for_faq(client)
        yield Target(
            name=name, client=client, startup_s=time.monotonic() - started, log_path=log_path
        )
    finally:
        await pool.close()
        if api is not None:
            await api.close()
        killed = await asyncio.to_thread(server.stop)
        if killed:
            print(f"warning: SIGKILLed leftover {name} processes {killed}", flush=True)
        shutil.rmtree(data_dir, ignore_errors=True)


# ---- vLLM's own server -------------------------------------------------------------------------


def vllm_server_env(settings: EngineSettings) -> dict[str, str]:
    """The environment the app's engine sets for itself (offline, loopback, caches)."""
    from inference.engines.vllm import configure_vllm_environment

    saved = dict(os.environ)
    try:
        configure_vllm_environment(settings=settings)
        env = dict(os.environ)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    env["VLLM_LOGGING_LEVEL"] = "INFO"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def vllm_server_args(settings: EngineSettings, *, port: int) -> list[str]:
    from inference.engines.dtype import engine_dtype
    from inference.engines.vllm import engine_block_size

    args = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(settings.model_dir),
        "--served-model-name",
        SERVED_MODEL_NAME,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        engine_dtype(settings.dtype).dtype,  # the app's engine chooses the same (VLLM_DTYPE)
        "--max-num-seqs",
        str(settings.max_num_seqs),
        "--max-num-batched-tokens",
        str(settings.max_num_batched_tokens),
        "--max-model-len",
        str(settings.max_model_len),
        "--scheduling-policy",
        "priority",
        "--enable-prompt-tokens-details",
        "--disable-uvicorn-access-log",
        "--enable-prefix-caching" if settings.prefix_caching else "--no-enable-prefix-caching",
    ]
    block_size = engine_block_size(settings)  # the app's engine asks for the same
    if block_size:
        args += ["--block-size", str(block_size)]
    if settings.chat_template_path is not None:
        args += ["--chat-template", str(settings.chat_template_path)]
    if settings.enforce_eager:
        args.append("--enforce-eager")
    return args


def parse_prefix_cache_counters(text: str) -> tuple[float, float] | None:
    """(hits, queries) in tokens from a vLLM `/metrics` page, summed over label sets."""
    totals = {"vllm:prefix_cache_hits_total": 0.0, "vllm:prefix_cache_queries_total": 0.0}
    seen = False
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in totals:
            totals[name] += float(line.rsplit(" ", 1)[1])
            seen = True
    if not seen:
        return None
    return totals["vllm:prefix_cache_hits_total"], totals["vllm:prefix_cache_queries_total"]


async def wait_for_health(
    server: harness.ServerProcess, base_url: str, *, timeout_s: float
) -> None:
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient(base_url=base_url, timeout=5) as http:
        while True:
            server.check_alive()
            with contextlib.suppress(httpx.HTTPError):
                if (await http.get("/health")).status_code == 200:
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(f"vLLM's server not healthy after {timeout_s:.0f} s")
            await asyncio.sleep(0.5)


def metrics_reader(base_url: str) -> Callable[[], Awaitable[tuple[float, float] | None]]:
    async def read() -> tuple[float, float] | None:
        async with httpx.AsyncClient(base_url=base_url, timeout=10) as http:
            response = await http.get("/metrics")
            response.raise_for_status()
            return parse_prefix_cache_counters(response.text)

    return read


@contextlib.asynccontextmanager
async def vllm_target(*, options: RunOptions) -> AsyncIterator[Target]:
    started = time.monotonic()
    settings = engine_settings(model_dir=options.model_dir)
    port = harness.free_port()
    log_path = options.results_stem.with_name(f"{options.results_stem.name}.vllm.server.log")
    server = harness.ServerProcess(
        args=vllm_server_args(settings, port=port), env=vllm_server_env(settings), log_path=log_path
    )
    server.start()
    base_url = f"http://127.0.0.1:{port}"
    client = OpenAIClient(
        base_url=base_url,
        model=SERVED_MODEL_NAME,
        api="chat",  # vLLM renders the messages with the model's chat template
        sampling=options.sampling,
        vllm=True,
    )
    try:
        await wait_for_health(server, base_url, timeout_s=options.ready_timeout_s)
        yield Target(
            name="vllm",
            client=client,
            startup_s=time.monotonic() - started,
            log_path=log_path,
            prefix_cache_counters=metrics_reader(base_url),
        )
    finally:
        await client.close()
        killed = await asyncio.to_thread(server.stop)
        if killed:
            print(f"warning: SIGKILLed leftover vLLM server processes {killed}", flush=True)


@contextlib.asynccontextmanager
async def external_target(*, options: RunOptions) -> AsyncIterator[Target]:
    prompt_of: Callable[[WorkItem], str] | None = None
    if options.external_api == "completions":
        from bench.prompts import tokenizer_prompt_builder

        settings = engine_settings(model_dir=options.model_dir)
        builder = tokenizer_prompt_builder(options.model_dir, context_tokens=settings.max_model_len)
        max_tokens = options.sampling.max_tokens

        def prompt_of(item: WorkItem) -> str:
            return item.prompt(builder, max_tokens=max_tokens).text

    client = OpenAIClient(
        base_url=options.external_url,
        model=options.external_model or SERVED_MODEL_NAME,
        api=options.external_api,
        sampling=options.sampling,
        vllm=options.external_vllm,
        prompt_of=prompt_of,
        api_key=options.external_api_key or None,
    )
    try:
        yield Target(name="external", client=client, startup_s=0.0, log_path=None)
    finally:
        await client.close()


def started(name: str, *, options: RunOptions) -> contextlib.AbstractAsyncContextManager[Target]:
    if name in ("full", "baseline", "nofaq", "api"):
        return app_target(name=name, options=options)
    if name == "vllm":
        return vllm_target(options=options)
    return external_target(options=options)
