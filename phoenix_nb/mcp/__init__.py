"""Tools from MCP servers, every stdio server inside the sandbox by default.

* ``config.py``: `ServerConfig` from ``c.Phoenix.mcp_servers`` and a project's
  ``.mcp.json`` (pure parsing; a project file can never grant network or write);
  tool names ``mcp__<server>__<tool>``; the digests approvals are pinned to.
* ``bounds.py``: the admin policy's ``[mcp]`` section as the hub enforces it
  (project files off; only the policy's servers), each refusal naming its line.
* ``approvals.py``: what the user approved, pinned to the entry's digest and to
  the tool list first seen (any change: pending again).
* ``hub.py``: `McpHub`, one per Phoenix: the servers' states and their one
  worker thread; stdio servers start through `phoenix_nb.commands`.
* ``sdk.py``: the official ``mcp`` SDK's side, imported on the worker thread only.
* ``tools.py``: `McpTool`, the adapter the conversation's tool set holds.

Above ``tools/`` (it adapts to `Tool`) and under the runtime, which owns the hub.
"""

from __future__ import annotations

from phoenix_nb.mcp.approvals import Approvals
from phoenix_nb.mcp.bounds import McpBounds
from phoenix_nb.mcp.config import McpConfigError, ServerConfig, parse_servers
from phoenix_nb.mcp.hub import INSTALL_HINT, McpHub, Server, ServerState
from phoenix_nb.mcp.tools import McpTool, mcp_tools

__all__ = [
    "INSTALL_HINT",
    "Approvals",
    "McpBounds",
    "McpConfigError",
    "McpHub",
    "McpTool",
    "Server",
    "ServerConfig",
    "ServerState",
    "mcp_tools",
    "parse_servers",
]
