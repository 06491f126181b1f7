"""When the launcher prepares a taken spare's replacement, and with which budget.

A replacement is prepared once the command that took its predecessor is over,
not while it runs (its preparation's CPU would come out of the command's time).
Seen from outside: the launcher's children while a Restricted command runs are
the taken spare (now its supervisor) and the spares not taken, no new one; once
the command is over, the launcher has its full set again. And a spare prepared
after one command, from that command's budget, must not undo the budget of the
next command of the same conversation, which may have changed it.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from phoenix_nb.commands import CommandRunner
from phoenix_nb.core.values import Mode
from phoenix_nb.sandbox import SandboxLimits, detect_sandbox, launcher
from phoenix_nb.sandbox.child.launcher import SPARES
from phoenix_nb.tools.base import ToolContext
from phoenix_nb.tools.bash import BashTool
from tests.tiers import needs_cgroup

SANDBOX = detect_sandbox()
pytestmark = pytest.mark.skipif(not SANDBOX.available, reason="needs Landlock")

WAIT = 60.0  # generous: the machine may be saturated


def _ctx(cwd: Path, conversation: str) -> ToolContext:
    return ToolContext(
        cwd=cwd,
        mode=Mode.RESTRICTED,
        commands=CommandRunner(group=conversation, info=SANDBOX),
        conversation_id=conversation,
    )


def _launcher_children() -> list[int]:
    """The children of this process's launcher (its spares and supervisors)."""
    found: list[int] = []
    me = os.getpid()
    for task in os.listdir(f"/proc/{me}/task"):
        with open(f"/proc/{me}/task/{task}/children") as fh:
            for pid in fh.read().split():
                try:
                    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    continue
                if b"launcher.py" in cmdline:
                    with open(f"/proc/{pid}/task/{pid}/children") as kids:
                        found += [int(x) for x in kids.read().split()]
    return found


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(child) for child in fh.read().split()]
    except OSError:
        return []


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        kids = _children(todo.pop())
        found += kids
        todo += kids
    return found


def _all_prepared() -> bool:
    """Every spare holds its prepared command side: an Unrestricted spare its command
    process, a Restricted one its namespace's PID 1, which holds the command process.
    (Counting the launcher's children alone also counts a finished command's
    supervisor still exiting, while its replacement is not there yet.)"""
    spares = _launcher_children()
    kids = [_children(s) for s in spares]  # read once: a child may go between two reads
    if len(spares) != 2 * SPARES or not all(len(k) == 1 for k in kids):
        return False
    inits = [k[0] for k in kids]
    with_command = [pid for pid in inits if len(_children(pid)) == 1]
    return len(with_command) == (SPARES if launcher().hello().namespaces else 0)


async def _until(check: object, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def _running(marker: str) -> bool:
    """Whether a process whose command line holds `marker` runs (the command's bash)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    return True
            except OSError:
                continue
    return False


async def test_a_spare_is_replaced_only_after_the_command_that_took_it(tmp_path: Path) -> None:
    tool = BashTool()
    ctx = _ctx(tmp_path, "spare-timing")
    first = await tool.run({"command": "true"}, ctx, "w")  # the launcher is up
    assert not first.is_error, first.content
    full = 2 * SPARES  # one set per socket (Unrestricted, Restricted)
    await _until(_all_prepared, "the full set of spares, each prepared")
    # The command runs until the test lets it go (a file it can see, made here).
    go, marker = tmp_path / "go", f"spare-timing-{os.getpid()}"
    command = f": {marker}; while [ ! -e {go} ]; do sleep 0.01; done"
    run = asyncio.ensure_future(tool.run({"command": command, "timeout": 120}, ctx, "r"))
    try:
        await _until(lambda: _running(marker), "the command to start")
        # The taken spare is now the command's supervisor; no replacement yet.
        assert len(_launcher_children()) == full
    finally:
        go.touch()
        result = await run
    assert not result.is_error, result.content
    await _until(_all_prepared, "the replacement spare")
    await _until(lambda: not _running(marker), "the command to be gone")


@needs_cgroup
async def test_a_spare_prepared_after_a_command_keeps_the_next_ones_budget(
    tmp_path: Path,
) -> None:
    """The spare prepared after `true` (default budget) must not reset the budget the
    next command of the conversation set: three 160 MiB processes stay within 256 MiB.
    Three rounds, each a fresh chance for a spare's write to land during the next command."""
    ctx = _ctx(tmp_path, "spare-budget")
    hog = "python3 -c 'b = bytearray(160 << 20); import time; time.sleep(1)'"
    tight = BashTool(SandboxLimits(memory=256 << 20, address_space=8 << 30))
    for _ in range(3):
        first = await BashTool().run({"command": "true"}, ctx, "a")
        assert not first.is_error, first.content
        result = await tight.run(
            {"command": f"{hog} & {hog} & {hog} & wait; exit 0", "timeout": 60}, ctx, "b"
        )
        assert "[limit hit: memory" in result.content, result.content
