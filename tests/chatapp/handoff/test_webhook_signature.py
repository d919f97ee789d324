"""Signing deliveries: HMAC-SHA256 over "timestamp.body", refused when anything changed or the
timestamp is old."""

from __future__ import annotations

import hashlib
import hmac

from chatapp.handoff.webhook_signature import delivery_headers, signature, signature_valid

SECRET = "whsec-0123456789abcdef"
BODY = b'{"event":"handoff.claimed"}'


def test_the_signature_is_an_hmac_of_the_timestamp_and_body() -> None:
    expected = hmac.new(SECRET.encode(), b"1700000000." + BODY, hashlib.sha256).hexdigest()
    assert signature(secret=SECRET, timestamp=1700000000, body=BODY) == f"sha256={expected}"


def test_the_headers_name_the_event_the_delivery_and_the_time() -> None:
    headers = delivery_headers(
        secret=SECRET, event="handoff.claimed", delivery_id="d-1", timestamp=1700000000, body=BODY
    )
    assert headers == {
        "Content-Type": "application/json",
        "X-Chat-Event": "handoff.claimed",
        "X-Chat-Delivery": "d-1",
        "X-Chat-Timestamp": "1700000000",
        "X-Chat-Signature": signature(secret=SECRET, timestamp=1700000000, body=BODY),
    }


def test_a_receiver_refuses_a_changed_body_a_wrong_secret_and_an_old_timestamp() -> None:
    signed = signature(secret=SECRET, timestamp=1700000000, body=BODY)

    def valid(*, secret: str = SECRET, body: bytes = BODY, now: float = 1700000010) -> bool:
        return signature_valid(
            secret=secret, timestamp="1700000000", body=body, received=signed, now=now
        )

    assert valid()
    assert not valid(body=BODY + b" ")
    assert not valid(secret=SECRET + "x")
    assert not valid(now=1700000000 + 301)  # a replay, minutes later
    assert not signature_valid(
        secret=SECRET, timestamp="soon", body=BODY, received=signed, now=1700000000
    )
