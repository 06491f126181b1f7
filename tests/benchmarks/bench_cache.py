"""The prompt cache with 100 MCP tools: 30 rounds of one conversation through a real
kernel and `%%phoenix`, a scripted model calling the tools.

Server: tests/notebook/fixtures/many_tools_mcp.py (100 tools with schemas), started
by phoenix in the sandbox from `c.Phoenix.mcp_servers`. The fake Messages API bills
each request as the real one would (cache reads vs writes vs plain input) and keeps
what it received. Measured in the same run:

* **deferred** (the default, `mcp_defer_above` = 30): the model gets `mcp_call` and
  `mcp_tool_search`; it searches once and calls through `mcp_call`.
* **baseline** (`mcp_defer_above` = 1000): all 100 tools with full schemas; it calls
  each directly.

Printed: the share of input tokens read from cache over the 30 rounds (issue 39's
target: >= 95%) and the first request's MCP tool-list size in bytes, each with the
deferred/baseline ratio. No assertions: a script, as every benchmark here.

Run: `python tests/benchmarks/bench_cache.py` (prints `uptime` first).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.notebook.kernel_harness import loaded_kernel

MANY = Path(__file__).resolve().parents[1] / "notebook" / "fixtures" / "many_tools_mcp.py"
ROUNDS = 30


def _rounds(deferred: bool) -> list[Turn]:
    """29 tool rounds and a final answer: 30 requests."""
    if deferred:
        first = [Turn([tool_use("mcp_tool_search", {"query": "quantity 57"})])]
        calls = [
            tool_use(
                "mcp_call", {"name": f"mcp__many__measure_{i:03d}", "arguments": {"sample": "s"}}
            )
            for i in range(ROUNDS - 2)
        ]
    else:
        first = []
        calls = [
            tool_use(f"mcp__many__measure_{i:03d}", {"sample": "s"}) for i in range(ROUNDS - 1)
        ]
    return [*first, *(Turn([c]) for c in calls), Turn([text("measured")])]


def _measure(defer_above: int, deferred: bool) -> tuple[float, int, int]:
    """(share of input tokens read from cache, first request's MCP tool bytes, requests)."""
    with FakeAnthropic() as fake, tempfile.TemporaryDirectory(prefix="bench-cache-") as tmp:
        with loaded_kernel(Path(tmp), fake.base_url) as kern:
            kern.ok(f"%config Phoenix.mcp_defer_above = {defer_above}")
            servers = {"many": {"command": sys.executable, "args": [str(MANY)]}}
            kern.ok(f"%config Phoenix.mcp_servers = {servers!r}")
            fake.script(*_rounds(deferred))
            cell = kern.run("%%phoenix --new\nMeasure everything.", timeout=600)
            assert cell.status == "ok", cell.error()
        first = fake.requests[0].body["tools"]
        size = sum(len(json.dumps(t)) for t in first if t["name"].startswith("mcp"))
        read = total = 0
        for index in range(len(fake.requests)):
            billed = fake.billing(index)
            assert billed is not None
            read += billed.cache_read_input_tokens
            total += (
                billed.input_tokens
                + billed.cache_read_input_tokens
                + billed.cache_creation_input_tokens
            )
        return read / total, size, len(fake.requests)


def main() -> None:
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    base_share, base_size, base_n = _measure(1000, deferred=False)
    share, size, n = _measure(30, deferred=True)
    print(f"100 MCP tools, {n} rounds (baseline {base_n}):")
    print(
        f"  input tokens read from cache: deferred {share:.1%}, all schemas {base_share:.1%} "
        f"(ratio {share / base_share:.3f}; target >= 95%)"
    )
    print(
        f"  first request's MCP tool list: deferred {size:,} B, all schemas {base_size:,} B "
        f"(ratio {size / base_size:.3f})"
    )


if __name__ == "__main__":
    main()
