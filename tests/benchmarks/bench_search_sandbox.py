"""Benchmark: keyword_search inside the Restricted sandbox vs outside it, on one tree.

keyword_search runs every rg as bash runs a command: through the sandbox
launcher, in Restricted mode inside the sandbox (namespaces, Landlock, seccomp,
credential placeholders). This measures what that costs on the same 5,000-file
tree (bench_keyword_search.py's), in one run, rounds interleaved so load on the
shared machine falls on all alike:

* inside: the tool in Restricted mode (each rg in its own sandbox);
* outside: the tool in Unrestricted mode (same launcher, no sandbox);
* raw: one direct `rg -i -F -C1` pass for the same terms (no launcher at all),
  output to /dev/null (rg still searches every file and writes every line; it has
  no /dev/null shortcut): bench_keyword_search.py's baseline, the same function.

Then the same inside/outside pair with the most terms a call may give (12): all
terms go into one rg (one sandbox), so this should cost about what 3 terms do.
Target: inside <= 1.5x raw. Prints the load average.

Run: /work/venv/bin/python tests/benchmarks/bench_search_sandbox.py [files]
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from phoenix_nb.commands import CommandRunner
from phoenix_nb.core.values import Mode
from phoenix_nb.sandbox import detect_sandbox
from phoenix_nb.tools.base import ToolContext
from phoenix_nb.tools.keyword_search import MAX_TERMS, KeywordSearchTool, find_rg
from tests.benchmarks.bench_keyword_search import TERMS, build_tree, time_raw_rg

ROUNDS = 15
MANY_TERMS = [*TERMS, *(f"rare_word_{i}" for i in range(MAX_TERMS - len(TERMS)))]


async def time_tool(root: Path, mode: Mode, terms: list[str] = TERMS) -> float:
    ctx = ToolContext(
        cwd=root,
        mode=mode,
        commands=CommandRunner(group="bench", info=detect_sandbox()),
        conversation_id="bench",
    )
    start = time.perf_counter()
    result = await KeywordSearchTool().run({"query": "q", "search_terms": terms}, ctx, "b")
    elapsed = time.perf_counter() - start
    assert not result.is_error, result.content
    return elapsed * 1000


async def measure(root: Path, rg: str) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {k: [] for k in ("inside", "outside", "raw", "in12", "out12")}
    for mode in (Mode.RESTRICTED, Mode.UNRESTRICTED):  # start the launcher, warm caches
        await time_tool(root, mode)
    for _ in range(ROUNDS):
        times["inside"].append(await time_tool(root, Mode.RESTRICTED))
        times["outside"].append(await time_tool(root, Mode.UNRESTRICTED))
        times["raw"].append(time_raw_rg(rg, root) * 1000)
        await asyncio.sleep(0.05)  # the launcher replaces its spares, as between tool calls
        times["in12"].append(await time_tool(root, Mode.RESTRICTED, MANY_TERMS))
        times["out12"].append(await time_tool(root, Mode.UNRESTRICTED, MANY_TERMS))
        await asyncio.sleep(0.05)
    return times


def main() -> None:
    files = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    info = detect_sandbox()
    if not info.available:
        sys.exit(f"Restricted mode unavailable: {info.reason}")
    rg = find_rg()
    assert rg is not None, "rg not found"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        build_tree(root, files)
        times = asyncio.run(measure(root, rg))
    inside, outside, raw = (statistics.median(times[k]) for k in ("inside", "outside", "raw"))
    print(f"tree: {files} files, terms: {TERMS}, {ROUNDS} interleaved rounds (medians)")
    print(f"  raw rg, one direct pass:                 {raw:7.1f} ms (baseline)")
    print(
        f"  keyword_search outside (Unrestricted):   {outside:7.1f} ms = {outside / raw:.2f}x raw"
    )
    print(
        f"  keyword_search inside (Restricted):      {inside:7.1f} ms = {inside / raw:.2f}x raw"
        " (target <= 1.5x)"
    )
    per_round = statistics.median(i / r for i, r in zip(times["inside"], times["raw"], strict=True))
    print(f"    median of the rounds' inside / raw: {per_round:.2f}x")
    print(f"  inside / outside the sandbox: {inside / outside:.2f}x (+{inside - outside:.1f} ms)")
    in12, out12 = statistics.median(times["in12"]), statistics.median(times["out12"])
    print(
        f"  {len(MANY_TERMS)} terms: inside {in12:.1f} ms, outside {out12:.1f} ms, "
        f"inside / outside {in12 / out12:.2f}x (+{in12 - out12:.1f} ms)"
    )
    print("  load average (1/5/15 min): " + "/".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
