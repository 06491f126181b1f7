"""Hostile records: no fallback may carry JavaScript or break its own structure.

Every string of the fixture record (and every key of tool inputs) is replaced by
attack payloads; the HTML is then parsed and checked for scripts, event
handlers, script URLs, loaded resources and injected styles, and the structure
(one section per cycle, one <details> per tool group) must be unchanged.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from bs4 import BeautifulSoup
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phoenix_nb.notebook._render.html import CSS
from phoenix_nb.notebook.render import render_bundle, render_html, render_markdown, render_plain

FIXTURE = Path(__file__).parent / "fixtures" / "record_full.json"

PAYLOADS = [
    "<script>alert(1)</script>",
    '" onmouseover="alert(1)',
    "' onfocus='alert(1)' autofocus x='",
    "</details></summary></pre></div></section><script>alert(2)</script>",
    "</style><script>alert(3)</script><style>",
    "javascript:alert(4)",
    "[click](javascript:alert(5)) [d](data:text/html;base64,PHNjcmlwdD4=)",
    '<a href="javascript:alert(6)">x</a>',
    '<img src=x onerror="alert(7)">',
    "![pixel](http://evil.example/track.png)",
    "<iframe src=//evil.example></iframe>",
    '<svg onload="alert(8)"></svg>',
    "```\n# not a heading\n```",
    "&lt;script&gt;alert(9)&lt;/script&gt;",
    "<style>.phx-record{background:url(http://evil.example)}</style>",
]

# Keys whose values are free text: the renderers show them (enums are left valid).
FREE_TEXT = {
    "text",
    "summary",
    "reason",
    "content",
    "command",
    "diff",
    "path",
    "task",
    "result",
    "message",
    "name",
    "slug",
    "model",
    "cwd",
    "id",
    "conversation_id",
    "media_type",
    "query",
    "thoughts",
    "tool_use_id",
}

FORBIDDEN_TAGS = {
    "script",
    "iframe",
    "frame",
    "object",
    "embed",
    "link",
    "meta",
    "base",
    "img",
    "svg",
    "math",
    "form",
    "input",
    "button",
    "audio",
    "video",
    "source",
    "template",
}
THUMBNAIL = re.compile(r"data:image/png;base64,[A-Za-z0-9+/]+=*")
URL_ATTRS = {"href", "src", "srcset", "action", "formaction", "xlink:href", "background", "poster"}


def load() -> dict[str, Any]:
    return json.loads(FIXTURE.read_text())


def poison(value: Any, payload: str, *, every: bool, key: str = "") -> Any:
    """A copy of `value` with strings (free text only, or every one) replaced by `payload`."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            new = poison(v, payload, every=every, key=k)
            out[k] = new
            if key == "input":  # hostile keys in tool input too
                out[payload + k] = new
        return out
    if isinstance(value, list):
        return [poison(v, payload, every=every, key=key) for v in value]
    if isinstance(value, str) and (every or key in FREE_TEXT):
        return payload + value
    return value


class Audit(HTMLParser):
    """Collects what a browser would treat as active content."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []
        self.styles: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in FORBIDDEN_TAGS:
            self.problems.append(f"tag <{tag}>")
        if tag == "style":
            self._in_style = True
            self.styles.append("")
        for name, value in attrs:
            value = value or ""
            if name.startswith("on"):
                self.problems.append(f"handler {name}= on <{tag}>")
            if name in URL_ATTRS:
                squashed = "".join(ch for ch in value if ch > " ").lower()
                thumbnail = tag == "img" and name == "src" and THUMBNAIL.fullmatch(value)
                if thumbnail:
                    continue
                if tag != "a" or name != "href":
                    self.problems.append(f"{name}= on <{tag}>")
                elif squashed.startswith(("javascript:", "vbscript:", "data:")):
                    self.problems.append(f"script URL {value!r}")
            if name == "style" and any(
                bad in value.lower() for bad in ("url(", "expression", "@import", "javascript")
            ):
                self.problems.append(f"style {value!r}")

    def handle_endtag(self, tag: str) -> None:
        if tag == "style":
            self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.styles[-1] += data


def audit(html: str) -> Audit:
    a = Audit()
    a.feed(html)
    a.close()
    return a


def structure(html: str) -> tuple[int, int, int, int]:
    soup = BeautifulSoup(html, "html.parser")
    groups = soup.select("details.phx-tools")
    assert all(g.find(True).name == "summary" for g in groups)
    return (
        len(soup.select("section.phx-cycle")),
        len(groups),
        len(soup.select("details.phx-tools > summary")),
        len(soup.select(".phx-call")),
    )


def without_hidden_calls(record: dict[str, Any]) -> dict[str, Any]:
    """The record less its upgrade-request calls: the renderers hide those (the approval
    step tells them), and a poisoned tool name would make one visible."""
    for cycle in record["cycles"]:
        for step in cycle["steps"]:
            groups = []
            for group in step.get("tool_groups", []):
                calls = [c for c in group["calls"] if c["name"] != "request_mode_upgrade"]
                if calls:
                    groups.append({**group, "calls": calls})
            if "tool_groups" in step:
                step["tool_groups"] = groups
    return record


@pytest.mark.parametrize("every", [False, True], ids=["free-text", "every-string"])
@pytest.mark.parametrize("payload", PAYLOADS)
def test_hostile_strings_never_become_active_html(payload: str, every: bool) -> None:
    clean = without_hidden_calls(load())
    hostile = poison(clean, payload, every=every)
    html = render_html(hostile)
    a = audit(html)
    assert a.problems == []
    assert a.styles == [CSS], "only our own stylesheet, untouched"
    if not every:
        assert structure(html) == structure(render_html(clean))
    else:  # every kind is unknown now: each step is still shown, as escaped JSON
        soup = BeautifulSoup(html, "html.parser")
        assert len(soup.select("section.phx-cycle")) == len(clean["cycles"])
        steps = sum(len(c["steps"]) for c in clean["cycles"])
        assert len(soup.select(".phx-unknown")) == steps


@pytest.mark.parametrize("payload", PAYLOADS)
def test_hostile_text_is_shown_not_swallowed(payload: str) -> None:
    """Escaped, not dropped: the reader sees what the model or tool produced."""
    hostile = poison(load(), payload, every=False)
    text = BeautifulSoup(render_html(hostile), "html.parser").get_text()
    # User text, tool output and commands are shown verbatim (never Markdown-rendered).
    assert text.count(payload) >= 3


def test_raw_html_in_ai_markdown_comes_out_escaped() -> None:
    record = load()
    record["cycles"][0]["steps"][2]["item"]["text"] = (
        "Look: <b onclick=alert(1)>bold</b> <script>alert(1)</script> "
        "[x](javascript:alert(1)) ![t](http://evil.example/p.png)"
    )
    html = render_html(record)
    assert audit(html).problems == []
    md = BeautifulSoup(html, "html.parser").select(".phx-ai .phx-md")[1]
    assert md.find("b") is None and md.find("img") is None
    assert "<script>alert(1)</script>" in md.get_text()
    # The javascript: link is not a link at all; the image is a link showing its target.
    assert [a["href"] for a in md.find_all("a")] == ["http://evil.example/p.png"]
    assert md.find("a").get_text() == "http://evil.example/p.png"
    assert "javascript:alert(1)" in md.get_text()


def test_markdown_and_plain_survive_hostile_records() -> None:
    for payload in PAYLOADS:
        hostile = poison(load(), payload, every=True)
        md = render_markdown(hostile)
        plain = render_plain(hostile)
        assert payload.split("\n")[0] in plain
        # The Markdown, rendered by a safe renderer, still gives one heading per cycle.
        from phoenix_nb.notebook._render.markdown_html import markdown_to_html

        soup = BeautifulSoup(markdown_to_html(md), "html.parser")
        assert len(soup.find_all("h3")) == len(hostile["cycles"]), payload


json_values: Callable[[], st.SearchStrategy[Any]] = lambda: st.recursive(  # noqa: E731
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)

STEP_KINDS = ["user", "ai", "system", "approval", "sub_agents", "error", "continuation", "x"]


@st.composite
def wild_records(draw: st.DrawFn) -> dict[str, Any]:
    """Records with the right skeleton and anything at all inside."""
    step = st.fixed_dictionaries(
        {"kind": st.sampled_from(STEP_KINDS)},
        optional={
            k: json_values()
            for k in ("text", "item", "tool_groups", "agents", "retry", "decision", "images")
        },
    )
    cycle = st.fixed_dictionaries(
        {"steps": st.lists(step, max_size=4)},
        optional={"stop": json_values(), "index": json_values()},
    )
    return draw(
        st.fixed_dictionaries(
            {"cycles": st.lists(cycle, max_size=3)},
            optional={
                k: json_values()
                for k in ("conversation", "context", "retry", "pending_approval", "summary")
            },
        )
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(wild_records())
def test_any_json_inside_a_record_renders_safely(record: dict[str, Any]) -> None:
    bundle = render_bundle(record)
    assert audit(bundle["text/html"]).problems == []
    assert isinstance(bundle["text/markdown"], str) and isinstance(bundle["text/plain"], str)
    assert len(
        BeautifulSoup(bundle["text/html"], "html.parser").select("section.phx-cycle")
    ) == len(record["cycles"])


@pytest.mark.parametrize(
    "thumb",
    [
        "javascript:alert(1)",
        "data:text/html;base64,PHNjcmlwdD4=",
        'data:image/png;base64,AAAA" onerror="alert(1)',
        "data:image/svg+xml;base64,PHN2Zz4=",
    ],
)
def test_only_png_data_thumbnails_become_images(thumb: str) -> None:
    record = load()
    step = record["cycles"][0]["steps"][0]
    step["images"] = [{"media_type": "image/png", "name": "fig.png", "thumbnail": thumb}]
    html = render_html(record)
    assert audit(html).problems == []
    assert "<img" not in html
    step["images"][0]["thumbnail"] = "data:image/png;base64,iVBORw0KGgo="
    assert '<img class="phx-thumb" src="data:image/png;base64,iVBORw0KGgo="' in render_html(record)
