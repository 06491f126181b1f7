"""MCP tools as phoenix tools: ``mcp__<server>__<tool>``, one adapter per server tool.

The description and the result are the server's text: hostile content, shown
inert by every renderer like any tool result (decision 14), and capped here so
one server cannot fill the context. A tool of a server granted ``network`` or
``write`` is a write tool: in Restricted mode it answers with the same kind of
refusal as patch, and the model can ask for write access.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from phoenix_nb.core.values import ImageData, Mode, ToolResult
from phoenix_nb.errors import PhoenixError
from phoenix_nb.mcp.config import tool_names
from phoenix_nb.mcp.hub import McpHub, Server
from phoenix_nb.tools.base import Tool, ToolContext
from phoenix_nb.tools.schema import invalid_input_result, validate

__all__ = ["McpCallTool", "McpSearchTool", "McpTool", "mcp_tools"]

SEARCH_RESULTS = 5

MAX_DESCRIPTION = 2000  # characters of a server's tool description sent to the model
MAX_INSTRUCTIONS = 2000  # characters of a server's `instructions` (on its first tool)
MAX_RESULT = 100_000  # characters of one result's text (about 25k tokens)
_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
MCP_GROUP = "mcp"  # the record's group of every MCP tool's calls (`Tool.group`)


def _summary_field(schema: Mapping[str, Any]) -> str:
    """The input that summarises a call of a server's tool: its first required string
    property, else its first string property, else none ("")."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return ""
    strings = [
        name
        for name, spec in properties.items()
        if isinstance(name, str) and isinstance(spec, Mapping) and spec.get("type") == "string"
    ]
    required = schema.get("required")
    wanted = set(required) if isinstance(required, list) else set()
    return next((n for n in strings if n in wanted), strings[0] if strings else "")


class McpTool:
    """One tool of one MCP server, as the model calls it."""

    group = MCP_GROUP

    def __init__(
        self,
        hub: McpHub,
        server: Server,
        name: str,
        wire_name: str,
        description: str,
        input_schema: Mapping[str, Any],
        instructions: str = "",
    ) -> None:
        self.hub = hub
        self.server = server
        self.name = name
        self.wire_name = wire_name
        text = description.strip() or "(no description)"
        if len(text) > MAX_DESCRIPTION:
            text = text[:MAX_DESCRIPTION] + " …"
        self.description = f"[MCP server {server.name}] {text}"
        if instructions.strip():
            said = instructions.strip()[:MAX_INSTRUCTIONS]
            self.description += f"\n\n[Instructions of MCP server {server.name}] {said}"
        schema = dict(input_schema) if input_schema else {}
        self.input_schema: Mapping[str, Any] = (
            schema
            if schema.get("type") == "object"
            else {
                "type": "object",
                "properties": {},
            }
        )
        # A server without grants runs read-only in the sandbox: its calls need no
        # checkpoint. One with a grant can write (`Tool.writes`).
        self.writes = server.config.granted
        self.summary_field = _summary_field(self.input_schema)

    async def run(self, input: Mapping[str, Any], ctx: ToolContext, tool_use_id: str) -> ToolResult:
        if self.writes and ctx.mode == Mode.RESTRICTED:
            return ToolResult(
                tool_use_id,
                f"{self.name} is from MCP server {self.server.name}, which has network or "
                "write access; it is disabled in Restricted mode. Use request_mode_upgrade "
                "to request write access.",
                is_error=True,
            )
        try:
            outcome = await self.hub.call(self.server, self.wire_name, input)
        except PhoenixError as exc:
            return ToolResult(tool_use_id, str(exc), is_error=True)
        text = outcome.text
        if len(text) > MAX_RESULT:
            text = text[:MAX_RESULT] + f"\n… {len(outcome.text) - MAX_RESULT:,} characters omitted"
        images = tuple(
            ImageData(media, data, source_name=f"{self.server.name} image")
            for media, data in outcome.images
            if media in _IMAGE_TYPES
        )
        return ToolResult(tool_use_id, text, is_error=outcome.is_error, images=images)


def _first_line(text: str, limit: int = 100) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "(no description)"
    return line if len(line) <= limit else line[: limit - 1] + "…"


class McpSearchTool:
    """`mcp_tool_search {query}`: the full descriptions and input schemas of the MCP
    tools that match, for a large tool set whose schemas are not sent up front."""

    name = "mcp_tool_search"
    writes = False
    group = MCP_GROUP
    summary_field = "query"
    input_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "description": "Words to look for."}
        },
        "required": ["query"],
    }

    def __init__(self, tools: Sequence[McpTool]) -> None:
        self.tools = tuple(tools)
        self.description = (
            "Find MCP tools by words in their names and descriptions; returns the best "
            f"{SEARCH_RESULTS} with their full descriptions and input schemas. Call one "
            "with mcp_call. The tools are listed in mcp_call's description."
        )

    async def run(self, input: Mapping[str, Any], ctx: ToolContext, tool_use_id: str) -> ToolResult:
        query = input.get("query")
        if not isinstance(query, str) or not query.strip():
            return invalid_input_result(tool_use_id, self.name, "query: a non-empty string")
        words = [w for w in re.split(r"[^a-z0-9]+", query.lower()) if w]

        def score(tool: McpTool) -> int:
            name, text = tool.name.lower(), tool.description.lower()
            return sum(3 * (w in name) + (w in text) for w in words)

        ranked = sorted(self.tools, key=lambda t: (-score(t), t.name))
        found = [t for t in ranked if score(t) > 0][:SEARCH_RESULTS]
        if not found:
            return ToolResult(tool_use_id, f"No MCP tool matches {query!r}.")
        blocks = [
            f"{t.name}\n{t.description}\ninput_schema: {json.dumps(t.input_schema)}" for t in found
        ]
        return ToolResult(tool_use_id, "\n\n".join(blocks))


class McpCallTool:
    """`mcp_call {name, arguments}`: call one MCP tool of a large, deferred tool set."""

    name = "mcp_call"
    group = MCP_GROUP
    summary_field = "name"
    input_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "description": "The MCP tool's name."},
            "arguments": {"type": "object", "description": "Its input, per its schema."},
        },
        "required": ["name", "arguments"],
    }

    def __init__(self, tools: Sequence[McpTool]) -> None:
        self.tools = {t.name: t for t in tools}
        self.writes = any(t.writes for t in tools)
        listing = "\n".join(
            f"- {t.name}: {_first_line(t.description)}" for t in self.tools.values()
        )
        self.description = (
            "Call a tool of a connected MCP server. Look up its input schema first with "
            f"mcp_tool_search. The tools:\n{listing}"
        )

    async def run(self, input: Mapping[str, Any], ctx: ToolContext, tool_use_id: str) -> ToolResult:
        problem = validate(input, self.input_schema)
        if problem:
            return invalid_input_result(tool_use_id, self.name, problem)
        tool = self.tools.get(input["name"])
        if tool is None:
            return ToolResult(
                tool_use_id,
                f"No MCP tool named {input['name']!r}; mcp_tool_search finds them.",
                is_error=True,
            )
        problem = validate(input["arguments"], tool.input_schema)
        if problem:
            return invalid_input_result(tool_use_id, tool.name, problem)
        return await tool.run(input["arguments"], ctx, tool_use_id)


def mcp_tools(hub: McpHub, servers: Sequence[Server], defer_above: int) -> tuple[Tool, ...]:
    """The tools of ``servers`` (ready ones), named uniquely, in a stable order; above
    ``defer_above`` of them (c.Phoenix.mcp_defer_above), the two tools that stand for
    them all: their schemas are then not sent with every request, only each tool's name
    and first line in `McpCallTool`'s description. Models choose worse among 30-50+
    tools, and every schema costs tokens on every request."""
    specs = [t for s in sorted(servers, key=lambda s: s.name) for t in s.tools]
    by_server = {s.name: s for s in servers}
    names = tool_names(specs)
    out: list[McpTool] = []
    told: set[str] = set()
    for name, spec in zip(names, specs, strict=True):
        # A server's instructions ride on its first tool's description: the tool list
        # is fixed for the conversation, so they are as stable as the system prompt
        # (and cached with it), without the system prompt depending on servers.
        server = by_server[spec.server]
        first = spec.server not in told
        told.add(spec.server)
        instructions = server.instructions if first else ""
        out.append(
            McpTool(hub, server, name, spec.name, spec.description, spec.input_schema, instructions)
        )
    if len(out) > defer_above:
        return (McpSearchTool(out), McpCallTool(out))
    return tuple(out)
