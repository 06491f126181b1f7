"""The third-party MCP servers the tests run, in a virtualenv of their own.

`mcp-server-time` and `mcp-server-git` (the reference servers, PyPI) are installed
with pip into a venv made once per machine (under ~/.cache, or
$PHOENIX_TEST_MCP_VENV) and reused: they are test counterparts, not phoenix's
dependencies, and must not share the kernel's environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import filelock

__all__ = ["SERVERS", "server_venv"]

SERVERS = ("mcp-server-time==2026.10.19", "mcp-server-git==2026.10.19")


def server_venv() -> Path:
    """The venv's bin folder, made (once, under a lock) if it is not there yet."""
    default = Path.home() / ".cache" / "phoenix_nb-tests" / "mcp-servers-2026.10.19"
    root = Path(os.environ.get("PHOENIX_TEST_MCP_VENV") or default)
    bin_dir = root / "bin"
    root.parent.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(str(root) + ".lock"):
        if not (bin_dir / "mcp-server-git").exists():
            subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
            subprocess.run(
                [str(bin_dir / "python"), "-m", "pip", "install", "-q", *SERVERS],
                check=True,
                timeout=900,
            )
    return bin_dir
