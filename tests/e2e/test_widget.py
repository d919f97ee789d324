"""The widget on a customer's website, in a real browser: the host page is served from another
origin (another port) and embeds the one-line snippet; the app runs the scripted engine."""

from __future__ import annotations

import functools
import http.server
import json
import re
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

pytest.importorskip("playwright.sync_api", reason="pip install playwright (a dev dependency)")

from playwright.sync_api import FrameLocator, Page, expect

from tests.e2e.seed import ADMIN_USERNAME
from tests.e2e.support import (
    TIMEOUT_MS,
    App,
    AppOptions,
    console_open,
    needs_chromium,
    scripted_reply,
)
from tests.support.net import free_port

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = [pytest.mark.e2e, needs_chromium]

HOST_PORT, OTHER_PORT = free_port(), free_port()
HOST_ORIGIN = f"http://127.0.0.1:{HOST_PORT}"
APP = AppOptions(
    faq=False,
    # the site offers the seeded template; the admin (an agent) answers its visitors
    seeds=("template", "site", "admin"),
    env={"WIDGET_HOST_ORIGIN": HOST_ORIGIN, "CHAT_MAX_TOKENS": "400"},
)


class _HostPage(http.server.BaseHTTPRequestHandler):
    """A customer's page: some content of its own and the snippet."""

    def __init__(self, *args: object, chat_url: str, **kwargs: object) -> None:
        self.chat_url = chat_url
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def do_GET(self) -> None:
        body = (
            "<!doctype html><html><head><title>Shop</title>"
            "<style>button{background:red!important;font-size:40px!important}</style></head>"
            "<body><h1>Our shop</h1>"
            f'<script src="{self.chat_url}/widget.js" data-site="site_e2e" async></script>'
            "</body></html>"
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def host_pages(app: App) -> Iterator[None]:
    """The allowed host page on HOST_PORT and the same page on OTHER_PORT, not allowed."""
    handler = functools.partial(_HostPage, chat_url=app.base_url)
    servers = [
        http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
        for port in (HOST_PORT, OTHER_PORT)
    ]
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers]
    for thread in threads:
        thread.start()
    yield
    for server in servers:
        server.shutdown()
        server.server_close()


def opened_panel(page: Page) -> FrameLocator:
    page.goto(HOST_ORIGIN + "/")
    launcher = page.get_by_role("button", name="Chat with us")
    launcher.hover()  # loads the panel and its socket before the click
    launcher.click()
    panel = page.frame_locator('iframe[title="Chat with us"]')
    expect(panel.locator("#connection-status")).to_have_attribute(
        "data-state", "connected", timeout=TIMEOUT_MS
    )
    expect(panel.get_by_role("textbox", name="Message")).to_be_focused()
    return panel


def asked(panel: FrameLocator, question: str) -> None:
    box = panel.get_by_role("textbox", name="Message")
    box.fill(question)
    box.press("Enter")


def test_a_guest_asks_on_the_website_and_a_reload_continues_the_conversation(
    browser: Browser, host_pages: None
) -> None:
    context = browser.new_context()
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    panel = opened_panel(page)
    question = "Do you ship to Norway?"
    asked(panel, question)
    answer = panel.locator('[data-role="assistant"]').last
    expect(answer).to_have_attribute("data-status", "complete", timeout=TIMEOUT_MS)
    expect(answer).to_contain_text(scripted_reply(question))

    page.reload()
    panel = opened_panel(page)
    expect(panel.locator('[data-role="user"]')).to_have_count(1)
    expect(panel.locator('[data-role="user"]').first).to_contain_text(question)
    expect(panel.locator('[data-role="assistant"]').first).to_contain_text(scripted_reply(question))
    assert errors == []

    # another visitor (another browser profile) starts with an empty chat
    stranger = browser.new_context().new_page()
    stranger_panel = opened_panel(stranger)
    expect(stranger_panel.locator('[data-role="user"]')).to_have_count(0)
    stranger.context.close()
    context.close()


def test_stop_ends_a_guests_answer(browser: Browser, host_pages: None) -> None:
    context = browser.new_context()
    panel = opened_panel(context.new_page())
    asked(panel, "[[slow]] " + "tell me about returns " * 40)
    answer = panel.locator('[data-role="assistant"]').last
    expect(answer).to_have_attribute("data-status", "streaming", timeout=TIMEOUT_MS)
    panel.get_by_role("button", name="Stop", exact=True).click()
    expect(answer).to_have_attribute("data-status", "stopped", timeout=TIMEOUT_MS)
    context.close()


def test_a_page_on_an_origin_not_allowed_gets_no_widget(
    browser: Browser, host_pages: None, app: App
) -> None:
    context = browser.new_context()
    page = context.new_page()
    seen: list[str] = []
    page.on("response", lambda r: seen.append(f"{r.status} {r.url}"))
    page.on("requestfailed", lambda r: seen.append(f"failed {r.url}"))
    page.goto(f"http://127.0.0.1:{OTHER_PORT}/")
    page.wait_for_load_state("networkidle")
    config = [line for line in seen if "/widget/config" in line]
    assert len(config) == 1, seen
    assert config[0].startswith(("403 ", "failed ")), config
    assert page.get_by_role("button", name="Chat with us").count() == 0
    assert page.locator("iframe").count() == 0
    context.close()


def test_a_template_of_the_site_starts_a_conversation_with_a_reference(
    browser: Browser, host_pages: None
) -> None:
    context = browser.new_context()
    page = context.new_page()
    sent: list[dict[str, Any]] = []
    page.on(
        "websocket",
        lambda ws: ws.on("framesent", lambda payload: sent.append(json.loads(payload))),
    )
    panel = opened_panel(page)
    topic = panel.get_by_label("Topic", exact=True)
    topic.select_option(label="Late order")
    panel.get_by_label("Order number").fill("A-1234")
    panel.get_by_label("What you want").select_option("refund")
    box = panel.get_by_role("textbox", name="Message")
    expect(box).to_have_value(re.compile(r"^My order A-1234 has not arrived"))
    body = box.input_value()
    box.press("Enter")
    answer = panel.locator('[data-role="assistant"]').last
    expect(answer).to_have_attribute("data-status", "complete", timeout=TIMEOUT_MS)
    expect(answer).to_contain_text(scripted_reply(body))
    [frame] = [f for f in sent if f.get("type") == "chat.send"]
    assert set(frame["template"]) == {"id", "version", "sha256"}
    assert frame["variables"] == {"order_id": "A-1234", "remedy": "refund"}
    assert "text" not in frame
    context.close()


def test_a_visitor_asks_for_a_person_in_words_and_talks_to_an_agent(
    browser: Browser, host_pages: None, app: App
) -> None:
    desk, desk_errors = console_open(browser, app)
    context = browser.new_context()
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    panel = opened_panel(page)
    asked(panel, "My parcel arrived crushed")
    answer = panel.locator('[data-role="assistant"]').last
    expect(answer).to_have_attribute("data-status", "complete", timeout=TIMEOUT_MS)
    expect(panel.get_by_role("button", name="Regenerate")).to_be_visible()

    asked(panel, "can I talk to a real person please")
    notice = panel.locator("#handoff-notice")
    expect(notice).to_have_text("A person will join shortly. You are next in line.")
    expect(panel.get_by_role("button", name="Stop waiting")).to_be_visible()
    expect(panel.get_by_role("button", name="Regenerate")).to_have_count(0)
    waiting = desk.locator(".console-item")
    expect(waiting).to_contain_text("E2E shop")
    expect(waiting).to_contain_text("asked in words")

    waiting.get_by_role("button").click()
    expect(notice).to_have_text(f"{ADMIN_USERNAME} joined the conversation.")
    reply_box = desk.get_by_label("Reply")
    expect(reply_box).to_have_attribute("data-draft", "ready", timeout=TIMEOUT_MS)
    reply_box.fill("Hello! Sorry about the parcel, a new one ships today.")
    reply_box.press("Enter")
    agent_line = panel.locator('.message[data-role="agent"]')
    expect(agent_line).to_have_text("Hello! Sorry about the parcel, a new one ships today.")
    asked(panel, "Thank you!")
    expect(desk.locator("#console-log .message").last).to_have_text("Thank you!")
    # the assistant answered only the first question
    expect(panel.locator('[data-role="assistant"]')).to_have_count(1)

    # the page's test hands back to the assistant; this one closes with a resolution
    desk.get_by_label("Resolution").fill("replacement sent")
    desk.get_by_role("button", name="Close").click()
    expect(notice).to_have_text("The conversation was closed. Ask again any time.")
    expect(panel.get_by_role("button", name="Regenerate")).to_be_visible()
    expect(desk.get_by_text("Nobody is waiting.")).to_be_visible()
    assert errors == []
    assert desk_errors == []
    context.close()
    desk.context.close()
