"""Driving a real JupyterLab in real Chromium: the server, the page, and the
gestures a user makes (open a notebook, run a cell, click a button, switch theme).

Kept apart from the tests so the end-to-end `%%phoenix` test can reuse every
piece: start the server once per session, open a notebook, run its cell, click
Approve, wait for text, save, restart, reload.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import pytest
from playwright.sync_api import Browser, Page, expect

CONVERSATION_MIME = "application/vnd.phoenix.conversation+json"
REPO_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO_ROOT / "test-artifacts"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
]
SERVER_START_TIMEOUT = 90.0
UI_TIMEOUT_MS = 60_000


def chromium_path() -> str | None:
    """Debian's Chromium, or one named by PHOENIX_CHROMIUM; playwright cannot download here."""
    candidate = os.environ.get("PHOENIX_CHROMIUM", "/usr/bin/chromium")
    if Path(candidate).exists():
        return candidate
    return shutil.which("chromium")


def require_chromium() -> str:
    """Chromium's path; without it skip locally but fail under CI, where a skip would hide a gap."""
    path = chromium_path()
    if path is None:
        message = "Chromium not found (install Debian's chromium package)"
        if os.environ.get("CI"):
            pytest.fail(f"{message}; CI is set, so browser tests must run", pytrace=False)
        pytest.skip(message)
    return path


def require_notebook7() -> None:
    """Notebook 7 must be installed for its UI test; like Chromium, a skip is an error under CI."""
    try:
        import notebook  # noqa: F401
    except ImportError:
        message = "the notebook package (Notebook 7) is not installed"
        if os.environ.get("CI"):
            pytest.fail(f"{message}; CI is set, so the Notebook 7 test must run", pytrace=False)
        pytest.skip(message)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LabServer:
    """A running `jupyter lab` on 127.0.0.1 serving `root`."""

    url: str
    root: Path
    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status) == 200
    except (urllib.error.URLError, OSError):
        return False


@contextmanager
def running_lab(tmp: Path, extra_env: Mapping[str, str] | None = None) -> Iterator[LabServer]:
    """Starts JupyterLab with private settings and workspaces, waits until it answers, stops it.

    `extra_env` reaches every kernel the server starts (kernels inherit the server's
    environment): that is how a `%%phoenix` cell finds the fake Messages API.
    """
    root = tmp / "root"
    root.mkdir()
    port = free_port()
    env = dict(os.environ)
    env.update(extra_env or {})
    # Private settings/workspaces: a theme switch or restored tab cannot leak between runs.
    env["JUPYTERLAB_SETTINGS_DIR"] = str(tmp / "settings")
    env["JUPYTERLAB_WORKSPACES_DIR"] = str(tmp / "workspaces")
    env["JUPYTER_RUNTIME_DIR"] = str(tmp / "runtime")
    # No "get notified about Jupyter news?" toast over the page and its screenshots.
    notification = tmp / "settings" / "@jupyterlab" / "apputils-extension"
    notification.mkdir(parents=True)
    (notification / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    log_path = tmp / "jupyter-lab.log"
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--allow-root",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--ServerApp.port_retries=0",
        "--ServerApp.open_browser=False",
        "--IdentityProvider.token=",
        "--ServerApp.password=",
        f"--ServerApp.root_dir={root}",
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    server = LabServer(f"http://127.0.0.1:{port}", root, process, log_path)
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while not _answers(f"{server.url}/api/status"):
            if process.poll() is not None:
                raise RuntimeError(f"jupyter lab exited early:\n{server.log()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"jupyter lab did not answer in time:\n{server.log()}")
            time.sleep(0.2)  # polling a real condition (the HTTP answer), bounded by deadline
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


def write_notebook(
    root: Path,
    name: str,
    cells: list[tuple[str, list[Mapping[str, Any]]]],
) -> Path:
    """A notebook of code cells, each with the given saved outputs; left unsigned (untrusted)."""
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    for source, outputs in cells:
        cell = nbformat.v4.new_code_cell(source)
        cell.outputs = [nbformat.from_dict(dict(output)) for output in outputs]
        notebook.cells.append(cell)
    nbformat.validate(notebook)
    path = root / name
    path.write_text(nbformat.writes(notebook), encoding="utf-8")
    return path


def record_output(record: Any, html_fallback: str, text_fallback: str) -> dict[str, Any]:
    """A saved display_data output: the record plus its fallbacks, as the kernel side emits it."""
    return {
        "output_type": "display_data",
        "data": {
            CONVERSATION_MIME: record,
            "text/html": html_fallback,
            "text/plain": text_fallback,
        },
        "metadata": {},
    }


def load_fixture(name: str) -> dict[str, Any]:
    path = Path(__file__).parent / "fixtures" / name
    return json.loads(path.read_text(encoding="utf-8"))


class LabPage:
    """A JupyterLab tab and the gestures tests make in it."""

    def __init__(self, page: Page, server: LabServer) -> None:
        self.page = page
        self.server = server

    def open_notebook(self, name: str, workspace: str = "phoenix-test") -> None:
        """Opens `name` in a fresh workspace (`?reset`) so no earlier tab is restored."""
        self.page.goto(f"{self.server.url}/lab/workspaces/{workspace}/tree/{name}?reset")
        self.page.locator(".jp-NotebookPanel .jp-Notebook").first.wait_for(timeout=UI_TIMEOUT_MS)

    def open_in_notebook7(self, name: str) -> None:
        """Opens `name` in the Notebook 7 UI served by the same server (needs `notebook>=7`)."""
        self.page.goto(f"{self.server.url}/notebooks/{name}")
        self.page.locator(".jp-NotebookPanel .jp-Notebook").first.wait_for(timeout=UI_TIMEOUT_MS)

    def answer_kernel_dialog(self) -> None:
        """On a loaded machine Notebook 7 may open its "Select Kernel" dialog before the
        notebook's kernel starts: accept its (the notebook's own) choice. Any other dialog is
        not a test's to answer: fail saying what it says."""
        dialog = self.page.locator(".jp-Dialog")
        if dialog.count() == 0 or not dialog.first.is_visible():
            return
        said = dialog.first.inner_text()
        assert "Select Kernel" in said or "select a kernel" in said.lower(), f"a dialog: {said!r}"
        dialog.first.locator(".jp-Dialog-button.jp-mod-accept").click()
        expect(dialog).to_have_count(0, timeout=UI_TIMEOUT_MS)

    def wait_for_text(self, text: str, timeout_ms: int = UI_TIMEOUT_MS) -> None:
        """Waits until `text` is visible in the notebook area."""
        expect(self.page.locator(".jp-NotebookPanel").get_by_text(text).first).to_be_visible(
            timeout=timeout_ms
        )

    def click_button(self, text: str, timeout_ms: int = UI_TIMEOUT_MS) -> None:
        """Clicks the visible button whose label is `text` (e.g. an ipywidgets Approve)."""
        button = self.page.get_by_role("button", name=text, exact=True).first
        button.wait_for(state="visible", timeout=timeout_ms)
        button.click()

    def wait_for_kernel_idle(self, timeout_ms: int = UI_TIMEOUT_MS) -> None:
        """Waits until a kernel is connected and idle (status bar "… | Idle").

        A cell run before the kernel connects is silently dropped by JupyterLab,
        so every run must wait for this first; the toolbar indicator alone reads
        "idle" before any kernel exists.
        """
        expect(
            self.page.locator(".jp-StatusBar-Widget").get_by_text(re.compile(r"\| Idle$"))
        ).to_be_visible(timeout=timeout_ms)

    def run_cell(self, index: int) -> None:
        """Runs cell `index` with Shift+Enter, as a user would, once the kernel is ready."""
        self.wait_for_kernel_idle()
        cell = self.page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").nth(index)
        cell.locator(".jp-InputArea-editor").click()
        self.page.keyboard.press("Shift+Enter")

    def run_command(self, command: str) -> None:
        """Runs a JupyterLab command through the command palette's search box."""
        self.page.keyboard.press("Control+Shift+C")
        palette = self.page.locator(".lm-CommandPalette-input")
        palette.wait_for(timeout=UI_TIMEOUT_MS)
        palette.fill(command)
        self.page.keyboard.press("Enter")

    def save(self) -> None:
        self.page.keyboard.press("Control+s")
        self.page.wait_for_function(
            "() => !document.querySelector('.jp-NotebookPanel.jp-mod-dirty, .jp-mod-dirty')",
            timeout=UI_TIMEOUT_MS,
        )

    def menu(self, *path: str) -> None:
        """Clicks through the main menu, e.g. menu("Kernel", "Restart Kernel…")."""
        top, *rest = path
        self.page.locator(
            ".lm-MenuBar-itemLabel", has_text=re.compile(f"^{re.escape(top)}$")
        ).click()
        for i, label in enumerate(rest):
            item = self.page.locator(
                ".lm-Menu:visible .lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(label)}$")
            ).first
            if i < len(rest) - 1:
                item.hover()
            else:
                item.click()

    def restart_kernel(self) -> None:
        """Restarts the kernel through the Kernel menu and its confirmation dialog."""
        self.wait_for_kernel_idle()
        self.menu("Kernel", "Restart Kernel…")
        self.page.locator(".jp-Dialog .jp-Dialog-button.jp-mod-accept").click()
        self.page.locator(".jp-Dialog").wait_for(state="detached", timeout=UI_TIMEOUT_MS)
        self.wait_for_kernel_idle()

    def reload(self) -> None:
        self.page.reload()
        self.page.locator(".jp-NotebookPanel .jp-Notebook").first.wait_for(timeout=UI_TIMEOUT_MS)

    def set_theme(self, dark: bool) -> None:
        """Switches theme through the Settings menu; waits until the body says it applied."""
        wanted = "JupyterLab Dark" if dark else "JupyterLab Light"
        self.menu("Settings", "Theme", wanted)
        self.page.wait_for_function(
            "(name) => document.body.dataset.jpThemeName === name",
            arg=wanted,
            timeout=UI_TIMEOUT_MS,
        )
        # JupyterLab covers the page with a splash while a theme loads.
        self.page.locator("#jupyterlab-splash").wait_for(state="detached", timeout=UI_TIMEOUT_MS)

    def screenshot(self, name: str, selector: str | None = None) -> Path:
        """A PNG in test-artifacts/: the page, or just the element `selector` names."""
        ARTIFACTS.mkdir(exist_ok=True)
        path = ARTIFACTS / name
        if selector is None:
            self.page.screenshot(path=str(path))
        else:
            self.page.locator(selector).first.screenshot(path=str(path))
        return path


def launch_browser(playwright: Any) -> Browser:
    return playwright.chromium.launch(executable_path=require_chromium(), args=CHROMIUM_ARGS)
