"""Signing the handoff webhook's deliveries (Stripe's scheme): an HMAC-SHA256, keyed with the
shared secret, over "<timestamp>.<body>". The timestamp is signed too, so a receiver that
refuses old timestamps refuses replays of a captured delivery.

docs/handoff.md#webhook shows a receiver's check; `signature_valid` is the same check, used by
the tests as a receiver would.
"""

from __future__ import annotations

import hashlib
import hmac

EVENT_HEADER = "X-Chat-Event"
DELIVERY_HEADER = "X-Chat-Delivery"
TIMESTAMP_HEADER = "X-Chat-Timestamp"
SIGNATURE_HEADER = "X-Chat-Signature"
SCHEME = "sha256="


def signature(*, secret: str, timestamp: int, body: bytes) -> str:
    """The signature header's value for `body` sent at `timestamp` (Unix seconds)."""
    signed = f"{timestamp}.".encode() + body
    return SCHEME + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def delivery_headers(
    *, secret: str, event: str, delivery_id: str, timestamp: int, body: bytes
) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        EVENT_HEADER: event,
        DELIVERY_HEADER: delivery_id,
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: signature(secret=secret, timestamp=timestamp, body=body),
    }


def signature_valid(
    *,
    secret: str,
    timestamp: str,
    body: bytes,
    received: str,
    now: float,
    tolerance_s: float = 300,
) -> bool:
    """Whether `received` signs `body` at `timestamp`, and that time is within `tolerance_s`
    of `now` (a replayed old delivery is refused)."""
    try:
        sent_at = int(timestamp)
    except ValueError:
        return False
    if abs(now - sent_at) > tolerance_s:
        return False
    expected = signature(secret=secret, timestamp=sent_at, body=body)
    return hmac.compare_digest(expected, received)
