"""One attempt to deliver a handoff webhook event: claim the row, POST it signed, record how it
went. Blocking I/O (up to CHAT_HANDOFF_WEBHOOK_TIMEOUT_S): run it only where waiting is
harmless (webhook_runner says where), never on a socket's thread.

A failed attempt (no connection, a timeout, any answer but 2xx) is tried again after the
project's backoff (`inference.wire.retry`), 10 s doubling to 10 min, until
CHAT_HANDOFF_WEBHOOK_ATTEMPTS; then the row is "failed", with its last error, in admin.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

import httpx
from django.conf import settings
from django.db.models import F
from django.utils import timezone

from chatapp.handoff.models import WebhookDelivery
from chatapp.handoff.webhook_signature import delivery_headers
from inference.wire.retry import BackoffPolicy

logger = logging.getLogger(__name__)

RETRY = BackoffPolicy(first_s=10.0, cap_s=600.0)
# An attempt's claim outlives its POST by this much: past it, the attempt's process is taken
# for dead and the sweep tries again (a receiver may then get it twice: it dedupes on the id).
CLAIM_MARGIN_S = 30.0
ERROR_CHARS = 500

Status = WebhookDelivery.Status


def retry_delay_s(attempts: int) -> float:
    """How long to wait after the `attempts`-th failed attempt."""
    backoff = RETRY.start()
    delay = 0.0
    for _ in range(attempts):
        delay = backoff.delay()
    return delay


@dataclass(frozen=True, slots=True)
class AttemptResult:
    status: str  # WebhookDelivery.Status
    next_attempt_at: datetime
    last_error: str


def attempt_result(
    *, attempts: int, max_attempts: int, error: str | None, now: datetime
) -> AttemptResult:
    """What an attempt (the `attempts`-th) that ended with `error` (None: accepted) leads to."""
    if error is None:
        return AttemptResult(Status.DELIVERED, now, "")
    if attempts >= max_attempts:
        return AttemptResult(Status.FAILED, now, error)
    return AttemptResult(Status.PENDING, now + timedelta(seconds=retry_delay_s(attempts)), error)


def body_of(delivery: WebhookDelivery) -> bytes:
    """The bytes that are sent and signed: the stored payload, compact JSON."""
    return json.dumps(delivery.payload, separators=(",", ":"), ensure_ascii=False).encode()


def delivery_attempt(delivery_pk: int) -> str | None:
    """Try the delivery once if it is due; its status afterwards, or None when it was not due
    (delivered or given up already, waiting out its backoff, or another attempt holds it)."""
    url = settings.CHAT_HANDOFF_WEBHOOK_URL
    if not url:
        return None
    timeout_s = float(settings.CHAT_HANDOFF_WEBHOOK_TIMEOUT_S)
    now = timezone.now()
    claimed = WebhookDelivery.objects.filter(
        pk=delivery_pk, status=Status.PENDING, next_attempt_at__lte=now
    ).update(
        attempts=F("attempts") + 1,
        next_attempt_at=now + timedelta(seconds=2 * timeout_s + CLAIM_MARGIN_S),
    )
    if not claimed:
        return None
    delivery = WebhookDelivery.objects.get(pk=delivery_pk)
    error = _post(delivery, url=url, timeout_s=timeout_s)
    result = attempt_result(
        attempts=delivery.attempts,
        max_attempts=int(settings.CHAT_HANDOFF_WEBHOOK_ATTEMPTS),
        error=error,
        now=timezone.now(),
    )
    WebhookDelivery.objects.filter(pk=delivery_pk).update(
        status=result.status,
        next_attempt_at=result.next_attempt_at,
        last_error=result.last_error,
        delivered_at=result.next_attempt_at if result.status == Status.DELIVERED else None,
    )
    if result.status == Status.FAILED:
        logger.error(
            "handoff webhook %s (%s) given up after %d attempts: %s",
            delivery.delivery_id,
            delivery.event,
            delivery.attempts,
            error,
        )
    elif error is not None:
        logger.warning(
            "handoff webhook %s (%s) attempt %d failed (%s); next at %s",
            delivery.delivery_id,
            delivery.event,
            delivery.attempts,
            error,
            result.next_attempt_at.isoformat(),
        )
    return result.status


def _post(delivery: WebhookDelivery, *, url: str, timeout_s: float) -> str | None:
    """POST the delivery, signed now; None when the receiver accepted it (2xx), else why not."""
    body = body_of(delivery)
    headers = delivery_headers(
        secret=settings.CHAT_HANDOFF_WEBHOOK_SECRET,
        event=delivery.event,
        delivery_id=str(delivery.delivery_id),
        timestamp=int(time.time()),
        body=body,
    )
    try:
        response = httpx.post(
            url, content=body, headers=headers, timeout=timeout_s, follow_redirects=False
        )
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"[:ERROR_CHARS]
    if response.is_success:
        return None
    return f"HTTP {response.status_code}: {response.text[:200]}"[:ERROR_CHARS]
