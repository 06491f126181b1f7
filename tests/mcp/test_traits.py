"""An MCP tool declares its own record traits, and the record shows them.

Its group is "mcp" and its summary field is its first required string input (else
its first string input), declared on the tool (`McpTool.group`, `.summary_field`)
like any tool's; the registry's table carries them to the record projection, which
has no table of its own.
"""

from __future__ import annotations

from typing import Any

from phoenix_nb.core.codec import to_json
from phoenix_nb.core.cycles import RecordHeader, project
from phoenix_nb.core.states import ConvState
from phoenix_nb.core.tool_fields import ToolTraits
from phoenix_nb.core.values import ToolUseBlock
from phoenix_nb.mcp import Server, ServerState, mcp_tools, parse_servers
from phoenix_nb.mcp.config import ToolSpec
from phoenix_nb.tools.registry import tool_traits

READ_FILE = ToolSpec(
    "files",
    "read_file",
    "Read a file.",
    {
        "type": "object",
        "properties": {"limit": {"type": "integer"}, "path": {"type": "string"}},
        "required": ["path"],
    },
)
NO_STRINGS = ToolSpec("files", "count", "Count.", {"type": "object", "properties": {}})


def _server() -> Server:
    (config,) = parse_servers({"files": {"command": "files-server"}})
    return Server(config, ServerState.READY, tools=(READ_FILE, NO_STRINGS))


def _record_of(calls: list[ToolUseBlock], tools: ToolTraits) -> dict[str, Any]:
    history = [
        {"message_type": "user", "content": {"text": "read it", "images": []}},
        {
            "message_type": "agent",
            "content": {"blocks": to_json(tuple(calls)), "stop_reason": "tool_use"},
        },
    ]
    header = RecordHeader("c-1", "mcp-otter", "demo", "/work", True, 200_000, tools=tools)
    return project(history, ConvState(), header)


def test_an_mcp_tools_declared_group_and_summary_are_what_the_record_shows() -> None:
    read_file, count = mcp_tools(None, [_server()], defer_above=30)  # type: ignore[arg-type]
    assert (read_file.group, read_file.summary_field) == ("mcp", "path")
    assert (count.group, count.summary_field) == ("mcp", "")
    calls = [
        ToolUseBlock("t1", read_file.name, {"path": "notes.md", "limit": 3}),
        ToolUseBlock("t2", count.name, {}),
    ]
    record = _record_of(calls, tool_traits([read_file, count]))
    (group,) = record["cycles"][0]["steps"][-1]["tool_groups"]
    assert group["group"] == "mcp"
    assert [c["summary"] for c in group["calls"]] == ["notes.md", ""]


def test_a_deferred_tool_sets_two_tools_declare_theirs() -> None:
    search, call = mcp_tools(None, [_server()], defer_above=1)  # type: ignore[arg-type]
    assert {(t.name, t.group, t.summary_field) for t in (search, call)} == {
        ("mcp_tool_search", "mcp", "query"),
        ("mcp_call", "mcp", "name"),
    }
    record = _record_of(
        [ToolUseBlock("t1", "mcp_call", {"name": "mcp__files__read_file", "arguments": {}})],
        tool_traits([search, call]),
    )
    (group,) = record["cycles"][0]["steps"][-1]["tool_groups"]
    assert group["group"] == "mcp" and group["calls"][0]["summary"] == "mcp__files__read_file"
