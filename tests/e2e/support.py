"""Helpers for the browser tests: the app process, the page's user-visible contract.

Selectors follow what a user (or a screen reader) sees, so the tests survive UI refactors:
the textbox "Message", the buttons "Send" / "Stop", the `role="log"` region, and the data
attributes of the page contract (frontend/README.md): `data-role`, `data-message-id`,
`data-status`, `data-source`, `data-ttft-ms`. An answer's text is read from its
`.message-body` when the page renders one (markdown), else from the message element itself.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.e2e.seed import ADMIN_PASSWORD, ADMIN_USERNAME
from tests.integration.processes import app_served, local_env, prepared_verifier_env

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page, ViewportSize

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path(os.environ.get("E2E_CHROMIUM", "/usr/bin/chromium"))
PASSWORD = "e2e-demo-pw-123"
# Where tests/e2e/screenshots.py (or E2E_SCREENSHOTS=DIR pytest tests/e2e) saves the views.
SCREENSHOTS = os.environ.get("E2E_SCREENSHOTS", "")
VIEWPORT: ViewportSize = {"width": 1200, "height": 800}
_NON_EMPTY = re.compile(r".+")
_LOGIN_URL = re.compile(r"/accounts/login/")
# Generous for a 2-core machine running daphne, the worker and Chromium together.
TIMEOUT_MS = 15_000
# An admin's first FAQ save in a fresh web process embeds with a model that process loads then,
# while the embedded worker loads its own and the verifier: once over 10 s on a busy CI run.
SAVE_TIMEOUT_MS = 45_000

needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason=f"no Chromium at {CHROMIUM}: run .ci/install-browser (Debian's chromium package) "
    "or set E2E_CHROMIUM; Playwright never downloads its own browsers here",
)


@dataclass(frozen=True)
class AppOptions:
    """How a test module wants the app process: FAQ cache on/off, data seeded before start."""

    faq: bool = False
    seeds: Sequence[str] = ()  # names in tests.e2e.seed.SEEDS
    env: dict[str, str] = field(default_factory=dict)
    ready_timeout_s: float = 90  # a real model loads for tens of seconds on a busy CPU


@dataclass(frozen=True)
class App:
    base_url: str
    password: str
    output: list[str]  # the process's output so far (for failure messages)


def app_start(data_dir: Path, options: AppOptions) -> Generator[App]:
    """`manage.py serve` in the embedded default: SQLite in `data_dir`, worker inside."""
    env = local_env(
        data_dir,
        {
            "INFERENCE_ENGINE": "scripted",
            "INFERENCE_FAQ": "1" if options.faq else "0",
            "CHAT_FAQ_ENABLED": "1" if options.faq else "0",
            **(prepared_verifier_env() if options.faq else {}),  # its data dir is a fresh one
            "DEMO_PASSWORD": PASSWORD,
            # publishing a template in the seed step warms it; no worker runs there yet
            "CHAT_WARMUP_TIMEOUT_S": "0.2",
            **options.env,
        },
    )
    seed = [sys.executable, "-m", "tests.e2e.seed", *options.seeds]  # migrate, demo user, data
    result = subprocess.run(seed, env=env, cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, f"seeding failed:\n{result.stdout}\n{result.stderr}"
    # SIGKILL at the end: a graceful stop takes seconds (up to 9 s seen on a loaded machine),
    # and the data dir is thrown away anyway.
    with app_served(env=env, kill=True, ready_timeout=options.ready_timeout_s) as served:
        yield App(base_url=served.base_url, password=PASSWORD, output=served.output)


def real_model_env(data_dir: Path) -> dict[str, str]:
    """`make run`'s environment on a throwaway data dir with the prepared default model (for
    the README's screenshots): the FAQ verifier is not trained there."""
    from inference.models.paths import default_data_dir, smollm2_model_dir

    return local_env(
        data_dir,
        {
            "MODEL": str(smollm2_model_dir(data_dir=default_data_dir())),
            "INFERENCE_FAQ_VERIFIER_TRAIN": "0",
            "DEMO_PASSWORD": PASSWORD,
        },
    )


def manage_steps(env: dict[str, str], *commands: list[str]) -> None:
    """`manage.py` commands, one after the other, as `make run` runs them before serving."""
    for command in commands:
        subprocess.run(
            [sys.executable, str(REPO / "manage.py"), *command], env=env, cwd=REPO, check=True
        )


# ---- the page ----------------------------------------------------------------------------


@dataclass
class Tab:
    """One logged-in browser tab, with what it saw: dialogs, script errors, socket frames."""

    page: Page
    dialogs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)
    received: list[dict[str, Any]] = field(default_factory=list)

    # -- recorders (registered before the first navigation) --

    def record(self) -> None:
        def on_dialog(dialog: Any) -> None:
            self.dialogs.append(f"{dialog.type}: {dialog.message}")
            dialog.dismiss()

        def on_websocket(ws: Any) -> None:
            ws.on("framesent", lambda payload: self.sent.append(_frame(payload)))
            ws.on("framereceived", lambda payload: self.received.append(_frame(payload)))

        self.page.on("dialog", on_dialog)
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        self.page.on("websocket", on_websocket)

    def sent_of(self, kind: str) -> list[dict[str, Any]]:
        return [f for f in self.sent if f.get("type") == kind]

    def received_of(self, kind: str) -> list[dict[str, Any]]:
        return [f for f in self.received if f.get("type") == kind]

    def wait_sent(self, kind: str, count: int = 1) -> list[dict[str, Any]]:
        """The page's `kind` frames once there are `count` (socket events arrive async)."""
        return self._wait_frames(lambda: self.sent_of(kind), f"{count} sent {kind}", count)

    def wait_received(
        self, kind: str, count: int = 1, message_id: str | None = None
    ) -> list[dict[str, Any]]:
        def frames() -> list[dict[str, Any]]:
            found = self.received_of(kind)
            return [f for f in found if message_id is None or f.get("message_id") == message_id]

        return self._wait_frames(frames, f"{count} received {kind}", count)

    def _wait_frames(
        self, frames: Callable[[], list[dict[str, Any]]], what: str, count: int
    ) -> list[dict[str, Any]]:
        # Poll with Playwright's own wait: the sync API delivers events only inside its calls.
        for _ in range(TIMEOUT_MS // 50):
            found = frames()
            if len(found) >= count:
                return found
            self.page.wait_for_timeout(50)
        raise AssertionError(f"timed out waiting for {what}; have {frames()}")

    # -- the page contract --

    @property
    def log(self) -> Locator:
        return self.page.get_by_role("log")

    @property
    def textbox(self) -> Locator:
        return self.page.get_by_role("textbox", name="Message")

    @property
    def send_button(self) -> Locator:
        return self.page.get_by_role("button", name="Send", exact=True)

    @property
    def stop_button(self) -> Locator:
        return self.page.get_by_role("button", name="Stop", exact=True)

    def answers(self) -> Locator:
        return self.log.locator('[data-role="assistant"]')

    def user_messages(self) -> Locator:
        return self.log.locator('[data-role="user"]')

    def answer(self, message_id: str) -> Locator:
        return self.log.locator(f'[data-role="assistant"][data-message-id="{message_id}"]')

    def wait_connected(self) -> None:
        from playwright.sync_api import expect

        expect(self.page.locator("#connection-status")).to_have_attribute(
            "data-state", "connected", timeout=TIMEOUT_MS
        )

    def open(self, url: str) -> None:
        """Open a chat page and wait until its socket is connected."""
        from playwright.sync_api import expect

        self.page.goto(url)
        expect(self.textbox).to_be_editable()
        self.wait_connected()

    def ask(self, text: str) -> Locator:
        """Type a question, press Enter; the new answer's element once the server accepted."""
        before = self.answers().count()
        self.textbox.fill(text)
        self.textbox.press("Enter")
        return self.next_answer(before)

    def next_answer(self, before: int) -> Locator:
        from playwright.sync_api import expect

        expect(self.answers()).to_have_count(before + 1, timeout=TIMEOUT_MS)
        answer = self.answers().nth(before)
        expect(answer).to_have_attribute("data-message-id", _NON_EMPTY, timeout=TIMEOUT_MS)
        message_id = answer.get_attribute("data-message-id")
        assert message_id
        return self.answer(message_id)  # stable even if more messages are added later

    def shoot(self, name: str) -> None:
        """Save a screenshot of the page for docs/screenshots (only when asked to)."""
        if SCREENSHOTS:
            Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
            self.page.screenshot(path=str(Path(SCREENSHOTS) / f"{name}.png"))


def text_of(message: Locator) -> str:
    """The message's visible content, whitespace collapsed (markdown may add line breaks)."""
    raw = message.evaluate(
        "el => (el.querySelector('.message-body') ?? el).textContent ?? ''",
    )
    return " ".join(str(raw).split())


def words_of(text: str) -> list[str]:
    return text.split()


def scripted_reply(question: str) -> str:
    """What INFERENCE_ENGINE=scripted answers (inference/engines/scripted.py)."""
    return f"You said: {question.strip()}"


def _frame(payload: str | bytes) -> dict[str, Any]:
    try:
        value = json.loads(payload)
    except ValueError:
        return {"type": "<not json>", "raw": str(payload)[:200]}
    return value if isinstance(value, dict) else {"type": "<not an object>", "raw": value}


def faq_entries_add(browser: Browser, app: App, entries: Sequence[tuple[str, str, str]]) -> None:
    """An admin adds FAQ entries (question, alternates, answer) in Django admin, as in
    production; each then shows in the list, embedded."""
    from playwright.sync_api import expect

    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    try:
        page.goto(f"{app.base_url}/admin/login/?next=/admin/faq/faqentry/")
        page.get_by_label("Username").fill(ADMIN_USERNAME)
        page.get_by_label("Password").fill(ADMIN_PASSWORD)
        page.get_by_role("button", name="Log in").click()
        for question, alternates, answer in entries:
            page.goto(f"{app.base_url}/admin/faq/faqentry/add/")
            page.get_by_label("Question").fill(question)
            page.get_by_label("Alternates").fill(alternates)
            page.get_by_label("Answer").fill(answer)
            page.get_by_role("button", name="Save", exact=True).click()
            row = page.get_by_role("row").filter(has_text=question)
            # the first save loads the web process's embedding model
            expect(row).to_have_count(1, timeout=SAVE_TIMEOUT_MS)
            expect(row.locator(".field-embedded img")).to_have_attribute(
                "alt", "True", timeout=SAVE_TIMEOUT_MS
            )
    finally:
        context.close()


def login(tab: Tab, app: App, *, shoot: bool = False) -> None:
    """Log in as the demo user through the login form; land on an empty, connected chat."""
    from playwright.sync_api import expect

    page = tab.page
    page.goto(f"{app.base_url}/")  # not logged in: redirected to the login form
    expect(page).to_have_url(_LOGIN_URL)
    page.get_by_label("Username").fill("demo")
    page.get_by_label("Password").fill(app.password)
    if shoot:
        tab.shoot("login")
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{app.base_url}/")
    expect(tab.textbox).to_be_editable()
    tab.wait_connected()


def console_open(browser: Browser, app: App) -> tuple[Page, list[str]]:
    """The admin (a superuser: an agent; the "admin" seed) logs in and opens the agent
    console in a browser context of its own; its page errors are collected."""
    from playwright.sync_api import expect

    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{app.base_url}/accounts/login/?next=/agent/")
    page.get_by_label("Username").fill(ADMIN_USERNAME)
    page.get_by_label("Password").fill(ADMIN_PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("#connection-status")).to_have_attribute("data-state", "connected")
    return page, errors
