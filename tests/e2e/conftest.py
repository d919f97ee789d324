"""Fixtures for the browser tests: one app process and one Chromium per module.

A module says how it wants the app with `APP = AppOptions(...)` (FAQ cache, seeded data).
Chromium is Debian's (/usr/bin/chromium, installed by .ci/install-browser), launched through
Playwright's `executable_path`: Playwright never downloads a browser here.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING

import pytest

from tests.e2e.support import CHROMIUM, VIEWPORT, App, AppOptions, Tab, app_start, login

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "e2e: drives the real app process with Chromium (needs /usr/bin/chromium)"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failing browser test shows the app process's last output lines."""
    report = yield
    app = getattr(item, "funcargs", {}).get("app")
    if report.failed and isinstance(app, App):
        report.sections.append(("app process output (last 60 lines)", "".join(app.output[-60:])))
    return report


@pytest.fixture(scope="module")
def app(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    options: AppOptions = getattr(request.module, "APP", AppOptions())
    yield from app_start(tmp_path_factory.mktemp("e2e-data"), options)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Chromium for one module. Not for the session: while Playwright's sync API is started,
    its event loop counts as running in this thread, and pytest-asyncio's tests that run
    after (other folders) would fail with "cannot be called from a running event loop"."""
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=10_000)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="module")
def signed_in(browser: Browser, app: App) -> Iterator[BrowserContext]:
    """A browser context where the demo user logged in through the login form (once a module)."""
    context = browser.new_context(viewport=VIEWPORT)
    try:
        tab = Tab(page=context.new_page())
        tab.record()
        login(tab, app, shoot=True)  # the login view, when screenshots are asked for
        assert tab.errors == [], f"script errors on the page: {tab.errors}"
        tab.page.close()
        yield context
    finally:
        context.close()


@pytest.fixture
def tab(signed_in: BrowserContext, app: App) -> Iterator[Tab]:
    """A new tab of the logged-in demo user, on a new chat, connected.

    Fails the test if the page opened a dialog (alert/confirm/prompt) or threw a script error.
    """
    tab = Tab(page=signed_in.new_page())
    tab.record()
    try:
        tab.open(f"{app.base_url}/")
        yield tab
        assert tab.dialogs == [], f"the page opened dialogs: {tab.dialogs}"
        assert tab.errors == [], f"script errors on the page: {tab.errors}"
    finally:
        tab.page.close()
