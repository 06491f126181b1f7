"""Sandbox detection and the degraded path (REQ-BASH-008, REQ-BASH-009).

Detection is cached per process, so the "Landlock missing" path runs in a
fresh interpreter with PHOENIX_SANDBOX=off, the switch that makes a machine
with Landlock behave like one without.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from phoenix_nb.commands import CommandRunner
from phoenix_nb.core.values import Mode
from phoenix_nb.sandbox import KERNEL_REQUIREMENT, MIN_ABI, detect_sandbox, launcher
from phoenix_nb.tools.base import ToolContext
from phoenix_nb.tools.bash import BashTool
from tests.tiers import cgroups_expected

needs_landlock = pytest.mark.skipif(not detect_sandbox().available, reason="needs Landlock")


def test_detect_sandbox_reports_available_with_abi() -> None:
    """This machine has Landlock ABI 7 (docs/platform-facts.md): Restricted mode must be on."""
    info = detect_sandbox()
    assert info.available, info.reason
    assert info.abi >= MIN_ABI
    assert f"Landlock ABI {info.abi}" in info.reason
    assert detect_sandbox() is info  # detected once


DEGRADED_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, logging, sys
    from pathlib import Path
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    from phoenix_nb.core.values import Mode
    from phoenix_nb.commands import CommandRunner
    from phoenix_nb.tools.base import ToolContext
    from phoenix_nb.tools.bash import BashTool
    from phoenix_nb.sandbox import detect_sandbox

    async def main():
        info = detect_sandbox()
        cwd = Path(sys.argv[1])
        out = {"available": info.available, "abi": info.abi, "reason": info.reason}
        for mode in (Mode.RESTRICTED, Mode.UNRESTRICTED):
            ctx = ToolContext(cwd=cwd, mode=mode, commands=CommandRunner(info=info))
            for command in ("echo ran > ran.txt; echo ran", "rm -rf ~"):
                r = await BashTool().run({"command": command}, ctx, "t")
                out[f"{mode.value}:{command}"] = [r.content, r.is_error]
        print(json.dumps(out))

    asyncio.run(main())
    """
)


def test_sandbox_off_disables_restricted_mode_but_keeps_safety(tmp_path: Path) -> None:
    """REQ-BASH-009: no Landlock -> warning, Restricted refused with the requirement,
    safety checks still refuse in Unrestricted mode."""
    env = {**os.environ, "PHOENIX_SANDBOX": "off"}
    proc = subprocess.run(
        [sys.executable, "-c", DEGRADED_SCRIPT, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    out = json.loads(proc.stdout)
    assert out["available"] is False
    assert KERNEL_REQUIREMENT in out["reason"]
    assert "sandbox unavailable, Restricted mode disabled" in proc.stderr
    assert KERNEL_REQUIREMENT in proc.stderr

    text, is_error = out["restricted:echo ran > ran.txt; echo ran"]
    assert is_error and "Restricted mode is unavailable" in text and KERNEL_REQUIREMENT in text
    text, is_error = out["restricted:rm -rf ~"]
    assert is_error and "Refused" in text

    text, is_error = out["unrestricted:echo ran > ran.txt; echo ran"]
    assert not is_error and text.strip() == "ran"
    text, is_error = out["unrestricted:rm -rf ~"]
    assert is_error and "Refused" in text
    # Only the one Unrestricted command ran: the refused Restricted one wrote nothing.
    assert (tmp_path / "ran.txt").read_text() == "ran\n"


@needs_landlock
@pytest.mark.parametrize(
    ("command", "kernel_error"),
    [
        # Read-only mounts answer first where the command has its own namespaces.
        ("echo x > f.txt", "Permission denied|Read-only file system"),
        ("chmod 600 f.txt", "Operation not permitted"),
        ("touch -d 2001-01-01 f.txt", "Permission denied|Read-only file system"),
        ("python3 -c 'import os; os.setsid()'", "Operation not permitted"),
    ],
)
async def test_kernel_errors_come_back_unrewritten(
    tmp_path: Path, command: str, kernel_error: str
) -> None:
    """REQ-BASH-008: the command's own stderr, with the kernel's errno text, reaches the model."""
    (tmp_path / "f.txt").write_text("keep\n")
    ctx = ToolContext(
        cwd=tmp_path, mode=Mode.RESTRICTED, commands=CommandRunner(info=detect_sandbox())
    )
    result = await BashTool().run({"command": command}, ctx, "t")
    assert any(e in result.content for e in kernel_error.split("|")), result.content
    assert "[exit code" in result.content
    assert (tmp_path / "f.txt").read_text() == "keep\n"


@needs_landlock
async def test_restricted_tmpdir_is_private_writable_and_removed(tmp_path: Path) -> None:
    ctx = ToolContext(
        cwd=tmp_path, mode=Mode.RESTRICTED, commands=CommandRunner(info=detect_sandbox())
    )
    result = await BashTool().run(
        {"command": "echo scratch > $TMPDIR/x && cat $TMPDIR/x && echo $TMPDIR"}, ctx, "t"
    )
    scratch, tmpdir = result.content.splitlines()
    assert scratch == "scratch"
    assert not Path(tmpdir, "x").exists()  # the command's file is gone when the tool returns
    # Where namespaces hold, the file lived in the namespace's own tmpfs, and what is
    # left here is its empty mount point, removed by the supervisor after its report.
    deadline = time.monotonic() + 30
    while Path(tmpdir).exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert not Path(tmpdir).exists()


# ---------------------------------------------------------------- degraded hosts

HOST_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    from pathlib import Path
    from phoenix_nb.core.values import Mode
    from phoenix_nb.commands import CommandRunner
    from phoenix_nb.tools.base import ToolContext
    from phoenix_nb.tools.bash import BashTool
    from phoenix_nb.sandbox import detect_sandbox, guarantees

    async def main():
        info = detect_sandbox()
        runner = CommandRunner(info=info)
        ctx = ToolContext(cwd=Path(sys.argv[1]), mode=Mode.RESTRICTED, commands=runner)
        out = {"available": info.available, "reason": info.reason,
               "guarantees": [[g.name, g.holds, g.mechanism] for g in guarantees()]}
        for command in sys.argv[2:]:
            r = await BashTool().run({"command": command, "timeout": 30}, ctx, "t")
            out[command] = r.content
        print(json.dumps(out))

    asyncio.run(main())
    """
)

NET_ATTEMPT = (
    "python3 -c 'import socket; s = socket.socket(); "
    's.sendto(b"x", socket.MSG_FASTOPEN, ("127.0.0.1", {port}))\''
)


def _host(tmp_path: Path, env: dict[str, str], *commands: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", HOST_SCRIPT, str(tmp_path), *commands],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(proc.stdout)


@needs_landlock
@pytest.mark.parametrize("abi", ["1", "2", "3"])
def test_older_landlock_abi_keeps_files_read_only_and_network_off(tmp_path: Path, abi: str) -> None:
    """Landlock asked for ABI 1-3 rights only (Linux 5.13-6.6): the network guarantee
    now comes from the network namespace, truncate(2) from seccomp (ABI < 3)."""
    import socket

    (tmp_path / "f.txt").write_text("keep\n")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        out = _host(
            tmp_path,
            {"PHOENIX_LANDLOCK_ABI": abi},
            "echo x > f.txt; truncate -s 0 f.txt; mv f.txt g.txt; exit 0",
            NET_ATTEMPT.format(port=port),
        )
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()
    assert out["available"], out
    assert f"Landlock ABI {abi}" in str(out["reason"])
    assert (tmp_path / "f.txt").read_text() == "keep\n"
    holds = {name: (ok, how) for name, ok, how in out["guarantees"]}  # type: ignore[union-attr]
    assert holds["no network"] == (True, "private network namespace (own loopback only)")


@needs_landlock
def test_without_namespaces_what_holds_is_kept_and_what_is_lost_is_named(tmp_path: Path) -> None:
    """A host that refuses namespaces: seccomp denies every socket and SysV IPC, and the
    report names each lost guarantee (credential hiding, /proc, TMPDIR caps)."""
    out = _host(
        tmp_path,
        {"PHOENIX_SANDBOX_NAMESPACES": "off"},
        NET_ATTEMPT.format(port=9),
        "ipcmk -M 4096; echo x > f.txt; echo ok > $TMPDIR/x && cat $TMPDIR/x",
    )
    assert out["available"], out
    attempt = str(out[NET_ATTEMPT.format(port=9)])
    assert "PermissionError" in attempt, attempt
    second = str(out["ipcmk -M 4096; echo x > f.txt; echo ok > $TMPDIR/x && cat $TMPDIR/x"])
    assert "Operation not permitted" in second and "Permission denied" in second
    assert second.rstrip().endswith("ok")
    lost = {name for name, ok, _ in out["guarantees"] if not ok}  # type: ignore[union-attr]
    assert lost == {
        "other processes invisible in /proc",
        "credential files unreadable",
        "TMPDIR size and inode caps",
        "no capability outside the sandbox",
    } | (set() if cgroups_expected() else {"whole-tree memory and process limits"}), out[
        "guarantees"
    ]
    assert "LOST here" in str(out["reason"])
    assert not (tmp_path / "f.txt").exists()


# Every way to shorten a file the command may read but not write.
TRUNCATIONS = (
    "python3 -c 'import os; os.open(\"f.txt\", os.O_RDONLY | os.O_TRUNC)'; "
    "python3 -c 'import os; os.truncate(\"f.txt\", 0)'; "
    "python3 -c 'import os; os.ftruncate(os.open(\"f.txt\", os.O_RDONLY), 0)'; "
    "python3 -c 'import os; os.ftruncate(os.open(\"f.txt\", os.O_WRONLY), 0)'; "
    "truncate -s 0 f.txt; : > f.txt; "
    "echo tmp > $TMPDIR/t && truncate -s 0 $TMPDIR/t && wc -c < $TMPDIR/t"
)


@needs_landlock
@pytest.mark.parametrize("abi", ["", "2"])
@pytest.mark.parametrize("namespaces", ["on", "off"])
def test_no_truncation_reaches_a_file_outside_tmpdir(
    tmp_path: Path, namespaces: str, abi: str
) -> None:
    """With its own namespaces a command sees every mount read-only (its TMPDIR and
    /dev/shm aside), which refuses truncation before Landlock is asked, and its
    Landlock ruleset leaves truncation unhandled (the kernel's walk up each opened
    path may stop early); without them Landlock refuses truncation itself, and below
    ABI 3 (which does not handle it) seccomp does: an open for reading with O_TRUNC
    shortened the file there. Either way no route shortens the user's file, and
    TMPDIR stays writable."""
    (tmp_path / "f.txt").write_text("keep\n")
    env = {"PHOENIX_SANDBOX_NAMESPACES": namespaces}
    if abi:
        env["PHOENIX_LANDLOCK_ABI"] = abi
    out = _host(tmp_path, env, TRUNCATIONS)
    text = str(out[TRUNCATIONS])
    assert (tmp_path / "f.txt").read_text() == "keep\n", text
    assert text.count("Traceback") == 4, text  # each Python route refused
    assert "\n0\n" in text + "\n", text  # TMPDIR's own file was truncated


@needs_landlock
async def test_every_mount_a_restricted_command_sees_is_read_only_but_its_own(
    tmp_path: Path,
) -> None:
    """Where namespaces hold: the mount table the command itself reads. Only its TMPDIR
    and /dev/shm (size-capped tmpfs of its own) are mounted writable."""
    if not launcher().hello().namespaces:
        pytest.skip("this host gives the command no namespaces")
    ctx = ToolContext(
        cwd=tmp_path, mode=Mode.RESTRICTED, commands=CommandRunner(info=detect_sandbox())
    )
    result = await BashTool().run({"command": "echo $TMPDIR; cat /proc/self/mountinfo"}, ctx, "t")
    tmpdir, *table = result.content.splitlines()
    writable = sorted(
        fields[4]
        for fields in (line.split() for line in table if " - " in line)
        if "ro" not in fields[5].split(",")
    )
    assert writable == sorted(["/dev/shm", tmpdir]), result.content


@needs_landlock
def test_leftovers_of_a_dead_kernel_are_removed_at_next_start_up(tmp_path: Path) -> None:
    """A kernel that died without ending its conversation left a background-job folder
    (deep, with an unreadable directory): the next kernel's launcher removes it.

    The leftover is built inside this live kernel's own folder and renamed into place
    in one step: the folder's parent is shared by every kernel on the machine, and any
    launcher starting meanwhile (another test run) may remove a dead kernel's folder,
    also one still being built."""
    from phoenix_nb.sandbox import run_dir

    dead = run_dir().parent / f"999999999-{os.getpid()}"
    staging = run_dir() / f"leftover-{os.getpid()}"
    deep = staging / "bg-x"
    deep.mkdir(parents=True)
    (deep / "output.log").write_text("old log\n")
    inner = deep
    for _ in range(300):
        inner = inner / "d"
    inner.mkdir(parents=True)
    (deep / "d").chmod(0)
    staging.rename(dead)
    _host(tmp_path, {}, "true")
    assert not dead.exists()
    assert run_dir().exists()  # this live kernel's own folder is left alone


@needs_landlock
@pytest.mark.timeout(120)
def test_status_and_load_ext_say_which_guarantees_hold_and_which_are_lost(
    tmp_path: Path,
) -> None:
    """In a real kernel: `%phoenix status` names each guarantee's mechanism; on a host
    without namespaces the first cell that uses phoenix warns, once, and lists exactly
    what is lost (`%load_ext` only starts the detection, off the main thread)."""
    from phoenix_nb.testing import FakeAnthropic
    from tests.notebook.kernel_harness import Kernel

    with FakeAnthropic() as fake:
        for env, expect_lost in (({}, False), ({"PHOENIX_SANDBOX_NAMESPACES": "off"}, True)):
            kern = Kernel(tmp_path / str(expect_lost), fake.base_url, extra_env=env)
            try:
                loaded = kern.ok("%load_ext phoenix_nb").text("stdout")
                other = kern.ok("x = 1").text("stdout")
                first = kern.ok("%phoenix new").text("stdout")
                status = kern.ok("%phoenix status").text("stdout")
            finally:
                kern.shutdown()
            assert "partial" not in loaded + other, (loaded, other)
            if expect_lost:
                assert "Restricted mode is partial" in first
                assert "credential files unreadable: LOST" in first, first
                assert "Restricted mode is partial" not in status, "said once"
                assert "LOST   credential files unreadable" in status, status
                assert "holds  no network: seccomp denies every inet socket" in status
            elif cgroups_expected():
                assert "partial" not in first, first
                assert "holds  no network: private network namespace" in status, status
                assert "holds  whole-tree memory and process limits: cgroup v" in status
                assert "LOST" not in status, status
            else:  # an ordinary user without a cgroup of its own: that, and only that
                assert "Restricted mode is partial" in first, first
                assert "whole-tree memory and process limits: LOST" in first, first
                assert "holds  no network: private network namespace" in status, status
                lost = [line for line in status.splitlines() if "LOST" in line]
                assert len(lost) == 1, status
                assert "LOST   whole-tree memory and process limits" in lost[0], status
