"""MCP tools as phoenix tools: ``mcp__<server>__<tool>``, one adapter per server tool.

The description and the result are the server's text: hostile content, shown
inert by every renderer like any tool result (decision 14), and capped here so
one server cannot fill the context. A tool of a server granted ``network`` or
``write`` is a write tool: in Restricted mode it answers with the same kind of
refusal as patch, and the model can ask for write access.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from phoenix_nb.core.values import ImageData, Mode, ToolResult
from phoenix_nb.errors import PhoenixError
from phoenix_nb.mcp.config import tool_names
from phoenix_nb.mcp.hub import McpHub, Server
from phoenix_nb.tools.base import Tool, ToolContext

__all__ = ["McpTool", "mcp_tools"]

MAX_DESCRIPTION = 2000  # characters of a server's tool description sent to the model
MAX_INSTRUCTIONS = 2000  # characters of a server's `instructions` (on its first tool)
MAX_RESULT = 100_000  # characters of one result's text (about 25k tokens)
_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


class McpTool:
    """One tool of one MCP server, as the model calls it."""

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
        self.writes = server.config.granted

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


def mcp_tools(hub: McpHub, servers: Sequence[Server]) -> tuple[Tool, ...]:
    """The tools of ``servers`` (ready ones), named uniquely, in a stable order."""
    specs = [t for s in sorted(servers, key=lambda s: s.name) for t in s.tools]
    by_server = {s.name: s for s in servers}
    names = tool_names(specs)
    out: list[Tool] = []
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
    return tuple(out)
