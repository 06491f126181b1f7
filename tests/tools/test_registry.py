"""Tool sets per conversation kind, API specs, and run_tool's never-raise contract."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from phoenix_nb.commands import CommandRunner
from phoenix_nb.core.values import Mode, ToolResult
from phoenix_nb.sandbox import SandboxInfo
from phoenix_nb.tools.base import Tool, ToolContext
from phoenix_nb.tools.declared import REQUEST_MODE_UPGRADE, SPAWN_AGENTS, SUBMIT_RESULT
from phoenix_nb.tools.registry import api_tool_specs, find_tool, run_tool, tool_traits, tools_for


def ctx_for(cwd: Path) -> ToolContext:
    return ToolContext(
        cwd=cwd, mode=Mode.UNRESTRICTED, commands=CommandRunner(info=SandboxInfo(available=True))
    )


def test_parent_tools_have_no_submit_result() -> None:
    names = [t.name for t in tools_for(is_sub_agent=False)]
    assert names == [
        "bash",
        "patch",
        "keyword_search",
        "think",
        "inspect_variables",
        "kernel_history",
        "run_python",
        "propose_cell",
        "edit_cell",
        "insert_cell",
        "request_mode_upgrade",
        "spawn_agents",
    ]


def test_sub_agent_tools_cannot_spawn_or_upgrade() -> None:
    names = [t.name for t in tools_for(is_sub_agent=True)]
    assert names == [
        "bash",
        "patch",
        "keyword_search",
        "think",
        "inspect_variables",
        "kernel_history",
        "submit_result",
    ]


def test_every_tool_satisfies_the_protocol_and_specs_are_static() -> None:
    """REQ-BED-017: two builds give identical specs; descriptions do not depend on mode."""
    for is_sub_agent in (False, True):
        tools = tools_for(is_sub_agent=is_sub_agent)
        assert all(isinstance(t, Tool) for t in tools)
        specs = api_tool_specs(tools)
        assert specs == api_tool_specs(tools_for(is_sub_agent=is_sub_agent))
        for spec in specs:
            assert set(spec) == {"name", "description", "input_schema"}
            assert spec["input_schema"]["type"] == "object"
            assert spec["description"].strip()


def test_fixed_minimal_schemas() -> None:
    specs = {s["name"]: s["input_schema"] for s in api_tool_specs(tools_for(is_sub_agent=False))}
    specs |= {s["name"]: s["input_schema"] for s in api_tool_specs(tools_for(is_sub_agent=True))}
    assert specs["patch"]["required"] == ["path", "patches"]
    assert specs["patch"]["properties"]["patches"]["items"]["properties"]["operation"]["enum"] == [
        "overwrite",
        "replace",
        "append_eof",
        "prepend_bof",
    ]
    assert specs["keyword_search"]["required"] == ["query", "search_terms"]
    assert specs["think"]["required"] == ["thoughts"]
    assert specs["request_mode_upgrade"]["required"] == ["reason"]
    assert specs["spawn_agents"]["properties"]["tasks"]["items"]["required"] == ["task"]
    assert "cwd" in specs["spawn_agents"]["properties"]["tasks"]["items"]["properties"]
    assert specs["submit_result"]["required"] == ["result"]
    assert specs["submit_result"]["properties"]["success"]["type"] == "boolean"


def test_descriptions_explain_restricted_mode() -> None:
    tools = {t.name: t for t in tools_for(is_sub_agent=False)}
    assert "Restricted" in tools["patch"].description
    assert "request_mode_upgrade" in tools["patch"].description
    assert "Landlock" in tools["request_mode_upgrade"].description
    assert "Restricted mode" in tools["spawn_agents"].description
    assert "Restricted mode" in tools["keyword_search"].description


async def test_unknown_tool_is_an_error_result(tmp_path: Path) -> None:
    tools = tools_for(is_sub_agent=True)
    result = await run_tool(tools, "spawn_agents", {"tasks": []}, ctx_for(tmp_path), "tu1")
    assert result.is_error and result.tool_use_id == "tu1"
    assert "Unknown tool 'spawn_agents'" in result.content and "submit_result" in result.content


async def test_non_object_input_is_an_error_result(tmp_path: Path) -> None:
    result = await run_tool(tools_for(is_sub_agent=False), "think", ["x"], ctx_for(tmp_path), "t")
    assert result.is_error and "input must be an object, got list" in result.content


@pytest.mark.parametrize("tool", [REQUEST_MODE_UPGRADE, SPAWN_AGENTS, SUBMIT_RESULT])
async def test_declared_tools_refuse_direct_execution(tool: Tool, tmp_path: Path) -> None:
    result = await tool.run({}, ctx_for(tmp_path), "tu")
    assert result.is_error
    assert "handled by the conversation" in result.content
    assert "should not be executed directly" in result.content


class Exploding:
    name = "explode"
    description = "raises"
    input_schema: Mapping[str, Any] = {"type": "object"}

    async def run(self, input: Mapping[str, Any], ctx: ToolContext, tool_use_id: str) -> ToolResult:
        raise RuntimeError("kaboom")


class Sleeping:
    name = "sleep"
    description = "waits for ever"
    input_schema: Mapping[str, Any] = {"type": "object"}

    def __init__(self) -> None:
        self.started = asyncio.Event()

    async def run(self, input: Mapping[str, Any], ctx: ToolContext, tool_use_id: str) -> ToolResult:
        self.started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_a_raising_tool_becomes_an_error_result(tmp_path: Path) -> None:
    result = await run_tool([Exploding()], "explode", {}, ctx_for(tmp_path), "tu")
    assert result.is_error
    assert "Tool explode failed unexpectedly: RuntimeError: kaboom" in result.content


async def test_cancellation_propagates(tmp_path: Path) -> None:
    tool = Sleeping()
    task = asyncio.create_task(run_tool([tool], "sleep", {}, ctx_for(tmp_path), "tu"))
    await asyncio.wait_for(tool.started.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_run_tool_dispatches_to_the_real_tool(tmp_path: Path) -> None:
    tools = tools_for(is_sub_agent=False)
    assert find_tool(tools, "nope") is None
    result = await run_tool(tools, "think", {"thoughts": "hm"}, ctx_for(tmp_path), "tu")
    assert result.content == "recorded"


def test_each_tool_declares_its_record_group_and_summary_field() -> None:
    """The registry's table is what the tools say (`Tool.group`, `Tool.summary_field`),
    and for our tools it is the grouping stored histories were always shown with."""
    tools = {t.name: t for t in (*tools_for(is_sub_agent=False), *tools_for(is_sub_agent=True))}
    traits = tool_traits(tools.values())
    for tool in tools.values():
        assert traits.group(tool.name) == tool.group in ("read", "write", "bash", "other")
        assert traits.summary_field(tool.name) == tool.summary_field
    assert {n: (traits.group(n), traits.summary_field(n)) for n in tools} == {
        "bash": ("bash", "command"),
        "patch": ("write", "path"),
        "keyword_search": ("read", "query"),
        "think": ("other", "thoughts"),
        "inspect_variables": ("other", ""),
        "kernel_history": ("other", ""),
        "run_python": ("other", ""),
        "propose_cell": ("other", ""),
        "edit_cell": ("other", ""),
        "insert_cell": ("other", ""),
        "request_mode_upgrade": ("other", "reason"),
        "spawn_agents": ("other", ""),
        "submit_result": ("other", "result"),
    }
