"""Safety checks (REQ-BASH-007) and fuzzing of the bash tool's input shapes.

The checks parse with tree-sitter-bash, so refusals must hold wherever the
command sits (sudo, pipelines, subshells, $(...), chains) and look-alikes in
strings or comments must pass.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phoenix_nb.core.values import Mode, ToolResult
from phoenix_nb.tools.base import ToolContext
from phoenix_nb.tools.bash import BashTool, kill_background_jobs
from phoenix_nb.tools.bash_safety import check_command
from phoenix_nb.tools.sandbox import detect_sandbox

REFUSED = [
    # git add of everything
    "git add -A",
    "git add .",
    "git add --all",
    "git add -Av",
    "git -C repo add .",
    # force pushes
    "git push --force",
    "git push -f origin main",
    "git push origin +main",
    # rm -rf of /, ~, $HOME, .git, *, .* in every spelling
    "rm -rf /",
    "rm -fr /",
    "rm -r -f /",
    "rm -Rf ~/",
    "rm --recursive --force /",
    "rm -rf -- /",
    "/bin/rm -rf /",
    "rm -rf '/'",
    "rm -rf ~",
    "rm -rf $HOME",
    "rm -rf ${HOME}",
    'rm -rf "$HOME"',
    "rm -rf .git",
    "rm -rf ./.git/",
    "rm -rf *",
    "rm -rf .*",
    # wherever it sits
    "sudo rm -rf /",
    "sudo -u root rm -rf /",
    "env FOO=1 rm -rf /",
    "timeout 5 rm -rf /",
    "echo hi | rm -rf ~",
    "ls | xargs rm -rf /",
    "(rm -rf ~)",
    "echo $(rm -rf ~)",
    "echo `rm -rf ~`",
    "cd x && rm -rf .git",
    "true; rm -rf *",
    "false || git push -f",
    "nohup git push --force &",
    "bash -c 'rm -rf /'",
    "eval 'rm -rf ~'",
    "if true; then rm -rf ~; fi",
    "for i in 1; do git add -A; done",
    "f() { rm -rf /; }",
]

ALLOWED = [
    "rm -rf build/",
    "rm -rf ./build",
    "rm -rf .github",
    "rm file",
    "rm -r /tmp/x/y",
    "git add file.py",
    "git add src/a.py src/b.py",
    "git push --force-with-lease",
    "git push origin main",
    "git commit -am msg",
    'echo "rm -rf /"',
    "echo 'git add -A'",
    "# rm -rf /",
    "grep -rf patterns /",
    "ls -la ~",
]


@pytest.mark.parametrize("command", REFUSED)
def test_dangerous_commands_are_refused_with_why_and_what_instead(command: str) -> None:
    """REQ-BASH-007: refusal says why and what to do instead."""
    message = check_command(command)
    assert message is not None, command
    assert message.startswith("Refused: `")
    if message.startswith("Refused: `rm"):
        assert "would delete" in message and "by name instead" in message
    elif message.startswith("Refused: `git add"):
        assert "stages everything" in message and "git add path/to/file" in message
    else:
        assert "rewrites the remote's history" in message and "--force-with-lease" in message


@pytest.mark.parametrize("command", ALLOWED)
def test_benign_look_alikes_are_allowed(command: str) -> None:
    assert check_command(command) is None


MODES = [
    Mode.UNRESTRICTED,
    pytest.param(
        Mode.RESTRICTED,
        marks=pytest.mark.skipif(not detect_sandbox().available, reason="needs Landlock"),
    ),
]


@pytest.mark.parametrize("mode", MODES)
async def test_tool_refuses_before_anything_runs(tmp_path: Path, mode: Mode) -> None:
    """The refusal is a tool error, in both modes, and no part of the command ran."""
    ctx = ToolContext(cwd=tmp_path, mode=mode, sandbox=detect_sandbox())
    result = await BashTool().run(
        {"command": "echo ran > /dev/null; touch marker; git add -A"}, ctx, "t"
    )
    assert result.is_error
    assert "git add -A" in result.content and "Stage files by name" in result.content
    assert not (tmp_path / "marker").exists()


# ------------------------------------------------------------------ fuzzing

junk = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=12)
    | st.lists(st.integers(), max_size=3)
    | st.dictionaries(st.text(max_size=4), st.integers(), max_size=2)
)
# Commands that may really run: fast, harmless in a sandbox, or refused.
commands = junk | st.sampled_from(
    ["true", "echo hi", "", "exit 3", "rm -rf /", "git add .", "nosuchcommand", "kill -- -1"]
)
timeouts = junk | st.integers(min_value=-5, max_value=5000) | st.floats(0, 10)
inputs = (
    st.fixed_dictionaries(
        {},
        optional={
            "command": commands,
            "timeout": timeouts,
            "background": junk,
            "extra": junk,
        },
    )
    | junk
)


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(payload=inputs)
def test_bash_input_shapes_never_raise(payload: Any) -> None:
    """Wrong types, missing fields and junk become results, never exceptions."""
    mode = Mode.RESTRICTED if detect_sandbox().available else Mode.UNRESTRICTED
    with tempfile.TemporaryDirectory() as cwd:
        ctx = ToolContext(
            cwd=Path(cwd), mode=mode, sandbox=detect_sandbox(), conversation_id="fuzz-bash"
        )

        async def go() -> ToolResult:
            try:
                return await BashTool().run(payload, ctx, "t")  # type: ignore[arg-type]
            finally:
                await kill_background_jobs("fuzz-bash")

        result = asyncio.run(go())
    assert isinstance(result, ToolResult)
    assert isinstance(result.content, str)
    if not isinstance(payload, dict) or not isinstance(payload.get("command"), str):
        assert result.is_error and "Invalid input for bash" in result.content
