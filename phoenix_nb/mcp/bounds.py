"""The admin policy's ``[mcp]`` section, as the hub enforces it.

The policy (`phoenix_nb.policy`) is parsed once when phoenix loads; this turns
its MCP part into what `McpHub` needs, with the words of every refusal written
here once, each naming the policy file and the line of the bound:

* ``allow_project_files = false``: a project's ``.mcp.json`` is never read for
  servers, so nothing of it is offered for approval (no prompt, no pending request).
* ``servers = {...}``: the only servers that may run, configured there (the same
  shape as ``c.Phoenix.mcp_servers``; the admin wrote them, so they may carry
  grants and run without a prompt). A server of the user's config or of a project
  file that is not among them is refused; one of the same name runs as the
  policy configures it, not as the user's entry says.

As the policy module says, this is a guard rail inside the user's own kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

from phoenix_nb.mcp.config import McpConfigError, ServerConfig, parse_servers
from phoenix_nb.policy import Policy

__all__ = ["McpBounds"]


@dataclass(frozen=True)
class McpBounds:
    """What the policy allows. The default (no policy) bounds nothing."""

    project_files: bool = True
    servers: tuple[ServerConfig, ...] | None = None  # None: no bound
    project_files_where: str = ""  # "the policy P line N ([mcp] allow_project_files)"
    servers_where: str = ""  # "the policy P line N ([mcp] servers)"
    problem: str = ""  # a policy entry phoenix cannot use (then no server may run)

    @classmethod
    def from_policy(cls, policy: Policy | None) -> McpBounds:
        if policy is None:
            return cls()
        servers: tuple[ServerConfig, ...] | None = None
        problem = ""
        where = _where_servers(policy)
        if policy.mcp_servers is not None:
            try:
                servers = parse_servers(policy.mcp_servers, source="policy")
            except McpConfigError as exc:  # fail closed: the admin meant a bound
                servers, problem = (), f"{where}: {exc}; no MCP server may run"
        return cls(
            project_files=policy.mcp_allow_project_files,
            servers=servers,
            project_files_where=policy.where("mcp.allow_project_files"),
            servers_where=where,
            problem=problem,
        )

    def project_file_refused(self, path: str) -> str:
        """The line for a project file this policy does not let phoenix offer."""
        return (
            f"{path} is not offered for approval: refused by {self.project_files_where} "
            "(project MCP files are off here)"
        )

    def server_refused(self, server: ServerConfig) -> str:
        """The line for a server (user config or project file) the policy does not list."""
        where = f"{server.project_dir}/.mcp.json" if server.source == "project" else "your config"
        names = ", ".join(s.name for s in self.servers or ()) or "none"
        return (
            f"MCP server {server.name} ({where}) is refused by {self.servers_where}: only "
            f"the policy's servers may run ({names})"
        )

    def replaced(self, server: ServerConfig) -> str:
        """The line for a user's entry whose name the policy configures itself."""
        return (
            f"MCP server {server.name} runs as {self.servers_where} configures it; "
            "your c.Phoenix.mcp_servers entry of that name is not used"
        )

    def summary(self) -> list[str]:
        """What `%phoenix status` says of these bounds (nothing without one)."""
        lines = []
        if not self.project_files:
            lines.append(f".mcp.json files not offered (refused by {self.project_files_where})")
        if self.servers is not None:
            names = ", ".join(s.name for s in self.servers) or "none"
            lines.append(f"only the policy's servers may run: {names} ({self.servers_where})")
        if self.problem:
            lines.append(self.problem)
        return lines


def _where_servers(policy: Policy) -> str:
    """The ``servers`` bound's line: ``servers = {…}``, or its first ``[mcp.servers.X]``."""
    if "mcp.servers" in policy.lines:
        return policy.where("mcp.servers")
    tables = [n for k, n in policy.lines.items() if k.startswith("mcp.servers.")]
    at = f" line {min(tables)}" if tables else ""
    return f"the policy {policy.path}{at} ([mcp] servers)"
