"""Cancel latency: task.cancel() to every process of a busy tree gone (REQ-BED-005).

The tree is busy on purpose (four spinning subshells on 2 shared cores) and
includes descendants that called ``setsid`` (Unrestricted; Restricted mode
refuses setsid). Modes are interleaved run by run so machine load falls on
both alike. Two figures per mode: when the cancelled tool returned (it
returns only after the supervisor reported the tree dead), and when a /proc
scan first found none of the tree's processes alive (includes the scan's own
cost, ~1-10 ms here). Target: p99 < 100 ms.

`cancel_busy_tree` and `p99` are this measurement for other benchmarks too
(bench_sandbox.py imports them rather than measuring cancel its own way).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import tempfile
import time
from pathlib import Path

from phoenix_nb.commands import CommandRunner
from phoenix_nb.core.values import Mode
from phoenix_nb.sandbox import detect_sandbox
from phoenix_nb.tools.base import ToolContext
from phoenix_nb.tools.bash import BashTool

RUNS = 40
MARK = "phoenix_cancel_bench"


def tree_pids() -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_bytes()
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if MARK.encode() in cmd and b") Z " not in stat:
                pids.append(int(entry))
    return pids


async def cancel_busy_tree(tool: BashTool, ctx: ToolContext) -> tuple[float, float]:
    """Cancel a busy tree run in `ctx`'s mode: (ms until the tool returned, until all gone)."""
    mode = ctx.mode
    cmd = (
        f": {MARK}; for i in 1 2 3 4; do (while :; do :; done) & done; "
        f"setsid sh -c ': {MARK}; sleep 300' & (setsid sh -c ': {MARK}; sleep 300' &); wait"
    )
    expected = 5 if mode == Mode.RESTRICTED else 7
    task = asyncio.ensure_future(tool.run({"command": cmd}, ctx, "c"))
    deadline = time.monotonic() + 10
    while len(tree_pids()) < expected and time.monotonic() < deadline:
        await asyncio.sleep(0.005)
    start = time.perf_counter()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    returned = (time.perf_counter() - start) * 1000
    while tree_pids():
        await asyncio.sleep(0.001)
    return returned, (time.perf_counter() - start) * 1000


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


async def main() -> None:
    modes = (Mode.UNRESTRICTED, Mode.RESTRICTED)
    cwd = Path(tempfile.gettempdir())
    ctxs = {
        mode: ToolContext(cwd=cwd, mode=mode, commands=CommandRunner(info=detect_sandbox()))
        for mode in modes
    }
    results: dict[Mode, list[tuple[float, float]]] = {m: [] for m in modes}
    for _ in range(RUNS):
        for mode in modes:
            results[mode].append(await cancel_busy_tree(BashTool(), ctxs[mode]))
    for mode in modes:
        returned = [r for r, _ in results[mode]]
        gone = [g for _, g in results[mode]]
        print(
            f"{mode.value}: cancel returned p50 {statistics.median(returned):.1f} ms, "
            f"p99 {p99(returned):.1f} ms; tree gone p50 {statistics.median(gone):.1f} ms, "
            f"p99 {p99(gone):.1f} ms (target p99 < 100 ms; {RUNS} runs)"
        )


if __name__ == "__main__":
    asyncio.run(main())
