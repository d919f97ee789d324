"""The admin latency dashboard in a real browser: answers asked in the chat appear as charts.

The demo user asks two questions on the chat page (scripted engine), so the answers are stored
the way production stores them; then a staff user opens /admin/latency/ from the admin index.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

pytest.importorskip("playwright.sync_api", reason="pip install playwright (a dev dependency)")

from playwright.sync_api import expect

from tests.e2e.seed import ADMIN_PASSWORD, ADMIN_USERNAME
from tests.e2e.support import TIMEOUT_MS, VIEWPORT, App, AppOptions, Tab, needs_chromium

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = [pytest.mark.e2e, needs_chromium]

APP = AppOptions(faq=False, seeds=("admin",))
CHARTS = ("ttft", "client_ttft", "cache", "answers", "tokens")


def test_staff_see_the_answers_as_latency_charts(tab: Tab, browser: Browser, app: App) -> None:
    for question in ("When do you open on Sunday?", "Do you ship to Norway?"):
        answer = tab.ask(question)
        expect(answer).to_have_attribute("data-status", "complete", timeout=TIMEOUT_MS)

    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        page.goto(f"{app.base_url}/admin/")
        page.get_by_label("Username").fill(ADMIN_USERNAME)
        page.get_by_label("Password").fill(ADMIN_PASSWORD)
        page.get_by_role("button", name="Log in").click()
        page.get_by_role("link", name="Latency dashboard").click()

        status = page.get_by_role("status")
        expect(status).to_contain_text("Last hour: 2 answers in 1 min buckets")
        expect(page.locator('[data-field="ttft_ms.count"]')).to_have_text("2")
        # The chat page reported its own time to first token for both (chat.client_timing).
        expect(page.locator('[data-field="client_ttft_ms.count"]')).to_have_text("2")
        for key in CHARTS:
            chart = page.locator(f'.latency-chart[data-chart="{key}"]')
            expect(chart.locator("canvas")).to_have_count(1)
            box = chart.locator("canvas").bounding_box()
            assert box is not None, key
            assert box["width"] > 200, key
            assert box["height"] > 100, key
        server_ttft = page.locator('.latency-chart[data-chart="ttft"]')
        expect(server_ttft.locator(".u-legend")).to_contain_text("P95")
        expect(server_ttft.locator(".u-legend")).to_contain_text("P99")
        legend = page.locator('.latency-chart[data-chart="cache"] .u-legend')
        expect(legend).to_contain_text("FAQ hit rate")
        Tab(page=page).shoot("latency-dashboard")

        page.get_by_role("link", name="Last 7 days").click()
        expect(status).to_contain_text("Last 7 days: 2 answers in 2 h 48 min buckets")
        expect(page.locator('.latency-chart[data-chart="ttft"] canvas')).to_have_count(1)
        assert errors == [], f"script errors on the page: {errors}"
    finally:
        context.close()
