"""think records the thoughts and returns "recorded" (issue item 6)."""

from __future__ import annotations

from pathlib import Path

from phoenix_nb.commands import CommandRunner
from phoenix_nb.core.values import Mode
from phoenix_nb.sandbox import SandboxInfo
from phoenix_nb.tools.base import ToolContext
from phoenix_nb.tools.think import ThinkTool


async def test_think_records_thoughts_in_any_mode(tmp_path: Path) -> None:
    for mode in Mode:
        ctx = ToolContext(
            cwd=tmp_path, mode=mode, commands=CommandRunner(info=SandboxInfo(available=True))
        )
        result = await ThinkTool().run({"thoughts": "first A, then B"}, ctx, "tu9")
        assert not result.is_error
        assert result.content == "recorded" and result.tool_use_id == "tu9"
        assert result.display is not None and result.display.to_json() == {
            "thoughts": "first A, then B"
        }


async def test_think_without_thoughts_names_the_field(tmp_path: Path) -> None:
    ctx = ToolContext(
        cwd=tmp_path, mode=Mode.RESTRICTED, commands=CommandRunner(info=SandboxInfo(available=True))
    )
    result = await ThinkTool().run({"thought": "typo"}, ctx, "tu")
    assert result.is_error and "thoughts is required" in result.content
