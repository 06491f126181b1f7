"""SIGKILL at the exact instants between the state commit and the message commit.

The runtime persists a transition's new state (in the store's index journal)
before its messages (in the conversation's own journal): two files, two
commits. A kill between them leaves a state that names a tool call the history
does not hold yet. The random crash test (test_crash_restore.py) found this by
chance — lane seed 2240223546, trial 20: a conversation committed as
`awaiting_mode_approval` whose request_mode_upgrade call was never persisted,
and start-up restore answered that call anyway, leaving a tool_result for no
tool_use (a history the API rejects). Here each such instant is reached on
purpose, in a real process killed by a real SIGKILL, so the regression is pinned
deterministically; restore must answer only calls the history holds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from phoenix_nb.core.states import ConvState, from_persisted
from phoenix_nb.store import Store
from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use

from .test_crash_restore import Acks, check_restored

ROOT = Path(__file__).resolve().parents[2]

KILL_POINTS = {
    # state committed, the agent message with the call not yet
    "awaiting_mode_approval": Turn([tool_use("request_mode_upgrade", {"reason": "write notes"})]),
    "awaiting_sub_agents": Turn([tool_use("spawn_agents", {"tasks": [{"task": "count files"}]})]),
    "tool_executing": Turn([tool_use("bash", {"command": "echo hi"})]),
}


def _killed_at(tmp_path: Path, die_at: str) -> tuple[Path, ConvState, list[dict[str, object]]]:
    store_root, project = tmp_path / "store", tmp_path / "project"
    project.mkdir()
    (project / "app.py").write_text("x = 1\n")
    with FakeAnthropic() as fake:
        fake.script(KILL_POINTS[die_at], Turn([text("done")]))
        victim = subprocess.run(
            [
                sys.executable,
                "-m",
                "tests.runtime.kill_point_child",
                str(store_root),
                str(project),
                fake.base_url,
                die_at,
                "go",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    assert victim.returncode == -signal.SIGKILL, victim.stderr[-2000:]
    with Store(store_root) as store:
        (record,) = store.list_conversations()
        return store_root, from_persisted(record), store.messages(record["id"])


@pytest.mark.parametrize("die_at", sorted(KILL_POINTS))
def test_kill_between_state_and_message_commit_restores_a_valid_history(
    tmp_path: Path, die_at: str
) -> None:
    store_root, state, history = _killed_at(tmp_path, die_at)
    # The kill landed where intended: the state is committed, the call is not.
    assert state.name == die_at
    assert [m["message_type"] for m in history] == ["user"]
    check_restored(store_root, Acks())
