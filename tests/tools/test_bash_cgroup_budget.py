"""A Restricted command runs only inside its conversation's cgroup budget, or not at all.

Checked from outside the sandbox: the test reads the command's
``/proc/<pid>/cgroup`` and its group's limit files on the host while the
command waits for a release file, and a refused command's effect (its output)
never appears.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from phoenix_nb.commands import CommandRunner
from phoenix_nb.core.values import Mode
from phoenix_nb.sandbox import SandboxLimits, detect_sandbox
from phoenix_nb.sandbox.child import cgroup
from phoenix_nb.sandbox.rundir import group_for, owner
from phoenix_nb.tools.base import ToolContext
from phoenix_nb.tools.bash import BashTool
from tests.seeds import phoenix_seed
from tests.tiers import needs_cgroup

_WAIT = 120.0  # generous: the machine may be saturated


def _mounts() -> dict[str, str]:
    """Controller ("memory", "pids", "" for v2) -> host path of its hierarchy's root."""
    found: dict[str, str] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        pre, _, post = line.partition(" - ")
        fields, post_fields = pre.split(), post.split()
        if not post_fields or post_fields[0] not in ("cgroup", "cgroup2"):
            continue
        if fields[3] != "/":
            continue  # a bind of a sub-tree: the paths in /proc/<pid>/cgroup are not under it
        if post_fields[0] == "cgroup2":
            found.setdefault("", fields[4])
        for ctl in ("memory", "pids"):
            if ctl in post_fields[-1].split(","):
                found[ctl] = fields[4]
    return found


def _probe_version() -> int:
    own = Path("/proc/self/cgroup").read_text()
    return 1 if ":memory:" in own else 2 if "0::" in own else 0


def _limits_of(pid: int) -> tuple[str, str, str]:
    """(group name, memory limit, pids limit) of the cgroup `pid` is in, read on the host."""
    paths = {}
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            paths[name] = path
    mounts = _mounts()
    if "memory" in paths and "memory" in mounts and "pids" in mounts:
        mem = Path(mounts["memory"] + paths["memory"]).parent
        pid_dir = Path(mounts["pids"] + paths["pids"]).parent
        assert mem.name == pid_dir.name, (mem, pid_dir)
        memory = (mem / "memory.limit_in_bytes").read_text().strip()
        return mem.name, memory, (pid_dir / "pids.max").read_text().strip()
    group = Path(mounts[""] + paths[""]).parent
    return (
        group.name,
        (group / "memory.max").read_text().strip(),
        (group / "pids.max").read_text().strip(),
    )


def _rss_kb(word: str) -> int:
    """The largest resident set (kB) of the processes whose command line holds `word`."""
    most = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, StopIteration):
                if word.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    status = Path(f"/proc/{entry}/status").read_text().splitlines()
                    rss = next(s for s in status if s.startswith("VmRSS:"))
                    most = max(most, int(rss.split()[1]))
    return most


def _find(word: str) -> int | None:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if word.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    return int(entry)
    return None


def _ctx(cwd: Path, conversation: str) -> ToolContext:
    return ToolContext(
        cwd=cwd,
        mode=Mode.RESTRICTED,
        commands=CommandRunner(group=conversation, info=detect_sandbox()),
        conversation_id=conversation,
    )


@pytest.fixture
def busy() -> Iterator[None]:
    """A busy loop per core for the test's length: the load CI saw."""
    procs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(os.cpu_count() or 1)
    ]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


@pytest.fixture
def marks() -> Iterator[str]:
    word = f"phoenix_budget_{os.getpid()}_{time.monotonic_ns()}"
    yield word
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if word.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    os.kill(int(entry), 9)


def _needs_cgroups() -> None:
    if not _probe_version() or not _mounts():
        pytest.skip("this host gives no cgroup")


@needs_cgroup
async def test_many_commands_of_two_conversations_each_run_in_their_own_budget(
    tmp_path: Path, busy: None, marks: str
) -> None:
    """Under load, every Restricted command sits in its conversation's group with its limits."""
    _needs_cgroups()
    seed = phoenix_seed()
    rng = random.Random(seed)
    page = os.sysconf("SC_PAGE_SIZE")
    budgets = {
        "stress-a": SandboxLimits(memory=96 << 20, max_procs=30),
        "stress-b": SandboxLimits(memory=160 << 20, max_procs=50),
    }
    tools = {name: BashTool(limits) for name, limits in budgets.items()}
    ctxs = {name: _ctx(tmp_path, name) for name in budgets}
    plan = [rng.choice(sorted(budgets)) for _ in range(24)]
    width = 6  # commands in flight at once

    async def one(i: int, conversation: str) -> tuple[str, str]:
        word = f"{marks}_{i}"
        release = tmp_path / f"release-{i}"
        command = f"sh -c 'while ! [ -e {release} ]; do sleep 0.02; done # {word}'; echo done-{i}"
        task = asyncio.create_task(
            tools[conversation].run({"command": command, "timeout": 300}, ctxs[conversation], "t")
        )
        try:
            deadline = time.monotonic() + _WAIT
            pid = _find(word)
            while pid is None:
                assert not task.done(), (seed, i, task.result().content)
                assert time.monotonic() < deadline, (seed, i, "command never started")
                await asyncio.sleep(0.05)
                pid = _find(word)
            seen = _limits_of(pid)
        finally:
            release.touch()
        result = await task
        assert f"done-{i}" in result.content, (seed, i, result.content)
        return conversation, repr(seen)

    semaphore = asyncio.Semaphore(width)

    async def bounded(i: int, conversation: str) -> tuple[str, str]:
        async with semaphore:
            return await one(i, conversation)

    results = await asyncio.gather(*(bounded(i, c) for i, c in enumerate(plan)))
    for conversation, seen in results:
        limits = budgets[conversation]
        assert limits.memory is not None
        want = (
            group_for(conversation),
            str(limits.memory // page * page),
            str(limits.max_procs),
        )
        assert seen == repr(want), (seed, conversation, seen, want)


@needs_cgroup
async def test_a_budget_that_cannot_be_applied_refuses_the_command(
    tmp_path: Path, marks: str
) -> None:
    """A lower budget the kernel will not take (a job holds more) refuses; never runs over it.

    cgroup v1 refuses to lower ``memory.limit_in_bytes`` below what the group
    holds (EBUSY); the command must then be refused, not run with the old,
    larger limit. (cgroup v2 OOM-kills the holder instead: nothing to refuse.)
    """
    if _probe_version() != 1 or "memory" not in _mounts():
        pytest.skip("only cgroup v1 refuses a lower memory limit")
    ctx = _ctx(tmp_path, "refuse")
    holder = BashTool(SandboxLimits(memory=512 << 20))
    await holder.run(
        {
            "command": "python3 -c 'b = b\"x\" * (200 << 20); import time; time.sleep(600)' "
            f"{marks}",
            "background": True,
        },
        ctx,
        "t",
    )
    try:
        deadline = time.monotonic() + _WAIT
        held = 0
        while held < 200 << 10:  # kB
            assert time.monotonic() < deadline, "the holder never held its memory"
            await asyncio.sleep(0.05)
            held = _rss_kb(marks)
        small = BashTool(SandboxLimits(memory=64 << 20))
        result = await small.run({"command": "echo RAN-$((6 * 7))", "timeout": 60}, ctx, "t")
        assert "RAN-42" not in result.content, result.content
        assert "phoenix sandbox:" in result.content and "cgroup" in result.content, result.content
    finally:
        await ctx.commands.jobs.kill(ctx.conversation_id)


def _cgroup_dirs_of(pid: int) -> list[Path]:
    """The host directories of the cgroups `pid` is in (memory and pids, or v2's one)."""
    paths = {}
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            paths[name] = path
    mounts = _mounts()
    if "memory" in paths and "memory" in mounts and "pids" in mounts:
        return [Path(mounts[c] + paths[c]) for c in ("memory", "pids")]
    return [Path(mounts[""] + paths[""])]


@needs_cgroup
async def test_a_commands_cgroup_is_named_for_its_user_and_private(
    tmp_path: Path, marks: str
) -> None:
    """`<kernel's group>/phoenix-u<uid>-<kernel>/<conversation>/<command>`, the kernel's
    directory 0700 and the user's: another user's conversation of the same name has
    another directory, and cannot list this one's (issue 40)."""
    _needs_cgroups()
    ctx = _ctx(tmp_path, "same-slug")
    release = tmp_path / "release"
    command = f"sh -c 'while ! [ -e {release} ]; do sleep 0.02; done # {marks}'; echo done"
    task = asyncio.create_task(BashTool(SandboxLimits()).run({"command": command}, ctx, "t"))
    try:
        deadline = time.monotonic() + _WAIT
        pid = _find(marks)
        while pid is None:
            assert not task.done(), task.result().content
            assert time.monotonic() < deadline, "the command never started"
            await asyncio.sleep(0.05)
            pid = _find(marks)
        dirs = _cgroup_dirs_of(pid)
    finally:
        release.touch()
    assert "done" in (await task).content
    for d in dirs:
        kernel_dir = d.parent.parent
        assert d.parent.name == group_for("same-slug"), d
        assert kernel_dir.name == f"phoenix-u{os.getuid()}-{owner()}", d
        st = kernel_dir.stat()
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (os.getuid(), 0o700), (kernel_dir, st)


@needs_cgroup
def test_a_kernel_sweeps_only_its_own_users_stale_cgroups() -> None:
    """A dead kernel's directory is swept by the next kernel of the same user; another
    user's (named for its uid) is left to that user's kernels."""
    _needs_cgroups()
    setup = cgroup.detect(owner())
    assert setup.version, setup.why_not
    dead = "1-1"  # pid 1 never started at clock tick 1: no live kernel has this name
    mine = [Path(b).parent / cgroup.owner_dir(dead) for b in setup.bases]
    theirs = [Path(b).parent / cgroup.owner_dir(dead, uid=os.getuid() + 1) for b in setup.bases]
    for d in mine + theirs:
        d.mkdir()
    try:
        cgroup.remove_stale(setup, lambda name: name != dead)
        assert not any(d.exists() for d in mine)
        assert all(d.exists() for d in theirs)
    finally:
        for d in mine + theirs:
            with contextlib.suppress(FileNotFoundError):
                d.rmdir()
