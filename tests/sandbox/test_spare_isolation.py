"""A Restricted command cannot shape the next Unrestricted one.

The launcher keeps a pre-forked spare per socket; the next Unrestricted command
runs in the Unrestricted socket's spare. Seen from the Unrestricted command:
its environment, resource limits, umask, working directory, open descriptors,
process group and TMPDIR are the same after a Restricted command that tried to
change every one of them (and left a background job behind) as before it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from phoenix_nb.commands import BackgroundJobs, CommandRunner
from phoenix_nb.core.values import Mode
from phoenix_nb.sandbox import detect_sandbox
from phoenix_nb.tools.base import ToolContext
from phoenix_nb.tools.bash import BashTool

SANDBOX = detect_sandbox()
pytestmark = pytest.mark.skipif(not SANDBOX.available, reason="needs Landlock")

# What an Unrestricted command can see of how it was started.
PROBE = (
    "echo env=$(env | grep -v -e '^_=' -e '^SHLVL=' -e '^OLDPWD=' | sort | md5sum); "
    "echo limits=$(ulimit -a | md5sum); echo umask=$(umask); echo pwd=$(pwd); "
    "echo fds=$(ls /proc/self/fd | wc -l); echo nice=$(nice); echo tmp=${TMPDIR:-unset}; "
    "echo evil=${PHOENIX_EVIL:-none}; echo pgid_is_own=$(($(ps -o pgid= $$) == $$))"
)

# Everything a shell can try to leave behind for whoever runs next.
MEDDLE = (
    "export PHOENIX_EVIL=1; ulimit -S -n 64; ulimit -S -s 1024; umask 077; renice 5 $$; "
    "cd /; exec 7</etc/hostname 8>$TMPDIR/fd; "
    "echo 'export PHOENIX_EVIL=1' >> ~/.bashrc 2>/dev/null; "
    "(sleep 300 &) ; setsid sleep 300 & true"
)


JOBS = BackgroundJobs()


def _ctx(cwd: Path, mode: Mode) -> ToolContext:
    return ToolContext(
        cwd=cwd,
        mode=mode,
        commands=CommandRunner(group="spare-isolation", info=SANDBOX, jobs=JOBS),
        conversation_id="spare-isolation",
    )


async def test_a_restricted_command_leaves_nothing_for_the_next_unrestricted_one(
    tmp_path: Path,
) -> None:
    tool = BashTool()
    free = _ctx(tmp_path, Mode.UNRESTRICTED)
    before = await tool.run({"command": PROBE}, free, "a")
    assert not before.is_error, before.content
    try:
        for background in (False, True):
            meddled = await tool.run(
                {"command": MEDDLE, "background": background},
                _ctx(tmp_path, Mode.RESTRICTED),
                "m",
            )
            assert not meddled.content.startswith("Refused"), meddled.content
            after = await tool.run({"command": PROBE}, free, "b")
            assert after.content == before.content
    finally:
        await JOBS.kill("spare-isolation")
    assert "evil=none" in before.content
