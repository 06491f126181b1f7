"""Cancel latency: task.cancel() to every process of a busy tree gone (REQ-BED-005)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import tempfile
import time
from pathlib import Path

from phoenix_nb.core.values import Mode
from phoenix_nb.tools.base import ToolContext
from phoenix_nb.tools.bash import BashTool
from phoenix_nb.tools.sandbox import detect_sandbox

RUNS = 30
MARK = "phoenix_cancel_bench"


def tree_pids() -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if MARK.encode() in cmd and ") Z " not in stat:
                pids.append(int(entry))
    return pids


async def one(mode: Mode) -> float:
    ctx = ToolContext(cwd=Path(tempfile.gettempdir()), mode=mode, sandbox=detect_sandbox())
    cmd = f": {MARK}; for i in 1 2 3 4; do (while :; do :; done) & done; (setsid sleep 300 &); wait"
    task = asyncio.ensure_future(BashTool().run({"command": cmd}, ctx, "c"))
    deadline = time.monotonic() + 5
    while len(tree_pids()) < 5 and time.monotonic() < deadline:
        await asyncio.sleep(0.005)
    start = time.perf_counter()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    while tree_pids():
        await asyncio.sleep(0.001)
    return (time.perf_counter() - start) * 1000


async def main() -> None:
    for mode in (Mode.UNRESTRICTED, Mode.RESTRICTED):
        times = sorted([await one(mode) for _ in range(RUNS)])
        p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
        print(
            f"{mode}: cancel p50 {statistics.median(times):.1f} ms, p99 {p99:.1f} ms "
            f"(target p99 < 100 ms; {RUNS} runs)"
        )


if __name__ == "__main__":
    asyncio.run(main())
