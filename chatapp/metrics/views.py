"""`GET /metrics`: the Prometheus text exposition of this process (protected, see access)."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from chatapp.metrics import recording  # noqa: F401  (defines the metrics, starts the gauges)
from chatapp.metrics.access import scrape_denied

FORWARDING_HEADERS = ("X-Forwarded-For", "Forwarded", "X-Real-IP")


@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    denied = scrape_denied(
        token=settings.METRICS_TOKEN,
        allowed_nets=tuple(settings.METRICS_ALLOWED_NETS),
        authorization=request.headers.get("Authorization", ""),
        remote_addr=request.META.get("REMOTE_ADDR") or "",
        forwarded=any(h in request.headers for h in FORWARDING_HEADERS),
    )
    if denied is not None:
        response = HttpResponse(denied.reason, status=denied.status, content_type="text/plain")
        if denied.status == 401:
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    # Always the classic text format (not OpenMetrics): there, the counter
    # chat:request_frame_bytes_total and the histogram chat:request_frame_bytes would be one
    # family name twice.
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
