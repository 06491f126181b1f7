"""Session fixtures for real-browser tests: one JupyterLab server and one Chromium."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, sync_playwright

from tests.browser.lab import LabPage, LabServer, launch_browser, require_chromium, running_lab


@pytest.fixture(scope="session")
def lab_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    require_chromium()  # no point starting a server the browser cannot reach
    tmp: Path = tmp_path_factory.mktemp("lab")
    with running_lab(tmp) as server:
        yield server


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
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
