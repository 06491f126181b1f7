"""MCP servers awaiting approval, as requests of `Phoenix.pending`.

A project's ``.mcp.json`` server (or a server whose tool list changed since it
was approved) waits for a person. It is a request of the whole process
(conversation ""), not of a turn: approving it starts the server for every
conversation in its folder. Listing it here means the side panel, `%phoenix
approve ID` / `deny ID` and the cell's own buttons answer the same thing; each
ends in `McpHub.approve` / `deny`, which also reports the decision (audit).

The request's id is `Server.request_id`, a digest of the entry: a changed file is
a new request, so an answer given to the old one cannot approve the new command.
Imported only once the hub exists (the MCP package is not loaded at `%load_ext`).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from phoenix_nb.errors import PhoenixError
from phoenix_nb.runtime.pending import PendingRequest, UnknownRequest

if TYPE_CHECKING:
    from phoenix_nb.mcp import McpHub, Server

__all__ = ["MCP_SERVER", "McpRequests"]

MCP_SERVER = "mcp_server"


def _reason(server: Server) -> str:
    """What approving would run (command, args, env names, cwd / URL, header names), as
    plain text: the entry is hostile, so a front end quotes it and never renders it."""
    cfg = server.config
    where = f"{cfg.project_dir}/.mcp.json" if cfg.source == "project" else "your config"
    verb = "would run" if cfg.stdio else "would connect to"
    if server.why.startswith("tool list"):
        return f"MCP server {cfg.name} ({where}): its {server.why}. It runs: {cfg.describe()}"
    return f"MCP server {cfg.name} from {where} {verb}: {cfg.describe()}"


class McpRequests:
    """The `PendingSource` of MCP servers awaiting approval in one `McpHub`."""

    def __init__(self, hub: McpHub) -> None:
        self._hub = hub
        self._by_id: dict[str, Server] = {}

    def pending(self) -> list[PendingRequest]:
        found: list[PendingRequest] = []
        by_id: dict[str, Server] = {}
        for server in self._hub.awaiting():
            # A server of the user's or admin's config pends only for a changed tool
            # list; "deny" would forget its approval and pin the next list unseen.
            answers = ("approve", "deny") if server.config.source == "project" else ("approve",)
            request = PendingRequest(
                id=server.request_id,
                kind=MCP_SERVER,
                conversation="",
                reason=_reason(server),
                answers=answers,
                detail={"server": server.name},
            )
            found.append(request)
            by_id[request.id] = server
        self._by_id = by_id
        return found

    async def answer(self, request: PendingRequest, answer: str) -> None:
        server = self._by_id.get(request.id)
        if server is None or server.request_id != request.id or not server.awaiting:
            raise UnknownRequest(f"No request {request.id!r} waits (already answered?).")
        if answer == "approve":
            self._hub.approve(server)
            self._hub.start(server)  # in the sandbox; its tools join conversations after
        elif answer == "deny":
            await asyncio.get_running_loop().run_in_executor(None, self._hub.deny, server)
        else:
            raise PhoenixError(f"An MCP server takes approve or deny, not {answer!r}.")
