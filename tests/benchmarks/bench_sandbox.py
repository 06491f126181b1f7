"""Sandbox overhead: median wall time of `true` Restricted vs Unrestricted vs direct.

The three ways are interleaved round by round, so load from other work on
the machine (2 shared cores) falls on all of them alike; the baseline is
measured in the same run. Target (issue 4): Restricted adds < 20 ms over
Unrestricted at the median.
"""

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

ROUNDS = 60


async def main() -> None:
    tool = BashTool()
    cwd = Path(tempfile.gettempdir())
    ctxs = {
        mode: ToolContext(cwd=cwd, mode=mode, sandbox=detect_sandbox())
        for mode in (Mode.UNRESTRICTED, Mode.RESTRICTED)
    }
    for ctx in ctxs.values():  # start the launcher, warm caches
        await tool.run({"command": "true"}, ctx, "warm")
    times: dict[str, list[float]] = {"direct": [], **{m.value: [] for m in ctxs}}
    for _ in range(ROUNDS):
        start = time.perf_counter()
        subprocess.run(["bash", "-c", "true"], start_new_session=True, check=True)
        times["direct"].append((time.perf_counter() - start) * 1000)
        for mode, ctx in ctxs.items():
            start = time.perf_counter()
            result = await tool.run({"command": "true"}, ctx, "b")
            times[mode.value].append((time.perf_counter() - start) * 1000)
            assert not result.is_error, result.content
    base, unrestricted, restricted = (
        statistics.median(times[k]) for k in ("direct", "unrestricted", "restricted")
    )
    print(f"direct subprocess bash -c true: {base:.2f} ms (median of {ROUNDS}, interleaved)")
    print(f"Unrestricted (launcher):        {unrestricted:.2f} ms")
    print(f"Restricted (Landlock+seccomp):  {restricted:.2f} ms")
    print(
        f"Restricted / Unrestricted ratio: {restricted / unrestricted:.2f}x, "
        f"added {restricted - unrestricted:.2f} ms (target < 20 ms)"
    )
    print(
        f"Restricted vs direct: {restricted / base:.2f}x, added {restricted - base:.2f} ms; "
        f"Unrestricted vs direct: added {unrestricted - base:.2f} ms"
    )


if __name__ == "__main__":
    asyncio.run(main())
