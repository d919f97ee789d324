"""The README's screenshot: real answers from the default model, as a newcomer sees them.

    .venv/bin/python -m tests.e2e.answer_screenshot [PNG]   # default docs/screenshots/answer.png

Runs `make run`'s steps on a throwaway data dir (migrate, demo user, the seeded examples,
serve with vLLM and the prepared SmolLM2, the FAQ cache on, its verifier not trained), logs in
in Debian's Chromium, clicks two of the suggested first questions (an FAQ example, answered
from the cache, then one for the model), waits for both answers to end and saves the page.
Needs `make prepare-model` and /usr/bin/chromium. The browser tests' views (`make
screenshots`) use the scripted engine.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from tests.e2e.support import (
    CHROMIUM,
    PASSWORD,
    REPO,
    VIEWPORT,
    App,
    Tab,
    login,
    manage_steps,
    real_model_env,
)
from tests.integration.processes import app_served

ANSWER_TIMEOUT_MS = 120_000  # a real model on a busy 2-core machine


def main(argv: list[str]) -> int:
    from playwright.sync_api import expect, sync_playwright

    target = Path(argv[0]).resolve() if argv else REPO / "docs" / "screenshots" / "answer.png"
    with tempfile.TemporaryDirectory(prefix="answer-shot-") as tmp:
        # the FAQ example is an exact repeat: no verifier needed (and none trained here)
        env = real_model_env(Path(tmp))
        manage_steps(env, ["migrate", "--noinput"], ["demo_user"], ["seed_examples"])
        with app_served(env=env, ready_timeout=300) as served, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
            page = browser.new_context(viewport=VIEWPORT).new_page()
            tab = Tab(page)
            tab.record()
            login(tab, App(base_url=served.base_url, password=PASSWORD, output=served.output))
            questions = page.locator("#first-questions button[data-question]")
            expect(questions.first).to_be_visible()
            for index in (1, 2):  # "Where is my order?" (FAQ), then one for the model
                before = tab.answers().count()
                page.locator("#first-questions").evaluate("el => { el.hidden = false; }")
                questions.nth(index).click()
                answer = tab.next_answer(before)
                expect(answer).to_have_attribute(
                    "data-status", "complete", timeout=ANSWER_TIMEOUT_MS
                )
            page.screenshot(path=str(target))
            browser.close()
    print(f"{target}: {target.stat().st_size // 1024} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
