"""An MCP tool call through phoenix against a direct `mcp.Client` call, and a
sandboxed server's start against an unsandboxed one.

Server: the reference `mcp-server-time` (in the test venv, tests/mcp_servers.py),
tool `get_current_time`. Baselines measured in the same run, interleaved round by
round so load from the shared machine falls on all alike:

* **call**: `McpTool.run` from this event loop (through the hub's worker thread,
  to a server in the Restricted sandbox) against `Client.call_tool` on a
  `Client(StdioServerParameters(...))` the SDK started itself, the same server.
  Target: ≤ 1.3×.
* **start** (start to listed tools): `McpHub.prepare` of a sandboxed server
  against the same hub path for an unsandboxed one (a `network` grant runs it
  outside the sandbox) and against the SDK's own `stdio_client`. Target: the
  sandbox adds ≤ 100 ms.

Run: `python tests/benchmarks/bench_mcp.py [rounds]` (prints `uptime` first).
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mcp import Client, StdioServerParameters

from phoenix_nb.commands import CommandRunner
from phoenix_nb.core.values import Mode
from phoenix_nb.mcp import Approvals, McpHub, mcp_tools, parse_servers
from phoenix_nb.sandbox import SandboxPolicy, detect_sandbox
from phoenix_nb.tools.base import ToolContext
from tests.mcp_servers import server_venv

CALLS = 40
ARGS = {"timezone": "Europe/Paris"}


async def _hub_start(command: str, store: Path, *, grant: bool) -> tuple[float, McpHub]:
    entry: dict[str, object] = {"command": command, "args": ["--local-timezone", "UTC"]}
    if grant:
        entry["network"] = True
    hub = McpHub(Approvals(store), detect_sandbox(), SandboxPolicy(), parse_servers({"t": entry}))
    start = time.perf_counter()
    problems = await hub.prepare(store)
    took = time.perf_counter() - start
    assert not problems, problems
    return took, hub


async def main(rounds: int) -> None:
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    command = str(server_venv() / "mcp-server-time")
    store = Path(tempfile.mkdtemp(prefix="bench-mcp-"))
    ctx = ToolContext(
        cwd=store, mode=Mode.UNRESTRICTED, commands=CommandRunner(info=detect_sandbox())
    )
    starts: dict[str, list[float]] = {"sandboxed": [], "unsandboxed": [], "sdk": []}
    calls: dict[str, list[float]] = {"phoenix": [], "sdk": []}
    for _ in range(rounds):
        took, hub = await _hub_start(command, store, grant=False)
        starts["sandboxed"].append(took)
        ready = mcp_tools(hub, hub.ready_servers(), defer_above=100)
        (tool,) = [t for t in ready if t.name.endswith("current_time")]
        took_u, hub_u = await _hub_start(command, store, grant=True)
        starts["unsandboxed"].append(took_u)
        await asyncio.get_running_loop().run_in_executor(None, hub_u.close)
        params = StdioServerParameters(command=command, args=["--local-timezone", "UTC"])
        start = time.perf_counter()
        async with Client(params, read_timeout_seconds=60) as client:
            await client.list_tools()
            starts["sdk"].append(time.perf_counter() - start)
            for _ in range(CALLS):  # interleaved, call by call
                start = time.perf_counter()
                await client.call_tool("get_current_time", ARGS)
                calls["sdk"].append(time.perf_counter() - start)
                start = time.perf_counter()
                await tool.run(ARGS, ctx, "b")
                calls["phoenix"].append(time.perf_counter() - start)
        await asyncio.get_running_loop().run_in_executor(None, hub.close)

    def ms(values: list[float]) -> str:
        return f"median {statistics.median(values) * 1000:.1f} ms (n={len(values)})"

    for name, values in starts.items():
        print(f"start to listed tools, {name:11s}: {ms(values)}")
    extra = statistics.median(starts["sandboxed"]) - statistics.median(starts["unsandboxed"])
    print(f"the sandbox adds to a start: {extra * 1000:+.0f} ms (target ≤ +100 ms)")
    for name, values in calls.items():
        print(f"call get_current_time, {name:7s}: {ms(values)}")
    ratio = statistics.median(calls["phoenix"]) / statistics.median(calls["sdk"])
    print(f"phoenix call / direct SDK call: {ratio:.2f}x (target ≤ 1.3x)")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 5))
