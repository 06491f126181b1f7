"""Restart restore (REQ-BED-007) and the purity of the core (REQ-BED-001)."""

from __future__ import annotations

import json
import subprocess
import sys

from phoenix_nb.core import states as S
from phoenix_nb.core.events import LlmResponse, SubAgentResult, ToolComplete, UserMessage
from phoenix_nb.core.messages import validate_chain
from phoenix_nb.core.restore import (
    SUB_AGENT_RESTART_ERROR,
    UPGRADE_NOT_APPROVED_RESULT,
    restore,
)
from phoenix_nb.core.values import Mode, SubAgentOutcome, ToolResult, ToolUseBlock

from .helpers import Driver, call, restored

UPGRADE = ToolUseBlock("u1", "request_mode_upgrade", {"reason": "edit"})


def appended(history: list, messages: list) -> list:
    return history + [{"message_type": k, "content": c} for k, c in messages]


def test_req_bed_007_tool_phase_restores_idle_with_orphans_answered() -> None:
    d = Driver()
    d.send(UserMessage("a"), LlmResponse((call(1), call(2), call(3)), "tool_use"))
    d.send(ToolComplete(ToolResult("t1", "ok")))
    state, messages = restored(d.state, d.history)
    assert state.phase == S.Idle() and state.mode is d.state.mode
    assert [c["tool_use_id"] for _, c in messages] == ["t2", "t3"]
    assert all("interrupted" in c["content"] for _, c in messages)
    assert validate_chain(appended(d.history, messages)) == []


def test_req_bed_007_pending_upgrade_is_answered_not_approved() -> None:
    d = Driver()
    d.send(UserMessage("a"), LlmResponse((UPGRADE, call(2)), "tool_use"))
    state, messages = restored(d.state, d.history)
    assert state.mode is Mode.RESTRICTED and state.phase == S.Idle()
    assert messages[0][1]["content"] == UPGRADE_NOT_APPROVED_RESULT
    assert [c["tool_use_id"] for _, c in messages] == ["u1", "t2"]
    assert validate_chain(appended(d.history, messages)) == []


def test_req_bed_007_sub_agent_wait_keeps_reported_outcomes() -> None:
    d = Driver()
    spawn = ToolUseBlock("s1", "spawn_agents", {"tasks": [{"task": "a"}, {"task": "b"}]})
    d.send(UserMessage("a"), LlmResponse((spawn,), "tool_use"))
    d.send(SubAgentResult("s1/0", SubAgentOutcome("success", "A done")))
    _state, messages = restored(d.state, d.history)
    [(kind, content)] = messages
    assert kind == "tool" and "A done" in content["content"]
    assert SUB_AGENT_RESTART_ERROR in content["content"]
    child, _ = restore(S.ConvState(S.LlmRequesting(2)), [], is_sub_agent=True)
    assert isinstance(child.phase, S.Failed)


def test_terminal_states_stay() -> None:
    exhausted = S.ConvState(S.ContextExhausted("summary"))
    assert restore(exhausted, []) == (exhausted, [])
    done = S.ConvState(S.Completed("r"))
    assert restore(done, [], is_sub_agent=True) == (done, [])


def test_req_bed_001_importing_the_core_pulls_in_no_io() -> None:
    code = (
        "import sys, json\n"
        "before = set(sys.modules)\n"
        "import phoenix_nb.core.transition, phoenix_nb.core.cycles, phoenix_nb.core.messages, "
        "phoenix_nb.core.restore, phoenix_nb.core.codec, phoenix_nb.core.models\n"
        "new = set(sys.modules) - before\n"
        "print(json.dumps(sorted(m for m in new if m.split('.')[0] in ("
        "'asyncio', 'socket', 'subprocess', 'tinydb', 'IPython', 'threading', 'random', "
        "'time', 'datetime', 'httpx', 'anthropic', 'os'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []
