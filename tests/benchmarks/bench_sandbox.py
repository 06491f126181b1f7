"""Sandbox overhead: median wall time of `true` Restricted vs Unrestricted vs direct."""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from phoenix_nb.core.values import Mode
from phoenix_nb.tools.base import ToolContext
from phoenix_nb.tools.bash import BashTool
from phoenix_nb.tools.sandbox import detect_sandbox

N = 50


async def median_ms(mode: Mode) -> float:
    tool = BashTool()
    ctx = ToolContext(cwd=Path(tempfile.gettempdir()), mode=mode, sandbox=detect_sandbox())
    await tool.run({"command": "true"}, ctx, "warm")
    times = []
    for _ in range(N):
        start = time.perf_counter()
        await tool.run({"command": "true"}, ctx, "b")
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    direct = []
    for _ in range(N):
        start = time.perf_counter()
        subprocess.run(["bash", "-c", "true"], start_new_session=True, check=True)
        direct.append((time.perf_counter() - start) * 1000)
    base = statistics.median(direct)
    unrestricted = asyncio.run(median_ms(Mode.UNRESTRICTED))
    restricted = asyncio.run(median_ms(Mode.RESTRICTED))
    print(f"direct subprocess bash -c true: {base:.2f} ms")
    print(f"Unrestricted (launcher):        {unrestricted:.2f} ms")
    print(f"Restricted (Landlock+seccomp):  {restricted:.2f} ms")
    print(
        f"Restricted / Unrestricted ratio: {restricted / unrestricted:.2f}x, "
        f"added {restricted - unrestricted:.2f} ms (target < 20 ms)"
    )
    print(f"Restricted vs direct: added {restricted - base:.2f} ms")


if __name__ == "__main__":
    main()
