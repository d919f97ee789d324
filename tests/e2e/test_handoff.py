"""Handoff in real browsers: a customer (the chat page) asks for a person, an agent (the
console at /agent/, another browser context) takes it, they write both ways in real time, a
reload on either side loses and doubles nothing, and the conversation goes back to the bot."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

pytest.importorskip("playwright.sync_api", reason="pip install playwright (a dev dependency)")

from playwright.sync_api import expect

from tests.e2e.seed import ADMIN_USERNAME
from tests.e2e.support import TIMEOUT_MS, App, AppOptions, Tab, console_open, needs_chromium

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = [pytest.mark.e2e, needs_chromium]

APP = AppOptions(faq=False, seeds=("admin",))


def test_a_customer_and_an_agent_talk_and_hand_back_to_the_assistant(
    tab: Tab, browser: Browser, app: App
) -> None:
    customer = tab.page
    answer = tab.ask("My parcel arrived crushed")
    expect(answer).to_have_attribute("data-status", "complete", timeout=TIMEOUT_MS)
    desk, desk_errors = console_open(browser, app)
    expect(desk.get_by_text("Nobody is waiting.")).to_be_visible()

    customer.get_by_role("button", name="Talk to a person").click()
    expect(customer.locator("#handoff-notice")).to_have_text(
        "A person will join shortly. You are next in line."
    )
    waiting = desk.locator(".console-item")
    expect(waiting).to_have_count(1)
    expect(waiting).to_contain_text("My parcel arrived crushed")

    waiting.get_by_role("button").click()
    expect(customer.locator("#handoff-notice")).to_have_text(
        f"{ADMIN_USERNAME} joined the conversation."
    )
    reply_box = desk.get_by_label("Reply")
    expect(reply_box).to_be_editable()
    reply_box.fill("Sorry about that! A new one ships today.")
    expect(customer.locator("#handoff-notice")).to_have_text(f"{ADMIN_USERNAME} is typing…")
    reply_box.press("Enter")
    agent_line = customer.locator('.message[data-role="agent"]')
    expect(agent_line).to_have_text("Sorry about that! A new one ships today.")
    expect(agent_line).to_have_attribute("data-sender", ADMIN_USERNAME)
    expect(reply_box).to_have_value("")

    expect(customer.locator("#handoff-notice")).to_have_text(
        f"{ADMIN_USERNAME} joined the conversation."
    )  # the reply came: no longer typing
    tab.textbox.fill("Thank you! Same address please.")
    expect(desk.locator("#console-typing")).to_have_text("The customer is typing…")
    tab.textbox.press("Enter")
    expect(desk.locator("#console-log .message").last).to_have_text(
        "Thank you! Same address please."
    )
    # the model drafts Dana's reply to it, streamed into the reply box
    expect(reply_box).to_have_value("You said: Thank you! Same address please.")
    expect(reply_box).to_have_attribute("data-draft", "ready")
    # the assistant kept silent: the customer's message has no answer under it
    expect(customer.locator('.message[data-role="assistant"]')).to_have_count(1)

    # a reload on either side shows everything once
    customer.reload()
    tab.wait_connected()
    expect(customer.locator('.message[data-role="agent"]')).to_have_count(1)
    expect(customer.locator("#handoff-notice")).to_have_text(
        f"{ADMIN_USERNAME} joined the conversation."
    )
    desk.reload()
    desk.locator(".console-item").get_by_role("button").click()
    expect(desk.locator("#console-log .message")).to_have_count(4)

    desk.get_by_role("button", name="Back to the assistant").click()
    expect(customer.locator("#handoff-notice")).to_have_text("Back with the assistant.")
    expect(desk.get_by_text("Nobody is waiting.")).to_be_visible()
    answer = tab.ask("And when will it arrive?")
    expect(answer).to_have_attribute("data-status", "complete", timeout=TIMEOUT_MS)
    assert desk_errors == []
    desk.context.close()


def test_a_user_who_is_not_an_agent_gets_no_console(tab: Tab, app: App) -> None:
    response = tab.page.goto(f"{app.base_url}/agent/")
    assert response is not None
    assert response.status == 403
    expect(tab.page.get_by_text('adds you to the "Agents" group')).to_be_visible()
