"""'Did you mean ...?' in a real browser: an answer the FAQ was unsure about offers the entries'
questions, and clicking one (or pressing Enter on it, after a reload too) answers from the FAQ.

The app is the real one with the FAQ cache on: the packaged embedding model, the shipped
verifier and decision rule (`entry_choice.choose`), entries added through Django admin. Only
the rule's margin is raised past any lead the verifier can give (a copy of the prepared
verifier's folder with another `verifier.json`), so no paraphrase is ever sure enough: each
gets the model's answer and the likely entries offered. Which questions the shipped rule is
unsure about depends on how its verifier trained, so that cannot be forced otherwise; the
verifier still decides which entries are likely enough to offer.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

pytest.importorskip("playwright.sync_api", reason="pip install playwright (a dev dependency)")

from playwright.sync_api import expect

from inference.faq.verifier import VerifierInfo
from inference.models.readiness import write_marker
from modelprep.faq_verifier import MODEL_NAME, training_source
from tests.e2e.seed import FAQ_ALTERNATES, FAQ_ANSWER, FAQ_QUESTION
from tests.e2e.support import (
    TIMEOUT_MS,
    App,
    AppOptions,
    Tab,
    app_start,
    faq_entries_add,
    needs_chromium,
    scripted_reply,
    text_of,
)
from tests.integration.processes import prepared_verifier_env

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator

pytestmark = [pytest.mark.e2e, needs_chromium]

OTHER_QUESTION = "How do I delete my account?"
OTHER_ANSWER = "Settings > Account > Delete account. It cannot be undone."
PARAPHRASE = "how can I reset my password"  # the shipped verifier accepts it (test_faq.py)
CONVERSATION_URL = re.compile(r"/c/[0-9a-f-]{36}/$")
NEVER_SURE = 1_000.0  # log-odds: more than any lead (probabilities are clipped to 1e-6)


def unsure_verifier(folder: Path) -> Path:
    """The prepared verifier (its files linked) with the margin raised to NEVER_SURE."""
    prepared = Path(prepared_verifier_env()["INFERENCE_FAQ_VERIFIER_DIR"])
    target = folder / "models" / "faq-verifier"
    target.mkdir(parents=True)
    for path in prepared.iterdir():
        if path.is_file() and path.name != "verifier.json" and not path.name.startswith("."):
            (target / path.name).symlink_to(path)
    info = VerifierInfo.read(prepared)
    dataclasses.replace(info, margin=NEVER_SURE).write(target)
    write_marker(model_dir=target, model=MODEL_NAME, source=training_source())
    return target


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    verifier = unsure_verifier(tmp_path_factory.mktemp("verifier"))
    options = AppOptions(
        faq=True,
        seeds=("admin",),
        env={"INFERENCE_FAQ_VERIFIER_DIR": str(verifier), "INFERENCE_FAQ_VERIFIER_TRAIN": "0"},
    )
    started = app_start(tmp_path_factory.mktemp("e2e-data"), options)
    app = next(started)
    try:
        # until the verifier is in, the cache answers exact repeats only and offers nothing
        deadline = time.monotonic() + TIMEOUT_MS / 1000
        while not any("FAQ verifier ready" in line for line in app.output):
            assert time.monotonic() < deadline, "the FAQ verifier did not load"
            time.sleep(0.1)
        yield app
    finally:
        started.close()


@pytest.fixture(scope="module", autouse=True)
def faq_entries(browser: Browser, app: App) -> None:
    """An admin adds two entries in Django admin; the list then shows them embedded."""
    faq_entries_add(
        browser,
        app,
        [(FAQ_QUESTION, FAQ_ALTERNATES, FAQ_ANSWER), (OTHER_QUESTION, "", OTHER_ANSWER)],
    )


def offered_under(tab: Tab) -> Locator:
    return tab.log.get_by_role("group", name="Did you mean")


def ask_unsure(tab: Tab) -> Locator:
    """Ask the paraphrase: the model answers, and the reset entry is offered under it."""
    answer = tab.ask(PARAPHRASE)
    expect(answer).to_have_attribute("data-status", "complete", timeout=TIMEOUT_MS)
    expect(answer).to_have_attribute("data-source", "model")
    assert text_of(answer) == scripted_reply(PARAPHRASE)
    offered = offered_under(tab)
    expect(offered).to_be_visible()
    expect(offered).to_contain_text("Did you mean:")
    done = tab.wait_received("chat.done")[-1]
    assert FAQ_QUESTION in [entry["question"] for entry in done["suggested_entries"]]
    return offered.get_by_role("button", name=FAQ_QUESTION, exact=True)


def expect_the_faq_answer(tab: Tab, offered_before: int) -> None:
    answer = tab.next_answer(offered_before)
    expect(answer).to_have_attribute("data-status", "complete", timeout=TIMEOUT_MS)
    expect(answer).to_have_attribute("data-source", "faq")
    assert text_of(answer) == " ".join(FAQ_ANSWER.split())
    expect(tab.user_messages().last).to_have_text(FAQ_QUESTION)
    expect(offered_under(tab)).to_be_hidden()  # no longer under the newest answer


def test_an_unsure_answer_offers_did_you_mean_and_a_click_answers_from_the_faq(tab: Tab) -> None:
    suggestion = ask_unsure(tab)
    tab.shoot("did-you-mean")

    suggestion.click()

    expect_the_faq_answer(tab, 1)
    first, clicked = tab.wait_sent("chat.send", 2)
    accepted = tab.wait_received("chat.accepted", 2)[0]
    assert clicked["text"] == FAQ_QUESTION
    assert clicked["conversation_id"] == accepted["conversation_id"]
    assert first["id"] != clicked["id"]


def test_after_a_reload_the_suggestions_are_back_and_enter_on_one_asks_it(tab: Tab) -> None:
    ask_unsure(tab)
    expect(tab.page).to_have_url(CONVERSATION_URL)  # the page's address once accepted
    tab.open(tab.page.url)

    suggestion = offered_under(tab).get_by_role("button", name=FAQ_QUESTION, exact=True)
    expect(suggestion).to_be_visible()
    suggestion.focus()
    suggestion.press("Enter")

    expect_the_faq_answer(tab, 1)
