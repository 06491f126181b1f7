"""How `%phoenix mcp` shows the MCP servers: one block per server, plain text.

Descriptions and names come from servers and project files (hostile text):
they are printed as text, never as HTML or Markdown.
"""

from __future__ import annotations

from collections.abc import Sequence

from phoenix_nb.mcp import McpHub, Server, ServerState

__all__ = ["server_lines"]


def server_lines(hub: McpHub, servers: Sequence[Server]) -> list[str]:
    """Source, state (and why), sandbox and grants, tool count, for each server."""
    if not servers:
        return [
            "No MCP servers: add them to c.Phoenix.mcp_servers, or a .mcp.json here "
            "(README 'Tools from MCP servers')."
        ]
    lines: list[str] = []
    if hub.config_problem:
        lines.append(f"c.Phoenix.mcp_servers: {hub.config_problem}")
    lines += hub.problems
    for server in servers:
        cfg = server.config
        source = "config" if cfg.source == "config" else f"project file {cfg.project_dir}/.mcp.json"
        state = server.state.value + (f": {server.why}" if server.why else "")
        if not cfg.stdio:
            sandbox = "HTTP (runs elsewhere; nothing is started here)"
        elif cfg.granted:
            sandbox = "Unrestricted (granted); its tools work only in Unrestricted mode"
        elif not hub.sandbox.available:
            sandbox = f"NOT sandboxed here ({hub.sandbox.reason}); read-only is not enforced"
        else:
            sandbox = "Restricted sandbox (read-only, no network, credentials hidden)"
        tools = f"{len(server.tools)} tools" if server.state == ServerState.READY else "-"
        lines += [
            f"{cfg.name}  [{source}]  {state}",
            f"    runs     {cfg.describe()}",
            f"    sandbox  {sandbox}",
            f"    grants   {cfg.grants()}",
            f"    tools    {tools}",
        ]
    return lines
