"""The OpenAI-compatible engine against vLLM's own OpenAI server (a real process on the tiny
model): real tokens through a worker, the session header on the wire, cached prompt tokens
reported back, and Stop aborting the request on the server (its `/metrics` running count).

The server is started once for the module with the flags `VllmEngine` uses for itself
(eager, 32-token blocks, prefix caching, priority scheduling) plus the one that reports
cached prompt tokens in usage (`--enable-prompt-tokens-details`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from channels.layers import InMemoryChannelLayer

from inference.engine_request import engine_request_of
from inference.engines.base import EngineDelta
from inference.engines.dtype import engine_dtype
from inference.engines.openai_compatible import OpenAICompatibleEngine
from inference.engines.vllm import vllm_environment
from inference.settings import OpenAIEngineSettings, data_dir_from_env
from inference.wire.protocol import (
    REQUEST_CHANNEL,
    CancelRequest,
    ChatTurn,
    GenerateRequest,
    SamplingOptions,
)
from inference.wire.transport import Transport
from inference.worker import InferenceWorker
from tests.inference.worker_events import running
from tests.integration.conftest import tiny_engine_settings
from tests.support.embedded import embedded_queue
from tests.support.net import free_port
from tests.support.vllm import SHARED, fresh, next_event, run_to_end
from tests.support.workers import worker_settings

pytestmark = [pytest.mark.vllm, pytest.mark.asyncio(loop_scope="session")]

SERVED_NAME = "tiny-served"
# The tiny model decodes thousands of tokens a second, so an answer that is surely still
# running when Stop comes needs a long context (beyond its 8192 positions: its weights are
# random anyway, VLLM_ALLOW_LONG_MAX_MODEL_LEN) and its eos_token_id (4) biased away.
CONTEXT = 32768
LONG = 32000
NO_EOS = {4: -100.0}


@dataclass(frozen=True)
class VllmServer:
    url: str
    log: Path


def server_env(data_dir: Path) -> dict[str, str]:
    """What `configure_vllm_environment` gives the in-process engine (offline, loopback,
    caches under the data dir), a small CPU KV cache, and the long context Stop needs."""
    return {
        **os.environ,
        **vllm_environment(data_dir=data_dir, kv_cache_gib=1),
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1",
        "PYTHONUNBUFFERED": "1",
    }


def descendants(pid: int) -> list[int]:
    """The processes under `pid` (the server's engine core and its model worker)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        children = [child for child, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def yield_engine_to_server(pid: int) -> None:
    """Run the server's engine processes at nice 19 (every thread: Linux's nice is per thread).

    The tiny model decodes faster than vLLM's API process can stream its tokens on two busy
    cores; vLLM's output handler then never yields its event loop, and the server answers
    nothing else (not /metrics, not a client's disconnect) until the request ends. A real
    model's decode steps are far slower than the API's per-token work; so, here, the API
    process (and this test) come first and the engine takes what is left.
    """
    for child in descendants(pid):
        for task in Path(f"/proc/{child}/task").glob("[0-9]*"):
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, int(task.name), 19)


@pytest.fixture(scope="module")
def vllm_server(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    port = free_port()
    log = tmp_path_factory.mktemp("vllm-server") / "server.log"
    args = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(tiny_model),
        "--served-model-name",
        SERVED_NAME,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        engine_dtype("auto").dtype,  # what the app's own engine runs on this machine
        "--max-model-len",
        str(CONTEXT),
        "--max-num-seqs",
        "4",
        "--max-num-batched-tokens",
        "2048",
        "--block-size",
        "32",  # inference/engines/vllm.py CPU_BLOCK_SIZE
        "--enable-prefix-caching",
        "--enforce-eager",
        "--scheduling-policy",
        "priority",
        "--enable-prompt-tokens-details",  # usage.prompt_tokens_details.cached_tokens
        "--disable-uvicorn-access-log",
    ]
    with log.open("w") as out:
        # its own process group: the engine core it spawns goes down with it
        proc = subprocess.Popen(
            args,
            env=server_env(data_dir_from_env()),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vLLM's server exited ({proc.returncode}):\n{log.read_text()[-4000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                pytest.fail(f"vLLM's server not healthy in 240 s:\n{log.read_text()[-4000:]}")
            time.sleep(0.5)
        yield_engine_to_server(proc.pid)
        yield VllmServer(url=url, log=log)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


class RecordingTransport(httpx.AsyncHTTPTransport):
    """The real transport, keeping each request's headers: what went on the wire."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        return await super().handle_async_request(request)


@dataclass(frozen=True)
class Served:
    engine: OpenAICompatibleEngine
    wire: RecordingTransport
    server: VllmServer


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def served(vllm_server: VllmServer, tiny_model: Path) -> AsyncIterator[Served]:
    wire = RecordingTransport()
    engine = await asyncio.to_thread(
        OpenAICompatibleEngine.create,
        settings=OpenAIEngineSettings(url=f"{vllm_server.url}/v1"),  # the SDKs' habit: fine
        engine_settings=tiny_engine_settings(tiny_model),
        transport=wire,
    )
    yield Served(engine=engine, wire=wire, server=vllm_server)
    await engine.aclose()


@pytest.fixture
async def worker(served: Served) -> AsyncIterator[InMemoryChannelLayer]:
    layer = InMemoryChannelLayer()
    worker = InferenceWorker(
        engine=served.engine,
        transport=Transport(layer=layer),
        settings=worker_settings(engine="openai"),
    )
    async with running(worker):
        yield layer


def generate(reply: str, text: str, **sampling: object) -> GenerateRequest:
    return GenerateRequest(
        request_id=str(uuid.uuid4()),
        reply_channel=reply,
        messages=[ChatTurn(role="user", content=text)],
        sampling=SamplingOptions.model_validate(sampling),
        submitted_at=time.time(),
        session_id=f"conversation-{uuid.uuid4().hex[:8]}",
    )


async def server_metric(server: VllmServer, prefix: str) -> float:
    """A metric of the server's /metrics, summed over the label sets whose line starts so."""
    async with httpx.AsyncClient(timeout=5) as http:
        text = (await http.get(f"{server.url}/metrics")).text
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix)
    )


async def requests_running(server: VllmServer) -> float:
    return await server_metric(server, "vllm:num_requests_running")


async def requests_finished(server: VllmServer) -> float:
    """Requests the server ran to their end (stop, length, ...); aborted ones are not counted."""
    return await server_metric(server, "vllm:request_success_total")


async def running_becomes(server: VllmServer, value: float, *, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if await requests_running(server) == value:
            return True
        await asyncio.sleep(0.05)
    return False


async def test_real_tokens_stream_through_a_worker_with_the_session_header(
    served: Served, worker: InMemoryChannelLayer
) -> None:
    assert served.engine.model == SERVED_NAME  # the only model /v1/models lists
    assert served.engine.prompt_builder.context_tokens == CONTEXT  # the server's max_model_len
    reply = await worker.new_channel()
    request = generate(reply, "Where is my parcel?", max_tokens=12)
    await embedded_queue().put(REQUEST_CHANNEL, request.to_channel())
    events = await run_to_end(worker, reply)

    assert events[0].type == "inference.accepted"
    done = events[-1]
    assert done.type == "inference.done", done
    deltas = [e for e in events if e.type == "inference.delta"]
    assert "".join(d.text for d in deltas).strip()
    assert 0 < done.completion_tokens <= 12
    assert sum(d.tokens for d in deltas) <= done.completion_tokens
    # vLLM ran exactly the tokens this side rendered (nothing added, nothing re-tokenized)
    built = engine_request_of(
        request, builder=served.engine.prompt_builder, defaults=served.engine.defaults
    )
    assert done.prompt_tokens == len(built.prompt_token_ids)
    (sent,) = [r for r in served.wire.sent if r.headers.get("x-request-id") == request.request_id]
    assert sent.url.path == "/v1/completions"
    assert sent.headers["x-session-id"] == request.session_id


async def test_a_repeated_long_prefix_reports_cached_prompt_tokens(served: Served) -> None:
    engine = served.engine
    shared = fresh(SHARED)  # no earlier request can have cached this
    before = engine.stats()
    finals: list[EngineDelta] = []
    for question in ("Question one?", "Another question?"):
        request = generate("unused", f"{shared} {question}", max_tokens=4)
        built = engine_request_of(request, builder=engine.prompt_builder, defaults=engine.defaults)
        deltas = [delta async for delta in engine.stream(built)]
        finals.append(deltas[-1])
    first, second = finals
    assert first.prompt_tokens > 600
    assert first.cached_prompt_tokens < 32  # nothing of it was cached before
    # vLLM reuses whole 32-token blocks of the shared text
    assert second.cached_prompt_tokens >= first.prompt_tokens - 64
    after = engine.stats()
    assert after.prefix_cache_hits - before.prefix_cache_hits == (
        first.cached_prompt_tokens + second.cached_prompt_tokens
    )
    assert after.prefix_cache_queries - before.prefix_cache_queries == (
        first.prompt_tokens + second.prompt_tokens
    )


async def test_stop_aborts_the_request_on_the_server(
    served: Served, worker: InMemoryChannelLayer
) -> None:
    finished_before = await requests_finished(served.server)
    reply = await worker.new_channel()
    request = generate(reply, "Tell me everything.", max_tokens=LONG, logit_bias=NO_EOS)
    await embedded_queue().put(REQUEST_CHANNEL, request.to_channel())
    accepted = await next_event(worker, reply)
    assert accepted.type == "inference.accepted"
    first = await next_event(worker, reply)
    assert first.type == "inference.delta"
    assert await running_becomes(served.server, 1, within_s=5)  # it runs on the server

    await worker.send(
        accepted.worker_channel, CancelRequest(request_id=request.request_id).to_channel()
    )
    done = (await run_to_end(worker, reply))[-1]
    assert done.type == "inference.done"
    assert done.finish_reason == "abort"
    assert done.completion_tokens < LONG
    assert await running_becomes(served.server, 0, within_s=10)  # the server let it go
    # aborted, not run to its end: vLLM counts only requests that finished
    assert await requests_finished(served.server) == finished_before
    assert served.engine.stats().unfinished_requests == 0


async def test_abort_by_id_aborts_on_the_server(served: Served) -> None:
    engine = served.engine
    finished_before = await requests_finished(served.server)
    request = generate("unused", "Go on and on.", max_tokens=LONG, logit_bias=NO_EOS)
    built = engine_request_of(request, builder=engine.prompt_builder, defaults=engine.defaults)
    stream = engine.stream(built)
    first = await anext(stream)
    assert first.finish_reason is None
    await engine.abort(request.request_id)
    rest = [delta async for delta in stream]
    assert rest[-1].finish_reason == "abort"
    assert sum(d.tokens for d in (first, *rest)) < LONG
    assert await running_becomes(served.server, 0, within_s=10)
    assert await requests_finished(served.server) == finished_before
