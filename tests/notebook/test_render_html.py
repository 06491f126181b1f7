"""The text/html fallback, asserted on the parsed document (not on string snapshots)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from bs4 import BeautifulSoup, Tag

from phoenix_nb.notebook.render import (
    MIME_TYPE,
    render_bundle,
    render_html,
    render_markdown,
    render_plain,
)

FIXTURE = Path(__file__).parent / "fixtures" / "record_full.json"


@pytest.fixture
def record() -> dict[str, Any]:
    return json.loads(FIXTURE.read_text())


def soup_of(record: dict[str, Any]) -> BeautifulSoup:
    return BeautifulSoup(render_html(record), "html.parser")


def text_of(node: Tag) -> str:
    return " ".join(node.get_text(" ").split())


def test_bundle_holds_record_and_three_fallbacks(record: dict[str, Any]) -> None:
    bundle = render_bundle(record)
    assert set(bundle) == {MIME_TYPE, "text/html", "text/markdown", "text/plain"}
    assert bundle[MIME_TYPE] is record
    assert bundle["text/html"] == render_html(record)
    assert bundle["text/markdown"] == render_markdown(record)
    assert bundle["text/plain"] == render_plain(record)


@pytest.mark.parametrize("bad", [None, [], "record", 42])
def test_non_mapping_record_is_a_clear_type_error(bad: Any) -> None:
    for fn in (render_bundle, render_html, render_markdown, render_plain):
        with pytest.raises(TypeError, match="must be a mapping"):
            fn(bad)


def test_one_root_with_scoped_style_and_no_external_resources(record: dict[str, Any]) -> None:
    soup = soup_of(record)
    roots = [c for c in soup.contents if isinstance(c, Tag)]
    assert len(roots) == 1 and "phx-record" in roots[0]["class"]
    styles = soup.find_all("style")
    assert len(styles) == 1 and styles[0].parent is roots[0]
    css = styles[0].string or ""
    selectors = [s.strip() for rule in re.findall(r"([^{}]+)\{", css) for s in rule.split(",")]
    assert selectors, "the style block holds rules"
    assert all(s.startswith(".phx-") for s in selectors), selectors
    assert "url(" not in css and "@import" not in css
    for tag in soup.find_all(True):
        assert not tag.has_attr("src"), tag.name
    assert "color-scheme:light dark" in css


def test_header_shows_slug_model_cwd_mode_and_state(record: dict[str, Any]) -> None:
    head = soup_of(record).select_one(".phx-head")
    assert head is not None
    words = text_of(head)
    for expected in ("brave-otter", "claude-sonnet-4-5", "Unrestricted", "context full"):
        assert expected in words
    # A shared record names the folder relative to a home, never the user's home itself.
    assert text_of(soup_of(record).select_one(".phx-cwd")) == "in ~/project"
    assert soup_of(record).select_one(".phx-nosandbox") is None


def test_mode_badge_says_sandbox_unavailable_when_landlock_is_missing(
    record: dict[str, Any],
) -> None:
    """REQ-BED-014: Landlock unavailability is shown to the user."""
    record["conversation"]["sandbox_available"] = False
    badge = soup_of(record).select_one(".phx-nosandbox")
    assert badge is not None and text_of(badge) == "sandbox unavailable"
    record["conversation"]["mode"] = "restricted"
    record["conversation"]["sandbox_available"] = True
    soup = soup_of(record)
    assert text_of(soup.select_one(".phx-mode-restricted")) == "Restricted"
    assert soup.select_one(".phx-nosandbox") is None


def test_context_meter_warns_from_80_percent_and_offers_continue(record: dict[str, Any]) -> None:
    """REQ-BED-023: warning indicator and the manual continuation offer."""
    meter = soup_of(record).select_one(".phx-meter")
    assert meter is not None and "phx-warn" in meter["class"] and "phx-limit" in meter["class"]
    words = text_of(meter)
    assert "182,000 / 200,000" in words and "91%" in words
    assert "%phoenix continue" in words

    record["context"] = {"used": 12_000, "window": 200_000, "fraction": 0.06}
    meter = soup_of(record).select_one(".phx-meter")
    assert "phx-warn" not in meter["class"] and "%phoenix continue" not in text_of(meter)
    assert "6%" in text_of(meter)

    record["context"] = {"used": 160_000, "window": 200_000, "fraction": 0.8, "warning": True}
    meter = soup_of(record).select_one(".phx-meter")
    assert "phx-warn" in meter["class"] and "phx-limit" not in meter["class"]
    assert "%phoenix continue" in text_of(meter)


def test_continuation_summary_is_prominent_before_the_cycles(record: dict[str, Any]) -> None:
    """REQ-BED-021: the summary is displayed prominently."""
    soup = soup_of(record)
    box = soup.select_one(".phx-summary")
    first_cycle = soup.select_one(".phx-cycle")
    assert box is not None and first_cycle is not None
    order = list(soup.find_all(True))
    assert order.index(box) < order.index(first_cycle)
    assert "We fixed add in src/calc.py" in text_of(box)
    assert box.find("code") is not None  # the summary's Markdown is rendered


def test_one_section_per_cycle_with_its_stop(record: dict[str, Any]) -> None:
    cycles = soup_of(record).select("section.phx-cycle")
    assert [text_of(c.select_one(".phx-cycle-head")) for c in cycles] == [
        "Request 1",
        "Request 2",
        "Request 3",
        "Request 4",
    ]
    stops = [c.select_one(".phx-stop") for c in cycles]
    assert [text_of(s) if s else None for s in stops] == [
        "■ completed",
        "■ stopped by an error",
        "■ interrupted",
        None,
    ]


def test_tool_groups_are_details_with_one_line_summary(record: dict[str, Any]) -> None:
    soup = soup_of(record)
    groups = soup.select("details.phx-tools")
    expected = sum(
        1
        for cycle in record["cycles"]
        for step in cycle["steps"]
        if step["kind"] == "ai"
        for group in step.get("tool_groups", [])
        if any(c["name"] != "request_mode_upgrade" for c in group["calls"])
    )
    assert len(groups) == expected, "an upgrade request is shown as the approval, not a group"
    bash = soup.select_one("details.phx-group-bash")
    summary = bash.find("summary")
    assert summary is bash.find(True), "summary is the first child of details"
    line = text_of(summary)
    assert line.startswith("ran 3 commands"), line
    assert "\n" not in summary.get_text()
    assert "1 failed" in line  # the timed-out call is an error result
    titles = [text_of(g.find("summary")) for g in groups]
    assert "searched for 'def add'" in titles
    assert any(t.startswith("edited src/calc.py +2 −1") for t in titles), titles
    opened = [text_of(g.find("summary")) for g in groups if g.has_attr("open")]
    assert opened == [t for t in titles if t.startswith("edited")], "write groups open"


def test_bash_call_shows_command_status_and_output(record: dict[str, Any]) -> None:
    calls = soup_of(record).select("details.phx-group-bash")[0].select(".phx-call")
    assert len(calls) == 3
    first = calls[0]
    assert first.select_one("pre.phx-cmd").get_text() == "$ python -m pytest -q tests/test_calc.py"
    assert text_of(first.select_one(".phx-status")) == "exit 1"
    assert "phx-bad" in first.select_one(".phx-status")["class"]
    out = first.select_one("pre.phx-out").get_text()
    assert out.endswith("1 failed, 60 passed in 0.42s")
    assert "phx-bad" not in calls[1].select_one(".phx-status")["class"]
    assert text_of(calls[2].select_one(".phx-status")) == "timed out, output truncated"


def test_running_call_is_marked_running(record: dict[str, Any]) -> None:
    last = soup_of(record).select("section.phx-cycle")[-1]
    group = last.select_one("details.phx-group-bash")
    assert "running…" in text_of(group.find("summary"))
    assert text_of(group.select_one(".phx-status")) == "running"


def test_long_output_is_cut_with_a_note(record: dict[str, Any]) -> None:
    call = record["cycles"][0]["steps"][2]["tool_groups"][1]["calls"][1]
    call["result"]["content"] = "\n".join(f"line {i}" for i in range(1000))
    pre = soup_of(record).select("details.phx-group-bash")[0].select("pre.phx-out")[1]
    assert pre.get_text().splitlines()[-1] == "line 399"
    assert "600 more lines" in text_of(pre.find_next_sibling("div"))


def test_patch_diff_lines_are_coloured_by_class_and_inline_style(record: dict[str, Any]) -> None:
    diff = soup_of(record).select_one("details.phx-group-write pre.phx-diff")
    assert diff is not None
    by_kind = {
        kind: [s.get_text() for s in diff.select(f"span.phx-d-{kind}")]
        for kind in ("add", "del", "hunk", "meta", "ctx")
    }
    assert by_kind["add"] == ["+    # fixed: was subtracting", "+    return a + b"]
    assert by_kind["del"] == ["-    return a - b"]
    assert by_kind["hunk"] == ["@@ -1,5 +1,6 @@"]
    assert by_kind["meta"] == ["--- a/src/calc.py", "+++ b/src/calc.py"]
    assert "background:rgba(46,160,67" in diff.select_one("span.phx-d-add")["style"]
    assert "background:rgba(248,81,73" in diff.select_one("span.phx-d-del")["style"]
    assert "background:rgba(56,139,253" in diff.select_one("span.phx-d-hunk")["style"]
    # The text of the <pre> is the diff itself, line for line.
    assert (
        diff.get_text()
        == record["cycles"][0]["steps"][6]["tool_groups"][0]["calls"][0]["result"]["display"][
            "diff"
        ]
    )


def test_error_cards_show_kind_retry_status_and_advice(record: dict[str, Any]) -> None:
    """REQ-BED-006: retry status while retrying, an actionable message otherwise."""
    cards = soup_of(record).select(".phx-card.phx-error")
    by_kind = {text_of(c.select_one(".phx-kind")): c for c in cards}
    rate = by_kind["rate_limit"]
    assert text_of(rate.select_one(".phx-retry")) == "retrying 2/3 in 4 s: rate limited"
    assert "429 Too Many Requests" in text_of(rate)
    net = by_kind["network"]
    assert net.select_one(".phx-retry") is None
    assert "Check the network connection" in text_of(net.select_one(".phx-advice"))
    assert "Start a new conversation" in text_of(by_kind["context_exhausted"])


def test_record_level_retry_banner(record: dict[str, Any]) -> None:
    banner = soup_of(record).select_one(".phx-retrying:not(.phx-error)")
    assert "retrying 2/3 in 4 s: rate limited" in text_of(banner)


def test_error_state_gets_an_error_card_with_advice(record: dict[str, Any]) -> None:
    record["conversation"]["state"] = {
        "name": "error",
        "busy": False,
        "message": "Authentication failed (401): check ANTHROPIC_API_KEY.",
        "kind": "auth",
    }
    root = soup_of(record).select_one(".phx-record")
    assert "phx-state-error" in root["class"]
    card = root.find_all("div", class_="phx-error", recursive=False)[-1]
    # The provider's message names its own credentials (llm/errors.py); the advice is
    # the same for every provider, so a Bedrock card never says ANTHROPIC_API_KEY.
    assert "check ANTHROPIC_API_KEY" in text_of(card)
    assert "Set the credentials the message names" in text_of(card.select_one(".phx-advice"))


def test_pending_approval_explains_how_to_answer_headless(record: dict[str, Any]) -> None:
    """REQ-BED-015: the request and its reason are shown; the answer path is explained."""
    soup = soup_of(record)
    [pending] = soup.select(".phx-pending")  # one block, not a step plus a banner
    assert "Write NOTES.md in the project root" in text_of(pending)
    codes = [c.get_text() for c in pending.find_all("code")]
    assert "%phoenix approve" in codes and "%phoenix deny" in codes
    assert text_of(pending.select_one(".phx-decision")) == "waiting for your approval"
    answered = [text_of(d) for d in soup.select(".phx-approval-line")]
    assert [a.split(":")[0] for a in answered] == [
        "✓ write access approved",
        "✗ write access denied",
    ], "an answered request is one line"
    record["conversation"]["state"] = {"name": "awaiting_mode_approval", "paused": True}
    pending = soup_of(record).select_one(".phx-pending")
    assert "paused — run %phoenix approve or %phoenix deny" in text_of(pending)


def test_approval_reason_is_a_labelled_quotation_in_plain_text(record: dict[str, Any]) -> None:
    """The reason is the model's: quoted under a label saying so, never rendered as
    Markdown (no heading, link or emphasis to pose as phoenix with), after phoenix's own
    line saying what approving does."""
    record["cycles"][-1]["steps"].append(
        {
            "kind": "approval",
            "reason": "# Restricted mode — nothing will change\n[**Approve**](https://evil.example/)",
            "decision": "pending",
        }
    )
    record["pending_approval"] = None
    pending = soup_of(record).select(".phx-pending")[-1]
    quote = pending.select_one("blockquote.phx-reason")
    assert quote.get_text() == (
        "# Restricted mode — nothing will change\n[**Approve**](https://evil.example/)"
    )
    assert quote.find(["a", "strong", "h1"]) is None
    assert "Approving switches this conversation to Unrestricted mode" in text_of(pending)
    assert "The agent's reason, in its own words:" in text_of(pending)


def test_sub_agent_outcomes(record: dict[str, Any]) -> None:
    items = soup_of(record).select(".phx-subagents li")
    assert [text_of(li.select_one(".phx-badge")) for li in items] == [
        "succeeded",
        "failed",
        "timed out",
        "running",
    ]
    assert "No bugs found in utils.py." in text_of(items[0])
    assert "c-sub-2" in text_of(items[1])


def test_ai_markdown_is_rendered_and_reasoning_folded(record: dict[str, Any]) -> None:
    soup = soup_of(record)
    assert any(s.get_text() == "add" for s in soup.select(".phx-ai .phx-md strong"))
    code = soup.select_one(".phx-ai .phx-md pre code.language-python")
    assert code is not None and code.get_text() == "return a - b\n"
    reasoning = soup.select_one("details.phx-reasoning")
    assert text_of(reasoning.find("summary")) == "Reasoning"
    assert "look for the function first" in text_of(reasoning)


def test_user_steps_show_kind_text_and_images(record: dict[str, Any]) -> None:
    users = soup_of(record).select(".phx-user")
    assert [text_of(u.select_one(".phx-who")) for u in users] == [
        "You",
        "You (steering)",
        "You (follow-up)",
        "You",
        "You",
    ]
    first = users[0]
    assert first.select_one(".phx-prewrap").get_text() == record["cycles"][0]["steps"][0]["text"]
    assert "failure.png" in text_of(first.select_one(".phx-images"))


def test_unknown_step_kind_is_kept_as_escaped_json(record: dict[str, Any]) -> None:
    step = {"kind": "hologram", "payload": {"x": "<b>bold</b>"}}
    record["cycles"][0]["steps"].append(step)
    node = soup_of(record).select_one(".phx-unknown")
    assert "hologram" in text_of(node)
    assert json.loads(node.find("pre").get_text()) == step
    assert node.find("b") is None


def test_malformed_fields_render_what_they_can(record: dict[str, Any]) -> None:
    broken = copy.deepcopy(record)
    broken["context"] = "lots"
    broken["conversation"]["state"] = None
    broken["cycles"][0]["steps"].insert(0, 7)
    broken["cycles"][1]["steps"] = "none"
    broken["cycles"].append("garbage")
    broken["retry"] = {"attempt": "two"}
    soup = soup_of(broken)
    assert len(soup.select("section.phx-cycle")) == 5
    assert "retrying ?/? in ? s" in text_of(soup.select_one(".phx-retrying"))
    assert "Why does `add` fail?" in text_of(soup)
    assert len(soup.select(".phx-unknown")) == 1  # the stray 7 is shown, not dropped


def test_unknown_record_format_is_flagged(record: dict[str, Any]) -> None:
    record["format"] = "phoenix.conversation/9"
    assert "record format phoenix.conversation/9" in text_of(
        soup_of(record).select_one(".phx-head")
    )
