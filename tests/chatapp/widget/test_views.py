"""The widget's HTTP edge: only the site's origins get its config, its panel and a guest."""

from __future__ import annotations

import gzip
import hashlib
import json
from urllib.parse import parse_qs, urlsplit

import pytest
from django.conf import settings
from django.test import Client

from chatapp.conversations.models import Conversation, Message
from chatapp.prompts import services
from chatapp.websites.models import Guest
from tests.chatapp.prompts.factories import template_create
from tests.chatapp.websites.sites import HOST, site_made

pytestmark = pytest.mark.django_db

OTHER = "https://evil.example"


def test_the_config_is_given_to_an_allowed_origin_only() -> None:
    site = site_made(title="Ask Shop", accent_colour="#112233")
    client = Client()
    ok = client.get("/widget/config", {"site": site.key}, HTTP_ORIGIN=HOST)
    assert ok.status_code == 200
    assert ok["Access-Control-Allow-Origin"] == HOST
    body = ok.json()
    assert body["title"] == "Ask Shop"
    assert body["accent_colour"] == "#112233"
    panel = urlsplit(body["panel_url"])
    assert panel.path == "/widget/panel/"
    assert parse_qs(panel.query) == {"site": [site.key], "host": [HOST]}

    refused = client.get("/widget/config", {"site": site.key}, HTTP_ORIGIN=OTHER)
    assert refused.status_code == 403
    assert "Access-Control-Allow-Origin" not in refused
    assert refused.json()["error"]["code"] == "widget_refused"
    assert client.get("/widget/config", {"site": "site_nope"}, HTTP_ORIGIN=HOST).status_code == 403
    assert client.get("/widget/config", {"site": site.key}).status_code == 403  # no Origin


def test_a_page_of_this_server_gets_the_config_without_an_origin_header() -> None:
    # a same-origin GET carries no Origin; the browser says where it comes from otherwise
    site = site_made(allowed_origins="http://testserver")
    client = Client()
    same = client.get("/widget/config", {"site": site.key}, HTTP_SEC_FETCH_SITE="same-origin")
    assert same.status_code == 200
    cross = client.get("/widget/config", {"site": site.key}, HTTP_SEC_FETCH_SITE="cross-site")
    assert cross.status_code == 403


def test_the_panel_may_be_framed_by_the_host_page_it_names_and_no_other() -> None:
    site = site_made()
    client = Client()
    panel = client.get("/widget/panel/", {"site": site.key, "host": HOST})
    assert panel.status_code == 200
    assert panel["Content-Security-Policy"] == f"frame-ancestors {HOST}"
    assert "X-Frame-Options" not in panel
    assert f'data-socket="/ws/guest/{site.key}/"' in panel.content.decode()

    # its script at a URL that changes with its bytes, so browsers keep it for good
    digest = hashlib.sha256((settings.BASE_DIR / "static" / "panel.js").read_bytes()).hexdigest()
    script = f"/static/panel.js?v={digest[:12]}"
    assert f'src="{script}"' in panel.content.decode()
    assert "immutable" in client.get(script)["Cache-Control"]
    assert "immutable" not in client.get("/static/chat.css")["Cache-Control"]

    refused = client.get("/widget/panel/", {"site": site.key, "host": OTHER})
    assert refused.status_code == 403
    assert refused["Content-Security-Policy"] == "frame-ancestors 'none'"


def post_guest(client: Client, body: object) -> tuple[int, dict[str, object]]:
    response = client.post("/widget/guest", json.dumps(body), content_type="application/json")
    return response.status_code, response.json()


def test_the_panel_enters_as_a_guest_and_comes_back_as_the_same_one() -> None:
    site = site_made()
    client = Client(enforce_csrf_checks=True)  # no cookie is read: nothing for CSRF to guard
    status, first = post_guest(client, {"site": site.key, "host": HOST})
    assert status == 200
    status, again = post_guest(client, {"site": site.key, "host": HOST, "token": first["token"]})
    assert status == 200
    assert again["guest"] == first["guest"]
    assert Guest.objects.count() == 1


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"host": HOST}, 400, "invalid"),
        ({"site": "KEY", "host": 5}, 400, "invalid"),
        ({"site": "KEY", "host": HOST, "token": "forged.token.x"}, 401, "token_forged"),
        ({"site": "KEY", "host": OTHER}, 403, "widget_refused"),
        ({"site": "KEY", "host": "not an origin"}, 403, "widget_refused"),
        ([1, 2], 400, "invalid"),
    ],
)
def test_a_bad_guest_request_gets_a_clear_error_and_stores_nothing(
    body: object, status: int, code: str
) -> None:
    site = site_made()
    if isinstance(body, dict) and body.get("site") == "KEY":
        body["site"] = site.key
    got_status, got = post_guest(Client(), body)
    assert (got_status, got["error"]["code"]) == (status, code)  # type: ignore[index]
    assert got["error"]["message"]  # type: ignore[index]
    assert not Guest.objects.exists()


def test_a_request_too_large_for_a_guest_is_refused() -> None:
    site = site_made()
    status, got = post_guest(Client(), {"site": site.key, "host": HOST, "token": "x" * 5000})
    assert (status, got["error"]["code"]) == (413, "too_large")  # type: ignore[index]


def test_a_returning_guest_gets_its_latest_conversation_to_show() -> None:
    site = site_made()
    client = Client()
    _, first = post_guest(client, {"site": site.key, "host": HOST})
    assert (first["conversation_id"], first["history"]) == (None, [])
    guest = Guest.objects.get()
    older = Conversation.objects.create(owner=guest.user, title="older")
    latest = Conversation.objects.create(owner=guest.user, title="latest")
    Message.objects.create(conversation=latest, role="user", content="Do you ship to Norway?")
    Conversation.objects.filter(id=older.id).update(updated_at=latest.updated_at.replace(year=2020))

    _, again = post_guest(client, {"site": site.key, "host": HOST, "token": first["token"]})

    assert again["conversation_id"] == str(latest.id)
    history = again["history"]
    assert isinstance(history, list)
    assert [(m["role"], m["content"]) for m in history] == [("user", "Do you ship to Norway?")]


def test_the_loader_is_served_small_with_a_short_cache() -> None:
    response = Client().get("/widget.js")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/javascript")
    assert response["Cache-Control"] == "public, max-age=300"
    assert len(gzip.compress(response.content)) <= 5 * 1024
    assert b"/widget/config?site=" in response.content


def test_the_demo_page_embeds_the_example_website_when_it_allows_this_server() -> None:
    site = site_made(is_example=True, allowed_origins="http://testserver")
    page = Client().get("/widget/demo/").content.decode()
    assert f'<script src="http://testserver/widget.js" data-site="{site.key}" async>' in page

    site.allowed_origins = HOST
    site.save()
    page = Client().get("/widget/demo/").content.decode()
    assert "This address is not allowed" in page
    assert "<script src=" not in page


def test_one_address_starts_only_so_many_new_visitors_an_hour() -> None:
    site = site_made(new_visitors_per_address=2)
    crowd, neighbour = Client(REMOTE_ADDR="203.0.113.7"), Client(REMOTE_ADDR="198.51.100.9")
    tokens = [post_guest(crowd, {"site": site.key, "host": HOST})[1]["token"] for _ in range(2)]

    response = crowd.post(
        "/widget/guest",
        json.dumps({"site": site.key, "host": HOST}),
        content_type="application/json",
    )

    assert response.status_code == 429
    assert response.json()["error"]["code"] == "rate_limited"
    assert 3500 <= int(response["Retry-After"]) <= 3600
    assert Guest.objects.count() == 2
    # a visitor coming back is not a new one; another address is not held back
    status, _ = post_guest(crowd, {"site": site.key, "host": HOST, "token": tokens[0]})
    assert status == 200
    assert post_guest(neighbour, {"site": site.key, "host": HOST})[0] == 200
    # the address itself is not stored
    assert not Guest.objects.filter(address_hash__contains="203.0.113.7").exists()
    assert Guest.objects.exclude(address_hash="").count() == 3


def test_the_panel_preloads_only_the_sites_templates_revalidated_with_an_etag() -> None:
    offered = template_create(name="Late order")
    default = template_create(name="Returns")
    internal = template_create(name="Internal refunds")
    for template in (offered, default, internal):
        services.template_publish(template=template, user=None, warm=False)
    site = site_made(default_template=default)
    site.offered_templates.set([offered])
    client = Client()

    first = client.get("/widget/templates", {"site": site.key})

    assert first.status_code == 200
    assert {t["name"] for t in first.json()["templates"]} == {"Late order", "Returns"}
    assert "system_prompt" not in first.content.decode()
    again = client.get("/widget/templates", {"site": site.key}, HTTP_IF_NONE_MATCH=first["ETag"])
    assert again.status_code == 304
    site.enabled = False
    site.save()
    assert client.get("/widget/templates", {"site": site.key}).status_code == 403
