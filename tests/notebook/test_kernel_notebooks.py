"""Notebooks under tests/notebooks run headless and still read well once shared.

The notebooks start the fake Messages API themselves, so they run the same in
nbval, nbclient and `jupyter nbconvert --execute`. nbval runs in a subprocess
(the main test command collects only `tests/`, and a notebook kernel should not
share this process); the sharing checks execute the notebook with nbclient
and convert it with the real `jupyter nbconvert` command.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import mistune
import nbformat
import pytest
from bs4 import BeautifulSoup
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

from tests.notebook.kernel_harness import KERNEL_NAME, MIME, venv_kernelspecs

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "tests" / "notebooks"
DEMO = NOTEBOOKS / "headless_turns.ipynb"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def test_nbval_passes_on_the_notebooks() -> None:
    """nbval re-runs every notebook against the fake and compares the checked outputs."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--nbval",
            str(NOTEBOOKS),
            "--nbval-current-env",
            "--nbval-sanitize-with",
            str(NOTEBOOKS / "sanitize.cfg"),
            "--nbval-cell-timeout",
            "60",
            "-p",
            "no:cacheprovider",
            "-q",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    cells = sum(1 for c in nbformat.read(DEMO, as_version=4).cells if c.cell_type == "code")
    assert f"{cells} passed" in proc.stdout


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo notebook executed headless by nbclient, saved like a user would save it."""
    folder = tmp_path_factory.mktemp("executed")
    nb = nbformat.read(DEMO, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    km = KernelManager(
        kernel_name=KERNEL_NAME, kernel_spec_manager=venv_kernelspecs(folder / "kernels")
    )
    client = NotebookClient(nb, km=km, timeout=60, resources={"metadata": {"path": str(folder)}})
    client.execute()
    path = folder / "shared.ipynb"
    nbformat.write(nb, path)
    return path


def _phoenix_outputs(path: Path) -> list[dict[str, Any]]:
    nb = nbformat.read(path, as_version=4)
    return [
        o["data"]
        for cell in nb.cells
        if cell.cell_type == "code"
        for o in cell.get("outputs", [])
        if MIME in o.get("data", {})
    ]


def test_saved_notebook_holds_no_dead_widgets(executed: Path) -> None:
    """Controls are removed at rest: the saved file has no widget views, only records."""
    nb = nbformat.read(executed, as_version=4)
    views = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if WIDGET_VIEW in o.get("data", {})
    ]
    assert views == []
    records = _phoenix_outputs(executed)
    assert len(records) == 3  # two %%phoenix cells and the `%phoenix approve` that resumed
    assert all({"text/html", "text/markdown", "text/plain"} <= set(r) for r in records)


def test_nbconvert_html_shows_the_whole_conversation(executed: Path) -> None:
    """`jupyter nbconvert --to html` shows every turn through the script-free HTML fallback."""
    subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", str(executed)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    html = executed.with_suffix(".html").read_text()
    soup = BeautifulSoup(html, "html.parser")
    outputs = [
        div
        for div in soup.select("div.jp-OutputArea-output")
        if "nbval-demo" in div.get_text() and "What does add() in app.py do?" in div.get_text()
    ]
    assert outputs, "the first turn's record is rendered as HTML"
    page_text = soup.get_text(" ")
    for expected in (
        "What does add() in app.py do?",
        "Let me read it.",
        "cat app.py",
        "return a - b",
        "instead of",
        "Please fix it.",
        "Fix the minus sign in app.py",
        "%phoenix approve",
        "Fixed:",
        "return a + b",
    ):
        assert expected in page_text, expected
    records = [
        div
        for div in soup.select("div.jp-OutputArea-output")
        if div.get("data-mime-type") == "text/html" and "nbval-demo" in div.get_text()
    ]
    assert len(records) == 3, "every record falls back to its text/html"
    for div in records:
        assert div.find("script") is None, "the fallback needs no JavaScript"
    first, paused, resumed = records
    assert first.find("details") is not None, "tool calls fold into <details>"
    assert paused.find("details") is None, "the upgrade request is the approval block, once"
    assert len(paused.select(".phx-pending")) == 1
    assert resumed.find("details") is not None
    assert '"format": "phoenix.conversation/1"' not in page_text, "no raw JSON shown"


def test_markdown_fallback_reads_on_its_own(executed: Path) -> None:
    """The text/markdown fallback is plain Markdown: headings, quotes, code, no HTML or JSON."""
    first, paused, resumed = (r["text/markdown"] for r in _phoenix_outputs(executed))
    assert first.startswith("**phoenix** · `nbval-demo`")
    assert "### Request 1" in first
    assert "> **You:**\n> What does add() in app.py do?" in first
    assert "- **bash** `cat app.py` — exit 0" in first
    assert "%phoenix approve" in paused and "%phoenix deny" in paused
    assert "Fixed: `add` now returns `a + b`." in resumed
    for text in (first, paused, resumed):
        assert not re.search(r"<(div|span|details|script|table)\b", text), "no raw HTML"
        assert '{"' not in text, "no raw JSON"
        assert text.count("```") % 2 == 0, "code fences are closed"
    rendered = mistune.html(first)
    assert "<h3>Request 1</h3>" in rendered
    assert "<blockquote>" in rendered
    assert "<pre><code>" in rendered and "return a - b" in rendered
