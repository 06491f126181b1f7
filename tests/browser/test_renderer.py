"""The conversation record drawn by the labextension in real JupyterLab and Chromium.

The notebooks here carry saved outputs only (no kernel runs), which is exactly the
shared-notebook case: the record must render without a kernel, in an untrusted
notebook, ahead of its HTML fallback.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.lab import (
    LabPage,
    load_fixture,
    record_output,
    require_notebook7,
    write_notebook,
)

pytestmark = pytest.mark.browser

HTML_FALLBACK_MARK = "PHOENIX-HTML-FALLBACK-SHOWN"


def _fallback_html() -> str:
    return f'<div class="phoenix-fallback"><b>{HTML_FALLBACK_MARK}</b></div>'


def _all_groups(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The groups a reader sees: an upgrade request is the approval step, not a group."""
    return [
        group
        for cycle in record["cycles"]
        for step in cycle["steps"]
        if step["kind"] == "ai"
        for group in step["tool_groups"]
        if any(call["name"] != "request_mode_upgrade" for call in group["calls"])
    ]


def _open_record(lab: LabPage, name: str, record: Any) -> None:
    write_notebook(
        lab.server.root,
        name,
        [("%%phoenix\nfix the parser", [record_output(record, _fallback_html(), "record")])],
    )
    lab.open_notebook(name)
    lab.page.locator(".jp-PhoenixConversation > *").first.wait_for(timeout=60_000)


def test_sample_record_renders_instead_of_html_fallback(lab: LabPage) -> None:
    """The MIME renderer wins over text/html, even in an untrusted notebook (rank 0, safe)."""
    record = load_fixture("sample_record.json")
    _open_record(lab, "sample.ipynb", record)
    page = lab.page
    # The renderer's widget is the output itself (JupyterLab adds jp-OutputArea-output to it).
    output = page.locator(".jp-OutputArea-output.jp-PhoenixConversation")
    expect(output).to_have_count(1)
    expect(page.get_by_text(HTML_FALLBACK_MARK)).to_have_count(0)
    expect(page.locator(".phoenix-fallback")).to_have_count(0)
    root = output.locator("[data-phoenix-record]")
    expect(root).to_have_attribute("data-phoenix-record", record["conversation"]["id"])
    expect(root).to_have_attribute("data-phoenix-mode", "unrestricted")


def test_tool_groups_are_one_line_each_write_open_others_expand(lab: LabPage) -> None:
    record = load_fixture("sample_record.json")
    _open_record(lab, "groups.ipynb", record)
    page = lab.page
    groups = page.locator("details[data-phoenix-group]")
    expected = [group["group"] for group in _all_groups(record)]
    expect(groups).to_have_count(len(expected))
    assert [groups.nth(i).get_attribute("data-phoenix-group") for i in range(len(expected))] == (
        expected
    )
    assert {"read", "write", "bash"} <= set(expected)
    for i in range(len(expected)):
        group = groups.nth(i)
        assert group.evaluate("node => node.open") is (expected[i] == "write"), expected[i]
        summary = group.locator("summary")
        box = summary.bounding_box()
        line_height = summary.evaluate("n => parseFloat(getComputedStyle(n).lineHeight) || 20")
        assert box is not None and box["height"] < 2.2 * line_height, "a group is one line"
    # Collapsed: call bodies (bash output) are hidden until the reader opens the group.
    first_bash = page.locator("details[data-phoenix-group='bash']").first
    output = first_bash.locator("[data-phoenix-output='bash']").first
    expect(output).to_be_hidden()
    first_bash.locator("summary").click()
    expect(output).to_be_visible()
    expect(output).to_contain_text("1 failed, 1 passed")
    command = first_bash.locator("[data-phoenix-bash-command]").first
    expect(command).to_have_text("$ python -m pytest -q tests/test_parser.py")
    expect(first_bash.locator("[data-phoenix-exit]").first).to_have_attribute(
        "data-phoenix-exit", "1"
    )
    expect(first_bash.locator("[data-phoenix-exit]").first).to_have_text("exit 1")


def test_diff_lines_are_coloured_by_kind(lab: LabPage) -> None:
    record = load_fixture("sample_record.json")
    _open_record(lab, "diff.ipynb", record)
    page = lab.page
    write_group = page.locator("details[data-phoenix-group='write']").first
    diff = write_group.locator("[data-phoenix-diff]")  # open without a click
    expect(diff).to_have_attribute("data-phoenix-diff", "src/parser.py")
    colours = {}
    for kind in ("add", "del", "hunk", "ctx"):
        line = diff.locator(f"[data-phoenix-diff-line='{kind}']").first
        expect(line).to_be_visible()
        colours[kind] = line.evaluate(
            "n => [getComputedStyle(n).backgroundColor, getComputedStyle(n).color].join('|')"
        )
    assert len(set(colours.values())) == 4, colours
    write = next(g for g in _all_groups(record) if g["group"] == "write")
    patch_display = write["calls"][0]["result"]["display"]
    diff_lines = patch_display["diff"].splitlines()
    added = [ln for ln in diff_lines if ln.startswith("+") and not ln.startswith("+++")]
    removed = [ln for ln in diff_lines if ln.startswith("-") and not ln.startswith("---")]
    adds = diff.locator("[data-phoenix-diff-line='add']")
    expect(adds).to_have_count(len(added))
    expect(diff.locator("[data-phoenix-diff-line='del']")).to_have_count(len(removed))
    expect(adds.first).to_have_text('+    if "=" not in text:')


def test_answer_markdown_meter_summary_and_other_steps(lab: LabPage) -> None:
    record = load_fixture("sample_record.json")
    _open_record(lab, "steps.ipynb", record)
    page = lab.page
    answer = page.locator("[data-phoenix-ai='assistant']").filter(has_text="Fixed.")
    expect(answer).to_have_count(1)
    # Markdown went through JupyterLab's renderer: bold and list items are elements.
    expect(answer.locator("strong")).to_have_text("Fixed.")
    expect(answer.locator("li")).to_have_count(2)
    expect(page.locator("[data-phoenix-ai='reasoning']")).to_contain_text("traceback points")

    meter = page.locator("[data-phoenix-meter]")
    expect(meter).to_have_attribute("data-phoenix-warning", "true")
    expect(meter).to_contain_text("170,000 / 200,000 tokens (85%)")
    expect(meter).to_have_class("jp-Phoenix-meter jp-Phoenix-meter-warning")

    summary = page.locator("[data-phoenix-summary]")
    expect(summary).to_be_visible()
    expect(summary).to_contain_text("document the new behaviour")

    expect(page.locator("[data-phoenix-step='approval']")).to_have_attribute(
        "data-phoenix-decision", "approved"
    )
    expect(page.locator("[data-phoenix-step='system']")).to_contain_text("Mode changed")
    agents = page.locator("[data-phoenix-agent]")
    expect(agents).to_have_count(2)
    expect(agents.nth(1)).to_have_attribute("data-phoenix-outcome", "timeout")
    error = page.locator("[data-phoenix-step='error']")
    expect(error).to_have_attribute("data-phoenix-error-kind", "rate_limit")
    expect(error.locator("[data-phoenix-retry]")).to_have_text("Retry attempt 1 of 3 in 2 s")
    expect(page.locator("[data-phoenix-step='continuation']")).to_contain_text("all 12 tests pass")
    expect(page.locator("[data-phoenix-image]")).to_have_text("image: traceback.png")
    expect(page.locator("[data-phoenix-cycle='1']")).to_have_attribute(
        "data-phoenix-stop", "interrupted"
    )


def test_payload_scripts_never_run_and_plain_strings_stay_text(lab: LabPage) -> None:
    """AI text is Markdown without raw HTML; every other string is textContent."""
    record = copy.deepcopy(load_fixture("sample_record.json"))
    steps = record["cycles"][0]["steps"]
    steps[-1]["item"]["text"] = (
        "*emphasis* <script>window.__phoenixPwned = 1</script>"
        '<img src="x" onerror="window.__phoenixPwned = 2">'
    )
    steps[0]["text"] = '<b id="user-html">not bold</b>'
    _open_record(lab, "hostile.ipynb", record)
    page = lab.page
    hostile = page.locator("[data-phoenix-ai='assistant']").filter(has_text="emphasis")
    expect(hostile.locator("em")).to_have_text("emphasis")  # Markdown still rendered
    # Raw HTML in the model's Markdown is shown as text, never made into elements.
    expect(hostile.locator("img")).to_have_count(0)
    expect(hostile).to_contain_text("<script>window.__phoenixPwned = 1</script>")
    expect(page.locator(".jp-PhoenixConversation script")).to_have_count(0)
    expect(page.locator(".jp-PhoenixConversation [onerror]")).to_have_count(0)
    expect(page.locator("#user-html")).to_have_count(0)
    expect(page.locator("[data-phoenix-step='user']").first).to_contain_text(
        '<b id="user-html">not bold</b>'
    )
    assert page.evaluate("() => window.__phoenixPwned === undefined")


def test_unreadable_record_is_named_and_shown_raw(lab: LabPage) -> None:
    """Bad input gets a clear error and loses nothing: the raw record stays on screen."""
    record = {"format": "phoenix.conversation/99", "cycles": [], "note": "keep-me-visible"}
    _open_record(lab, "bad.ipynb", record)
    problem = lab.page.locator("[data-phoenix-problem]")
    expect(problem).to_contain_text("unsupported record format")
    expect(problem).to_contain_text("keep-me-visible")


def test_light_and_dark_screenshots_follow_the_theme(lab: LabPage) -> None:
    """Theme variables only: the same DOM changes colour with JupyterLab's theme."""
    record = load_fixture("sample_record.json")
    _open_record(lab, "themes.ipynb", record)
    page = lab.page
    page.set_viewport_size({"width": 1280, "height": 2400})  # room for the whole record
    for kind in ("bash", "write"):
        page.locator(f"details[data-phoenix-group='{kind}']").first.locator("summary").click()
    user_text = page.locator(".jp-Phoenix-userText").first

    def colours() -> str:
        return user_text.evaluate(
            "n => getComputedStyle(n).color + '|' + getComputedStyle(n).backgroundColor"
        )

    lab.set_theme(dark=False)
    light = colours()
    lab.screenshot("lab-light.png")
    light_shot = lab.screenshot("conversation-light.png", ".jp-PhoenixConversation")
    lab.set_theme(dark=True)
    expect(page.locator("body")).to_have_attribute("data-jp-theme-light", "false")
    page.wait_for_function(
        "([sel, before]) => { const s = getComputedStyle(document.querySelector(sel));"
        " return s.color + '|' + s.backgroundColor !== before; }",
        arg=[".jp-Phoenix-userText", light],
        timeout=30_000,
    )
    dark = colours()
    dark_shot = lab.screenshot("conversation-dark.png", ".jp-PhoenixConversation")
    lab.screenshot("lab-dark.png")
    lab.set_theme(dark=False)  # leave the session's shared settings as found
    assert light != dark
    assert light_shot.stat().st_size > 10_000 and dark_shot.stat().st_size > 10_000


def test_record_renders_in_notebook7(lab: LabPage) -> None:
    """A plain MIME extension is picked up by Notebook 7 too, ahead of the HTML fallback."""
    require_notebook7()
    record = load_fixture("sample_record.json")
    write_notebook(
        lab.server.root,
        "nb7.ipynb",
        [("%%phoenix\nfix the parser", [record_output(record, _fallback_html(), "record")])],
    )
    lab.open_in_notebook7("nb7.ipynb")
    page = lab.page
    expect(page.locator(".jp-PhoenixConversation [data-phoenix-record]")).to_have_count(1)
    expect(page.get_by_text(HTML_FALLBACK_MARK)).to_have_count(0)
    expect(page.locator("details[data-phoenix-group]")).to_have_count(len(_all_groups(record)))
    expect(page.locator("[data-phoenix-meter]")).to_have_attribute("data-phoenix-warning", "true")
    lab.screenshot("notebook7-light.png")
