"""A fork of the kernel is confined and scrubbed by the conversation's `CommandRunner`.

The kernel tools' forks have no recipe of their own: what a fork may read (the
runner's policy, its hidden paths) and which provider credentials it overwrites in
its memory (the runner's live credentials) come from the runner the runtime made
for the conversation, as a bash command's confinement does. Each test runs
`run_python` through a real fork twice, with two runners that differ in one value,
and checks what the fork itself saw.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from phoenix_nb.commands import CommandRunner
from phoenix_nb.core.values import Mode
from phoenix_nb.sandbox import DEFAULT_DENY_READ, SandboxPolicy, detect_sandbox
from phoenix_nb.tools.base import ToolContext
from phoenix_nb.tools.kernel import RunPythonTool
from phoenix_nb.tools.kernel.fork import sandbox_ready
from phoenix_nb.tools.kernel_port import DictKernel

needs_sandbox = pytest.mark.skipif(
    not (detect_sandbox().available and sandbox_ready()), reason="no kernel sandbox"
)

# A token an SDK client holds: no secret-looking name, no known token shape, and not
# in the environment, so only the runner's `live_credentials` can say it is one.
LIVE_TOKEN = "opaque-Hq3vZ8pW2mK5xR7t"


def _ctx(cwd: Path, kernel: DictKernel, runner: CommandRunner) -> ToolContext:
    return ToolContext(cwd=cwd, mode=Mode.RESTRICTED, commands=runner, kernel=kernel)


@needs_sandbox
async def test_the_forks_hidden_paths_are_its_runners_policy(tmp_path: Path) -> None:
    (tmp_path / "private-notes.txt").write_text("CANARY-fork-notes\n")
    kernel = DictKernel(namespace={})
    plain = CommandRunner(group="runner-fork", info=detect_sandbox())
    hiding = replace(
        plain, policy=SandboxPolicy.build(deny_read=[*DEFAULT_DENY_READ, "private-notes.txt"])
    )
    code = {"code": "print(open('private-notes.txt').read())"}

    shown = await RunPythonTool().run(code, _ctx(tmp_path, kernel, plain), "t1")
    hidden = await RunPythonTool().run(code, _ctx(tmp_path, kernel, hiding), "t2")

    assert "CANARY-fork-notes" in shown.content, shown.content
    assert "CANARY-fork-notes" not in hidden.content
    assert hidden.is_error and "Error" in hidden.content, hidden.content


@needs_sandbox
async def test_the_runners_live_credentials_are_overwritten_in_the_fork(tmp_path: Path) -> None:
    # The fork counts the token's prefix in its own copy of `blob`: the output names no
    # secret, so the way-out redaction cannot be what hides it.
    kernel = DictKernel(namespace={"blob": f"held by an SDK client: {LIVE_TOKEN}"})
    without = CommandRunner(group="runner-fork", info=detect_sandbox())
    holding = replace(without, live_credentials=lambda: (LIVE_TOKEN,))
    code = {"code": "print('count', blob.count('Hq3vZ8pW2mK5'))"}

    kept = await RunPythonTool().run(code, _ctx(tmp_path, kernel, without), "t1")
    scrubbed = await RunPythonTool().run(code, _ctx(tmp_path, kernel, holding), "t2")

    assert "count 1" in kept.content, kept.content
    assert "count 0" in scrubbed.content, scrubbed.content
    assert LIVE_TOKEN in kernel.namespace["blob"]  # the kernel's own copy is untouched
