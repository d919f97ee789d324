"""FAQ answers in a real browser: the stored answer, its label, and "Ask the assistant instead".

The app runs with the FAQ cache on (INFERENCE_FAQ=1, the packaged embedding model). An admin
adds one entry through Django admin, as in production: saving embeds it (Celery, eager in the
embedded default) and pushes it to the running worker, with no restart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

pytest.importorskip("playwright.sync_api", reason="pip install playwright (a dev dependency)")

from playwright.sync_api import expect

from tests.e2e.seed import FAQ_ALTERNATES, FAQ_ANSWER, FAQ_QUESTION
from tests.e2e.support import (
    TIMEOUT_MS,
    App,
    AppOptions,
    Tab,
    faq_entries_add,
    needs_chromium,
    scripted_reply,
    text_of,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = [pytest.mark.e2e, needs_chromium]

APP = AppOptions(faq=True, seeds=("admin",))


@pytest.fixture(scope="module", autouse=True)
def faq_entry(browser: Browser, app: App) -> None:
    """An admin adds the FAQ entry in Django admin; the list then shows it embedded."""
    faq_entries_add(browser, app, [(FAQ_QUESTION, FAQ_ALTERNATES, FAQ_ANSWER)])


def test_a_faq_answer_is_labelled_and_the_assistant_can_answer_instead(tab: Tab) -> None:
    question = "how can I reset my password"  # a paraphrase of the entry's question
    answer = tab.ask(question)

    expect(answer).to_have_attribute("data-status", "complete", timeout=TIMEOUT_MS)
    expect(answer).to_have_attribute("data-source", "faq")
    assert text_of(answer) == " ".join(FAQ_ANSWER.split())
    label = tab.log.get_by_text("From FAQ", exact=True)
    expect(label).to_be_visible()
    ask_instead = tab.log.get_by_role("button", name="Ask the assistant instead")
    expect(ask_instead).to_be_enabled()
    (done,) = tab.wait_received("chat.done")
    assert done["source"] == "faq"
    assert isinstance(done["faq_entry_id"], int)
    tab.shoot("faq-answer")

    ask_instead.click()

    # The same message now streams the model's answer.
    expect(answer).to_have_attribute("data-source", "model", timeout=TIMEOUT_MS)
    expect(answer).to_have_attribute("data-status", "complete")
    assert text_of(answer) == scripted_reply(question)
    expect(label).to_have_count(0)
    expect(ask_instead).to_have_count(0)
    expect(tab.answers()).to_have_count(1)
    (regenerate,) = tab.wait_sent("chat.regenerate")
    assert regenerate["bypass_faq"] is True
    assert regenerate["message_id"] == answer.get_attribute("data-message-id")


def test_a_question_the_faq_does_not_cover_goes_to_the_model(tab: Tab) -> None:
    question = "how do I reset my router?"  # close in words, another object
    answer = tab.ask(question)
    expect(answer).to_have_attribute("data-status", "complete", timeout=TIMEOUT_MS)
    expect(answer).to_have_attribute("data-source", "model")
    assert text_of(answer) == scripted_reply(question)
    expect(tab.log.get_by_text("From FAQ", exact=True)).to_have_count(0)
