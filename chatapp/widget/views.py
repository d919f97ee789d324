"""The widget's HTTP edge (docs/widget.md).

- `GET /widget/config?site=KEY`: asked by the loader on the host page, cross-origin. The
  browser's `Origin` says which page asks; an origin not on the site's list gets 403 and no
  CORS header, so the loader shows nothing.
- `GET /widget/panel/?site=KEY&host=ORIGIN`: the panel, in an iframe on the host page. Its
  `Content-Security-Policy: frame-ancestors ORIGIN` makes the browser refuse to show it in any
  other page, so the `host` it is told is the page it is really in.
- `GET /widget/templates?site=KEY`: the templates the panel offers (the site's).
- `GET /widget/demo/`: a pretend customer page with the snippet, for a first try.
- `GET /widget.js`: the loader the website's snippet names (static/widget.js).
- `POST /widget/guest`: the panel enters as a guest (a new one, or the one its stored token
  names) and gets a fresh token and its latest conversation. No cookie is read, so there is
  nothing for CSRF to protect.
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.templatetags.static import static
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.clickjacking import xframe_options_exempt
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from chatapp.api.preload import preload_response
from chatapp.conversations import selectors
from chatapp.web.login_throttle import client_ip
from chatapp.websites.models import Site
from chatapp.websites.origins import OriginError, origin_normalised
from chatapp.websites.services import NewVisitorsLimited, WidgetRefused, guest_enter, site_allowing
from chatapp.websites.tokens import TokenRefused

_GUEST_BODY_MAX = 4096
_LOADER_MAX_AGE_S = 300


def _error(status: int, code: str, message: str) -> JsonResponse:
    return JsonResponse({"error": {"code": code, "message": message}}, status=status)


def _site_for(site_key: str, origin: str) -> tuple[Site, str]:
    """The site of `site_key` if `origin` may show its widget, with the origin normalised."""
    try:
        normalised = origin_normalised(origin)
    except OriginError:
        raise WidgetRefused("This chat is not available on this website.") from None
    return site_allowing(site_key, normalised), normalised


@require_GET
@never_cache  # a site turned off or an origin removed takes effect at once
def widget_config(request: HttpRequest) -> JsonResponse:
    origin = request.headers.get("Origin", "")
    if not origin and request.headers.get("Sec-Fetch-Site") == "same-origin":
        # browsers leave Origin out of a same-origin GET (a page of this server, e.g. the demo)
        origin = f"{request.scheme}://{request.get_host()}"
    try:
        site, normalised = _site_for(request.GET.get("site", ""), origin)
    except WidgetRefused as refused:
        return _error(403, refused.code, refused.message)
    response = JsonResponse(
        {
            "title": site.title,
            "greeting": site.greeting,
            "accent_colour": site.accent_colour,
            "panel_url": request.build_absolute_uri(reverse("widget-panel"))
            + "?"
            + urlencode({"site": site.key, "host": normalised}),
        }
    )
    response["Access-Control-Allow-Origin"] = origin
    response["Vary"] = "Origin"
    return response


@require_GET
@xframe_options_exempt  # framing is decided by the CSP below, per site
def widget_panel(request: HttpRequest) -> HttpResponse:
    host = request.GET.get("host", "")
    try:
        site, normalised = _site_for(request.GET.get("site", ""), host)
    except WidgetRefused as refused:
        response = HttpResponse(refused.message, status=403, content_type="text/plain")
        response["Content-Security-Policy"] = "frame-ancestors 'none'"
        return response
    response = render(
        request,
        "widget/panel.html",
        {
            "site": site,
            "host": normalised,
            "socket_path": f"/ws/guest/{site.key}/",
            "panel_script": _panel_script_url(),
        },
    )
    response["Content-Security-Policy"] = f"frame-ancestors {normalised}"
    return response


@csrf_exempt
@require_POST
@never_cache
def widget_guest(request: HttpRequest) -> JsonResponse:
    if len(request.body) > _GUEST_BODY_MAX:
        return _error(413, "too_large", "The request is too large.")
    try:
        body: Any = json.loads(request.body or b"{}")
    except ValueError:
        return _error(400, "invalid", "The body must be JSON.")
    if not isinstance(body, dict):
        return _error(400, "invalid", "The body must be a JSON object.")
    site_key, host, token = body.get("site"), body.get("host"), body.get("token")
    if not isinstance(site_key, str) or not isinstance(host, str):
        return _error(400, "invalid", "`site` and `host` are required strings.")
    if token is not None and not isinstance(token, str):
        return _error(400, "invalid", "`token` must be a string.")
    try:
        site, normalised = _site_for(site_key, host)
        entry = guest_enter(
            site=site,
            origin=normalised,
            token=token,
            address=client_ip(request),
        )
    except NewVisitorsLimited as limited:
        response = _error(429, limited.code, limited.message)
        response["Retry-After"] = str(limited.retry_after_s)
        return response
    except WidgetRefused as refused:
        return _error(403, refused.code, refused.message)
    except TokenRefused as refused:
        return _error(401, f"token_{refused.problem}", refused.message)
    latest = selectors.conversation_latest(owner=entry.guest.user)
    return JsonResponse(
        {
            "token": entry.token,
            "guest": str(entry.guest.id),
            # a reload or a later visit continues the guest's latest conversation
            "conversation_id": str(latest.id) if latest else None,
            "history": selectors.page_history(conversation=latest) if latest else [],
        }
    )


@require_GET
def widget_script(request: HttpRequest) -> HttpResponse:
    """The loader (`static/widget.js`), at the short URL the snippet names. Cached briefly:
    a new release reaches every website within minutes, and the script is under 1 kB."""
    response = HttpResponse(_loader_source(), content_type="text/javascript; charset=utf-8")
    response["Cache-Control"] = f"public, max-age={_LOADER_MAX_AGE_S}"
    response["Access-Control-Allow-Origin"] = "*"  # any page may load it; config decides
    return response


@require_GET
def widget_templates(request: HttpRequest) -> HttpResponse:
    """The templates the site's panel offers (its preload list, revalidated with ETags like
    the staff page's); a disabled or unknown site gets 403."""
    site = Site.objects.filter(key=request.GET.get("site", ""), enabled=True).first()
    if site is None:
        return _error(403, WidgetRefused.code, "This chat is not available.")
    return preload_response(request, template_ids=site.template_ids())


@require_GET
def widget_demo(request: HttpRequest) -> HttpResponse:
    """A pretend customer page that embeds the widget the way a website does: the site of
    `?site=KEY`, or the example website `make run` seeds. The site must allow this server's
    own origin."""
    key = request.GET.get("site")
    sites = Site.objects.filter(enabled=True)
    site = sites.filter(key=key).first() if key else sites.filter(is_example=True).first()
    own = f"{request.scheme}://{request.get_host()}"
    return render(
        request,
        "widget/demo.html",
        {
            "site": site,
            "allowed": site is not None and own in site.origins,
            "own_origin": own,
            "script_url": request.build_absolute_uri(reverse("widget-script")),
        },
    )


@functools.cache
def _panel_script_url() -> str:
    """`static/panel.js` at a URL that changes with its bytes (cached for good: settings'
    WHITENOISE_IMMUTABLE_FILE_TEST), read once per process."""
    digest = hashlib.sha256((settings.BASE_DIR / "static" / "panel.js").read_bytes()).hexdigest()
    return f"{static('panel.js')}?v={digest[:12]}"


@functools.cache
def _loader_source() -> bytes:
    return (settings.BASE_DIR / "static" / "widget.js").read_bytes()
