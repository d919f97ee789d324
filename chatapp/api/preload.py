"""The template preload list as an HTTP response, revalidated with ETags: the staff page's
list (`/api/templates`) and a site's (`/widget/templates`) are answered the same way."""

from __future__ import annotations

from collections.abc import Collection

from django.http import HttpRequest, HttpResponse, HttpResponseNotModified, JsonResponse
from django.utils.cache import patch_cache_control

from chatapp.prompts import selectors


def preload_response(
    request: HttpRequest, *, template_ids: Collection[int] | None = None
) -> HttpResponse:
    """The published templates (all, or those of `template_ids`), or 304 when the browser's
    copy is current."""
    etag = f'"{selectors.preload_etag(template_ids=template_ids)}"'
    if etag in _etags(request.headers.get("If-None-Match", "")):
        response: HttpResponse = HttpResponseNotModified()
    else:
        response = JsonResponse(selectors.preload_payload(template_ids=template_ids))
    response["ETag"] = etag
    # The browser keeps its own copy and revalidates on every load.
    patch_cache_control(response, private=True, no_cache=True)
    return response


def _etags(header: str) -> set[str]:
    return {tag.strip().removeprefix("W/") for tag in header.split(",") if tag.strip()}
