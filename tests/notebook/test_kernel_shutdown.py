"""A kernel that exits leaves nothing in its TMPDIR: its run folder goes with it.

The run folder (`<TMPDIR>/phoenix-<uid>/<pid>-<start>`) holds the placeholders
bound over hidden paths, TMPDIR mount points, background-job logs and
run_python scratch. Checked from outside: the kernel gets a TMPDIR of its own,
uses every one of those, exits (cleanly, or killed), and the test waits for
its sandbox launcher to exit, then reads the folder.
"""

from __future__ import annotations

import os
import select
from pathlib import Path

import pytest

from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.notebook.kernel_harness import Kernel

pytestmark = pytest.mark.timeout(180)


def _launchers(kernel_pid: int) -> list[int]:
    """The kernel's sandbox launcher processes (children running sandbox/child/launcher.py)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        if ppid == kernel_pid and b"sandbox/child/launcher.py" in cmdline:
            found.append(int(entry))
    return found


def _wait_exit(pid: int, timeout: float) -> bool:
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(int(timeout * 1000)))
    finally:
        os.close(fd)


@pytest.fixture
def fake() -> FakeAnthropic:
    with FakeAnthropic() as server:
        yield server


@pytest.mark.parametrize("how", ["clean", "killed"])
def test_an_exiting_kernel_leaves_nothing_in_its_tmpdir(
    fake: FakeAnthropic, tmp_path: Path, how: str
) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    kernel = Kernel(tmp_path / "k", fake.base_url, extra_env={"TMPDIR": str(tmp)})
    try:
        kernel.ok("%load_ext phoenix_nb")
        fake.script(
            Turn([tool_use("bash", {"command": "echo scratch > $TMPDIR/x && cat $TMPDIR/x"})]),
            Turn([tool_use("bash", {"command": "sleep 600", "background": True})]),
            Turn([tool_use("run_python", {"code": "print(6 * 7)"})]),
            Turn([text("Done.")]),
        )
        cell = kernel.ok("%%phoenix --new\nuse the sandbox three ways")
        assert "42" in cell.text() or cell.status == "ok"
        kernel_pid = kernel.km.provisioner.pid  # type: ignore[union-attr]
        launchers = _launchers(kernel_pid)
        assert launchers, "the kernel started its sandbox launcher"
        assert any(tmp.iterdir()), "the kernel used its TMPDIR"
    finally:
        kernel.client.stop_channels()
        kernel.km.shutdown_kernel(now=how == "killed")
    for pid in launchers:
        assert _wait_exit(pid, 60), "the launcher outlived its kernel by a minute"
    left = sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*"))
    assert left == [], f"left in TMPDIR after the kernel exited: {left[:10]}"
