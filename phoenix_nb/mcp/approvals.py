"""Which MCP servers the user approved, pinned to what they approved.

A file in the store's folder (``mcp-approvals.json``), so an approval outlives
the kernel but belongs to this user's phoenix store. Each entry is keyed by the
server's source, its project folder and its name, and holds two digests:

* ``config``: `ServerConfig.digest` of the entry approved. A project file's
  server whose entry changed in any byte (its command, an argument, an env
  value, the URL) no longer matches: pending again, and the new command does
  not run until approved. Approval by name alone is the hole other hosts had.
* ``tools``: `tools_digest` of the tool list the server showed first after the
  approval. A server that later shows other names, descriptions or schemas (a
  "rug pull") is pending again and its tools are not offered.

A server from the user's own config is approved by being written there: its
``config`` digest is recorded at first sight, its tools pinned the same way.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
from pathlib import Path

from phoenix_nb.mcp.config import ServerConfig

__all__ = ["Approvals"]

FILE_NAME = "mcp-approvals.json"


def _key(server: ServerConfig) -> str:
    return f"{server.source}|{server.project_dir}|{server.name}"


class Approvals:
    """The approvals file of one store; every method reads and writes it whole (small)."""

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / FILE_NAME
        self._lock = threading.Lock()

    def _read(self) -> dict[str, dict[str, str | None]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, data: dict[str, dict[str, str | None]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".mcp-approvals-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=1, sort_keys=True)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def config_approved(self, server: ServerConfig) -> bool:
        entry = self._read().get(_key(server)) or {}
        return entry.get("config") == server.digest()

    def approve(self, server: ServerConfig) -> None:
        """Approve this exact entry; its tool list is pinned when it is first listed."""
        with self._lock:
            data = self._read()
            old = data.get(_key(server)) or {}
            same = old.get("config") == server.digest()
            data[_key(server)] = {
                "config": server.digest(),
                "tools": old.get("tools") if same else None,
            }
            self._write(data)

    def approve_tools(self, server: ServerConfig, tools: str) -> None:
        """Accept a changed tool list (the user saw what changed and approved)."""
        with self._lock:
            data = self._read()
            data[_key(server)] = {"config": server.digest(), "tools": tools}
            self._write(data)

    def deny(self, server: ServerConfig) -> None:
        with self._lock:
            data = self._read()
            data.pop(_key(server), None)
            self._write(data)

    def check_tools(self, server: ServerConfig, tools: str) -> bool:
        """Whether ``tools`` is the pinned list; the first list after an approval is pinned."""
        with self._lock:
            data = self._read()
            entry = data.get(_key(server)) or {}
            if entry.get("config") != server.digest():
                return False
            if entry.get("tools") is None:
                data[_key(server)] = {"config": server.digest(), "tools": tools}
                self._write(data)
                return True
            return entry.get("tools") == tools
