"""Benchmark: keyword_search (no helper model) vs raw `rg` on a tree of 5,000+ files.

keyword_search runs one rg for all terms (counting each term's files and hits
from its output, the tree's size from its --stats) and formats the result; this
prints what that costs against a single raw `rg -i -F -C1` for the same terms,
both measured in this run, and the load average. Target: <= 1.5x.
Run: /work/venv/bin/python tests/benchmarks/bench_keyword_search.py [files]
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from phoenix_nb.core.values import Mode
from phoenix_nb.tools.base import SandboxInfo, ToolContext
from phoenix_nb.tools.keyword_search import KeywordSearchTool, _rg, find_rg, rg_spec

TERMS = ["frobnicate", "parse_config", "import"]
ROUNDS = 7


def build_tree(root: Path, files: int) -> None:
    """Python-like files in 100 packages; rare and common terms sprinkled deterministically."""
    for i in range(files):
        package = root / f"pkg{i % 100}"
        package.mkdir(exist_ok=True)
        body = [f"import os\n\n\ndef function_{i}(value):\n"]
        body += [f"    total_{j} = value * {j}\n" for j in range(30)]
        if i % 97 == 0:
            body.append("    return frobnicate(value)\n")
        if i % 13 == 0:
            body.append("    cfg = parse_config(value)\n")
        (package / f"mod{i}.py").write_text("".join(body))
    subprocess.run(["git", "init", "-q", str(root)], check=True)


def time_raw_rg(rg: str, root: Path) -> float:
    args = [rg, "--no-config", "-i", "-F", "--context=1"]
    for term in TERMS:
        args += ["-e", term]
    start = time.perf_counter()
    subprocess.run([*args, "."], cwd=root, stdout=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


async def time_sandboxed_rg(root: Path) -> float:
    """The same raw pass, started as the tool starts its rg (launcher, Restricted sandbox),
    its output read and discarded: what the sandbox alone costs over a direct rg."""
    ctx = ToolContext(cwd=root, mode=Mode.RESTRICTED, sandbox=SandboxInfo(available=True))
    rg = find_rg()
    assert rg is not None
    spec = rg_spec(ctx, root, rg)
    args = ["-i", "-F", "--context=1"]
    for term in TERMS:
        args += ["-e", term]
    start = time.perf_counter()
    async with _rg([*args, "."], spec) as process:
        async for _batch in process.batches():
            pass
        await process.wait()
    return time.perf_counter() - start


async def time_tool(root: Path) -> float:
    ctx = ToolContext(cwd=root, mode=Mode.RESTRICTED, sandbox=SandboxInfo(available=True))
    start = time.perf_counter()
    result = await KeywordSearchTool().run({"query": "q", "search_terms": TERMS}, ctx, "b")
    elapsed = time.perf_counter() - start
    assert not result.is_error, result.content
    return elapsed


def main() -> None:
    files = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    rg = find_rg()
    assert rg is not None, "rg not found"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        build_tree(root, files)
        time_raw_rg(rg, root)  # warm the page cache for both
        raw = [time_raw_rg(rg, root) for _ in range(ROUNDS)]
        tool = [asyncio.run(time_tool(root)) for _ in range(ROUNDS)]
        boxed = [asyncio.run(time_sandboxed_rg(root)) for _ in range(ROUNDS)]
    raw_ms = statistics.median(raw) * 1000
    tool_ms = statistics.median(tool) * 1000
    boxed_ms = statistics.median(boxed) * 1000
    print(f"tree: {files} files, terms: {TERMS}, rounds: {ROUNDS}")
    print(f"raw rg (one pass, -C1):        median {raw_ms:7.1f} ms")
    print(f"keyword_search (no helper):    median {tool_ms:7.1f} ms")
    print(f"raw rg through the sandbox:    median {boxed_ms:7.1f} ms")
    print(f"ratio keyword_search / raw rg: {tool_ms / raw_ms:.2f}x (target <= 1.5x)")
    print(f"ratio keyword_search / raw rg through the sandbox: {tool_ms / boxed_ms:.2f}x")
    print("load average (1/5/15 min): " + "/".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
