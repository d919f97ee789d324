"""The README's widget screenshot: the demo website with the widget open, answered by the
default model, as a visitor sees it.

    .venv/bin/python -m tests.e2e.widget_screenshot [PNG]   # default docs/screenshots/widget.png

Runs `make run`'s steps on a throwaway data dir (migrate, demo user, the seeded examples and
their example website for this server's address, serve with vLLM and the prepared SmolLM2),
opens the demo page (`/widget/demo/`) in Debian's Chromium, opens the widget, asks one
question, waits for the answer to end and saves the page. Needs `make prepare-model` and
/usr/bin/chromium.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from tests.e2e.support import CHROMIUM, REPO, VIEWPORT, manage_steps, real_model_env
from tests.integration.processes import app_served
from tests.support.net import free_port

ANSWER_TIMEOUT_MS = 120_000  # a real model on a busy 2-core machine
QUESTION = "Can I change the delivery address of an order I already placed?"


def main(argv: list[str]) -> int:
    from playwright.sync_api import expect, sync_playwright

    target = Path(argv[0]).resolve() if argv else REPO / "docs" / "screenshots" / "widget.png"
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="widget-shot-") as tmp:
        env = real_model_env(Path(tmp))
        seed = ["seed_examples", "--site-origin", f"http://127.0.0.1:{port}"]
        manage_steps(env, ["migrate", "--noinput"], ["demo_user"], seed)
        with (
            app_served(env=env, ready_timeout=300, port=port) as served,
            sync_playwright() as playwright,
        ):
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
            page = browser.new_context(viewport=VIEWPORT).new_page()
            page.goto(f"{served.base_url}/widget/demo/")
            launcher = page.get_by_role("button", name="Chat with us")
            launcher.hover()
            launcher.click()
            panel = page.frame_locator('iframe[title="Chat with us"]')
            box = panel.get_by_role("textbox", name="Message")
            expect(box).to_be_focused(timeout=30_000)
            box.fill(QUESTION)
            box.press("Enter")
            answer = panel.locator('[data-role="assistant"]').last
            expect(answer).to_have_attribute("data-status", "complete", timeout=ANSWER_TIMEOUT_MS)
            page.screenshot(path=str(target))
            browser.close()
    print(f"{target}: {target.stat().st_size // 1024} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
