"""Benchmark: keyword_search (no helper model) vs raw `rg` on a tree of 5,000+ files.

keyword_search runs one rg for all terms (counting each term's files and hits
from its output, the tree's size from its --stats) and formats the result; this
prints what that costs in Restricted mode (where it must run: rg in the sandbox)
against the baseline, one raw `rg -i -F -C1` pass over the same tree for the same
terms, started directly, its output to /dev/null (rg still searches every file and
writes every line there; it has no /dev/null shortcut), and the load average.
Target: <= 1.5x.

The same pass started as the tool starts its rg, through the launcher with and
without the sandbox, is the floor under the tool's own work; it is printed too.
The rounds are interleaved (raw, tool, rg through the sandbox and the launcher) and
a pause follows each sandboxed call, as between a conversation's tool calls, so
the shared machine's load falls on all alike; both the ratio of the medians and
the median of each round's ratio are printed. So is this process's CPU time per
call, the tool's and the sandboxed raw pass's: their difference is the tool's own
work (reading, counting, formatting), which runs on the cores rg's threads use.

``--before DIR`` (a checkout of another revision, e.g. ``git archive main | tar -x
-C DIR``) also times the same sandboxed pass through DIR's launcher script, a
second launcher process started beside this tree's, and DIR's keyword_search (its
own reading of rg's output; its rg through this tree's launcher), in the same
rounds: a change to the sandbox or the tool is then judged within one run, under
one load, not across runs on a shared machine whose load moves by more than the
change.
``--parse-only`` times the tool's own work alone, without rg, the launcher or the
machine's load in the figure: rg's output of the one pass over the tree is recorded
once (the tool's arguments), and the tool's whole reading of it — counting each read,
dropping broad terms, choosing and rendering the hits, the summary and display — is
replayed many times, in this process's CPU time, against the line-by-line reading it
replaced (``reference_one_pass`` in tests/tools/test_keyword_search_parse.py), the two
interleaved in one run; the results must be identical. "while rg runs" is the reading
of the reads (`_one_pass`), which overlaps rg's search; the rest comes after rg's exit.

Run: /work/venv/bin/python tests/benchmarks/bench_keyword_search.py [files] [--before DIR]
     [--parse-only] (with --before DIR: against DIR's tool, else the reference reading)
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import ModuleType

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from phoenix_nb import sandbox
from phoenix_nb.commands import CommandRunner
from phoenix_nb.core.values import Mode
from phoenix_nb.sandbox import detect_sandbox, launcher_client
from phoenix_nb.tools import keyword_search as ks
from phoenix_nb.tools.base import ToolContext
from phoenix_nb.tools.keyword_search import KeywordSearchTool, _rg, find_rg, rg_spec
from tests.tools.test_keyword_search_parse import reference_one_pass, replaying

TERMS = ["frobnicate", "parse_config", "import"]
ROUNDS = int(os.environ.get("PHOENIX_BENCH_ROUNDS", "15"))
PAUSE = 0.05  # between sandboxed calls: the launcher replaces its spare, as between calls


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


def context(root: Path, mode: Mode = Mode.RESTRICTED) -> ToolContext:
    return ToolContext(
        cwd=root,
        mode=mode,
        commands=CommandRunner(group="bench", info=detect_sandbox()),
        conversation_id="bench",
    )


async def time_sandboxed_rg(root: Path, mode: Mode = Mode.RESTRICTED) -> float:
    """The same raw pass, started as the tool starts its rg (the launcher; in Restricted
    mode the sandbox), its output read as the tool reads it and discarded: the floor
    under the tool's own cost, and what the launcher and the sandbox cost over a direct
    rg. Finding rg and building its RunSpec are timed too: every sandboxed command
    expands its hidden paths and environment when it starts (bash's as well), and the
    tool's time includes them."""
    ctx = context(root, mode)
    args = ["-i", "-F", "--context=1"]
    for term in TERMS:
        args += ["-e", term]
    start = time.perf_counter()
    rg = find_rg()
    assert rg is not None
    spec = rg_spec(ctx, root, rg)
    async with _rg([*args, "."], spec) as process:
        async for _batch in process.batches():
            pass
        await process.wait()
    return time.perf_counter() - start


def other_launcher(tree: Path) -> launcher_client.LauncherHandle:
    """A launcher handle that runs `tree`'s launcher script (another revision's sandbox)."""
    script = tree / "phoenix_nb" / "sandbox" / "child" / "launcher.py"
    if not script.is_file():
        sys.exit(f"no launcher script at {script}")
    handle = launcher_client.LauncherHandle()
    ours = launcher_client._LAUNCHER_SCRIPT
    launcher_client._LAUNCHER_SCRIPT = script
    try:
        handle.hello()  # starts it, with that script
    finally:
        launcher_client._LAUNCHER_SCRIPT = ours
    return handle


async def time_through(handle: launcher_client.LauncherHandle, root: Path) -> float:
    """`time_sandboxed_rg` with the commands started by `handle`'s launcher."""
    ours = launcher_client._LAUNCHER
    launcher_client._LAUNCHER = handle
    try:
        return await time_sandboxed_rg(root)
    finally:
        launcher_client._LAUNCHER = ours


async def time_tool(root: Path, tool: type[KeywordSearchTool] = KeywordSearchTool) -> float:
    ctx = context(root)
    start = time.perf_counter()
    result = await tool().run({"query": "q", "search_terms": TERMS}, ctx, "b")
    elapsed = time.perf_counter() - start
    assert not result.is_error, result.content
    return elapsed


async def measure(
    root: Path,
    rg: str,
    before: launcher_client.LauncherHandle | None = None,
    before_tool: type[KeywordSearchTool] | None = None,
) -> dict[str, list[float]]:
    """Each call's wall time by kind, and this process's CPU time for the tool's calls
    ("tool cpu", "before tool cpu") and the sandboxed raw pass's ("boxed cpu")."""
    times: dict[str, list[float]] = {
        "raw": [],
        "tool": [],
        "boxed": [],
        "launched": [],
        "tool cpu": [],
        "boxed cpu": [],
    }
    await time_tool(root)  # start the launcher, warm the page cache
    if before is not None:
        times["before"] = []
        await time_through(before, root)
    if before_tool is not None:
        times["before tool"], times["before tool cpu"] = [], []
        await time_tool(root, before_tool)
    for _ in range(ROUNDS):
        if before is not None:
            times["before"].append(await time_through(before, root))
            await asyncio.sleep(PAUSE)
        if before_tool is not None:
            cpu = time.process_time()
            times["before tool"].append(await time_tool(root, before_tool))
            times["before tool cpu"].append(time.process_time() - cpu)
            await asyncio.sleep(PAUSE)
        times["raw"].append(time_raw_rg(rg, root))
        cpu = time.process_time()
        times["tool"].append(await time_tool(root))
        times["tool cpu"].append(time.process_time() - cpu)
        await asyncio.sleep(PAUSE)
        cpu = time.process_time()
        times["boxed"].append(await time_sandboxed_rg(root))
        times["boxed cpu"].append(time.process_time() - cpu)
        await asyncio.sleep(PAUSE)
        times["launched"].append(await time_sandboxed_rg(root, Mode.UNRESTRICTED))
        await asyncio.sleep(PAUSE)
    return times


PARSE_REPEATS = int(os.environ.get("PHOENIX_BENCH_PARSE_REPEATS", "200"))
READ_BYTES = 64 << 10  # the recorded output is replayed in reads of this size
OnePassFn = Callable[[list[str], sandbox.RunSpec, int], Awaitable[object]]


def record_one_pass(root: Path, rg: str) -> list[bytes]:
    """rg's output of the tool's one pass over `root`, cut into reads."""
    args = [rg, "--no-config", *ks._one_pass_args(list(TERMS), ks.DEFAULT_CONTEXT_LINES)]
    data = subprocess.run(args, cwd=root, capture_output=True, check=True).stdout
    return [data[at : at + READ_BYTES] for at in range(0, len(data), READ_BYTES)]


async def replay_cpu(
    reads: list[bytes], module: ModuleType, one_pass: OnePassFn | None, root: Path
) -> tuple[float, float, object]:
    """CPU seconds per call of the one pass alone and of the whole search, by `module`'s
    tool (its `_one_pass` replaced by `one_pass` if given), on `reads` replayed as rg's
    output, and the search's result."""
    spec = sandbox.RunSpec(argv=("rg",), cwd=str(root), env={}, restricted=False)
    context = ks.DEFAULT_CONTEXT_LINES
    with pytest.MonkeyPatch.context() as patch:
        if one_pass is not None:
            patch.setattr(module, "_one_pass", one_pass)
        start = time.process_time()
        for _ in range(PARSE_REPEATS):
            patch.setattr(module, "_rg", replaying(reads))
            await module._one_pass(list(TERMS), spec, context)
        reading = (time.process_time() - start) / PARSE_REPEATS
        start = time.process_time()
        for _ in range(PARSE_REPEATS):
            patch.setattr(module, "_rg", replaying(reads))
            result = await module.KeywordSearchTool()._search("q", list(TERMS), root, spec, context)
        whole = (time.process_time() - start) / PARSE_REPEATS
    return reading, whole, result


def module_of(tree: Path) -> ModuleType:
    """`tree`'s keyword_search module (another revision's), loaded beside this one."""
    path = tree / "phoenix_nb" / "tools" / "keyword_search.py"
    spec = importlib.util.spec_from_file_location("keyword_search_before", path)
    if spec is None or spec.loader is None:
        sys.exit(f"no keyword_search module at {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def parse_only(root: Path, rg: str, files: int, before: Path | None) -> None:
    """The tool's reading of a recorded one pass against `before`'s (a checkout of another
    revision), or else against the line-by-line reference reading."""
    reads = record_one_pass(root, rg)
    size = sum(len(read) for read in reads)
    lines = sum(read.count(b"\n") for read in reads)
    baseline: tuple[str, ModuleType, OnePassFn | None]
    if before is not None:
        baseline = (f"{before}'s tool", module_of(before), None)
    else:
        baseline = ("line-by-line reference", ks, reference_one_pass)
    runs = (baseline, ("keyword_search (here)", ks, None))
    times: dict[str, list[float]] = {}
    results: dict[str, object] = {}
    for _ in range(5):  # interleaved: the machine's load falls on both alike
        for name, module, one_pass in runs:
            reading, whole, results[name] = asyncio.run(replay_cpu(reads, module, one_pass, root))
            times.setdefault(name, []).append(reading)
            times.setdefault(name + " whole", []).append(whole)
    if len({repr(result) for result in results.values()}) != 1:
        sys.exit("the readings differ: see tests/tools/test_keyword_search_parse.py")
    print(
        f"tree: {files} files, terms: {TERMS}; one pass recorded: {size} bytes, {lines} lines,"
        f" {len(reads)} reads of {READ_BYTES >> 10} KiB; {PARSE_REPEATS} replays x 5 rounds,"
        " medians of this process's CPU per call; results identical"
    )
    print(f"{'':34}{'while rg runs':>14}{'after rg':>11}{'whole':>11}")
    figures = []
    for name, _module, _fn in runs:
        read, whole = (statistics.median(times[k]) * 1000 for k in (name, name + " whole"))
        figures.append((read, whole))
        print(f"{name[-34:]:34}{read:11.2f} ms{whole - read:8.2f} ms{whole:8.2f} ms")
    (old_read, old_whole), (new_read, new_whole) = figures
    print(
        f"ratio here/baseline: whole {new_whole / old_whole:.2f}x,"
        f" while rg runs {new_read / old_read:.2f}x,"
        f" after rg {(new_whole - new_read) / (old_whole - old_read):.2f}x"
    )
    print("load average (1/5/15 min): " + "/".join(f"{x:.2f}" for x in os.getloadavg()))


def main() -> None:
    args = sys.argv[1:]
    only_parse = "--parse-only" in args
    if only_parse:
        args.remove("--parse-only")
    before_tree: Path | None = None
    if "--before" in args:
        at = args.index("--before")
        before_tree = Path(args[at + 1])
        del args[at : at + 2]
    files = int(args[0]) if args else 5000
    if only_parse:
        rg = find_rg()
        assert rg is not None, "rg not found"
        with tempfile.TemporaryDirectory() as tmp:
            build_tree(Path(tmp), files)
            parse_only(Path(tmp), rg, files, before_tree)
        return
    info = detect_sandbox()
    if not info.available:
        sys.exit(f"Restricted mode unavailable: {info.reason}")
    rg = find_rg()
    assert rg is not None, "rg not found"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        build_tree(root, files)
        before = other_launcher(before_tree) if before_tree is not None else None
        tool = module_of(before_tree).KeywordSearchTool if before_tree is not None else None
        try:
            times = asyncio.run(measure(root, rg, before, tool))
        finally:
            if before is not None:
                before.close()
    raw_ms, tool_ms, boxed_ms, launched_ms = (
        statistics.median(times[k]) * 1000 for k in ("raw", "tool", "boxed", "launched")
    )
    per_round = statistics.median(t / r for t, r in zip(times["tool"], times["raw"], strict=True))
    print(f"tree: {files} files, terms: {TERMS}, {ROUNDS} interleaved rounds (medians)")
    print(f"raw rg, one direct pass (-C1):  {raw_ms:7.1f} ms (baseline)")
    print(f"keyword_search (Restricted):    {tool_ms:7.1f} ms")
    print(
        f"raw rg through the launcher:    {launched_ms:7.1f} ms = {launched_ms / raw_ms:.2f}x raw"
        " (Unrestricted: no sandbox)"
    )
    print(
        f"raw rg through the sandbox:     {boxed_ms:7.1f} ms = {boxed_ms / raw_ms:.2f}x raw"
        " (the floor under keyword_search)"
    )
    if "before" in times:
        before_ms = statistics.median(times["before"]) * 1000
        print(
            f"  the same through {before_tree}'s sandbox: {before_ms:7.1f} ms ="
            f" {before_ms / raw_ms:.2f}x raw (here / there: {boxed_ms / before_ms:.2f}x)"
        )
    if "before tool" in times:
        old_ms = statistics.median(times["before tool"]) * 1000
        old_cpu = statistics.median(times["before tool cpu"]) * 1000
        print(
            f"  {before_tree}'s keyword_search (this launcher): {old_ms:7.1f} ms ="
            f" {old_ms / raw_ms:.2f}x raw, {old_cpu:.1f} ms CPU"
            f" (here / there: {tool_ms / old_ms:.2f}x)"
        )
    print(f"ratio keyword_search / raw rg: {tool_ms / raw_ms:.2f}x (target <= 1.5x)")
    print(f"  median of the rounds' ratios: {per_round:.2f}x")
    print(f"ratio keyword_search / raw rg through the sandbox: {tool_ms / boxed_ms:.2f}x")
    tool_cpu, boxed_cpu = (statistics.median(times[k]) * 1000 for k in ("tool cpu", "boxed cpu"))
    print(
        f"this process's CPU per call: keyword_search {tool_cpu:.1f} ms, the sandboxed raw"
        f" pass {boxed_cpu:.1f} ms: the tool's own work is {tool_cpu - boxed_cpu:.1f} ms,"
        " on the cores rg's threads use"
    )
    print("load average (1/5/15 min): " + "/".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
