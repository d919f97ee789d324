"""JSON API for the browser: the template preload list (revalidated with ETags) and the
user's conversations."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.cache import patch_cache_control
from django.views.decorators.http import require_GET

from chatapp.api.preload import preload_response
from chatapp.conversations import selectors as conversation_selectors


@require_GET
def templates_list(request: HttpRequest) -> HttpResponse:
    if not request.user.is_authenticated:
        return _unauthenticated("Log in to see templates.")
    return preload_response(request)


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
