"""MCP server configuration, parsed into types once: user/system config and `.mcp.json`.

Two sources, two levels of trust:

* ``c.Phoenix.mcp_servers`` (user or system config, ``%config``): the user wrote
  it, so its servers start without a prompt, and only here may a server be
  granted ``network`` or ``write``.
* ``.mcp.json`` in the conversation's folder (the format Claude Code and VS Code
  use): a cloned repository's file. It starts nothing until the user approves
  it, and it can never grant anything: a project entry naming ``network`` or
  ``write`` is refused, not silently reduced.

`ServerConfig.digest` is what an approval is pinned to: every byte that decides
what runs (command, args, env names and values, cwd, url, header names). The
tool list is pinned separately (`tools_digest`) once the server has answered.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from phoenix_nb.errors import PhoenixError

__all__ = [
    "DEFAULT_MEMORY",
    "DEFAULT_STARTUP_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "PROJECT_FILE",
    "McpConfigError",
    "ServerConfig",
    "ToolSpec",
    "parse_project_file",
    "parse_servers",
    "tool_names",
    "tools_digest",
]

PROJECT_FILE = ".mcp.json"
DEFAULT_TIMEOUT = 60.0  # seconds for one tool call (a server's `timeout`)
DEFAULT_STARTUP_TIMEOUT = 30.0  # seconds from start to a listed tool set
DEFAULT_MEMORY = 1 << 30  # a server's own cgroup budget (`memory`), well below a conversation's
MAX_TOOL_NAME = 64  # the Messages API's limit on a tool's name
_NAME_CHARS = re.compile(r"[^a-zA-Z0-9_-]")

# "policy": the admin's policy file's [mcp] servers (trusted like the user's config).
Source = Literal["config", "project", "policy"]


class McpConfigError(PhoenixError, ValueError):
    """A server entry phoenix cannot use; the message names the server and the field."""


@dataclass(frozen=True)
class ServerConfig:
    """One MCP server as configured. ``command`` for stdio, ``url`` for Streamable HTTP."""

    name: str
    source: Source
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str = ""  # "" : the conversation's folder
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    network: bool = False  # grant: the server keeps the host's network
    write: tuple[str, ...] = ()  # grant: the folders the server may write below (sandboxed)
    timeout: float = DEFAULT_TIMEOUT
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT  # start to listed tools
    memory: int = DEFAULT_MEMORY
    project_dir: str = ""  # the folder of the .mcp.json it came from

    @property
    def stdio(self) -> bool:
        return bool(self.command)

    @property
    def granted(self) -> bool:
        """A server with any grant is a write tool: offered only in Unrestricted mode."""
        return self.network or bool(self.write)

    def grants(self) -> str:
        said = []
        if self.network:
            said.append("network")
        if self.write:
            said.append("write " + ", ".join(self.write))
        return "; ".join(said) or "none (read-only files, no network)"

    def digest(self) -> str:
        """What an approval of this entry is pinned to (what would run, and where)."""
        shape = {
            "name": self.name,
            "command": self.command,
            "args": list(self.args),
            "env": dict(sorted(self.env.items())),
            "cwd": self.cwd,
            "url": self.url,
            "headers": sorted(self.headers),
            "network": self.network,
            "write": list(self.write),
        }
        return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()

    def describe(self) -> str:
        """What the user approves: every command, argument, env name and URL."""
        if self.stdio:
            line = " ".join([self.command, *self.args])
            env = f" env: {', '.join(sorted(self.env))}" if self.env else ""
            cwd = f" cwd: {self.cwd}" if self.cwd else ""
            return f"{line}{env}{cwd}"
        headers = f" headers: {', '.join(sorted(self.headers))}" if self.headers else ""
        return f"{self.url}{headers}"


@dataclass(frozen=True)
class ToolSpec:
    """One tool a server listed, as the model will see it (hostile text: shown inert)."""

    server: str
    name: str  # the server's own name (the wire name)
    description: str
    input_schema: Mapping[str, Any]


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise McpConfigError(f"{what} must be a list of strings")
    if not all(isinstance(v, str) for v in value):
        raise McpConfigError(f"{what} must be a list of strings")
    return tuple(value)


def _mapping(value: Any, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise McpConfigError(f"{what} must be a dict of strings")
    return dict(value)


_KNOWN = {
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "type",
    "network",
    "write",
    "timeout",
    "startup_timeout",
    "memory",
}


def _server(name: str, raw: Any, source: Source, project_dir: str = "") -> ServerConfig:
    where = f"MCP server {name!r}" + (f" in {project_dir}/{PROJECT_FILE}" if project_dir else "")
    if not isinstance(name, str) or not name or _NAME_CHARS.search(name):
        raise McpConfigError(f"{where}: a name is letters, digits, '_' and '-' only")
    if not isinstance(raw, Mapping):
        raise McpConfigError(f"{where}: each server is a dict")
    unknown = set(raw) - _KNOWN
    if unknown:
        raise McpConfigError(f"{where}: unknown field(s) {sorted(unknown)}")
    if source == "project" and (raw.get("network") or raw.get("write")):
        raise McpConfigError(
            f"{where} asks for network or write access: a project file can never grant "
            "that. Put the server in your own config (c.Phoenix.mcp_servers) to grant it."
        )
    command, url = raw.get("command"), raw.get("url")
    if bool(command) == bool(url):
        raise McpConfigError(f"{where}: give either 'command' (stdio) or 'url' (HTTP)")
    if command is not None and not isinstance(command, str):
        raise McpConfigError(f"{where}: command must be a string")
    if url is not None and (
        not isinstance(url, str) or not url.startswith(("http://", "https://"))
    ):
        raise McpConfigError(f"{where}: url must be an http(s) URL")
    kind = raw.get("type")
    if kind not in (None, "stdio", "http", "streamable-http", "streamable_http"):
        raise McpConfigError(f"{where}: type {kind!r} is not supported (stdio or http)")
    timeout = raw.get("timeout", DEFAULT_TIMEOUT)
    startup = raw.get("startup_timeout", DEFAULT_STARTUP_TIMEOUT)
    memory = raw.get("memory", DEFAULT_MEMORY)
    for key, value in (("timeout", timeout), ("startup_timeout", startup)):
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise McpConfigError(f"{where}: {key} is a positive number of seconds")
    if isinstance(memory, bool) or not isinstance(memory, int) or memory <= 0:
        raise McpConfigError(f"{where}: memory is a positive number of bytes")
    cwd = raw.get("cwd") or ""
    if not isinstance(cwd, str):
        raise McpConfigError(f"{where}: cwd must be a string")
    return ServerConfig(
        name=name,
        source=source,
        command=command or "",
        args=_strings(raw.get("args"), f"{where}: args"),
        env=_mapping(raw.get("env"), f"{where}: env"),
        cwd=cwd,
        url=url or "",
        headers=_mapping(raw.get("headers"), f"{where}: headers"),
        network=bool(raw.get("network", False)),
        write=_strings(raw.get("write"), f"{where}: write"),
        timeout=float(timeout),
        startup_timeout=float(startup),
        memory=int(memory),
        project_dir=project_dir,
    )


def parse_servers(
    raw: Mapping[str, Any] | None, source: Source = "config"
) -> tuple[ServerConfig, ...]:
    """``c.Phoenix.mcp_servers`` (or the policy's ``[mcp] servers``, same shape) as
    typed entries; McpConfigError names a bad one."""
    if not raw:
        return ()
    if not isinstance(raw, Mapping):
        raise McpConfigError("MCP servers are a dict of {name: server}")
    return tuple(_server(name, entry, source) for name, entry in raw.items())


def parse_project_file(folder: Path) -> tuple[ServerConfig, ...]:
    """The servers of ``folder/.mcp.json`` (none if there is no file).

    Only reading: nothing here starts or approves anything."""
    path = folder / PROJECT_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ()
    except OSError as exc:
        raise McpConfigError(f"cannot read {path}: {exc}") from exc
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise McpConfigError(f"{path} is not JSON: {exc}") from exc
    servers = data.get("mcpServers") if isinstance(data, Mapping) else None
    if not isinstance(servers, Mapping):
        raise McpConfigError(f'{path} has no "mcpServers" object')
    return tuple(_server(name, entry, "project", str(folder)) for name, entry in servers.items())


def tools_digest(tools: Iterable[ToolSpec]) -> str:
    """What a server's tool list is pinned to: names, descriptions and input schemas."""
    shape = sorted(
        (t.name, t.description, json.dumps(t.input_schema, sort_keys=True)) for t in tools
    )
    return hashlib.sha256(json.dumps(shape).encode()).hexdigest()


def tool_names(tools: Sequence[ToolSpec]) -> list[str]:
    """The model-facing names, ``mcp__<server>__<tool>``, in the order given.

    Characters the API refuses become ``_``; a name over the API's length keeps
    its start and gets a short hash of the whole, so two long names never collide;
    a collision left after that gets a counter.
    """
    out: list[str] = []
    seen: set[str] = set()
    for tool in tools:
        full = f"mcp__{tool.server}__{tool.name}"
        name = _NAME_CHARS.sub("_", full)
        if len(name) > MAX_TOOL_NAME:
            tag = hashlib.sha256(full.encode()).hexdigest()[:8]
            name = f"{name[: MAX_TOOL_NAME - 9]}_{tag}"
        base, n = name, 2
        while name in seen:
            suffix = f"_{n}"
            name = base[: MAX_TOOL_NAME - len(suffix)] + suffix
            n += 1
        seen.add(name)
        out.append(name)
    return out
