"""MCP configuration: what a project file may say, tool names, what approvals pin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from phoenix_nb.mcp import Approvals, McpConfigError, parse_servers
from phoenix_nb.mcp.config import (
    MAX_TOOL_NAME,
    ToolSpec,
    parse_project_file,
    tool_names,
    tools_digest,
)


def _project(folder: Path, servers: dict[str, object]) -> None:
    (folder / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))


def test_a_project_file_can_never_grant(tmp_path: Path) -> None:
    for grant in ({"network": True}, {"write": ["/tmp"]}):
        _project(tmp_path, {"x": {"command": "srv", **grant}})
        with pytest.raises(McpConfigError, match="can never grant"):
            parse_project_file(tmp_path)
    _project(tmp_path, {"x": {"command": "srv", "args": ["-v"], "env": {"A": "1"}}})
    (server,) = parse_project_file(tmp_path)
    assert server.source == "project" and not server.granted and server.project_dir == str(tmp_path)
    (tmp_path / "empty").mkdir()
    assert parse_project_file(tmp_path / "empty") == ()


def test_user_config_may_grant_and_bad_entries_are_named() -> None:
    (server,) = parse_servers({"gh": {"command": "srv", "network": True, "write": ["~/x"]}})
    assert server.granted and "network" in server.grants() and "write ~/x" in server.grants()
    with pytest.raises(McpConfigError, match="either 'command'"):
        parse_servers({"a": {"command": "x", "url": "http://h"}})
    with pytest.raises(McpConfigError, match="unknown field"):
        parse_servers({"a": {"command": "x", "sudo": True}})
    with pytest.raises(McpConfigError, match="timeout"):
        parse_servers({"a": {"command": "x", "timeout": 0}})
    with pytest.raises(McpConfigError, match="name"):
        parse_servers({"a b": {"command": "x"}})


def test_tool_names_are_api_safe_and_unique() -> None:
    long = "t" * 100
    specs = [
        ToolSpec("srv", "get.thing", "", {}),
        ToolSpec("srv", "get_thing", "", {}),
        ToolSpec("srv", long, "", {}),
        ToolSpec("srv", long + "x", "", {}),
    ]
    names = tool_names(specs)
    assert names[0] == "mcp__srv__get_thing"
    assert len(set(names)) == 4
    assert all(len(n) <= MAX_TOOL_NAME for n in names)
    assert all(
        set(n) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
        for n in names
    )


def test_approval_is_pinned_to_the_entry_and_to_the_first_tool_list(tmp_path: Path) -> None:
    approvals = Approvals(tmp_path)
    _project(tmp_path, {"p": {"command": "srv", "args": ["a"]}})
    (server,) = parse_project_file(tmp_path)
    assert not approvals.config_approved(server)
    approvals.approve(server)
    assert approvals.config_approved(server)
    first = tools_digest([ToolSpec("p", "t", "reads a file", {"type": "object"})])
    assert approvals.check_tools(server, first)  # the first list is pinned
    assert approvals.check_tools(server, first)
    changed = tools_digest([ToolSpec("p", "t", "reads ~/.ssh too", {"type": "object"})])
    assert not approvals.check_tools(server, changed)  # the rug pull
    _project(tmp_path, {"p": {"command": "srv", "args": ["b"]}})
    (edited,) = parse_project_file(tmp_path)
    assert not approvals.config_approved(edited)  # same name, another command
