"""The database being unreachable or out of pooled connections: a clear 503, never a 500.

Django raises `OperationalError` when no connection can be had (the pool's wait ran out, the
server refused or went away, a statement timed out) and `InterfaceError` for a connection that
broke under it. Both are temporary from the user's side, so the answer is "try again in a few
seconds", with `Retry-After`. Every write the app makes is atomic, so a request that fails this
way leaves nothing half-written. The chat socket says the same with its `unavailable` error
(`chatapp/realtime/consumers.py`) and the OpenAI API with a 503 in OpenAI's error shape.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.html import escape

logger = logging.getLogger(__name__)

MESSAGE = "The database is briefly unavailable and nothing was saved; please try again shortly."


def database_unavailable(exc: BaseException) -> bool:
    return isinstance(exc, OperationalError | InterfaceError)


def retry_after_s() -> int:
    return max(1, math.ceil(settings.CHAT_BUSY_RETRY_AFTER_S))


def unavailable_response(request: HttpRequest) -> HttpResponse:
    """JSON for the APIs (the page's fetches and scripts), a small page for people."""
    response: HttpResponse
    if request.path.startswith("/api/"):
        response = JsonResponse({"error": {"code": "unavailable", "message": MESSAGE}}, status=503)
    else:
        response = HttpResponse(
            "<!doctype html><title>Briefly unavailable</title>"
            f"<h1>Briefly unavailable</h1><p>{escape(MESSAGE)}</p>",
            status=503,
        )
    response["Retry-After"] = str(retry_after_s())
    response["Cache-Control"] = "no-store"
    return response


class DatabaseUnavailableMiddleware:
    """Turns a view's database outage into 503 + Retry-After (the OpenAI API shapes its own)."""

    sync_capable = True
    async_capable = True

    def __init__(
        self, get_response: Callable[[HttpRequest], HttpResponse | Awaitable[HttpResponse]]
    ) -> None:
        self.get_response = get_response
        if iscoroutinefunction(get_response):  # stay async in an async stack (no thread hop)
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> HttpResponse | Awaitable[HttpResponse]:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not database_unavailable(exception):
            return None
        logger.warning(
            "database unavailable for %s %s: %s", request.method, request.path, exception
        )
        return unavailable_response(request)
