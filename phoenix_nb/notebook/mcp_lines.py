"""How `%phoenix mcp` shows the MCP servers: one block per server, plain text.

Descriptions and names come from servers and project files (hostile text):
they are printed as text, never as HTML or Markdown.
"""

from __future__ import annotations

import asyncio
import html
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from phoenix_nb.mcp import McpHub, Server, ServerState
from phoenix_nb.sandbox import lost_guarantees

__all__ = ["approval_controls", "server_lines", "what_it_runs"]


def what_it_runs(server: Server) -> list[str]:
    """Every command, argument, env name and URL a pending server would run, one per line."""
    cfg = server.config
    where = f"{cfg.project_dir}/.mcp.json" if cfg.source == "project" else "your config"
    head = f"MCP server {cfg.name} (from {where}) awaits your approval"
    if server.why.startswith("tool list"):
        head += f": its {server.why}"
    lines = [head]
    if cfg.stdio:
        lines.append(f"  command    {cfg.command}")
        lines += [f"  arg        {arg}" for arg in cfg.args]
        lines += [f"  env name   {name}" for name in sorted(cfg.env)]
        if cfg.cwd:
            lines.append(f"  cwd        {cfg.cwd}")
        lines.append(f"  sandbox    Restricted; grants: {cfg.grants()}")
    else:
        lines.append(f"  url        {cfg.url}")
        lines += [f"  header     {name}" for name in sorted(cfg.headers)]
    return lines


def server_lines(hub: McpHub, servers: Sequence[Server]) -> list[str]:
    """Source, state (and why), sandbox and grants, tool count, for each server; first
    what could not be used and why (a bad entry, the admin policy's refusals)."""
    lines: list[str] = []
    if hub.config_problem:
        lines.append(f"c.Phoenix.mcp_servers: {hub.config_problem}")
    lines += hub.refused
    lines += hub.problems
    if not servers:
        return [
            *lines,
            "No MCP servers: add them to c.Phoenix.mcp_servers, or a .mcp.json here "
            "(README 'Tools from MCP servers').",
        ]
    for server in servers:
        cfg = server.config
        source = {"config": "config", "policy": "the admin's policy"}.get(
            cfg.source, f"project file {cfg.project_dir}/.mcp.json"
        )
        state = server.state.value + (f": {server.why}" if server.why else "")
        if server.state == ServerState.PENDING and not server.awaiting:
            state = "denied: it does not run"
        if not cfg.stdio:
            sandbox = "HTTP (runs elsewhere; nothing is started here)"
        elif not hub.sandbox.available:
            sandbox = f"NOT sandboxed here ({hub.sandbox.reason}); read-only is not enforced"
        else:
            files = "writes only its write grants" if cfg.write else "read-only"
            net = "the host's network" if cfg.network else "no network"
            sandbox = f"Restricted sandbox ({files}, {net}, credentials hidden)"
            if cfg.granted:
                sandbox += "; granted: its tools work only in Unrestricted mode"
            lost = lost_guarantees()  # the lesser tier of a host without namespaces
            if lost:
                sandbox += "; NOT here: " + "; ".join(lost)
        tools = f"{len(server.tools)} tools" if server.state == ServerState.READY else "-"
        lines += [
            f"{cfg.name}  [{source}]  {state}",
            f"    runs     {cfg.describe()}",
            f"    sandbox  {sandbox}",
            f"    grants   {cfg.grants()}",
            f"    tools    {tools}",
        ]
        if server.awaiting:
            lines.append(
                f"    answer   `%phoenix approve {server.request_id}` or "
                f"`%phoenix deny {server.request_id}` (or `%phoenix mcp approve {cfg.name}`)"
            )
    return lines


def approval_controls(hub: McpHub, server: Server, cwd: Path) -> dict[str, Any]:
    """Approve / Deny buttons for one pending server, with what it would run.

    The buttons' handlers may run on a subshell thread: they hand the work to the
    kernel's loop. The hint (for a saved notebook, where no kernel can act) is the
    `%phoenix mcp` command that does the same.
    """
    import ipywidgets as w

    from phoenix_nb.notebook.controls import control_bundle

    loop = asyncio.get_running_loop()
    cfg = server.config
    approve = w.Button(description=f"Approve {cfg.name}", button_style="warning")
    deny = w.Button(description=f"Deny {cfg.name}")
    status = w.Label(value="")
    # The server's entry is hostile text: escaped, shown as text, wrapped inside the
    # cell (a Label would cut a long command off with an ellipsis).
    runs = w.HTML(
        value='<div class="phx-mcp-runs" style="white-space: pre-wrap; '
        "overflow-wrap: anywhere; line-height: 1.4; "
        'font-family: var(--jp-code-font-family, monospace)">'
        f"{html.escape(chr(10).join(what_it_runs(server)))}</div>",
        layout=w.Layout(width="auto", max_width="100%"),
    )
    box = w.VBox([runs, w.HBox([approve, deny, status])])

    async def decide(approved: bool) -> None:
        approve.disabled = deny.disabled = True
        if approved:
            hub.approve(server)
            problems = await hub.prepare(cwd)
            state = hub.find(cfg.name, cwd).state.value
            status.value = f"approved; {state}" + (f" ({problems[0]})" if problems else "")
        else:
            await loop.run_in_executor(None, hub.deny, server)
            status.value = "denied: it does not run"

    running: set[asyncio.Task[None]] = set()  # kept until done (the loop holds tasks weakly)

    def start(approved: bool) -> None:
        task = loop.create_task(decide(approved))
        running.add(task)
        task.add_done_callback(running.discard)

    def on(approved: bool) -> Callable[[Any], None]:
        def clicked(_button: Any) -> None:
            loop.call_soon_threadsafe(start, approved)

        return clicked

    approve.on_click(on(True))
    deny.on_click(on(False))
    hint = f"Approve with `%phoenix mcp approve {cfg.name}`, or `%phoenix mcp deny {cfg.name}`."
    return control_bundle(box, hint)
