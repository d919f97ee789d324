"""The OpenAI-compatible endpoints (docs/api.md). Thin: parse, authenticate, hand over to
`answers`, shape the reply. Every failure is an `ApiError` in OpenAI's JSON shape."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt

from chatapp import unavailable
from chatapp.answers.entries import LogEntry, LoggedDelta, LoggedEnd, text_of
from chatapp.apikeys.models import ApiKey
from chatapp.openai_api import responses
from chatapp.openai_api.answers import (
    IDEMPOTENCY_KEY_MAX,
    SESSION_ID_MAX,
    ApiAnswer,
    answer_start,
)
from chatapp.openai_api.auth import api_key_of
from chatapp.openai_api.errors import ApiError, answer_failed, invalid
from chatapp.openai_api.parsing import chat_request_parse
from chatapp.openai_api.prompting import prompt_build
from chatapp.openai_api.schemas import ModelCard, ModelList
from chatapp.openai_api.streaming import sse_stream
from chatapp.unavailable import database_unavailable

logger = logging.getLogger(__name__)

View = Callable[..., Coroutine[Any, Any, HttpResponseBase]]
# When the model "was created": the web process's start is as good as any for clients.
_STARTED = int(time.time())


def api_view(*methods: str) -> Callable[[View], View]:
    """CSRF-exempt (key auth, no cookies), method check, ApiError -> JSON error response."""

    def decorate(view: View) -> View:
        @csrf_exempt
        @functools.wraps(view)
        async def wrapper(
            request: HttpRequest, *args: object, **kwargs: object
        ) -> HttpResponseBase:
            try:
                if request.method not in methods:
                    raise ApiError(
                        status=405,
                        message=f"Use {' or '.join(methods)} for {request.path}.",
                        code="method_not_allowed",
                    )
                return await view(request, *args, **kwargs)
            except ApiError as exc:
                return exc.response()
            except Exception as exc:
                if database_unavailable(exc):
                    logger.warning("API request %s: database unavailable: %s", request.path, exc)
                    return ApiError(
                        status=503,
                        type="service_unavailable_error",
                        code="database_unavailable",
                        message=unavailable.MESSAGE,
                        retry_after_s=unavailable.retry_after_s(),
                    ).response()
                logger.exception("API request %s failed", request.path)
                return ApiError(
                    status=500,
                    type="server_error",
                    code="internal",
                    message="The server failed; nothing was generated. Please try again.",
                ).response()

        return wrapper

    return decorate


@api_view("GET")
async def models_list(request: HttpRequest) -> HttpResponse:
    await api_key_of(request)
    return JsonResponse(ModelList(data=[_model_card()]).model_dump(mode="json"))


@api_view("GET")
async def model_detail(request: HttpRequest, model: str) -> HttpResponse:
    await api_key_of(request)
    if model != settings.CHAT_API_MODEL:
        raise _unknown_model(model)
    return JsonResponse(_model_card().model_dump(mode="json"))


@api_view("POST")
async def chat_completions(request: HttpRequest) -> HttpResponseBase:
    key = await api_key_of(request)
    try:
        body = request.body
    except RequestDataTooBig as exc:
        raise ApiError(
            status=413, code="request_too_large", message="The request body is too large."
        ) from exc
    parsed = chat_request_parse(body)
    if parsed.model != settings.CHAT_API_MODEL:
        raise _unknown_model(parsed.model)
    prompt = await database_sync_to_async(prompt_build)(parsed)
    # A request may ask for background on its own, never to be ahead of its key's priority.
    background = "background" in (key.priority, parsed.priority)
    answer = await answer_start(
        key=key,
        prompt=prompt,
        background=background,
        idempotency_key=_idempotency_key(request),
        session_id=_session_id(request, key=key),
    )
    streaming = False
    try:
        entries = answer.entries()
        logprobs = prompt.sampling.logprobs is not None
        if parsed.stream:
            # Headers now, not at the first token: a wait is never silent. An answer that
            # fails before its first token (no worker took it in time, the queue timed out)
            # ends the stream with an error event; refusals at admission (busy, rate limits)
            # came before this with their own status codes.
            include_usage = bool(parsed.stream_options and parsed.stream_options.include_usage)
            response = StreamingHttpResponse(
                sse_stream(
                    answer,
                    entries=entries,
                    include_usage=include_usage,
                    retry_after_s=settings.CHAT_BUSY_RETRY_AFTER_S,
                    keepalive_s=settings.CHAT_SSE_KEEPALIVE_S,
                    logprobs=logprobs,
                ),
                content_type="text/event-stream",
            )
            response["Cache-Control"] = "no-cache"
            response["X-Accel-Buffering"] = "no"  # nginx: pass events through at once
            streaming = True  # the stream owns the answer now and stops it if the client leaves
            return response
        # Not streamed: the status code says how it ended.
        first = await anext(entries)
        if isinstance(first, LoggedEnd) and first.status == "failed":
            raise _failed(first)
        return await _completion(answer, [first], entries, logprobs=logprobs)
    finally:
        # Client gone (Django cancels this task), an error, or done: never leave it running.
        if not streaming:
            await answer.close()


async def _completion(
    answer: ApiAnswer,
    collected: list[LogEntry],
    rest: AsyncIterator[LogEntry],
    *,
    logprobs: bool,
) -> HttpResponse:
    async for entry in rest:
        collected.append(entry)
    end = collected[-1]
    assert isinstance(end, LoggedEnd)
    if end.status == "failed":
        raise _failed(end)
    tokens = None
    if logprobs:
        tokens = [
            token
            for entry in collected
            if isinstance(entry, LoggedDelta)
            for token in entry.logprobs or ()
        ]
    body = responses.completion(
        message_id=answer.message_id, text=text_of(collected), end=end, logprobs=tokens
    ).model_dump(mode="json")
    if body["x_faq"] is None:
        del body["x_faq"]
    reply = JsonResponse(body)
    reply["X-Answer-Source"] = end.source  # "faq" when an approved FAQ entry answered
    return reply


def _idempotency_key(request: HttpRequest) -> str | None:
    """The client's `Idempotency-Key` (an SDK sends one per logical request and repeats it on
    retries), or None."""
    return _printable_header(request, "Idempotency-Key", max_chars=IDEMPOTENCY_KEY_MAX)


def _session_id(request: HttpRequest, *, key: ApiKey) -> str | None:
    """The client's `X-Session-ID` (the header vLLM's router routes sessions by): its
    requests go to the worker that holds the session's prefix cache (routing affinity), and
    on to a router in front of an OpenAI-compatible engine. Per API key, so two clients'
    sessions never share a name."""
    value = _printable_header(request, "X-Session-ID", max_chars=SESSION_ID_MAX)
    return None if value is None else f"api{key.pk}:{value}"


def _printable_header(request: HttpRequest, name: str, *, max_chars: int) -> str | None:
    """The request's header `name`, or None without one; a 400 naming it unless it is 1 to
    `max_chars` printable characters."""
    value = request.headers.get(name)
    if value is None:
        return None
    if not value or len(value) > max_chars or not value.isprintable():
        raise invalid(f"{name} must be 1 to {max_chars} printable characters.", param=name)
    return value


def _failed(end: LoggedEnd) -> ApiError:
    return answer_failed(end, retry_after_s=settings.CHAT_BUSY_RETRY_AFTER_S)


@api_view("GET", "POST", "PUT", "PATCH", "DELETE")
async def not_found(request: HttpRequest, rest: str) -> HttpResponseBase:
    raise ApiError(
        status=404,
        type="not_found_error",
        code="unknown_url",
        message=f"Unknown API path {request.path[:200]}: this server has /v1/chat/completions "
        "and /v1/models.",
    )


def _model_card() -> ModelCard:
    return ModelCard(id=settings.CHAT_API_MODEL, created=_STARTED)


def _unknown_model(model: str) -> ApiError:
    return ApiError(
        status=404,
        type="not_found_error",
        code="model_not_found",
        param="model",
        message=f"The model '{model[:100]}' does not exist. This server serves "
        f"'{settings.CHAT_API_MODEL}' (GET /v1/models).",
    )
