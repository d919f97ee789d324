"""The chat page in a real browser against `manage.py serve` (scripted engine, no FAQ cache).

The scripted engine answers "You said: <question>" word by word (20 ms a word; 50 ms with
`[[slow]]` in the question), so every answer's full text is known in advance.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest

pytest.importorskip("playwright.sync_api", reason="pip install playwright (a dev dependency)")

from playwright.sync_api import expect

from tests.e2e.support import (
    TIMEOUT_MS,
    AppOptions,
    Tab,
    needs_chromium,
    scripted_reply,
    text_of,
    words_of,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = [pytest.mark.e2e, needs_chromium]

# CHAT_MAX_TOKENS: the scripted engine stops at 64 words by default; the slow answers are longer.
APP = AppOptions(faq=False, seeds=("template",), env={"CHAT_MAX_TOKENS": "400"})


def slow_question(words: int) -> str:
    """A question whose answer streams `words` + 2 words at 50 ms a word."""
    filler = words_of("please tell me about returns shipping refunds exchanges and gift cards")
    return " ".join(["[[slow]]", *(filler[i % len(filler)] for i in range(words - 1))])


# Stop is pressed after the first words: a long answer leaves time even on a loaded machine.
SLOW_TO_STOP = slow_question(150)  # 7.6 s if nobody stopped it
# A reload takes a moment; the answer must still be streaming when the page is back.
SLOW_TO_RELOAD = slow_question(70)  # 3.6 s


def test_a_question_streams_into_the_log_and_the_answer_shows_its_ttft(tab: Tab) -> None:
    question = "What are your opening hours on weekends?"
    answer = tab.ask(question)

    expect(answer).to_have_attribute("data-status", "complete", timeout=TIMEOUT_MS)
    assert text_of(answer) == scripted_reply(question)
    user = tab.user_messages().last
    expect(user).to_have_attribute("data-status", "complete")
    assert text_of(user) == question
    expect(answer).to_have_attribute("data-source", "model")
    # The stats line: the browser-measured time to first token, shown and in data-ttft-ms.
    stats = tab.page.locator("[data-ttft-ms]")
    expect(stats).to_have_count(1)
    expect(stats).to_be_visible()
    expect(stats).to_have_attribute("data-server-ttft-ms", re.compile(r"^\d+(\.\d+)?$"))
    ttft, shown = stats.evaluate("el => [el.dataset.ttftMs, el.textContent]")
    assert re.fullmatch(r"\d+", ttft), ttft
    assert 0 <= int(ttft) < TIMEOUT_MS
    assert f"{ttft} ms" in shown, shown
    # Ready for the next question.
    expect(tab.textbox).to_have_value("")
    expect(tab.send_button).to_be_enabled()
    expect(tab.stop_button).to_be_disabled()
    tab.shoot("chat")


def test_stop_ends_the_answer_stopped_and_keeps_its_partial_text(tab: Tab) -> None:
    full = words_of(scripted_reply(SLOW_TO_STOP))
    answer = tab.ask(SLOW_TO_STOP)
    expect(answer).to_have_attribute("data-status", "streaming")
    expect(answer).to_contain_text("You said:")  # some words are on screen
    expect(tab.stop_button).to_be_enabled()
    tab.stop_button.click()

    expect(answer).to_have_attribute("data-status", "stopped", timeout=TIMEOUT_MS)
    shown = words_of(text_of(answer))
    assert 2 <= len(shown) < len(full), shown
    assert shown == full[: len(shown)]  # a prefix of the answer, nothing garbled
    assert len(tab.wait_sent("chat.stop")) == 1
    expect(tab.stop_button).to_be_disabled()
    expect(tab.send_button).to_be_enabled()
    # The partial answer is what was stored: a reload shows the same text, still stopped.
    tab.page.reload()
    stored = tab.answers().last
    expect(stored).to_have_attribute("data-status", "stopped")
    assert words_of(text_of(stored)) == shown


def test_a_reload_mid_answer_resumes_it_without_gaps_or_repeats(tab: Tab) -> None:
    expected = scripted_reply(SLOW_TO_RELOAD)
    answer = tab.ask(SLOW_TO_RELOAD)
    message_id = answer.get_attribute("data-message-id")
    expect(answer).to_contain_text("You said:")
    expect(tab.page).to_have_url(re.compile(r"/c/[0-9a-f-]{36}/$"))  # the conversation's page
    assert answer.get_attribute("data-status") == "streaming"
    sent_before = len(tab.sent)

    tab.page.reload()

    resumed = tab.answer(str(message_id))
    expect(resumed).to_have_attribute("data-status", "complete", timeout=TIMEOUT_MS)
    assert text_of(resumed) == expected
    expect(tab.answers()).to_have_count(1)
    expect(tab.user_messages()).to_have_count(1)
    # It was still streaming when the page came back, and the page asked to resume it.
    resumes = [f for f in tab.sent[sent_before:] if f.get("type") == "chat.resume"]
    assert [(f["message_id"], f["last_seq"]) for f in resumes] == [(message_id, 0)]
    assert not tab.sent_of("chat.stop")
    # the wait began on the page before the reload: no browser figure from the reload
    meta = tab.page.locator(f'.message-meta[data-for="{message_id}"]')
    expect(meta).to_have_attribute("data-server-ttft-ms", re.compile(r"\d"))
    assert meta.get_attribute("data-ttft-ms") is None
    assert "first token (server)" in meta.inner_text()


def test_typing_a_follow_up_sends_its_draft_once_before_send(tab: Tab) -> None:
    first = tab.ask("Do you ship to Norway?")
    expect(first).to_have_attribute("data-status", "complete", timeout=TIMEOUT_MS)
    conversation_id = tab.wait_received("chat.accepted")[0]["conversation_id"]
    tab.textbox.press_sequentially("And how long does it take?", delay=20)
    [draft] = tab.wait_sent("chat.draft")
    assert draft["conversation_id"] == conversation_id
    assert draft["text"] == "And how long does it take?"
    tab.textbox.press("Enter")
    answer = tab.next_answer(1)
    expect(answer).to_have_attribute("data-status", "complete", timeout=TIMEOUT_MS)
    assert len(tab.sent_of("chat.draft")) == 1  # one per question, until a paste
    assert tab.received_of("chat.error") == []


def test_a_templated_message_sends_variables_not_its_text(tab: Tab) -> None:
    page = tab.page
    picker = page.get_by_label("Template", exact=True)
    expect(picker.locator("option", has_text="Late order")).to_be_attached()
    picker.select_option(label="Late order")
    page.get_by_label("Order number").fill("A-1234")
    page.get_by_label("What you want").select_option("refund")
    expect(tab.textbox).to_have_value(re.compile(r"^My order A-1234 has not arrived"))
    body = tab.textbox.input_value()
    assert "{{" not in body
    tab.shoot("template-picker")
    # the variables are filled in: the first message is prefilled before Send
    [draft] = tab.wait_sent("chat.draft")
    assert (draft["conversation_id"], draft["text"]) == (None, body)

    tab.textbox.press("Enter")
    answer = tab.next_answer(0)
    expect(answer).to_have_attribute("data-status", "complete", timeout=TIMEOUT_MS)
    assert text_of(answer) == scripted_reply(body)
    (frame,) = tab.wait_sent("chat.send")
    assert draft["template"] == frame["template"]
    assert set(frame["template"]) == {"id", "version", "sha256"}
    assert frame["variables"] == {"order_id": "A-1234", "remedy": "refund"}
    assert "text" not in frame  # the server renders the body itself
    assert "patch" not in frame
    assert re.fullmatch(r"[0-9a-f]{64}", frame["result_sha256"])
    assert not tab.received_of("chat.resend_full")
    # A conversation exists now: templates are for first messages only.
    expect(page.locator("#template-picker")).to_be_hidden()


def test_an_edited_templated_message_sends_a_patch(tab: Tab) -> None:
    page = tab.page
    page.get_by_label("Template", exact=True).select_option(label="Late order")
    page.get_by_label("Order number").fill("B-77")
    page.get_by_label("What you want").select_option("replacement")
    expect(tab.textbox).to_have_value(re.compile(r"^My order B-77 has not arrived"))
    tab.textbox.click()
    page.keyboard.press("Control+End")
    page.keyboard.type(" Thanks a lot.")
    edited = tab.textbox.input_value()
    assert edited.endswith("at home. Thanks a lot.")

    tab.textbox.press("Enter")
    answer = tab.next_answer(0)
    expect(answer).to_have_attribute("data-status", "complete", timeout=TIMEOUT_MS)
    assert text_of(answer) == scripted_reply(edited)
    (frame,) = tab.wait_sent("chat.send")
    assert frame["variables"] == {"order_id": "B-77", "remedy": "replacement"}
    assert "text" not in frame
    assert "Thanks a lot." in frame["patch"]
    assert re.fullmatch(r"[0-9a-f]{64}", frame["result_sha256"])
    assert not tab.received_of("chat.resend_full")  # the server rebuilt the text exactly


# One line: the scripted engine echoes only the first line of a question.
XSS = (
    "<img src=x onerror=\"window.__xss='img';alert('img')\"> "
    "<script>window.__xss='script';alert('script')</script> "
    "<a href=\"javascript:window.__xss='a';alert('a')\">click me</a> "
    "[markdown link](javascript:alert('md')) "
    "<svg onload=\"window.__xss='svg';alert('svg')\"></svg> "
    "<iframe src=\"javascript:alert('iframe')\"></iframe> "
    "<p onmouseover=\"alert('hover')\">hover me</p>"
)

# Everything in the log that could run script: elements that execute or embed, event-handler
# attributes, and URLs with the javascript: scheme (ignoring case, spaces and control chars).
_DANGER_JS = """log => {
  const found = [];
  for (const el of log.querySelectorAll('*')) {
    const tag = el.tagName.toLowerCase();
    if (['script', 'iframe', 'object', 'embed', 'frame', 'base', 'meta', 'link'].includes(tag))
      found.push('<' + tag + '>');
    for (const attr of Array.from(el.attributes)) {
      const name = attr.name.toLowerCase();
      const value = attr.value.replace(/[\\s\\u0000-\\u001f]/g, '').toLowerCase();
      if (name.startsWith('on')) found.push(tag + '[' + name + ']');
      if (value.startsWith('javascript:') || value.startsWith('vbscript:')
          || (value.startsWith('data:') && name !== 'alt' && !value.startsWith('data:image/')))
        found.push(tag + '[' + name + '=' + attr.value + ']');
    }
  }
  return found;
}"""


def assert_inert(tab: Tab) -> None:
    # Give an image's error handler, or anything scheduled, the time to fire.
    tab.page.wait_for_timeout(300)
    assert tab.dialogs == []
    assert tab.page.evaluate("() => window.__xss ?? null") is None
    assert tab.log.evaluate(_DANGER_JS) == []


def test_the_inertness_check_finds_live_markup(browser: Browser) -> None:
    """The check above is not vacuous: it reports handlers, script and javascript: URLs."""
    page = browser.new_page()
    try:
        page.set_content(
            '<div id="log"><img src="x" onerror="1"><script>1</script>'
            '<a href=" JaVa\tscript:alert(1)">x</a><a href="https://example.com/">ok</a></div>'
        )
        found = page.locator("#log").evaluate(_DANGER_JS)
    finally:
        page.close()
    assert found == ["img[onerror]", "<script>", "a[href= JaVa\tscript:alert(1)]"]


def test_model_output_with_html_and_script_stays_inert(tab: Tab) -> None:
    answer = tab.ask(XSS)
    expect(answer).to_have_attribute("data-status", "complete", timeout=TIMEOUT_MS)
    assert text_of(answer).startswith("You said:")
    assert_inert(tab)


def test_markdown_answers_render_formatting_but_no_script(tab: Tab) -> None:
    question = (
        "Here is **bold text** and `inline code` and [our docs](https://example.com/help) "
        "<img src=x onerror=\"window.__xss='img';alert('img')\"> "
        "[bad link](javascript:alert('md')) <script>alert('script')</script>"
    )
    answer = tab.ask(question)
    expect(answer).to_have_attribute("data-status", "complete", timeout=TIMEOUT_MS)
    body = answer.locator(".message-body")
    expect(body).to_have_count(1, timeout=2_000)
    expect(body.locator("strong")).to_have_text("bold text")
    expect(body.locator("code")).to_have_text("inline code")
    expect(body.get_by_role("link", name="our docs")).to_have_attribute(
        "href", "https://example.com/help"
    )
    assert_inert(tab)


def test_the_conversation_list_links_the_new_conversation(tab: Tab) -> None:
    answer = tab.ask("Do you ship to Norway?")
    expect(answer).to_have_attribute("data-status", "complete", timeout=TIMEOUT_MS)
    match = re.search(r"/c/([0-9a-f-]{36})/", tab.page.url)
    assert match is not None, tab.page.url
    nav = tab.page.get_by_role("navigation", name="Conversations")
    expect(nav.locator(f'a[href*="{match.group(1)}"]')).to_have_count(1, timeout=2_000)


def test_regenerate_streams_a_new_answer_into_the_same_message(tab: Tab) -> None:
    question = "Can I change my delivery address?"
    answer = tab.ask(question)
    expect(answer).to_have_attribute("data-status", "complete", timeout=TIMEOUT_MS)
    message_id = answer.get_attribute("data-message-id")

    tab.log.get_by_role("button", name="Regenerate", exact=True).click(timeout=2_000)

    (frame,) = tab.wait_sent("chat.regenerate")
    assert (frame["message_id"], frame["bypass_faq"]) == (message_id, False)
    tab.wait_received("chat.done", 2, message_id=message_id)  # answered twice, same message
    expect(answer).to_have_attribute("data-status", "complete")
    assert text_of(answer) == scripted_reply(question)
    expect(tab.answers()).to_have_count(1)


def test_edit_and_resend_replaces_the_question_and_answers_it_again(tab: Tab) -> None:
    answer = tab.ask("Do you deliver on Sundys?")
    expect(answer).to_have_attribute("data-status", "complete", timeout=TIMEOUT_MS)
    question = tab.user_messages().last
    question_id = question.get_attribute("data-message-id")

    tab.log.get_by_role("button", name="Edit", exact=True).click(timeout=2_000)
    editor = tab.log.get_by_role("textbox", name="Edit question")
    expect(editor).to_have_value("Do you deliver on Sundys?")
    editor.fill("Do you deliver on Sundays?")
    tab.log.get_by_role("button", name="Save", exact=True).click()

    (frame,) = tab.wait_sent("chat.edit")
    assert (frame["message_id"], frame["text"]) == (question_id, "Do you deliver on Sundays?")
    expect(answer).to_have_text(re.compile("Sundays"), timeout=TIMEOUT_MS)
    expect(answer).to_have_attribute("data-status", "complete", timeout=TIMEOUT_MS)
    assert text_of(answer) == scripted_reply("Do you deliver on Sundays?")
    assert text_of(question) == "Do you deliver on Sundays?"
    expect(tab.user_messages()).to_have_count(1)
    expect(tab.answers()).to_have_count(1)
