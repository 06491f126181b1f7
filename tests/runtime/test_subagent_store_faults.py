"""A sub-agent whose save fails mid-turn: its parent learns at once, and why.

The store is a real full filesystem: a small tmpfs mounted as PHOENIX_HOME in a
private mount namespace (CI runs as root), filled by the fake Messages API while
the sub-agent waits for its reply (`full_store_child.py` runs parent, child, the
real SDK and the fake model in that namespace). The sub-agent timeout is an hour;
the run waits only for the parent to settle, so a parent left waiting for its
child would fail the test by its timeout instead of passing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.small_disk import run_on_small_tmpfs

pytestmark = pytest.mark.timeout(180)

CHILD = Path(__file__).with_name("full_store_child.py")


def _run(tmp_path: Path, free: int, *extra: str) -> dict[str, Any]:
    args = [str(CHILD), str(tmp_path), str(free), " ".join(extra)]
    result = run_on_small_tmpfs(tmp_path / "store", "2m", args)
    assert result.returncode == 0, result.stderr[-3000:]
    return dict(json.loads(result.stdout.splitlines()[-1]))


def _store_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if "Could not save" in line]


def test_the_parent_is_told_at_once_that_its_sub_agent_could_not_save(tmp_path: Path) -> None:
    """Room is left for the parent's small result, not for the child's big reply."""
    out = _run(tmp_path, free=64 * 1024)
    [result] = out["results"]
    body = result.split("Status: failure\n", 1)[1]
    assert "\n" not in body, "one line"
    assert body.startswith("The sub-agent stopped because its save failed: Could not save")
    assert "the disk is full" in body and "(PHOENIX_HOME)" in body
    assert "kernel restart" not in result
    assert out["saved_results"] == [result], "the parent's model got it only once it was saved"
    [shown] = _store_lines(out["shown"])  # the user sees the store's line once
    assert shown == body
    assert out["parent_state"] == "idle" and out["parent_valid"]
    assert out["child_state"] == "Failed" and out["child_error"] == body
    assert out["child_valid"]
    assert out["parent_valid_after"] and out["parent_state_after"] == "idle"


def test_with_no_room_for_the_parent_either_the_user_sees_one_line(tmp_path: Path) -> None:
    """The parent cannot save either (its record, holding a 4,000-byte cwd, is longer
    than a page and fits in no page's slack): it stops with its own line — the same
    cause, said once — sends nothing unsaved, and goes on once space is freed."""
    out = _run(tmp_path, 0, "long")
    [shown] = _store_lines(out["shown"])
    assert shown.startswith("Could not save conversation ") and "the disk is full" in shown
    assert "\n" not in shown
    assert out["results"] == [] == out["saved_results"], "nothing unsaved reached its model"
    assert out["parent_state"] == "idle"
    assert out["parent_valid_after"] and out["parent_state_after"] == "idle"
