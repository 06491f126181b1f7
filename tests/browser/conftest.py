"""Session fixtures for real-browser tests: one JupyterLab server, one Chromium, and one
fake Messages API the server's kernels talk to."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect, sync_playwright

from phoenix_nb.testing import FakeAnthropic
from tests.browser.lab import (
    UI_TIMEOUT_MS,
    LabPage,
    LabServer,
    launch_browser,
    require_chromium,
    running_lab,
)

E2E_MODEL = "claude-sonnet-5-5"

# Every expectation waits for the page's event with a bound only a real hang reaches:
# Playwright's default of 5 s is a guess about the scheduler, and on a busy machine a
# kernel or a panel can take longer to settle (ci-under-load at load 4: the panel asking a
# kernel again after its idle stayed "Connecting…" past 5 s). A wait that passes ends at
# once; only a failing one is slower. Waits that expect to time out set their own bound.
expect.set_options(timeout=UI_TIMEOUT_MS)


@pytest.fixture(scope="session")
def fake_llm() -> Iterator[FakeAnthropic]:
    """The fake Messages API for the session's kernels; each test scripts it after `clear()`.

    Session-scoped because the JupyterLab server is: kernels inherit the server's
    environment, so the URL must be known before the server starts.
    """
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture(scope="session")
def lab_server(
    tmp_path_factory: pytest.TempPathFactory, fake_llm: FakeAnthropic
) -> Iterator[LabServer]:
    require_chromium()  # no point starting a server the browser cannot reach
    tmp: Path = tmp_path_factory.mktemp("lab")
    kernel_env = {
        "ANTHROPIC_BASE_URL": fake_llm.base_url,
        "ANTHROPIC_API_KEY": "test-key",
        "PHOENIX_HOME": str(tmp / "phoenix-home"),
        "PHOENIX_MODEL": E2E_MODEL,
    }
    with running_lab(tmp, kernel_env) as server:
        yield server


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    """Package-scoped on purpose: Playwright's sync API keeps an asyncio loop
    running in the main thread while it is open, which breaks every async test
    collected after the browser tests if it stays open for the whole session."""
    require_chromium()
    with sync_playwright() as playwright:
        browser = launch_browser(playwright)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def lab(browser: Browser, lab_server: LabServer) -> Iterator[LabPage]:
    """A fresh browser context (no shared storage) on the session's JupyterLab."""
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    try:
        yield LabPage(page, lab_server)
    finally:
        context.close()
