"""An engine that streams from an OpenAI-compatible serving cluster (INFERENCE_ENGINE=openai).

For a team that already runs vLLM's own server, the vLLM router / production-stack, llm-d or
SGLang: the worker keeps everything it does (queue, FAQ cache, coalescing, Stop) and the
cluster runs the model. What makes it fit such a cluster:

* The prompt is rendered here, with the model folder's own tokenizer and chat template, exactly
  as `VllmEngine` renders it, and sent to `/v1/completions` as token ids: the shared system
  prompt is the same tokens in every request (a server re-rendering chat messages or
  re-tokenizing text could differ), and user text cannot become special tokens.
* The conversation id travels in a session header (`X-Session-ID` by default): vLLM's router
  / production-stack and llm-d route a session to the engine that holds its cache.
* Stop closes the HTTP stream, and vLLM's server aborts a request whose client went away.
* `X-Request-Id` is the worker's request id, so the server's logs name the same request.

Sampling fields are sent explicitly, because vLLM's server otherwise fills the missing ones
from the model's generation_config.json; the extensions `priority` and `response_format` are
sent only when a request uses them. Token counts come from `stream_options.include_usage` +
`continuous_usage_stats`, cached prompt tokens from `usage.prompt_tokens_details` (vLLM's
server reports them with `--enable-prompt-tokens-details`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx

from inference.chat_prompt import ChatTemplateError
from inference.engines.base import (
    MIN_LOGPROB,
    EngineDelta,
    EngineError,
    EngineRequest,
    EngineStats,
    ModelFolderEngine,
    PromptTooLongError,
    RequestRejectedError,
    finish_reason_of,
    prompt_too_long_message,
)
from inference.generation_config import GenerationDefaults
from inference.prompt_builder import PromptBuilder, folder_prompt_builder
from inference.settings import EngineSettings, OpenAIEngineSettings
from inference.wire.protocol import FinishReason, TokenLogprob, TopLogprob

logger = logging.getLogger(__name__)

COMPLETIONS_PATH = "/v1/completions"
_CONTEXT_LIMIT = re.compile(r"maximum context length is (\d+)", re.IGNORECASE)


@dataclass
class _Flight:
    """One request on its way: what `abort()` closes and what `stats()` counts."""

    response: httpx.Response | None = None
    answering: bool = False  # a first chunk came: the server runs it (else queued/prefilling)
    aborted: bool = False


@dataclass
class _Answer:
    """What one stream reported so far."""

    prompt_tokens: int
    counted_tokens: int = 0  # completion tokens already handed out in deltas
    usage_tokens: int | None = None  # the server's completion_tokens, when it says
    cached_tokens: int | None = None
    finish: str | None = None
    done: bool = False  # the server said [DONE]

    def take_usage(self, usage: dict[str, Any]) -> None:
        if isinstance(usage.get("prompt_tokens"), int):
            self.prompt_tokens = usage["prompt_tokens"]
        if isinstance(usage.get("completion_tokens"), int):
            self.usage_tokens = usage["completion_tokens"]
        details = usage.get("prompt_tokens_details") or {}
        if isinstance(details.get("cached_tokens"), int):
            self.cached_tokens = details["cached_tokens"]

    def delta(
        self,
        *,
        text: str,
        tokens: int,
        finish: FinishReason | None = None,
        logprobs: tuple[TokenLogprob, ...] | None = None,
    ) -> EngineDelta:
        self.counted_tokens += tokens
        return EngineDelta(
            text=text,
            tokens=tokens,
            finish_reason=finish,
            prompt_tokens=self.prompt_tokens,
            cached_prompt_tokens=self.cached_tokens or 0,
            logprobs=logprobs,
        )


class OpenAICompatibleEngine(ModelFolderEngine):
    def __init__(
        self,
        *,
        settings: OpenAIEngineSettings,
        model: str,
        builder: PromptBuilder,
        defaults: GenerationDefaults,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(builder=builder, defaults=defaults)
        self._settings = settings
        self.model = model
        headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
        self._client = httpx.AsyncClient(
            base_url=settings.url,
            headers=headers,
            timeout=httpx.Timeout(settings.timeout_s),
            # one connection per stream: the worker's own admission bounds how many
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=32),
            transport=transport,
        )
        self._flights: dict[str, _Flight] = {}
        self._prefix_queries = 0
        self._prefix_hits = 0
        self._closing: set[asyncio.Task[None]] = set()

    @classmethod
    def create(
        cls,
        *,
        settings: OpenAIEngineSettings,
        engine_settings: EngineSettings,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> OpenAICompatibleEngine:
        """Ask the server what it serves and load the model folder's tokenizer. Blocks
        (seconds at most: no model is loaded here); raises EngineError with the cause.
        `transport`: the streams' HTTP transport (tests record what goes on the wire)."""
        model, context = _served_model(settings)
        model_dir = engine_settings.model_dir
        if not model_dir.is_dir():
            raise EngineError(
                f"MODEL={model_dir} is not a folder. The OpenAI-compatible engine renders "
                "prompts itself, so it needs a local copy of the served model's folder (its "
                "tokenizer, chat template and generation_config.json)."
            )
        try:
            builder = folder_prompt_builder(
                model_dir=model_dir,
                # the server's own limit when it says (vLLM does), else the configured one
                context_tokens=context or engine_settings.max_model_len,
                chat_template=engine_settings.chat_template(),
            )
        except ChatTemplateError as exc:
            raise EngineError(str(exc)) from exc
        except (OSError, ValueError) as exc:
            raise EngineError(f"MODEL={model_dir}: cannot load its tokenizer: {exc}") from exc
        return cls(
            settings=settings,
            model=model,
            builder=builder,
            defaults=GenerationDefaults.from_model_dir(model_dir),
            transport=transport,
        )

    def _body(self, request: EngineRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": list(request.prompt_token_ids),
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "top_p": request.top_p,
            "top_k": request.top_k if request.top_k > 0 else -1,  # -1: off for vLLM and SGLang
            "repetition_penalty": request.repetition_penalty,
            "frequency_penalty": request.frequency_penalty,
            "presence_penalty": request.presence_penalty,
            "stop": list(request.stop),
        }
        if request.seed is not None:
            body["seed"] = request.seed
        if request.logprobs is not None:
            body["logprobs"] = request.logprobs
        if request.logit_bias:
            body["logit_bias"] = {str(token): bias for token, bias in request.logit_bias.items()}
        if request.priority:  # vLLM's extension: lower runs first (--scheduling-policy priority)
            body["priority"] = request.priority
        if request.json_schema is not None:
            # vLLM turns this into the same structured-outputs JSON constraint as VllmEngine;
            # SGLang takes it too. {} = any JSON object, as for VllmEngine.
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": "answer",
                    "schema": request.json_schema or {"type": "object"},
                },
            }
        return body

    def _headers(self, request: EngineRequest) -> dict[str, str]:
        headers = {"X-Request-Id": request.request_id}
        if request.session_id:
            headers[self._settings.session_header] = request.session_id
        return headers

    async def stream(self, request: EngineRequest) -> AsyncIterator[EngineDelta]:
        """Deltas of the server's stream. Cancelling the task iterating this, or closing it,
        closes the HTTP response: vLLM's server then aborts the request."""
        flight = _Flight()
        self._flights[request.request_id] = flight
        answer = _Answer(prompt_tokens=len(request.prompt_token_ids))
        url = f"{self._settings.url}{COMPLETIONS_PATH}"
        try:
            async with self._client.stream(
                "POST", COMPLETIONS_PATH, json=self._body(request), headers=self._headers(request)
            ) as response:
                flight.response = response
                if response.status_code != 200:
                    await response.aread()
                    raise self._refusal(response.status_code, _error_message(response), request)
                if flight.aborted:  # abort() came while the request was being sent
                    await response.aclose()
                async with contextlib.aclosing(_sse_data(response)) as events:
                    async for event in events:
                        if flight.aborted:  # what was already received is not passed on
                            break
                        if event == "[DONE]":
                            answer.done = True
                            break
                        delta = self._take(event, answer, request)
                        if delta is not None:
                            flight.answering = True
                            yield delta
        except (httpx.HTTPError, httpx.StreamError) as exc:
            if not flight.aborted:
                raise EngineError(_unreachable(url, exc, self._settings.timeout_s)) from exc
        finally:
            self._flights.pop(request.request_id, None)
        if flight.aborted:
            yield answer.delta(text="", tokens=0, finish="abort")
            return
        if not answer.done:
            raise EngineError(f"{url} ended the stream before the answer was done")
        if answer.cached_tokens is not None:  # only servers that report it count as a cache
            self._prefix_queries += answer.prompt_tokens
            self._prefix_hits += answer.cached_tokens
        # The last chunk with text comes before the usage chunk: the finish reason and the
        # cached prompt tokens go out last, with any tokens the chunks did not account for.
        remaining = max(0, (answer.usage_tokens or 0) - answer.counted_tokens)
        finish = finish_reason_of(answer.finish)
        yield answer.delta(text="", tokens=remaining, finish=finish)

    def _take(self, event: str, answer: _Answer, request: EngineRequest) -> EngineDelta | None:
        """One SSE chunk into the answer; the delta to yield, if it carries one."""
        try:
            chunk = json.loads(event)
        except ValueError as exc:
            raise EngineError(
                f"{self._settings.url} sent a chunk that is not JSON: {event[:200]!r}"
            ) from exc
        if not isinstance(chunk, dict):
            raise EngineError(
                f"{self._settings.url} sent a chunk that is not an object: {event[:200]!r}"
            )
        if isinstance(chunk.get("error"), dict):  # vLLM reports a failure inside the stream
            error = chunk["error"]
            code = error.get("code")
            status = code if isinstance(code, int) else 500
            raise self._refusal(status, str(error.get("message") or error), request)
        usage = chunk.get("usage")
        before = answer.usage_tokens if answer.usage_tokens is not None else answer.counted_tokens
        if isinstance(usage, dict):
            answer.take_usage(usage)
        choices = chunk.get("choices") or []
        if not choices:
            return None  # the final usage chunk
        choice = choices[0]
        if choice.get("finish_reason") == "error":
            raise EngineError(f"{self._settings.url} failed while generating")
        if choice.get("finish_reason"):
            answer.finish = str(choice["finish_reason"])
        text = str(choice.get("text") or "")
        logprobs = _logprobs_of(choice.get("logprobs"), top_n=request.logprobs)
        if isinstance(usage, dict) and answer.usage_tokens is not None:
            tokens = max(0, answer.usage_tokens - before)  # continuous usage: exact
        elif logprobs is not None:
            tokens = len(logprobs)
        else:
            tokens = 1 if text else 0  # a guess; the final usage chunk corrects the total
        if not text and not tokens and not logprobs:
            return None
        return answer.delta(text=text, tokens=tokens, logprobs=logprobs)

    def _refusal(self, status: int, message: str, request: EngineRequest) -> Exception:
        """The server's refusal as the protocol's exception: the request's fault (4xx) or
        the engine's (anything else)."""
        url = f"{self._settings.url}{COMPLETIONS_PATH}"
        if status in (400, 413, 422):
            if "context length" in message.lower():
                limit = _CONTEXT_LIMIT.search(message)
                return PromptTooLongError(
                    prompt_too_long_message(
                        prompt_tokens=len(request.prompt_token_ids),
                        max_model_len=int(limit.group(1))
                        if limit
                        else self._builder.context_tokens,
                    )
                )
            return RequestRejectedError(message)
        if status in (401, 403):
            return EngineError(
                f"{url} refused the credentials ({status}: {message}); check OPENAI_ENGINE_API_KEY"
            )
        if status == 404:
            return EngineError(
                f"{url} does not serve model {self.model!r} ({status}: {message}); "
                "check OPENAI_ENGINE_MODEL"
            )
        return EngineError(f"{url} answered {status}: {message}")

    async def abort(self, request_id: str) -> None:
        """Close the request's stream; it ends with finish reason "abort"."""
        flight = self._flights.get(request_id)
        if flight is None:
            return
        flight.aborted = True
        if flight.response is not None:
            await flight.response.aclose()  # the reading side gets a ReadError, then stops

    async def check_health(self) -> None:
        url = f"{self._settings.url}/health"
        try:
            response = await self._client.get("/health")
        except httpx.HTTPError as exc:
            raise EngineError(_unreachable(url, exc, self._settings.timeout_s)) from exc
        if response.status_code != 200:
            raise EngineError(f"{url} answered {response.status_code}")

    def stats(self) -> EngineStats:
        flights = list(self._flights.values())
        running = sum(1 for flight in flights if flight.answering)
        return EngineStats(
            unfinished_requests=len(flights),
            running_requests=running,
            waiting_requests=len(flights) - running,
            prefix_cache_queries=self._prefix_queries,
            prefix_cache_hits=self._prefix_hits,
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    def shutdown(self) -> None:
        # Called from sync code, sometimes after the loop is gone (its sockets go with it).
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        task = loop.create_task(self._client.aclose())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)


async def _sse_data(response: httpx.Response) -> AsyncGenerator[str, None]:
    """The data of each server-sent event; comments (keep-alives) are skipped."""
    data: list[str] = []
    async for line in response.aiter_lines():
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        field, _, value = line.partition(":")
        if field == "data":
            data.append(value.removeprefix(" "))
    if data:
        yield "\n".join(data)


def _logprobs_of(raw: object, *, top_n: int | None) -> tuple[TokenLogprob, ...] | None:
    """Completions-API logprobs (parallel lists: tokens, token_logprobs, top_logprobs dicts
    holding the sampled token and the likeliest ones) as the protocol's, best first."""
    if top_n is None or not isinstance(raw, dict):
        return None
    tokens = raw.get("tokens") or []
    values = raw.get("token_logprobs") or []
    tops = raw.get("top_logprobs") or []
    out = []
    for index, token in enumerate(tokens):
        value = values[index] if index < len(values) else None
        top = tops[index] if index < len(tops) else None
        ranked = sorted((top or {}).items(), key=lambda item: -item[1])[:top_n]
        out.append(
            TokenLogprob(
                token=str(token),
                logprob=float(value) if value is not None else MIN_LOGPROB,
                top=[TopLogprob(token=str(t), logprob=float(lp)) for t, lp in ranked],
            )
        )
    return tuple(out)


def _error_message(response: httpx.Response) -> str:
    """The message of an OpenAI-style error body ({"error": {"message": ...}}), else the text."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:500] or response.reason_phrase
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str):
            return error
        if body.get("detail"):  # FastAPI's own validation errors
            return str(body["detail"])[:500]
        if body.get("message"):
            return str(body["message"])
    return response.text[:500]


def _unreachable(url: str, exc: Exception, timeout_s: float) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return f"{url} did not answer within {timeout_s:g} s (OPENAI_ENGINE_TIMEOUT_S)"
    return f"cannot reach the OpenAI-compatible server at {url}: {type(exc).__name__}: {exc}"


def _served_model(settings: OpenAIEngineSettings) -> tuple[str, int | None]:
    """The model to ask for and its context length, from the server's /v1/models.

    Without OPENAI_ENGINE_MODEL the server must serve exactly one model. With it, a server
    that does not list models (some gateways) is taken at its word; one that lists others is
    a misconfiguration, refused now rather than on every request.
    """
    url = f"{settings.url}/v1/models"
    headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
    try:
        response = httpx.get(url, headers=headers, timeout=settings.timeout_s)
    except httpx.HTTPError as exc:
        raise EngineError(_unreachable(url, exc, settings.timeout_s)) from exc
    cards: list[dict[str, Any]] = []
    if response.status_code == 200:
        try:
            data = response.json().get("data")
        except (ValueError, AttributeError):
            data = None
        cards = [card for card in data or [] if isinstance(card, dict) and card.get("id")]
    if settings.model is not None:
        if response.status_code != 200 or not cards:
            logger.warning(
                "%s answered %s; using OPENAI_ENGINE_MODEL=%s",
                url,
                response.status_code,
                settings.model,
            )
            return settings.model, None
        for card in cards:
            if card["id"] == settings.model:
                return settings.model, _context_of(card)
        names = ", ".join(str(card["id"]) for card in cards)
        raise EngineError(f"{url} serves {names}, not OPENAI_ENGINE_MODEL={settings.model}")
    if response.status_code != 200:
        raise EngineError(
            f"{url} answered {response.status_code}: set OPENAI_ENGINE_MODEL to the served "
            "model's name"
        )
    if len(cards) != 1:
        names = ", ".join(str(card["id"]) for card in cards) or "no model"
        raise EngineError(f"{url} serves {names}: set OPENAI_ENGINE_MODEL to the one to use")
    return str(cards[0]["id"]), _context_of(cards[0])


def _context_of(card: dict[str, Any]) -> int | None:
    value = card.get("max_model_len")  # vLLM's extension of the model card
    return value if isinstance(value, int) and value > 0 else None
