"""The load generator's clients: WebSockets to the app, streaming HTTP to an OpenAI server.

Both fill in an `Outcome` per request with the same clock: `sent_s` just before the request
leaves, TTFT at the first piece of non-blank answer text, ITL between pieces, E2E at the end.
`run_open_loop` sends a point's requests at their Poisson offsets whatever is in flight;
`run_closed_loop` keeps a fixed number in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import httpx
import websockets
from websockets.asyncio.client import ClientConnection

from bench.load.results import Outcome
from bench.load.workload import WorkItem
from bench.prompts import BenchSampling

REQUEST_TIMEOUT_S = 300.0
BUSY_CODES = frozenset({"busy", "rate_limited", "no_worker"})


class Client(Protocol):
    async def request(self, item: WorkItem, outcome: Outcome, *, clock: float) -> None:
        """Send `item`, fill `outcome`; times relative to `clock` (`time.perf_counter()`)."""


class _Stream:
    """TTFT and inter-piece gaps of one answer, from the moment it was sent."""

    def __init__(self, outcome: Outcome, *, clock: float) -> None:
        self.outcome = outcome
        self.started = time.perf_counter()
        outcome.sent_s = self.started - clock
        self.last: float | None = None
        self.parts: list[str] = []

    def piece(self, text: str) -> None:
        if not self.parts and not text.strip():
            return  # the app never sends a blank first delta: count from the first text
        now = time.perf_counter()
        if self.last is None:
            self.outcome.ttft_s = now - self.started
        else:
            self.outcome.itl_s.append(now - self.last)
        self.last = now
        self.outcome.frames += 1
        self.parts.append(text)

    def end(self) -> None:
        self.outcome.e2e_s = time.perf_counter() - self.started
        self.outcome.answer = "".join(self.parts)
        self.outcome.status = "ok"


# ---- WebSocket: the app's /ws/chat/ ----------------------------------------------------------


class SocketPool:
    """Logged-in sockets, one request at a time each (the app answers `busy` to a second one);
    one user per socket. Sockets are reused first-in first-out; more open as load needs."""

    def __init__(self, *, url: str, origin: str, cookies: Sequence[str]) -> None:
        self.url = url
        self.origin = origin
        self.cookies = list(cookies)
        self.free: asyncio.Queue[ClientConnection] = asyncio.Queue()
        self.opened: list[ClientConnection] = []

    async def open(self, count: int) -> None:
        for _ in range(count):
            self.free.put_nowait(await self._connect())

    async def _connect(self) -> ClientConnection:
        if len(self.opened) >= len(self.cookies):
            raise RuntimeError(f"more than {len(self.cookies)} requests in flight (--max-sockets)")
        cookie = self.cookies[len(self.opened)]
        ws = await websockets.connect(
            self.url,
            additional_headers={"Cookie": f"sessionid={cookie}", "Origin": self.origin},
            max_size=2**22,
            ping_interval=None,  # a busy CPU must not turn a late pong into a closed socket
        )
        self.opened.append(ws)
        return ws

    @contextlib.asynccontextmanager
    async def socket(self) -> Any:
        ws = self.free.get_nowait() if not self.free.empty() else await self._connect()
        try:
            yield ws
        except BaseException:
            # mid-answer frames may still arrive on it: never hand it to another request
            with contextlib.suppress(Exception):
                await ws.close()
            raise
        self.free.put_nowait(ws)

    async def close(self) -> None:
        for ws in self.opened:
            with contextlib.suppress(Exception):
                await ws.close()


@dataclass(frozen=True, kw_only=True)
class TemplateRef:
    id: int
    version: int
    sha256: str

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "version": self.version, "sha256": self.sha256}


async def fetch_template_ref(*, base_url: str, cookie: str, name: str) -> TemplateRef:
    """The published version as the browser preloads it (`GET /api/templates/`)."""
    async with httpx.AsyncClient(base_url=base_url, cookies={"sessionid": cookie}) as client:
        response = await client.get("/api/templates/")
        response.raise_for_status()
        for template in response.json()["templates"]:
            if template["name"] == name:
                return TemplateRef(
                    id=int(template["id"]),
                    version=int(template["version"]),
                    sha256=str(template["sha256"]),
                )
    raise RuntimeError(f"template {name!r} is not published")


class WebSocketClient:
    """`chat.send` in a new conversation per request; a templated send for template items."""

    def __init__(self, *, pool: SocketPool, template: TemplateRef | None) -> None:
        self.pool = pool
        self.template = template

    def frame(self, item: WorkItem) -> dict[str, Any]:
        frame: dict[str, Any] = {
            "type": "chat.send",
            "id": str(uuid.uuid4()),
            "conversation_id": None,
        }
        if item.kind == "template" and self.template is not None:
            frame["template"] = self.template.to_json()
            frame["variables"] = dict(item.variables or {})
        else:
            frame["text"] = item.text
        return frame

    async def request(self, item: WorkItem, outcome: Outcome, *, clock: float) -> None:
        frame = self.frame(item)
        async with self.pool.socket() as ws:
            stream = _Stream(outcome, clock=clock)
            await ws.send(json.dumps(frame))
            async with asyncio.timeout(REQUEST_TIMEOUT_S):
                while True:
                    reply = json.loads(await ws.recv())
                    kind = reply.get("type")
                    if kind == "chat.delta":
                        stream.piece(str(reply["text"]))
                    elif kind == "chat.done":
                        stream.end()
                        usage = reply.get("usage") or {}
                        outcome.prompt_tokens = usage.get("prompt_tokens")
                        outcome.cached_prompt_tokens = usage.get("cached_prompt_tokens")
                        outcome.completion_tokens = usage.get("completion_tokens")
                        outcome.source = reply.get("source")
                        outcome.finish_reason = reply.get("finish_reason")
                        timings = reply.get("timings") or {}
                        outcome.queue_wait_ms = timings.get("queue_wait_ms")
                        outcome.server_ttft_ms = timings.get("ttft_ms")
                        if reply.get("status") != "complete":
                            outcome.status = "error"
                            outcome.error = f"status {reply.get('status')}"
                        return
                    elif kind == "chat.error":
                        code = str(reply.get("code"))
                        outcome.status = "busy" if code in BUSY_CODES else "error"
                        outcome.error = f"{code}: {reply.get('message')}"
                        return
                    elif kind == "chat.resend_full":  # the template did not resolve: full text
                        await ws.send(json.dumps({**frame, "text": item.text}))
                    # chat.accepted, templates.changed: nothing to measure


# ---- OpenAI-compatible HTTP: /v1/completions and /v1/chat/completions --------------------


class OpenAIClient:
    """Streaming requests with the same messages and the same explicit sampling.

    `api="chat"` sends the system prompt and user message: the server renders them with the
    model's chat template, as the app's worker does (vLLM's server: the same prompt tokens).
    `api="completions"` sends the prompt text the worker would build (`prompt_of`), for a
    server without a chat endpoint. `sampling` is sent field by field (`BenchSampling.
    openai_fields`); `vllm` adds vLLM's extensions (top_k, repetition_penalty, stop strings),
    which our own API refuses because it applies the model's own.
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api: Literal["completions", "chat"],
        sampling: BenchSampling,
        vllm: bool,
        prompt_of: Callable[[WorkItem], str] | None = None,
        api_key: str | None = None,
        template_id: int | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.AsyncClient(
            base_url=base_url,
            headers=headers,
            timeout=httpx.Timeout(REQUEST_TIMEOUT_S, connect=10.0),
            limits=httpx.Limits(max_connections=256, max_keepalive_connections=256),
        )
        self.model = model
        self.api = api
        if api == "completions" and prompt_of is None:
            raise ValueError("api='completions' needs prompt_of (the prompt text)")
        self.prompt_of = prompt_of
        self.sampling = sampling
        self.vllm = vllm
        # our own API: template requests by reference (`template` extension), as the page does
        self.template_id = template_id

    def body(self, item: WorkItem) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            **self.sampling.openai_fields(vllm=self.vllm),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.api == "completions":
            assert self.prompt_of is not None
            body["prompt"] = self.prompt_of(item)
        elif item.kind == "template" and self.template_id is not None:
            body["template"] = {"id": self.template_id, "variables": dict(item.variables or {})}
            body["messages"] = []
        else:
            body["messages"] = item.chat_messages()
        return body

    async def request(self, item: WorkItem, outcome: Outcome, *, clock: float) -> None:
        path = "/v1/completions" if self.api == "completions" else "/v1/chat/completions"
        body = self.body(item)
        stream = _Stream(outcome, clock=clock)
        async with self.http.stream("POST", path, json=body) as response:
            if response.status_code != 200:
                body_text = (await response.aread()).decode(errors="replace")[:300]
                outcome.status = "busy" if response.status_code in (429, 503) else "error"
                outcome.error = f"HTTP {response.status_code}: {body_text}"
                return
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                if chunk.get("system_fingerprint") == "faq":  # our API's FAQ-answer marker
                    outcome.source = "faq"
                for choice in chunk.get("choices") or []:
                    text: str | None
                    if self.api == "completions":
                        text = choice.get("text")
                    else:
                        text = (choice.get("delta") or {}).get("content")
                    if text:
                        stream.piece(text)
                    if choice.get("finish_reason"):
                        outcome.finish_reason = choice["finish_reason"]
                usage = chunk.get("usage")
                if usage:
                    outcome.prompt_tokens = usage.get("prompt_tokens")
                    outcome.completion_tokens = usage.get("completion_tokens")
                    details = usage.get("prompt_tokens_details") or {}
                    outcome.cached_prompt_tokens = details.get("cached_tokens")
        stream.end()
        outcome.source = outcome.source or "model"

    async def close(self) -> None:
        await self.http.aclose()


# ---- sending a point -----------------------------------------------------------------------


async def _one(client: Client, item: WorkItem, outcome: Outcome, clock: float) -> None:
    try:
        await client.request(item, outcome, clock=clock)
    except Exception as exc:  # a failed request is a result, not the end of the run
        outcome.status = "error"
        outcome.error = f"{type(exc).__name__}: {exc}"[:300]


async def run_open_loop(
    client: Client,
    items: Sequence[WorkItem],
    offsets: Sequence[float],
    *,
    on_done: Callable[[Outcome], None],
) -> list[Outcome]:
    """Send each item at its offset (Poisson arrivals), whatever is still in flight."""
    clock = time.perf_counter()
    outcomes = [
        Outcome(index=item.index, kind=item.kind, scheduled_s=offset)
        for item, offset in zip(items, offsets, strict=True)
    ]

    async def send(item: WorkItem, outcome: Outcome) -> None:
        await asyncio.sleep(max(0.0, clock + outcome.scheduled_s - time.perf_counter()))
        await _one(client, item, outcome, clock)
        on_done(outcome)

    await asyncio.gather(*(send(i, o) for i, o in zip(items, outcomes, strict=True)))
    return outcomes


async def run_closed_loop(
    client: Client,
    items: Sequence[WorkItem],
    *,
    concurrency: int,
    on_done: Callable[[Outcome], None],
) -> list[Outcome]:
    """Keep `concurrency` requests in flight until every item was sent."""
    clock = time.perf_counter()
    queue = list(reversed(items))
    outcomes: list[Outcome] = []

    async def lane() -> None:
        while queue:
            item = queue.pop()
            outcome = Outcome(index=item.index, kind=item.kind, scheduled_s=0.0)
            outcomes.append(outcome)
            await _one(client, item, outcome, clock)
            on_done(outcome)

    await asyncio.gather(*(lane() for _ in range(concurrency)))
    return sorted(outcomes, key=lambda o: o.index)


async def sequential(client: Client, items: Sequence[WorkItem]) -> list[Outcome]:
    """Warm-up: one request after the other (not part of any point)."""
    outcomes = []
    for item in items:
        outcome = Outcome(index=item.index, kind=item.kind, scheduled_s=0.0)
        await _one(client, item, outcome, time.perf_counter())
        outcomes.append(outcome)
    return outcomes


Sender = Callable[[Client], Awaitable[list[Outcome]]]
