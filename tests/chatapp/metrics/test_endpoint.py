"""`/metrics` is for the monitoring system only: a bearer token, or allowed networks."""

from __future__ import annotations

import re

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import Client, override_settings

from chatapp.metrics.access import address_allowed, allowed_networks

pytestmark = pytest.mark.django_db

# Every metric of the web process (docs/metrics.md) is exposed, even before any traffic.
WEB_METRICS = (
    "chat:time_to_first_token_seconds",
    "chat:inter_token_latency_seconds",
    "chat:e2e_request_latency_seconds",
    "chat:request_queue_time_seconds",
    "chat:client_time_to_first_token_seconds",
    "chat:faq_requests_total",
    "chat:prompt_tokens_total",
    "chat:cached_prompt_tokens_total",
    "chat:generation_tokens_total",
    "chat:answers_total",
    "chat:request_frame_bytes",
    "chat:request_frame_bytes_total",
    "chat:request_prompt_bytes_total",
    "chat:active_streams",
    "chat:admission_in_flight",
    "chat:admission_refusals_total",
    "chat:errors_total",
    "chat:handoffs_total",
    "chat:handoff_first_response_seconds",
    "chat:handoffs_waiting",
)


def scrape(client: Client, **headers: str) -> tuple[int, str, str]:
    response = client.get("/metrics", headers=headers)
    return response.status_code, response["Content-Type"], response.content.decode()


@override_settings(METRICS_TOKEN="", METRICS_ALLOWED_NETS=["127.0.0.1/32", "::1/128"])
def test_loopback_gets_every_metric_in_the_text_format() -> None:
    status, content_type, body = scrape(Client(REMOTE_ADDR="127.0.0.1"))

    assert status == 200
    assert content_type.startswith("text/plain")
    for name in WEB_METRICS:
        assert f"# TYPE {name} " in body, name
    # the histogram and the counter of the same stem are two families, each declared once
    assert body.count("# TYPE chat:request_frame_bytes histogram") == 1
    assert body.count("# TYPE chat:request_frame_bytes_total counter") == 1
    assert "_created" not in body


@override_settings(METRICS_TOKEN="", METRICS_ALLOWED_NETS=["127.0.0.1/32", "10.0.0.0/8"])
def test_addresses_outside_the_allowed_networks_are_refused() -> None:
    assert scrape(Client(REMOTE_ADDR="10.20.30.40"))[0] == 200
    status, _, body = scrape(Client(REMOTE_ADDR="192.168.1.5"))
    assert status == 403
    assert "METRICS_ALLOWED_NETS" in body
    assert "chat:" not in body
    # a forwarded-for header is anyone's to send: not trusted
    assert scrape(Client(REMOTE_ADDR="192.168.1.5"), X_Forwarded_For="127.0.0.1")[0] == 403
    assert scrape(Client(REMOTE_ADDR=""))[0] == 403


@override_settings(METRICS_TOKEN="", METRICS_ALLOWED_NETS=["127.0.0.1/32", "::1/128"])
def test_behind_a_proxy_on_the_same_host_the_internet_is_not_loopback() -> None:
    """nginx on the same host forwards every visitor from 127.0.0.1: a request that came
    through a proxy (it says so in a forwarding header) needs the token, however local its
    address looks; Prometheus scraping the process directly sends no such header."""
    local = Client(REMOTE_ADDR="127.0.0.1")
    for header in ("X-Forwarded-For", "Forwarded", "X-Real-IP"):
        status, _, body = scrape(local, **{header: "203.0.113.9"})
        assert status == 403, header
        assert "METRICS_TOKEN" in body
        assert "chat:" not in body
    assert scrape(local)[0] == 200


@override_settings(METRICS_TOKEN="s3cret-token", METRICS_ALLOWED_NETS=["127.0.0.1/32"])
def test_with_a_token_only_the_bearer_gets_in_from_anywhere() -> None:
    far = Client(REMOTE_ADDR="203.0.113.9")
    status, _, body = scrape(far, Authorization="Bearer s3cret-token")
    assert status == 200
    assert "chat:answers_total" in body

    for header in ("", "Bearer wrong", "Bearer s3cret-token-longer", "Basic s3cret-token"):
        response = far.get("/metrics", headers={"Authorization": header} if header else {})
        assert response.status_code == 401, header
        assert response["WWW-Authenticate"].startswith("Bearer")
    # the allowed networks do not replace the token once one is set
    assert scrape(Client(REMOTE_ADDR="127.0.0.1"))[0] == 401


@override_settings(METRICS_TOKEN="", METRICS_ALLOWED_NETS=["127.0.0.1/32"])
def test_only_reads_are_served() -> None:
    assert Client(REMOTE_ADDR="127.0.0.1").post("/metrics").status_code == 405


def test_dual_stack_listeners_report_ipv4_as_mapped_ipv6() -> None:
    loopback = allowed_networks(("127.0.0.1/32",))
    assert address_allowed("::ffff:127.0.0.1", networks=loopback)
    assert not address_allowed("::ffff:10.0.0.1", networks=loopback)
    assert address_allowed("::1", networks=allowed_networks(("::1/128",)))
    assert not address_allowed("not-an-address", networks=loopback)


def test_a_malformed_network_is_a_clear_configuration_error() -> None:
    with pytest.raises(ImproperlyConfigured, match=re.escape("'10.0.0/8x' is not a network")):
        allowed_networks(("127.0.0.1/32", "10.0.0/8x"))
