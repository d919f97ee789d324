"""The admin latency dashboard: the page (staff, through the admin site) and its JSON data."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils.cache import patch_cache_control
from django.views.decorators.http import require_GET

from chatapp.errors import ApplicationError
from chatapp.latency import selectors
from chatapp.websites.models import Site

REFRESH_SECONDS = 15


@require_GET
def latency_page(request: HttpRequest) -> HttpResponse:
    """Staff only: wrapped in `admin.site.admin_view` by the URLconf (login redirect)."""
    key = request.GET.get("window", selectors.DEFAULT_WINDOW)
    context = {
        **admin.site.each_context(request),
        "title": "Latency",
        "windows": list(selectors.WINDOWS.values()),
        "window_key": key,
        "sites": list(Site.objects.values_list("id", "name")),
        "site_id": None,
        "refresh_seconds": REFRESH_SECONDS,
    }
    try:
        window = selectors.window_get(key=key)
        context["site_id"] = site_id = _site_id(request)
    except ApplicationError as exc:
        context["error"] = exc.message
        return render(request, "admin/latency/dashboard.html", context, status=400)
    report = selectors.latency_report(window=window, site_id=site_id)
    context.update(report=report, report_json=report.as_json())
    return render(request, "admin/latency/dashboard.html", context)


@require_GET
def latency_data(request: HttpRequest) -> JsonResponse:
    """The report as JSON (the page refreshes its charts from it). Errors are JSON too."""
    if not request.user.is_authenticated:
        return _error("unauthenticated", "Log in as staff to see latency data.", status=401)
    if not (request.user.is_active and request.user.is_staff):
        return _error("forbidden", "Only staff may see latency data.", status=403)
    try:
        window = selectors.window_get(key=request.GET.get("window", selectors.DEFAULT_WINDOW))
        site_id = _site_id(request)
    except ApplicationError as exc:
        return _error(exc.code, exc.message, status=400)
    response = JsonResponse(selectors.latency_report(window=window, site_id=site_id).as_json())
    patch_cache_control(response, private=True, no_store=True)
    return response


def _site_id(request: HttpRequest) -> int | None:
    """`?site=ID`: only that website's widget answers; absent: all answers."""
    raw = request.GET.get("site", "")
    if not raw:
        return None
    if not raw.isdigit() or not Site.objects.filter(id=int(raw)).exists():
        raise ApplicationError(f"No website {raw!r}: pick one from the list.")
    return int(raw)


def _error(code: str, message: str, *, status: int) -> JsonResponse:
    return JsonResponse({"error": {"code": code, "message": message}}, status=status)
