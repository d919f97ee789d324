"""The admin latency page and its JSON: staff only, bad windows refused, the numbers shown."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from chatapp.conversations.models import Conversation, Message
from chatapp.latency import selectors
from chatapp.latency.selectors import BUCKETS
from chatapp.websites import services
from tests.chatapp.latency.factories import answer_create
from tests.chatapp.websites.sites import HOST, site_made
from tests.support.users import client_for

pytestmark = pytest.mark.django_db

PAGE = "/admin/latency/"
DATA = "/admin/latency/data.json"


@pytest.fixture
def staff() -> Client:
    return client_for(User.objects.create_user("ops", password="pw-ops-123", is_staff=True))


@pytest.fixture
def member() -> Client:
    return client_for(User.objects.create_user("bob", password="pw-bob-123"))


def test_anonymous_users_are_sent_to_the_admin_login() -> None:
    response = client_for(None).get(PAGE)
    assert response.status_code == 302
    assert response["Location"] == "/admin/login/?next=/admin/latency/"


def test_users_who_are_not_staff_do_not_see_the_page(member: Client) -> None:
    response = member.get(PAGE)
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_the_json_needs_a_staff_login(member: Client) -> None:
    anonymous = client_for(None).get(DATA)
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["code"] == "unauthenticated"
    refused = member.get(DATA)
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "forbidden"


def test_the_admin_index_links_to_the_dashboard(staff: Client) -> None:
    html = staff.get("/admin/").content.decode()
    assert re.search(r'<a href="/admin/latency/">Latency dashboard</a>', html)


def test_an_empty_window_says_so_and_still_has_the_tables(staff: Client) -> None:
    response = staff.get(PAGE)
    html = response.content.decode()
    assert response.status_code == 200
    assert "No answers in this window." in html
    assert '<td data-field="ttft_ms.p95">\N{EN DASH}</td>' in html
    assert 'id="latency-data"' in html  # the charts' data
    assert "latency.js" in html
    assert "latency.css" in html


def test_the_summary_table_is_rendered_without_javascript(staff: Client) -> None:
    now = timezone.now()
    for ttft in (100.0, 200.0, 300.0):
        answer_create(finished_at=now - timedelta(minutes=2), ttft_ms=ttft, client_ttft_ms=ttft)
    answer_create(finished_at=now, source="faq", ttft_ms=4.0)
    answer_create(
        finished_at=now, status=Message.Status.FAILED, error_code="worker_lost", ttft_ms=None
    )

    html = staff.get(PAGE + "?window=6h").content.decode()

    assert "Last 6 hours: 5 answers in 6 min buckets" in html
    assert '<td data-field="ttft_ms.count">4</td>' in html
    assert '<td data-field="ttft_ms.p50">100</td>' in html
    assert '<td data-field="ttft_ms.p99">300</td>' in html
    assert '<td data-field="client_ttft_ms.p50">200</td>' in html
    assert '<td data-field="faq_hit_rate">25.0 %</td>' in html
    assert '<td data-field="errors">worker_lost: 1</td>' in html
    assert re.search(r'<a href="\?window=6h" aria-current="page">Last 6 hours</a>', html)


def test_a_bad_window_is_a_400_with_the_choices(staff: Client) -> None:
    page = staff.get(PAGE + "?window=90m")
    assert page.status_code == 400
    assert "Unknown window &#x27;90m&#x27;: choose one of 1h, 6h, 24h, 7d." in page.content.decode()
    data = staff.get(DATA + "?window=90m")
    assert data.status_code == 400
    assert data.json() == {
        "error": {
            "code": "invalid",
            "message": "Unknown window '90m': choose one of 1h, 6h, 24h, 7d.",
        }
    }


def test_the_json_has_the_buckets_and_the_summary(staff: Client) -> None:
    answer_create(finished_at=timezone.now(), ttft_ms=80.0, completion_tokens=12)

    response = staff.get(DATA + "?window=24h")

    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    data = response.json()
    assert data["window"] == "24h"
    assert data["bucket_seconds"] == 24 * 60
    assert set(data["buckets"]) == {
        "start",
        "answers",
        "ttft_ms",
        "client_ttft_ms",
        "faq_hit_rate",
        "prefix_cache_hit_rate",
        "answers_per_minute",
        "tokens_per_second",
    }
    assert len(data["buckets"]["start"]) == BUCKETS
    assert data["buckets"]["ttft_ms"]["p95"][-1] == 80.0
    assert sum(data["buckets"]["answers"]) == 1
    assert data["summary"]["ttft_ms"] == {"p50": 80.0, "p95": 80.0, "p99": 80.0, "count": 1}
    assert data["summary"]["answers"] == 1


def test_the_json_defaults_to_the_last_hour(staff: Client) -> None:
    assert staff.get(DATA).json()["window"] == "1h"


def test_a_capped_window_says_how_much_it_shows(
    staff: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(selectors, "ROW_CAP", 2)
    now = timezone.now()
    for minutes in (30, 20, 10):
        answer_create(finished_at=now - timedelta(minutes=minutes), ttft_ms=float(minutes))

    html = staff.get(PAGE).content.decode()

    assert "Only the newest 2 answers are shown (since " in html
    assert '<td data-field="ttft_ms.count">2</td>' in html
    assert staff.get(DATA).json()["capped"] is True


def test_the_dashboard_filters_by_website(staff: Client) -> None:
    site = site_made(name="Shop")
    guest = services.guest_enter(site=site, origin=HOST, token=None).guest
    widget_answer = answer_create(finished_at=timezone.now(), ttft_ms=300.0)
    Conversation.objects.filter(id=widget_answer.conversation_id).update(owner=guest.user)
    answer_create(finished_at=timezone.now(), ttft_ms=80.0)  # a staff member's

    everything = staff.get(DATA).json()["summary"]
    only_shop = staff.get(DATA, {"site": site.pk}).json()["summary"]

    assert everything["answers"] == 2
    assert only_shop["answers"] == 1
    assert only_shop["ttft_ms"]["p50"] == 300.0
    page = staff.get(PAGE, {"site": site.pk}).content.decode()
    assert "Shop (widget)" in page
    assert f"site={site.pk}" in page
    bad = staff.get(DATA, {"site": "999999"})
    assert bad.status_code == 400
    assert "No website" in bad.json()["error"]["message"]
