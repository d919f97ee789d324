"""The browser's time to first token reaches the server's metrics (real Chromium, real app).

The page reports each answer's time to first token once (`chat.client_timing`); the app
stores it on the message and `/metrics` (read from 127.0.0.1, an allowed network) counts it.
"""

from __future__ import annotations

import re
import urllib.request

import pytest

pytest.importorskip("playwright.sync_api", reason="pip install playwright (a dev dependency)")

from playwright.sync_api import expect

from tests.e2e.support import TIMEOUT_MS, App, AppOptions, Tab, needs_chromium

pytestmark = [pytest.mark.e2e, needs_chromium]

APP = AppOptions(faq=False)
COUNT = "chat:client_time_to_first_token_seconds_count"
SUM = "chat:client_time_to_first_token_seconds_sum"


def scrape(app: App) -> dict[str, float]:
    url = f"{app.base_url}/metrics"  # http://127.0.0.1:<port>
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310
        body = response.read().decode()
    return {
        line.split(" ")[0]: float(line.split(" ")[1])
        for line in body.splitlines()
        if line.startswith("chat:client_time_to_first_token_seconds_")
    }


def test_each_answer_reports_the_painted_ttft_once_and_metrics_count_it(tab: Tab, app: App) -> None:
    before = scrape(app)
    answer = tab.ask("When do you open on Sunday?")
    expect(answer).to_have_attribute("data-status", "complete", timeout=TIMEOUT_MS)
    [timing] = tab.wait_sent("chat.client_timing")
    message_id = answer.get_attribute("data-message-id")
    assert timing["message_id"] == message_id
    # the same measurement the answer shows under it (that one is rounded to whole ms)
    shown = tab.page.locator(f'.message-meta[data-for="{message_id}"]').get_attribute(
        "data-ttft-ms"
    )
    assert shown is not None
    assert re.fullmatch(r"\d+", shown)
    assert abs(timing["ttft_ms"] - int(shown)) <= 0.5
    assert 0 < timing["ttft_ms"] < TIMEOUT_MS

    after = scrape(app)
    assert after[COUNT] == before.get(COUNT, 0) + 1
    assert after[SUM] - before.get(SUM, 0) == pytest.approx(timing["ttft_ms"] / 1000)
    # nothing refused it, nothing is shown for it
    assert tab.received_of("chat.error") == []
    expect(tab.page.locator("#chat-alert")).to_be_hidden()

    # a second answer reports its own, once
    tab.ask("And on Monday?")
    timings = tab.wait_sent("chat.client_timing", 2)
    tab.page.wait_for_timeout(300)
    assert len(tab.sent_of("chat.client_timing")) == 2
    assert timings[1]["message_id"] != message_id
