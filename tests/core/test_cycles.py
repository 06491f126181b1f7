"""The request-cycle projection (seed 002) over histories made by `transition`."""

from __future__ import annotations

from phoenix_nb.core.cycles import RecordHeader, call_summary, follow_up, project, tool_group
from phoenix_nb.core.displays import BashDisplay, PatchDisplay
from phoenix_nb.core.events import (
    LlmError,
    LlmResponse,
    ToolComplete,
    UserApproveUpgrade,
    UserCancel,
    UserMessage,
)
from phoenix_nb.core.tool_fields import ToolTraits
from phoenix_nb.core.values import (
    ImageData,
    TextBlock,
    ThinkingBlock,
    ToolResult,
    ToolUseBlock,
    Usage,
)

from .helpers import Driver, fatal, restored

# What the tools declare (`Tool.group`, `Tool.summary_field`), as the registry hands
# it to the projection: the core is given it, it names no tool itself.
TRAITS = ToolTraits.of(
    [
        ("keyword_search", "read", "query"),
        ("bash", "bash", "command"),
        ("patch", "write", "path"),
        ("think", "other", "thoughts"),
        ("request_mode_upgrade", "other", "reason"),
    ]
)
HEADER = RecordHeader("c-1", "brave-otter", "demo", "/work", True, 200_000, tools=TRAITS)
SEARCH = ToolUseBlock("t1", "keyword_search", {"query": "where is add"})
BASH1 = ToolUseBlock("t2", "bash", {"command": "pytest -q\nsecond line"})
BASH2 = ToolUseBlock("t3", "bash", {"command": "cat a.py"})
PATCH = ToolUseBlock("t4", "patch", {"path": "a.py"})
UPGRADE = ToolUseBlock("t5", "request_mode_upgrade", {"reason": "fix the bug"})


def test_full_cycle_steps_groups_and_stop_reasons() -> None:
    d = Driver()
    d.send(UserMessage("why?", (ImageData("image/png", "AAAA", "fig.png"),)))
    d.send(
        LlmResponse(
            (ThinkingBlock("think", "sig"), TextBlock("look"), SEARCH, BASH1, BASH2, UPGRADE),
            "tool_use",
            Usage(170_000),
        )
    )
    for call in (SEARCH, BASH1, BASH2):
        display = BashDisplay(call.input["command"], 0) if call.name == "bash" else None
        d.send(ToolComplete(ToolResult(call.id, "out", display=display)))
    d.send(UserApproveUpgrade())
    d.send(LlmResponse((PATCH,), "tool_use"))
    d.send(ToolComplete(ToolResult("t4", "patched", display=PatchDisplay("a.py", "-a\n+b"))))
    d.send(LlmResponse((TextBlock("fixed"),), "end_turn", Usage(1000)))
    d.send(UserMessage("again"), LlmError(fatal(), 1))
    d.send(UserMessage("third"), UserCancel())

    record = project(d.history, d.state, HEADER)
    assert record == project(d.history, d.state, HEADER)  # deterministic
    c0, c1, _c2 = record["cycles"]
    assert [c["stop"] for c in record["cycles"]] == [
        {"reason": "completed"},
        {"reason": "error"},
        {"reason": "interrupted"},
    ]
    kinds = [s["kind"] for s in c0["steps"]]
    assert kinds == ["user", "ai", "ai", "approval", "system", "ai", "ai"]
    assert c0["steps"][0]["images"] == [{"media_type": "image/png", "name": "fig.png"}]
    assert c0["steps"][1]["item"] == {"type": "reasoning", "text": "think"}
    groups = c0["steps"][2]["tool_groups"]
    assert [(g["group"], [c["id"] for c in g["calls"]]) for g in groups] == [
        ("read", ["t1"]),
        ("bash", ["t2", "t3"]),
        ("other", ["t5"]),
    ]
    assert groups[1]["calls"][0]["summary"] == "pytest -q"
    # the tool's typed display, stored as its JSON
    assert (
        groups[1]["calls"][0]["result"]["display"]
        == BashDisplay(BASH1.input["command"], 0).to_json()
    )
    assert c0["steps"][3]["decision"] == "approved"
    assert c0["steps"][5]["item"] is None  # tools with no text before them
    assert c0["steps"][5]["tool_groups"][0]["group"] == "write"
    assert c1["steps"][-1]["kind"] == "error" and c1["steps"][-1]["error_kind"] == "auth"
    assert record["conversation"]["mode"] == "unrestricted"
    assert record["conversation"]["state"] == {"name": "idle", "busy": False}
    assert record["context"]["used"] == 1000 and record["pending_approval"] is None


def test_running_cycle_has_no_stop_and_pending_approval() -> None:
    d = Driver()
    d.send(UserMessage("go"), LlmResponse((UPGRADE,), "tool_use", Usage(165_000)))
    record = project(d.history, d.state, HEADER)
    [cycle] = record["cycles"]
    assert cycle["stop"] is None
    assert cycle["steps"][-1] == {
        "kind": "approval",
        "reason": "fix the bug",
        "decision": "pending",
    }
    assert record["pending_approval"] == {"reason": "fix the bug", "tool_use_id": "t5"}
    assert record["context"]["warning"] is True and record["context"]["limit_reached"] is False
    assert record["conversation"]["state"]["busy"] is True


def test_follow_up_policy_queues_until_the_run_stops() -> None:
    history = [
        {"message_type": "user", "content": {"text": "a", "images": []}},
        {"message_type": "user", "content": {"text": "b", "images": []}},
        {
            "message_type": "agent",
            "content": {"blocks": [{"type": "TextBlock", "text": "x"}], "stop_reason": "end_turn"},
        },
    ]
    d = Driver()
    record = project(history, d.state, HEADER, user_kind=follow_up)
    assert [c["steps"][0]["user_kind"] for c in record["cycles"]] == ["direct", "followUp"]
    assert record["cycles"][0]["steps"][-1]["kind"] == "ai"


def test_grouping_and_summary_rules() -> None:
    names = ("keyword_search", "patch", "bash", "think", "x")
    assert [tool_group(n, TRAITS) for n in names] == ["read", "write", "bash", "other", "other"]
    long = ToolUseBlock("t", "bash", {"command": "x" * 200})
    assert len(call_summary(long, TRAITS)) == 80
    spawn = ToolUseBlock("t", "spawn_agents", {"tasks": [{"task": "a"}, {"task": "b"}]})
    assert call_summary(spawn, TRAITS) == "2 sub-agent task(s)"


def test_groups_and_summaries_are_what_the_given_table_says() -> None:
    """The core has no table of its own: a tool it was not told of (a tool of an older
    version, a server no longer connected) is "other" with no summary, and a table
    that says otherwise is followed, whatever the tool's name."""
    call = ToolUseBlock("t", "mcp__files__read_file", {"path": "notes.md"})
    assert (tool_group(call.name), call_summary(call)) == ("other", "")
    told = ToolTraits.of([("mcp__files__read_file", "mcp", "path")])
    assert (tool_group(call.name, told), call_summary(call, told)) == ("mcp", "notes.md")
    assert (tool_group("bash"), call_summary(BASH1)) == ("other", "")


def _decisions(history: list[dict[str, object]]) -> list[object]:
    record = project(history, Driver().state, HEADER)
    return [s["decision"] for c in record["cycles"] for s in c["steps"] if s["kind"] == "approval"]


def _upgrade_answers(history: list[dict[str, object]]) -> list[dict[str, object]]:
    return [
        m["content"]  # type: ignore[misc]
        for m in history
        if m["message_type"] == "tool" and m["content"]["tool_use_id"] == "t5"  # type: ignore[index]
    ]


def test_approval_decision_is_read_from_the_recorded_field_not_the_reply_wording() -> None:
    """Approve, deny and cancel record `approval` with the answer; the record's approval
    step follows that field whatever the reply says (rewording a reply, or a reply that
    happens to quote the approval text, cannot flip the decision)."""
    runs = {"approved": UserApproveUpgrade(), "denied": UserCancel()}
    for expected, answer in runs.items():
        d = Driver()
        d.send(UserMessage("go"), LlmResponse((UPGRADE,), "tool_use"), answer)
        (content,) = _upgrade_answers(d.history)
        assert content["approval"] == expected
        assert _decisions(d.history) == [expected]
        content["content"] = "reworded reply"  # the wording no longer matches any constant
        assert _decisions(d.history) == [expected]
    d = Driver()
    d.send(UserMessage("go"), LlmResponse((UPGRADE,), "tool_use"), UserApproveUpgrade())
    (content,) = _upgrade_answers(d.history)
    content["approval"] = "denied"  # the wording still says "Approved: …"
    assert _decisions(d.history) == ["denied"]


def test_an_invalid_upgrade_request_records_no_approval_step() -> None:
    d = Driver()
    bad = ToolUseBlock("t5", "request_mode_upgrade", {"reason": ""})
    d.send(UserMessage("go"), LlmResponse((bad,), "tool_use"))
    (content,) = _upgrade_answers(d.history)
    assert "approval" not in content and _decisions(d.history) == []


def test_a_restart_during_approval_records_a_denied_answer() -> None:
    d = Driver()
    d.send(UserMessage("go"), LlmResponse((UPGRADE,), "tool_use"))
    _state, repairs = restored(d.state, d.history)
    answer = next(body for kind, body in repairs if kind == "tool")
    assert answer["approval"] == "denied"
    history = [*d.history, {"message_type": "tool", "content": answer}]
    assert _decisions(history) == ["denied"]


def test_a_note_between_turns_opens_the_turn_that_reads_it() -> None:
    """The model reads a note with the next message, so the next cell shows it first."""
    d = Driver()
    d.send(UserMessage("fix my cell"), LlmResponse((TextBlock("proposed"),), "end_turn"))
    d.history.append({"message_type": "system", "content": {"text": "edit-1: accepted"}})
    resting = project(d.history, d.state, HEADER)["cycles"]
    assert [s["kind"] for s in resting[-1]["steps"]] == ["user", "ai", "system"]  # nothing after
    d.send(UserMessage("done?"), LlmResponse((TextBlock("yes"),), "end_turn"))
    c0, c1 = project(d.history, d.state, HEADER)["cycles"]
    assert [s["kind"] for s in c0["steps"]] == ["user", "ai"]
    assert [s["kind"] for s in c1["steps"]] == ["system", "user", "ai"]
    assert c1["steps"][0]["text"] == "edit-1: accepted"
    assert c0["stop"] == {"reason": "completed"}


def test_a_note_the_run_goes_on_after_stays_in_that_run() -> None:
    d = Driver()
    d.send(UserMessage("go"), LlmResponse((BASH1,), "tool_use"))
    d.history.append({"message_type": "system", "content": {"text": "Mode changed"}})
    d.send(ToolComplete(ToolResult(BASH1.id, "out")))
    d.send(LlmResponse((TextBlock("done"),), "end_turn"), UserMessage("next"))
    c0, c1 = project(d.history, d.state, HEADER)["cycles"]
    assert [s["kind"] for s in c0["steps"]] == ["user", "ai", "system", "ai"]
    assert [s["kind"] for s in c1["steps"]] == ["user"]
