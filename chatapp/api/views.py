"""JSON API for the browser: the template preload list (revalidated with ETags) and the
user's conversations."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseNotModified, JsonResponse
from django.utils.cache import patch_cache_control
from django.views.decorators.http import require_GET

from chatapp.conversations import selectors as conversation_selectors
from chatapp.prompts import selectors


@require_GET
def templates_list(request: HttpRequest) -> HttpResponse:
    if not request.user.is_authenticated:
        return _unauthenticated("Log in to see templates.")
    etag = f'"{selectors.preload_etag()}"'
    if etag in _etags(request.headers.get("If-None-Match", "")):
        response: HttpResponse = HttpResponseNotModified()
    else:
        response = JsonResponse(selectors.preload_payload())
    response["ETag"] = etag
    # The browser keeps its own copy and revalidates on every load.
    patch_cache_control(response, private=True, no_cache=True)
    return response


@require_GET
def conversations_list(request: HttpRequest) -> HttpResponse:
    if not request.user.is_authenticated:
        return _unauthenticated("Log in to see conversations.")
    response = JsonResponse(
        {"conversations": conversation_selectors.conversation_list(owner=request.user)}
    )
    patch_cache_control(response, private=True, no_store=True)
    return response


def _unauthenticated(message: str) -> JsonResponse:
    return JsonResponse({"error": {"code": "unauthenticated", "message": message}}, status=401)


def _etags(header: str) -> set[str]:
    return {tag.strip().removeprefix("W/") for tag in header.split(",") if tag.strip()}
