"""`%phoenix chat` in real JupyterLab and Notebook 7 (Chromium): Deny, Approve, Revert and
Cancel from the panel, each followed until the conversation rests; then save, reload and
restart the kernel: the chat cell still shows the conversation and its controls say what to
run; nbconvert's HTML of the saved notebook shows the transcript and no widget repr.

The transcript is an ordinary output (the record bundle) the kernel keeps updating by display
id; the controls are widgets displayed with a hint (labextension/src/controls.ts).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from playwright.sync_api import Locator, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.browser.lab import LabPage, require_notebook7, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

WAIT_MS = 60_000
BUGGY = "def add(a, b):\n    return a - b\n"


def _patch(path: str) -> dict[str, object]:
    return {
        "path": path,
        "patches": [{"operation": "replace", "oldText": "a - b", "newText": "a + b"}],
    }


def _script(fake: FakeAnthropic, path: str) -> None:
    """Deny, then Approve and a patch, then a long answer to cancel."""
    ask = "request_mode_upgrade"
    fake.script(
        Turn([text("May I write?"), tool_use(ask, {"reason": f"I need to edit `{path}`"})]),
        Turn([text("Understood, staying read-only.")]),
        Turn([text("Now I must write."), tool_use(ask, {"reason": f"fix `{path}`"})]),
        Turn([tool_use("patch", _patch(path))]),
        Turn([text("Fixed add() for you.")]),
        Turn([text("A very long story that streams slowly. " * 400, chunk=10, delay=0.05)]),
    )


class ChatPage:
    """The chat cell of a notebook page (JupyterLab or Notebook 7)."""

    def __init__(self, lab: LabPage, cell: int) -> None:
        self.lab = lab
        self.cell = lab.page.locator(".jp-NotebookPanel .jp-Cell").nth(cell)
        self.panel = self.cell.locator(".jp-Phoenix-chat")
        self.record = self.cell.locator(".jp-PhoenixConversation [data-phoenix-record]")

    def footer(self) -> Locator:
        return self.panel.locator(".jp-Phoenix-chatStatus [data-phoenix-state]")

    def button(self, name: str) -> Locator:
        return self.panel.get_by_role("button", name=name, exact=True)

    def send(self, message: str) -> None:
        expect(self.button("Send")).to_be_enabled(timeout=WAIT_MS)
        self.panel.locator("textarea").fill(message)
        self.button("Send").click()

    def wait_rest(self, showing: str) -> None:
        """Transcript, footer and Send all say the conversation rests."""
        expect(self.record.locator("[data-phoenix-ai=assistant]").last).to_contain_text(
            showing, timeout=WAIT_MS
        )
        expect(self.record).to_have_attribute("data-phoenix-state", "idle", timeout=WAIT_MS)
        expect(self.footer()).to_have_attribute("data-phoenix-state", "idle", timeout=WAIT_MS)
        expect(self.footer()).to_contain_text("idle")
        expect(self.button("Send")).to_be_enabled(timeout=WAIT_MS)
        for name in ("Approve", "Deny", "Cancel"):
            expect(self.button(name)).to_be_hidden()

    def answer(self, name: str) -> None:
        expect(self.footer()).to_have_attribute(
            "data-phoenix-state", "awaiting_mode_approval", timeout=WAIT_MS
        )
        expect(self.button("Send")).to_be_disabled()
        self.button(name).click()


def _controls(chat: ChatPage, state: str) -> Locator:
    return chat.cell.locator(f".jp-Phoenix-controlOutput[data-phoenix-control={state}]")


def _run_flows(lab: LabPage, chat: ChatPage, target: Path) -> None:
    # While the kernel can act the control is the widget; its hint is not shown.
    expect(_controls(chat, "live")).to_have_count(1, timeout=WAIT_MS)
    expect(chat.cell.locator(".jp-Phoenix-controlHint").filter(visible=True)).to_have_count(0)
    chat.send("please fix add")
    chat.answer("Deny")
    chat.wait_rest("Understood, staying read-only.")
    assert target.read_text() == BUGGY
    expect(chat.button("Restrict")).to_be_hidden()  # Restricted already: nothing to restrict

    chat.send("please, you may write now")
    chat.answer("Approve")
    chat.wait_rest("Fixed add() for you.")
    assert target.read_text() == BUGGY.replace("a - b", "a + b")
    expect(chat.footer()).to_contain_text("unrestricted")
    expect(chat.button("Restrict")).to_be_visible()

    # The button's name carries its icon's glyph: found by its text's end.
    chat.panel.locator("button:visible", has_text=re.compile(r"Revert$")).click()
    expect(chat.panel.locator("[data-phoenix-revert=done]")).to_be_visible(timeout=WAIT_MS)
    assert target.read_text() == BUGGY

    chat.send("tell me a long story")
    expect(chat.button("Cancel")).to_be_visible(timeout=WAIT_MS)
    expect(chat.record.locator("[data-phoenix-ai=assistant]").last).to_contain_text(
        "A very long story", timeout=WAIT_MS
    )
    chat.button("Cancel").click()
    expect(chat.footer()).to_have_attribute("data-phoenix-state", "idle", timeout=WAIT_MS)
    expect(chat.button("Send")).to_be_enabled(timeout=WAIT_MS)
    expect(chat.record).to_have_attribute("data-phoenix-state", "idle", timeout=WAIT_MS)


def _run_in_notebook7(lab: LabPage, index: int) -> None:
    """Shift+Enter on cell `index` until it runs: Notebook 7 has no status bar to say the kernel
    is connected, and a cell run before it is silently dropped (running %load_ext or the chat
    again is harmless)."""
    cell = lab.page.locator(".jp-NotebookPanel .jp-Cell").nth(index)
    prompt = cell.locator(".jp-InputPrompt")
    for _attempt in range(6):
        lab.answer_kernel_dialog()
        try:  # the dialog can open between the check and the click: answer it next time
            cell.locator(".jp-InputArea-editor").click(timeout=10_000)
        except PlaywrightTimeout:
            continue
        lab.page.keyboard.press("Shift+Enter")
        try:
            expect(prompt).not_to_have_text(re.compile(r"^\[ \]:$"), timeout=10_000)
        except AssertionError:
            continue
        expect(prompt).to_have_text(re.compile(r"^\[\d+\]:$"), timeout=WAIT_MS)
        return
    raise AssertionError(f"cell {index} never ran in Notebook 7")


def _focus_notebook(lab: LabPage) -> None:
    """The keyboard back to the notebook: a text widget keeps shortcuts (Ctrl+S) to itself."""
    lab.page.locator(".jp-NotebookPanel .jp-Cell").nth(0).locator(".jp-InputPrompt").click()


def _wait_saved(path: Path, showing: str) -> None:
    """Poll the file itself (Notebook 7 marks unsaved changes differently from JupyterLab)."""
    deadline = time.monotonic() + WAIT_MS / 1000
    while showing not in path.read_text(encoding="utf-8"):
        assert time.monotonic() < deadline, f"{path.name} was not saved with {showing!r}"
        time.sleep(0.1)  # polling the saved file, bounded by the deadline


def _saved_outputs(path: Path) -> list[dict[str, object]]:
    notebook = json.loads(path.read_text(encoding="utf-8"))
    return [o for cell in notebook["cells"] for o in cell.get("outputs", [])]


def _check_saved_and_exported(path: Path) -> None:
    outputs = _saved_outputs(path)
    records = [o for o in outputs if "application/vnd.phoenix.conversation+json" in o["data"]]
    assert records, "the transcript is an ordinary output"
    assert "Fixed add() for you." in json.dumps(records[-1]["data"]["text/markdown"])
    for to in ("html", "markdown"):
        exported = subprocess.run(
            [sys.executable, "-m", "nbconvert", "--to", to, "--stdout", str(path)],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout
        for widget_repr in ("VBox(", "HBox(", "Output(", "Button("):
            assert widget_repr not in exported, (to, widget_repr)
        assert "Fixed add() for you." in exported, to
        assert "%phoenix chat" in exported and "%phoenix revert" in exported, to


def _check_after_restart(lab: LabPage, chat: ChatPage) -> None:
    expect(chat.record).to_contain_text("Understood, staying read-only.", timeout=WAIT_MS)
    expect(chat.record).to_contain_text("Fixed add() for you.")
    hint = chat.cell.locator(".jp-Phoenix-controlOutput[data-phoenix-control=hint]")
    expect(hint).to_have_count(1, timeout=WAIT_MS)
    expect(hint).to_contain_text("%phoenix chat")
    expect(hint).to_contain_text("%phoenix revert")
    for dead in ("Error displaying widget", "Loading widget"):
        expect(chat.cell.get_by_text(dead).filter(visible=True)).to_have_count(0)


def test_chat_flows_save_reload_restart_and_export_in_jupyterlab(
    lab: LabPage, fake_llm: FakeAnthropic
) -> None:
    fake_llm.clear()
    target = lab.server.root / "chat_lab_calc.py"
    target.write_text(BUGGY)
    _script(fake_llm, target.name)
    name = "chat-flows.ipynb"
    write_notebook(lab.server.root, name, [("%load_ext phoenix_nb", []), ("%phoenix chat", [])])
    lab.open_notebook(name, workspace="phoenix-chat-flows")
    lab.run_cell(0)
    lab.run_cell(1)
    chat = ChatPage(lab, 1)
    expect(chat.panel).to_be_visible(timeout=WAIT_MS)
    _run_flows(lab, chat, target)
    _focus_notebook(lab)
    lab.save()
    lab.reload()
    # Same kernel: the page has no widget state, so the control reads as its hint, never as
    # "Loading widget…" (ipywidgets does not bring the models back from the kernel here).
    chat = ChatPage(lab, 1)
    expect(chat.record).to_contain_text("Fixed add() for you.", timeout=WAIT_MS)
    expect(chat.cell.locator(".jp-Phoenix-controlOutput")).to_have_count(1)
    for dead in ("Error displaying widget", "Loading widget"):
        expect(chat.cell.get_by_text(dead).filter(visible=True)).to_have_count(0)
    lab.restart_kernel()
    chat = ChatPage(lab, 1)
    _check_after_restart(lab, chat)
    _check_saved_and_exported(lab.server.root / name)


def test_chat_flows_save_reopen_with_a_new_kernel_and_export_in_notebook7(
    lab: LabPage, fake_llm: FakeAnthropic
) -> None:
    require_notebook7()
    fake_llm.clear()
    target = lab.server.root / "chat_nb7_calc.py"
    target.write_text(BUGGY)
    _script(fake_llm, target.name)
    name = "chat-nb7.ipynb"
    write_notebook(lab.server.root, name, [("%load_ext phoenix_nb", []), ("%phoenix chat", [])])
    lab.open_in_notebook7(name)
    _run_in_notebook7(lab, 0)
    _run_in_notebook7(lab, 1)
    chat = ChatPage(lab, 1)
    expect(chat.panel).to_be_visible(timeout=WAIT_MS)
    _run_flows(lab, chat, target)
    _focus_notebook(lab)
    lab.page.keyboard.press("Control+s")
    _wait_saved(lab.server.root / name, "Fixed add() for you.")
    # A new page on the saved notebook after its kernel is shut down.
    lab.page.goto(f"{lab.server.url}/api/sessions")
    sessions = json.loads(lab.page.inner_text("body"))
    for session in sessions:
        if session["path"].endswith(name):
            lab.page.request.delete(f"{lab.server.url}/api/sessions/{session['id']}")
    lab.open_in_notebook7(name)
    chat = ChatPage(lab, 1)
    _check_after_restart(lab, chat)
    _check_saved_and_exported(lab.server.root / name)
