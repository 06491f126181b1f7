"""A checkpoint that fails says so once: one cause, one line.

Checkpoints live in the store (PHOENIX_HOME/checkpoints). On a full disk the
store's own saves fail for the same cause and its one line is what the user
reads, so the checkpoint adds no second line; its call's changes still record
that they cannot be reverted. A checkpoint that fails alone (its folder broken,
or a full disk outside the store) says one clear line: what failed, that the
call's changes cannot be reverted, and what to do. The full disk is real: a
small tmpfs in a private mount namespace (CI runs as root).
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
from pathlib import Path

import pytest

from phoenix_nb.checkpoints.recorder import Checkpoints
from phoenix_nb.core.values import Mode, ToolResult
from tests.small_disk import run_on_small_tmpfs

CHILD = r"""
import asyncio, json, logging, os, sys
from pathlib import Path
from phoenix_nb.checkpoints.recorder import Checkpoints
from phoenix_nb.core.values import Mode, ToolResult
from tests.small_disk import fill

store, project, in_store = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "store"
lines = []

class Keep(logging.Handler):
    def emit(self, record):
        lines.append([record.levelname, record.getMessage()])

logger = logging.getLogger("phoenix_nb")
logger.addHandler(Keep())
logger.setLevel(logging.INFO)
# As the manager wires it: the store's folder is excluded and holds the checkpoints.
checkpoints = Checkpoints(store / "checkpoints", exclude=(store,) if in_store else ())


async def main():
    await checkpoints.writes_possible("c1", str(project), "approval")
    fill(store)

    async def run():
        (project / "new.bin").write_bytes(os.urandom(300_000))
        return ToolResult("toolu_1", "done")

    result = await checkpoints.around_tool(
        conversation_id="c1", cwd=str(project), mode=Mode.UNRESTRICTED, tool="bash",
        tool_use_id="toolu_1", run=run,
    )
    return result.changes.error


error = asyncio.run(main())
print(json.dumps({"error": error, "log": lines}))
"""


def _full_disk(tmp_path: Path, where: str) -> dict[str, object]:
    store, project = tmp_path / "store", tmp_path / "project"
    project.mkdir()
    (project / "app.py").write_text("print('hi')\n")
    result = run_on_small_tmpfs(store, "256k", ["-c", CHILD, str(store), str(project), where])
    assert result.returncode == 0, result.stderr[-3000:]
    return dict(json.loads(result.stdout.splitlines()[-1]))


def _said(log: object) -> list[str]:
    """What reaches the user: warnings and above (the kernel shows them in the cell)."""
    assert isinstance(log, list)
    return [message for level, message in log if level in ("WARNING", "ERROR")]


def test_a_full_store_disk_is_said_once_by_the_store_not_again_by_the_checkpoint(
    tmp_path: Path,
) -> None:
    out = _full_disk(tmp_path, "store")
    assert _said(out["log"]) == [], "the store's own line says the disk is full"
    error = str(out["error"])
    assert "the disk is full" in error and "this call's changes cannot be reverted" in error


def test_a_checkpoint_that_fails_alone_says_one_clear_line(tmp_path: Path) -> None:
    """The same full disk, but not the store's: the checkpoint's line is the only one."""
    out = _full_disk(tmp_path, "elsewhere")
    [line] = _said(out["log"])
    assert "\n" not in line
    assert line.startswith("phoenix: the checkpoint ") and "the disk is full" in line
    assert "this call's changes cannot be reverted" in line and "Free some space in" in line


def test_a_broken_checkpoint_folder_says_what_it_means_for_undo(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "app.py").write_text("print('hi')\n")
    store = tmp_path / "store"
    checkpoints = Checkpoints(store / "checkpoints", exclude=(store,))
    asyncio.run(checkpoints.writes_possible("c1", str(project), "approval"))
    objects = store / "checkpoints" / "c1" / "git" / "objects"
    shutil.rmtree(objects)
    objects.write_text("a file where git's objects were")

    async def run() -> ToolResult:
        (project / "new.txt").write_text("new\n")
        return ToolResult("toolu_1", "done")

    with caplog.at_level(logging.INFO, logger="phoenix_nb"):
        result = asyncio.run(
            checkpoints.around_tool(
                conversation_id="c1",
                cwd=str(project),
                mode=Mode.UNRESTRICTED,
                tool="bash",
                tool_use_id="toolu_1",
                run=run,
            )
        )
    assert (project / "new.txt").exists(), "the call ran"
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    [line] = said
    assert "\n" not in line and "this call's changes cannot be reverted" in line, line
    assert "%config Phoenix.checkpoints = False" in line
    assert result.changes is not None and result.changes.error
    assert "cannot be reverted" in result.changes.error
