"""Sandbox detection and the degraded path (REQ-BASH-008, REQ-BASH-009).

Detection is cached per process, so the "Landlock missing" path runs in a
fresh interpreter with PHOENIX_SANDBOX=off, the switch that makes a machine
with Landlock behave like one without.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from phoenix_nb.core.values import Mode
from phoenix_nb.tools.base import ToolContext
from phoenix_nb.tools.bash import BashTool
from phoenix_nb.tools.sandbox import KERNEL_REQUIREMENT, MIN_ABI, detect_sandbox

needs_landlock = pytest.mark.skipif(not detect_sandbox().available, reason="needs Landlock")


def test_detect_sandbox_reports_available_with_abi() -> None:
    """This machine has Landlock ABI 7 (NOTES.md): Restricted mode must be on."""
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
    from phoenix_nb.tools.base import ToolContext
    from phoenix_nb.tools.bash import BashTool
    from phoenix_nb.tools.sandbox import detect_sandbox

    async def main():
        info = detect_sandbox()
        cwd = Path(sys.argv[1])
        out = {"available": info.available, "abi": info.abi, "reason": info.reason}
        for mode in (Mode.RESTRICTED, Mode.UNRESTRICTED):
            ctx = ToolContext(cwd=cwd, mode=mode, sandbox=info)
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
        ("echo x > f.txt", "Permission denied"),
        ("chmod 600 f.txt", "Operation not permitted"),
        ("touch -d 2001-01-01 f.txt", "Permission denied"),
        ("python3 -c 'import os; os.setsid()'", "Operation not permitted"),
    ],
)
async def test_kernel_errors_come_back_unrewritten(
    tmp_path: Path, command: str, kernel_error: str
) -> None:
    """REQ-BASH-008: the command's own stderr, with the kernel's errno text, reaches the model."""
    (tmp_path / "f.txt").write_text("keep\n")
    ctx = ToolContext(cwd=tmp_path, mode=Mode.RESTRICTED, sandbox=detect_sandbox())
    result = await BashTool().run({"command": command}, ctx, "t")
    assert kernel_error in result.content, result.content
    assert "[exit code" in result.content
    assert (tmp_path / "f.txt").read_text() == "keep\n"


@needs_landlock
async def test_restricted_tmpdir_is_private_writable_and_removed(tmp_path: Path) -> None:
    ctx = ToolContext(cwd=tmp_path, mode=Mode.RESTRICTED, sandbox=detect_sandbox())
    result = await BashTool().run(
        {"command": "echo scratch > $TMPDIR/x && cat $TMPDIR/x && echo $TMPDIR"}, ctx, "t"
    )
    scratch, tmpdir = result.content.splitlines()
    assert scratch == "scratch"
    assert not Path(tmpdir).exists()
