"""The OpenAI-compatible engine against a fake server started in the test (aiohttp).

The fake records every request and answers with vLLM's own chunk shapes (completions
streaming with include_usage + continuous_usage_stats, the usage chunk last, then [DONE]).
vLLM's real server is in tests/integration/test_openai_compatible_vllm.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from channels.layers import InMemoryChannelLayer

from inference.engine_request import engine_request_of
from inference.engines.base import (
    EngineDelta,
    EngineError,
    EngineRequest,
    PromptTooLongError,
    RequestRejectedError,
)
from inference.engines.openai_compatible import OpenAICompatibleEngine
from inference.engines.scripted import SCRIPTED_DEFAULTS, ScriptedEngine
from inference.prompt_builder import folder_prompt_builder
from inference.runtime import build_engine
from inference.settings import (
    EngineSettings,
    OpenAIEngineSettings,
    WorkerSettings,
    data_dir_from_env,
    openai_base_url,
)
from inference.wire.protocol import (
    CancelRequest,
    ChatTurn,
    GenerateRequest,
    SamplingOptions,
)
from inference.wire.transport import Transport
from inference.worker import InferenceWorker
from tests.inference.worker_events import ask, running
from tests.support.net import free_port
from tests.support.vllm import next_event
from tests.support.workers import worker_settings


@dataclass
class Seen:
    body: dict[str, Any]
    headers: dict[str, str]  # names in lower case


@dataclass
class FakeServer:
    """An OpenAI-compatible server that plays back `chunks` (SSE data items)."""

    url: str = ""
    requests: list[Seen] = field(default_factory=list)
    models: list[dict[str, Any]] = field(
        default_factory=lambda: [{"id": "served-tiny", "object": "model", "max_model_len": 512}]
    )
    chunks: list[str] = field(default_factory=list)
    status: int = 200
    error: dict[str, Any] | None = None
    hang: bool = False  # after the chunks, keep the stream open (keep-alives) until the client goes
    done: bool = True  # end with [DONE]
    health_status: int = 200
    disconnected: asyncio.Event = field(default_factory=asyncio.Event)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        headers = {name.lower(): value for name, value in request.headers.items()}
        self.requests.append(Seen(body=await request.json(), headers=headers))
        if self.status != 200:
            return web.json_response(self.error or {}, status=self.status)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        try:
            for data in self.chunks:
                await response.write(f"data: {data}\n\n".encode())
            while self.hang:
                await asyncio.sleep(0.02)
                await response.write(b": keep-alive\n\n")
            if self.done:
                await response.write(b"data: [DONE]\n\n")
        except ConnectionResetError:  # aiohttp's ClientConnectionResetError: the client left
            self.disconnected.set()
        return response

    async def list_models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": self.models})

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=self.health_status)


@pytest.fixture
async def fake() -> AsyncIterator[FakeServer]:
    server = FakeServer()
    app = web.Application()
    app.router.add_post("/v1/completions", server.completions)
    app.router.add_get("/v1/models", server.list_models)
    app.router.add_get("/health", server.health)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    server.url = f"http://127.0.0.1:{port}"
    yield server
    server.hang = False
    await runner.cleanup()


def chunk(text: str, *, tokens: int, finish: str | None = None, prompt: int = 7) -> str:
    """A vLLM completions chunk with continuous usage (`tokens`: completion tokens so far)."""
    return json.dumps(
        {
            "id": "cmpl-x",
            "object": "text_completion",
            "model": "served-tiny",
            "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": tokens,
                "total_tokens": prompt + tokens,
            },
        }
    )


def usage(*, prompt: int = 7, tokens: int, cached: int | None = None) -> str:
    body: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": tokens}
    if cached is not None:
        body["prompt_tokens_details"] = {"cached_tokens": cached}
    return json.dumps({"id": "cmpl-x", "choices": [], "usage": body})


def engine_for(server: FakeServer, **settings: Any) -> OpenAICompatibleEngine:
    return OpenAICompatibleEngine(
        settings=OpenAIEngineSettings(url=server.url, **settings),
        model="served-tiny",
        builder=ScriptedEngine().prompt_builder,
        defaults=SCRIPTED_DEFAULTS,
    )


def engine_request(**overrides: Any) -> EngineRequest:
    values: dict[str, Any] = {
        "request_id": "req-1",
        "prompt": "hello there",
        "prompt_token_ids": [5, 6, 7],
        "max_tokens": 16,
        "temperature": 0.0,
        "top_p": 1.0,
        "stop": (),
    }
    values.update(overrides)
    return EngineRequest(**values)


async def collect(engine: OpenAICompatibleEngine, request: EngineRequest) -> list[EngineDelta]:
    return [delta async for delta in engine.stream(request)]


async def test_a_prompt_goes_as_the_model_folders_tokens_with_the_session_header(
    fake: FakeServer, tiny_dir: Path
) -> None:
    fake.chunks = [chunk("Hi", tokens=1, finish="stop"), usage(tokens=1)]
    engine = await asyncio.to_thread(
        OpenAICompatibleEngine.create,
        settings=OpenAIEngineSettings(url=fake.url),
        engine_settings=EngineSettings(
            model_dir=tiny_dir,
            data_dir=data_dir_from_env(),
            max_num_seqs=4,
            max_num_batched_tokens=1024,
            max_model_len=4096,
            kv_cache_gib=1.0,
            enforce_eager=True,
        ),
    )
    assert engine.model == "served-tiny"  # the only model /v1/models lists
    assert engine.prompt_builder.context_tokens == 512  # the server's max_model_len wins
    request = GenerateRequest(
        request_id="r-tokens",
        reply_channel="reply",
        system="You are the support agent.",
        messages=[ChatTurn(role="user", content="Where is <|im_start|>my parcel?")],
        sampling=SamplingOptions(max_tokens=8),
        submitted_at=0.0,
        session_id="conversation-42",
    )
    built = engine_request_of(request, builder=engine.prompt_builder, defaults=engine.defaults)
    await collect(engine, built)
    await engine.aclose()

    (seen,) = fake.requests
    # the same tokens a builder of its own on the same folder makes: byte-identical prefixes
    reference = folder_prompt_builder(model_dir=tiny_dir, context_tokens=512).build(
        system=request.system, messages=request.messages, max_tokens=8, trim=True
    )
    assert seen.body["prompt"] == built.prompt_token_ids == reference.token_ids
    assert seen.body["model"] == "served-tiny"
    assert seen.headers["x-session-id"] == "conversation-42"
    assert seen.headers["x-request-id"] == "r-tokens"
    assert "authorization" not in seen.headers
    assert seen.body["stream"] is True
    assert seen.body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    # the model's own defaults (generation_config.json: greedy), sent, not left to the server
    assert seen.body["temperature"] == 0.0
    assert seen.body["max_tokens"] == 8


async def test_no_session_header_without_a_conversation_and_a_configured_header_name(
    fake: FakeServer,
) -> None:
    fake.chunks = [chunk("a", tokens=1, finish="stop"), usage(tokens=1)]
    engine = engine_for(fake, session_header="X-Conversation", api_key="sk-test")
    await collect(engine, engine_request(request_id="one"))
    await collect(engine, engine_request(request_id="two", session_id="conv-7"))
    await engine.aclose()
    first, second = fake.requests
    assert "x-session-id" not in first.headers
    assert "x-conversation" not in first.headers
    assert second.headers["x-conversation"] == "conv-7"
    assert "x-session-id" not in second.headers
    assert first.headers["authorization"] == "Bearer sk-test"


async def test_chunks_become_deltas_with_usage_and_cached_prompt_tokens(fake: FakeServer) -> None:
    fake.chunks = [
        chunk("Hel", tokens=1, prompt=40),
        chunk("", tokens=2, prompt=40),  # a token that decodes to nothing yet
        chunk("lo!", tokens=4, prompt=40, finish="length"),  # two tokens in one step
        usage(prompt=40, tokens=4, cached=32),
    ]
    engine = engine_for(fake)
    deltas = await collect(engine, engine_request())
    await engine.aclose()

    assert [(d.text, d.tokens, d.finish_reason) for d in deltas] == [
        ("Hel", 1, None),
        ("", 1, None),
        ("lo!", 2, None),
        ("", 0, "length"),  # the finish reason comes with the usage, after the last text
    ]
    assert all(d.prompt_tokens == 40 for d in deltas)
    assert deltas[-1].cached_prompt_tokens == 32
    stats = engine.stats()
    assert (stats.prefix_cache_queries, stats.prefix_cache_hits) == (40, 32)
    assert stats.unfinished_requests == 0


async def test_without_continuous_usage_the_final_usage_corrects_the_token_count(
    fake: FakeServer,
) -> None:
    plain = json.dumps({"choices": [{"index": 0, "text": "ab", "finish_reason": None}]})
    last = json.dumps({"choices": [{"index": 0, "text": "c", "finish_reason": "stop"}]})
    fake.chunks = [plain, last, usage(prompt=3, tokens=5)]  # no cached tokens reported
    engine = engine_for(fake)
    deltas = await collect(engine, engine_request())
    await engine.aclose()
    assert sum(d.tokens for d in deltas) == 5
    assert deltas[-1].finish_reason == "stop"
    assert deltas[-1].cached_prompt_tokens == 0
    # a server that does not report cached tokens adds nothing to the cache counters
    assert (engine.stats().prefix_cache_queries, engine.stats().prefix_cache_hits) == (0, 0)


async def test_sampling_fields_map_to_the_completions_request(fake: FakeServer) -> None:
    fake.chunks = [chunk("{}", tokens=1, finish="stop"), usage(tokens=1)]
    engine = engine_for(fake)
    request = engine_request(
        max_tokens=9,
        temperature=0.7,
        top_p=0.9,
        top_k=40,
        stop=("\nUser:",),
        seed=11,
        repetition_penalty=1.1,
        frequency_penalty=0.2,
        presence_penalty=0.3,
        logprobs=2,
        logit_bias={17: -100.0},
        priority=5,
        json_schema={"type": "object", "properties": {"id": {"type": "string"}}},
    )
    await collect(engine, request)
    await collect(engine, engine_request(request_id="plain"))
    await engine.aclose()
    body, plain = fake.requests[0].body, fake.requests[1].body
    assert body["prompt"] == [5, 6, 7]
    assert {k: body[k] for k in ("max_tokens", "temperature", "top_p", "top_k", "seed")} == {
        "max_tokens": 9,
        "temperature": 0.7,
        "top_p": 0.9,
        "top_k": 40,
        "seed": 11,
    }
    assert body["stop"] == ["\nUser:"]
    assert (body["repetition_penalty"], body["frequency_penalty"]) == (1.1, 0.2)
    assert body["presence_penalty"] == 0.3
    assert body["logprobs"] == 2
    assert body["logit_bias"] == {"17": -100.0}
    assert body["priority"] == 5
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "answer",
            "schema": {"type": "object", "properties": {"id": {"type": "string"}}},
        },
    }
    # off values: top_k -1 (vLLM and SGLang), vLLM's extensions left out entirely
    assert plain["top_k"] == -1
    assert plain["repetition_penalty"] == 1.0
    for absent in ("priority", "response_format", "logprobs", "logit_bias", "seed"):
        assert absent not in plain


async def test_logprobs_come_back_best_first(fake: FakeServer) -> None:
    with_logprobs = json.loads(chunk("Hi", tokens=1))
    with_logprobs["choices"][0]["logprobs"] = {
        "text_offset": [0],
        "tokens": ["Hi"],
        "token_logprobs": [-0.1],
        "top_logprobs": [{"Hello": -2.5, "Hi": -0.1, "Hey": -1.5}],
    }
    fake.chunks = [json.dumps(with_logprobs), usage(tokens=1)]
    engine = engine_for(fake)
    deltas = await collect(engine, engine_request(logprobs=2))
    await engine.aclose()
    (logprob,) = deltas[0].logprobs or ()
    assert (logprob.token, logprob.logprob) == ("Hi", -0.1)
    assert [(t.token, t.logprob) for t in logprob.top] == [("Hi", -0.1), ("Hey", -1.5)]


async def test_cancelling_the_reader_closes_the_connection(fake: FakeServer) -> None:
    fake.chunks = [chunk("Once", tokens=1)]
    fake.hang = True  # the answer goes on until the client goes away
    engine = engine_for(fake)
    first = asyncio.Event()

    async def read() -> None:
        async for _delta in engine.stream(engine_request()):
            first.set()

    task = asyncio.create_task(read())
    await asyncio.wait_for(first.wait(), 5)
    assert engine.stats().unfinished_requests == 1
    assert engine.stats().running_requests == 1
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await asyncio.wait_for(fake.disconnected.wait(), 5)  # what makes vLLM's server abort
    assert engine.stats().unfinished_requests == 0
    await engine.aclose()


async def test_stop_through_a_worker_closes_the_connection(fake: FakeServer) -> None:
    fake.chunks = [chunk("Once upon", tokens=2)]
    fake.hang = True
    engine = engine_for(fake)
    layer = InMemoryChannelLayer()
    worker = InferenceWorker(
        engine=engine, transport=Transport(layer=layer), settings=worker_settings(engine="openai")
    )
    async with running(worker, ready_timeout_s=5):
        reply = await ask(
            layer, "Tell me a story", request_id="stop-me", session_id="conversation-9"
        )
        accepted = await next_event(layer, reply)
        assert (await next_event(layer, reply)).type == "inference.delta"
        await layer.send(accepted.worker_channel, CancelRequest(request_id="stop-me").to_channel())
        done = await next_event(layer, reply)
        assert (done.type, done.finish_reason) == ("inference.done", "abort")
        await asyncio.wait_for(fake.disconnected.wait(), 5)
        assert fake.requests[0].headers["x-session-id"] == "conversation-9"
    await engine.aclose()


async def test_abort_by_id_ends_the_stream_with_abort(fake: FakeServer) -> None:
    fake.chunks = [chunk("Once", tokens=1)]
    fake.hang = True
    engine = engine_for(fake)
    deltas: list[EngineDelta] = []
    first = asyncio.Event()

    async def read() -> None:
        async for delta in engine.stream(engine_request(request_id="to-abort")):
            deltas.append(delta)
            first.set()

    task = asyncio.create_task(read())
    await asyncio.wait_for(first.wait(), 5)
    await engine.abort("to-abort")
    await asyncio.wait_for(task, 5)
    await asyncio.wait_for(fake.disconnected.wait(), 5)
    assert deltas[0].text == "Once"
    assert deltas[-1].finish_reason == "abort"
    await engine.abort("unknown")  # nothing running under that id: nothing happens
    await engine.aclose()


@pytest.mark.parametrize(
    ("status", "message", "expected", "words"),
    [
        (
            400,
            "This model's maximum context length is 512 tokens. However, your prompt contains "
            "600 input tokens",
            PromptTooLongError,
            "at most 511",
        ),
        (400, "`logprobs` must be a positive value or -1.", RequestRejectedError, "logprobs"),
        (500, "EngineCore died", EngineError, "answered 500: EngineCore died"),
        (503, "no healthy backend", EngineError, "/v1/completions answered 503"),
        (401, "bad key", EngineError, "OPENAI_ENGINE_API_KEY"),
        (404, "The model `x` does not exist.", EngineError, "OPENAI_ENGINE_MODEL"),
    ],
)
async def test_http_errors_map_to_the_protocols_exceptions(
    fake: FakeServer, status: int, message: str, expected: type[Exception], words: str
) -> None:
    fake.status = status
    fake.error = {"error": {"message": message, "type": "BadRequestError", "code": status}}
    engine = engine_for(fake)
    with pytest.raises(expected) as raised:
        await collect(engine, engine_request())
    await engine.aclose()
    assert type(raised.value) is expected
    assert words in str(raised.value)
    if expected is EngineError:  # the operator's problem: says which server
        assert fake.url in str(raised.value)


async def test_an_error_inside_the_stream_and_a_stream_cut_short_fail_the_answer(
    fake: FakeServer,
) -> None:
    failure = {"error": {"message": "engine failed", "type": "InternalServerError", "code": 500}}
    fake.chunks = [chunk("a", tokens=1), json.dumps(failure)]
    engine = engine_for(fake)
    with pytest.raises(EngineError, match="engine failed"):
        await collect(engine, engine_request())
    fake.chunks, fake.done = [chunk("a", tokens=1)], False  # the connection ends, no [DONE]
    with pytest.raises(EngineError, match="ended the stream"):
        await collect(engine, engine_request())
    await engine.aclose()


async def test_an_unreachable_server_fails_with_its_url() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    engine = engine_for(FakeServer(url=url), timeout_s=5)
    with pytest.raises(EngineError, match=r"cannot reach the OpenAI-compatible server at http"):
        await collect(engine, engine_request())
    with pytest.raises(EngineError, match=f"{url}/health"):
        await engine.check_health()
    await engine.aclose()


async def test_health_asks_the_servers_health_endpoint(fake: FakeServer) -> None:
    engine = engine_for(fake)
    await engine.check_health()
    fake.health_status = 503
    with pytest.raises(EngineError, match="/health answered 503"):
        await engine.check_health()
    await engine.aclose()


async def test_the_served_model_is_checked_at_start(fake: FakeServer, tmp_path: Path) -> None:
    engine_settings = EngineSettings(
        model_dir=tmp_path / "absent",
        data_dir=tmp_path,
        max_num_seqs=4,
        max_num_batched_tokens=1024,
        max_model_len=1024,
        kv_cache_gib=1.0,
        enforce_eager=True,
    )

    def create(**settings: Any) -> OpenAICompatibleEngine:
        return OpenAICompatibleEngine.create(
            settings=OpenAIEngineSettings(url=fake.url, **settings),
            engine_settings=engine_settings,
        )

    fake.models = [{"id": "a"}, {"id": "b"}]
    with pytest.raises(EngineError, match="serves a, b: set OPENAI_ENGINE_MODEL"):
        await asyncio.to_thread(create)
    with pytest.raises(EngineError, match="serves a, b, not OPENAI_ENGINE_MODEL=c"):
        await asyncio.to_thread(create, model="c")
    # the model is fine, the folder is not: said with the folder's path
    with pytest.raises(EngineError, match=r"MODEL=.*absent is not a folder"):
        await asyncio.to_thread(create, model="b")


def test_the_url_is_required_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_ENGINE_URL", raising=False)
    with pytest.raises(ValueError, match="INFERENCE_ENGINE=openai needs OPENAI_ENGINE_URL"):
        OpenAIEngineSettings.from_env()
    for bad in ("router:8000", "ftp://router", "http://", "http://router:80x0", "http://r/?a=1"):
        monkeypatch.setenv("OPENAI_ENGINE_URL", bad)
        with pytest.raises(ValueError, match="OPENAI_ENGINE_URL"):
            OpenAIEngineSettings.from_env()
    assert openai_base_url("http://router:8000/v1/") == "http://router:8000"
    assert openai_base_url(" https://gw.example/llm/v1 ") == "https://gw.example/llm"
    monkeypatch.setenv("OPENAI_ENGINE_URL", "http://router:8000")
    monkeypatch.setenv("OPENAI_ENGINE_SESSION_HEADER", "X Bad")
    with pytest.raises(ValueError, match="OPENAI_ENGINE_SESSION_HEADER"):
        OpenAIEngineSettings.from_env()
    monkeypatch.setenv("OPENAI_ENGINE_SESSION_HEADER", "")
    monkeypatch.setenv("OPENAI_ENGINE_TIMEOUT_S", "0")
    with pytest.raises(ValueError, match="OPENAI_ENGINE_TIMEOUT_S must be positive"):
        OpenAIEngineSettings.from_env()
    monkeypatch.setenv("OPENAI_ENGINE_TIMEOUT_S", "30")
    monkeypatch.setenv("OPENAI_ENGINE_MODEL", "served")
    monkeypatch.setenv("OPENAI_ENGINE_API_KEY", "sk-1")
    assert OpenAIEngineSettings.from_env() == OpenAIEngineSettings(
        url="http://router:8000", model="served", api_key="sk-1", timeout_s=30.0
    )
    monkeypatch.setenv("INFERENCE_ENGINE", "openai")
    assert WorkerSettings.from_env().engine == "openai"


def test_a_worker_on_the_openai_engine_fails_at_start_with_a_clear_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_ENGINE_URL", raising=False)
    settings = worker_settings(engine="openai")
    with pytest.raises(EngineError, match="needs OPENAI_ENGINE_URL"):
        build_engine(worker_settings=settings, progress=lambda _line: None)
    url = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("OPENAI_ENGINE_URL", url)
    lines: list[str] = []
    with pytest.raises(EngineError, match=f"cannot reach the OpenAI-compatible server at {url}"):
        build_engine(worker_settings=settings, progress=lines.append)
    assert url in lines[0]
