"""The offline demo model drives real tools through the real SDK.

Every test goes the way a user does: `Phoenix` with model "demo" starts the
demo server, the official `anthropic` SDK reaches it over loopback, bash runs
real subprocesses under the real Landlock sandbox, patch edits real files.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from phoenix_nb.core.states import AwaitingModeApproval, ContextExhausted, Idle
from phoenix_nb.core.values import Mode
from phoenix_nb.demo.screenplay import INTRO, LABEL, RequestView, pace_from_env
from phoenix_nb.llm.images import prepare_image
from phoenix_nb.runtime.manager import Conversation, Phoenix
from phoenix_nb.runtime.settings import DEMO_MODEL, Settings, default_model
from phoenix_nb.sandbox import detect_sandbox

SAMPLE = Path(__file__).resolve().parents[1] / "notebooks" / "sample_project"
TURN_TIMEOUT = 60.0
needs_sandbox = pytest.mark.skipif(
    not detect_sandbox().available, reason="the Landlock sandbox is unavailable here"
)


def unittest_ok(folder: Path) -> bool:
    done = subprocess.run(
        [sys.executable, "-m", "unittest"], cwd=folder, capture_output=True, text=True
    )
    return done.returncode == 0


@pytest.fixture
def project(tmp_path: Path) -> Path:
    target = tmp_path / "project"
    shutil.copytree(SAMPLE, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


@pytest.fixture
async def phoenix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Phoenix]:
    monkeypatch.setenv("PHOENIX_DEMO_PACE", "0")
    manager = Phoenix(Settings(home=tmp_path / "home", model=DEMO_MODEL))
    yield manager
    await manager.aclose()


def agent_texts(conv: Conversation) -> list[str]:
    return [
        block["text"]
        for message in conv.history()
        if message["message_type"] == "agent"
        for block in message["content"]["blocks"]
        if block.get("type") == "TextBlock"
    ]


def tool_calls(conv: Conversation) -> list[dict[str, Any]]:
    return [
        block
        for message in conv.history()
        if message["message_type"] == "agent"
        for block in message["content"]["blocks"]
        if block.get("type") == "ToolUseBlock"
    ]


async def settle(coro: Any) -> Any:
    return await asyncio.wait_for(coro, TURN_TIMEOUT)


def test_demo_is_the_default_model_without_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("PHOENIX_MODEL", raising=False)
    assert default_model() == DEMO_MODEL
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    assert default_model() != DEMO_MODEL


@needs_sandbox
async def test_demo_explores_read_only_asks_then_fixes_after_approval(
    phoenix: Phoenix, project: Path
) -> None:
    conv = phoenix.create(cwd=project)
    assert conv.mode is Mode.RESTRICTED
    state = await settle(conv.run("The tests fail. Find out why and fix it."))

    assert isinstance(state.phase, AwaitingModeApproval)
    assert "pricing.py" in state.phase.reason
    assert not unittest_ok(project), "nothing may change before approval"
    first = agent_texts(conv)[0]
    assert first.startswith(LABEL) and "No ANTHROPIC_API_KEY" in first
    names = [call["name"] for call in tool_calls(conv)]
    assert names[:4] == ["bash", "bash", "keyword_search", "bash"]
    results = [m["content"] for m in conv.history() if m["message_type"] == "tool"]
    assert "FAILED (failures=2)" in results[1]["content"], "the real unittest output"

    await conv.approve()
    state = await settle(conv.wait())
    assert isinstance(state.phase, Idle) and state.mode is Mode.UNRESTRICTED
    assert unittest_ok(project)
    assert "quantity >= BULK_THRESHOLD" in (project / "shop/pricing.py").read_text()
    assert "quantity > BULK_THRESHOLD" in (SAMPLE / "shop/pricing.py").read_text()
    assert "All 6 tests pass now" in agent_texts(conv)[-1]
    patch_displays = [m["display_data"] for m in conv.history() if m["message_type"] == "tool"]
    assert any(
        d and "+    if quantity >= BULK_THRESHOLD:" in d.get("diff", "") for d in patch_displays
    )


@needs_sandbox
async def test_demo_denied_upgrade_changes_nothing_and_explains(
    phoenix: Phoenix, project: Path
) -> None:
    conv = phoenix.create(cwd=project)
    await settle(conv.run("Please fix the failing tests."))
    await conv.deny()
    state = await settle(conv.wait())
    assert isinstance(state.phase, Idle) and state.mode is Mode.RESTRICTED
    assert not unittest_ok(project)
    assert "stay read-only" in agent_texts(conv)[-1]
    assert "patch" not in [call["name"] for call in tool_calls(conv)]


async def test_demo_asking_twice_finds_nothing_left_to_fix(phoenix: Phoenix, project: Path) -> None:
    """A re-run cell must not break the script: the second time, the tests already pass."""
    conv = phoenix.create(cwd=project, mode=Mode.UNRESTRICTED)
    state = await settle(conv.run("Fix the failing tests."))
    assert isinstance(state.phase, Idle), "Unrestricted: no approval needed"
    assert unittest_ok(project)
    results = [m["content"]["content"] for m in conv.history() if m["message_type"] == "tool"]
    assert any(r.startswith("Already in Unrestricted") for r in results), "asked, not blocked"
    await settle(conv.run("Fix the failing tests."))
    assert "tests pass: there is nothing to fix" in agent_texts(conv)[-1]
    await settle(conv.run("What did you change?"))
    assert "`>` became `>=`" in agent_texts(conv)[-1]
    assert LABEL not in agent_texts(conv)[-1], "the disclaimer is said once per conversation"
    said = "\n".join(agent_texts(conv))
    assert said.count(LABEL) == 1 and said.count(INTRO) == 1


async def test_demo_outside_the_sample_project_answers_truthfully(
    phoenix: Phoenix, tmp_path: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    conv = phoenix.create(cwd=empty)
    state = await settle(conv.run("Fix the failing tests."))
    assert isinstance(state.phase, Idle)
    assert "no failing unittest test" in agent_texts(conv)[-1]
    assert list(empty.iterdir()) == []


async def test_demo_sub_agents_run_real_commands(phoenix: Phoenix, project: Path) -> None:
    conv = phoenix.create(cwd=project)
    state = await settle(conv.run("Use sub-agents to survey the project."))
    assert isinstance(state.phase, Idle)
    assert [c["name"] for c in tool_calls(conv)] == ["spawn_agents"]
    # The reports reach the parent (and the record) once, as spawn_agents' result; the
    # answer lists the tasks without pasting the reports a second time.
    result = json.dumps([m["content"] for m in conv.history() if m["message_type"] != "agent"])
    assert "./shop/pricing.py" in result, "wc -l output from a sub-agent"
    assert "def line_total" in result, "grep output from the other sub-agent"
    final = agent_texts(conv)[-1]
    assert "**Task 1** (success)" in final and "**Task 2** (success)" in final, final
    assert "./shop/pricing.py" not in final and "def line_total" not in final, final
    children = phoenix.store.children(conv.id)
    assert len(children) == 2


async def test_demo_reports_the_attached_image(phoenix: Phoenix, project: Path) -> None:
    conv = phoenix.create(cwd=project)
    image = prepare_image(Image.new("RGB", (64, 48), "orange"))
    await settle(conv.run("What does this chart show?", [image]))
    assert "64×48 px image/png" in agent_texts(conv)[-1]


async def test_demo_writes_a_labelled_continuation_summary(phoenix: Phoenix, project: Path) -> None:
    conv = phoenix.create(cwd=project, mode=Mode.UNRESTRICTED)
    await settle(conv.run("Fix the failing tests."))
    new = await settle(conv.continue_in_new())
    phase = conv.state.phase
    assert isinstance(phase, ContextExhausted)
    assert phase.summary.startswith(LABEL) and "all tests pass" in phase.summary
    await settle(new.run("What did you change?"))
    assert "`>` became `>=`" in agent_texts(new)[-1], "the seeded summary carries the fix"


def test_request_view_reads_steps_results_and_mode() -> None:
    body = {
        "tools": [{"name": "bash"}],
        "messages": [
            {"role": "user", "content": "fix it"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "toolu_demo_upgrade_ab1", "name": "x", "input": {}}
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_demo_upgrade_ab1",
                        "content": [{"type": "text", "text": "Approved: yes"}],
                    },
                    {"type": "text", "text": "Mode changed to Unrestricted: ..."},
                ],
            },
        ],
    }
    view = RequestView.of(body)
    assert not view.is_sub_agent and not view.continuation and not view.first_reply
    assert view.unrestricted
    outcome = view.outcome("upgrade")
    assert outcome is not None and outcome.content == "Approved: yes"


def test_pace_setting_rejects_junk() -> None:
    assert pace_from_env({"PHOENIX_DEMO_PACE": "fast"}) == pace_from_env({})
    assert pace_from_env({"PHOENIX_DEMO_PACE": "99"}) == 0.5
    assert pace_from_env({"PHOENIX_DEMO_PACE": "0"}) == 0.0


async def test_demo_answers_a_follow_up_from_the_real_history(
    phoenix: Phoenix, project: Path
) -> None:
    """'What did you change?' is answered from the patch the conversation really made,
    without running the fix again or asking for write access."""
    conv = phoenix.create(cwd=project, mode=Mode.UNRESTRICTED)
    await settle(conv.run("The tests fail. Fix them."))
    calls_before = len(tool_calls(conv))
    await settle(conv.run("What did you change, in one sentence?"))
    answer = agent_texts(conv)[-1]
    assert answer.startswith("In `shop/pricing.py` I changed one line: `>` became `>=`"), answer
    assert len(tool_calls(conv)) == calls_before, "no tool call for a follow-up"
    fresh = phoenix.create(cwd=project)
    await settle(fresh.run("What did you change?"))
    assert "I have not changed any file in this conversation." in agent_texts(fresh)[-1]
    assert agent_texts(fresh)[-1].startswith(INTRO), "a new conversation gets it once"


def _patch_then(*after: dict[str, Any]) -> dict[str, Any]:
    """A request body: the demo patched pricing.py, then `after` happened."""
    call = {
        "type": "tool_use",
        "id": "toolu_demo_patch_ab1",
        "name": "patch",
        "input": {
            "path": "shop/pricing.py",
            "patches": [{"operation": "replace", "oldText": "a > b", "newText": "a >= b"}],
        },
    }
    result = {"type": "tool_result", "tool_use_id": "toolu_demo_patch_ab1", "content": "ok"}
    return {
        "tools": [{"name": "bash"}],
        "messages": [
            {"role": "user", "content": "fix it"},
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [result]},
            {"role": "assistant", "content": [{"type": "text", "text": "`>` became `>=`"}]},
            *after,
        ],
    }


def test_request_view_drops_patches_a_revert_undid() -> None:
    notice = (
        "[phoenix notice] The user reverted the working tree to checkpoint 1; files you "
        "changed since then are back as they were. Re-read files before editing them.\n"
        "  restored: shop/pricing.py"
    )
    ask = {"type": "text", "text": "What did you change?"}
    reverted = RequestView.of(
        _patch_then({"role": "user", "content": [{"type": "text", "text": notice}, ask]})
    )
    assert reverted.patches == [] and not reverted.fixed_before
    assert reverted.reverted == [("shop/pricing.py", "a > b", "a >= b")]
    assert reverted.question == "What did you change?", "the notice is not the user's words"
    kept = RequestView.of(_patch_then({"role": "user", "content": [ask]}))
    assert kept.patches == [("shop/pricing.py", "a > b", "a >= b")] and kept.fixed_before


def test_a_new_message_wins_over_the_results_a_cancel_left() -> None:
    from phoenix_nb.demo.screenplay import DemoScript
    from phoenix_nb.demo.turns import FakeRequest, TextSpec, ToolUseSpec

    call = {"type": "tool_use", "id": "toolu_demo_tests_ab2", "name": "bash", "input": {}}
    cancelled = {
        "type": "tool_result",
        "tool_use_id": "toolu_demo_tests_ab2",
        "content": "Cancelled by the user while this tool was running.",
        "is_error": True,
    }
    body = {
        "tools": [{"name": "bash"}],
        "messages": [
            {"role": "user", "content": "The tests fail."},
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [cancelled, {"type": "text", "text": "Please fix them."}]},
        ],
    }
    turn = DemoScript(pace=0).reply(FakeRequest(1, "POST", "/v1/messages", {}, body))
    said, explore = turn.blocks
    assert isinstance(said, TextSpec) and said.text.startswith("(You cancelled my last step")
    assert isinstance(explore, ToolUseSpec) and explore.id.startswith("toolu_demo_explore_")
