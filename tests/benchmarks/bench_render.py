"""Benchmark: rendering the record's fallbacks, against json.dumps of the same record.

Run: /work/venv/bin/python tests/benchmarks/bench_render.py
Prints, for records of 8, 80 and 800 cycles, the time of each renderer as a ratio to
`json.dumps` (the cheapest thing the lead does with the record anyway), and the
growth per 10× cycles (linear ≈ 10×) with its exponent, also beside json.dumps's own
in the same run (a loaded machine and the memory caches bend both alike), and the
growth of the function calls each renderer makes, which the load cannot bend. The
fallbacks fold the earlier requests of a long record (`view.WHOLE_CYCLES_BUDGET`);
this part lifts that budget so it measures the renderers' own cost on every request,
and then prints the 800-cycle record once more as the notebook renders it (folded).

Then one record whose single assistant message is 40 KB, 400 KB and 4 MB of Markdown:
the notebook's fallbacks show a bounded head and tail of any one block, so their time
should stay flat (≈ 1× per 10×); the exports render the block whole, so theirs should
grow linearly (≈ 10× per 10×), never faster (the parser is mistune, linear in its input).
"""

from __future__ import annotations

import copy
import gc
import json
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from phoenix_nb.notebook._render import view
from phoenix_nb.notebook.export import export_html, export_markdown
from phoenix_nb.notebook.render import render_bundle, render_html, render_markdown, render_plain

FIXTURE = Path(__file__).parent.parent / "notebook" / "fixtures" / "record_full.json"


def with_cycles(n: int) -> dict[str, Any]:
    base = json.loads(FIXTURE.read_text())
    record = copy.deepcopy(base)
    cycles = base["cycles"]
    record["cycles"] = [dict(copy.deepcopy(cycles[i % len(cycles)]), index=i) for i in range(n)]
    return record


def best_of(fn: Callable[[Any], Any], arg: Any, repeat: int = 5) -> float:
    """Best time with the cyclic GC paused: its pauses depend on the whole heap, not the call."""
    times = []
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            fn(arg)
            times.append(time.perf_counter() - t0)
        finally:
            gc.enable()
    return min(times)


def calls(fn: Callable[[Any], Any], arg: Any) -> int:
    """Function calls (Python and C) one run makes: the work done, whatever the load."""
    count = 0

    def note(frame: Any, event: str, arg: Any) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(note)
    try:
        fn(arg)
    finally:
        sys.setprofile(None)
    return count


def main() -> None:
    renderers: dict[str, Callable[[Any], Any]] = {
        "html": render_html,
        "markdown": render_markdown,
        "plain": render_plain,
        "bundle": render_bundle,
    }
    results: dict[int, dict[str, float]] = {}
    work: dict[int, dict[str, int]] = {n: {} for n in (8, 80, 800)}
    budget = view.WHOLE_CYCLES_BUDGET
    view.WHOLE_CYCLES_BUDGET = 10**12  # every request whole: the renderers' own cost
    for n in (8, 80, 800):
        record = with_cycles(n)
        baseline = best_of(json.dumps, record)
        results[n] = {"json.dumps": baseline}
        size = len(json.dumps(record))
        print(f"{n} cycles, record {size / 1024:.0f} KiB, json.dumps {baseline * 1e3:.2f} ms")
        for name, fn in renderers.items():
            t = best_of(fn, record)
            results[n][name] = t
            work[n][name] = calls(fn, record)
            print(f"  {name:9s} {t * 1e3:7.2f} ms  = {t / baseline:5.1f}× json.dumps")
    for a, b in ((8, 80), (80, 800)):
        print(f"growth {a} → {b} cycles (linear ≈ 10×, exponent ≈ 1.0):")
        base = math.log(results[b]["json.dumps"] / results[a]["json.dumps"]) / math.log(b / a)
        for name in ("json.dumps", *renderers):
            ratio = results[b][name] / results[a][name]
            exponent = math.log(ratio) / math.log(b / a)
            line = f"  {name:10s} {ratio:5.1f}×  n^{exponent:.2f}"
            if name in work[a]:
                steps = work[b][name] / work[a][name]
                line += (
                    f"  (n^{exponent - base:+.2f} beside json.dumps; function calls "
                    f"{steps:.2f}× = n^{math.log(steps) / math.log(b / a):.2f})"
                )
            print(line)
    view.WHOLE_CYCLES_BUDGET = budget
    record = with_cycles(800)
    folded = best_of(render_bundle, record)
    print(
        f"800 cycles as the notebook renders them (earlier requests folded): bundle "
        f"{folded * 1e3:.1f} ms = {folded / results[800]['bundle']:.2f}× the unfolded bundle, "
        f"{len(render_html(record)) / 1024:.0f} KiB of HTML"
    )


PARAGRAPH = (
    "Some *text* with `code`, a [link](https://x.example/a), <b>raw html</b> and "
    "![an image](https://x.example/i.png).\n"
) * 5 + "\n"


def with_message(size: int) -> dict[str, Any]:
    record = with_cycles(4)
    text = PARAGRAPH * (size // len(PARAGRAPH) + 1)
    record["cycles"][0]["steps"][2]["item"]["text"] = text[:size]
    return record


def one_big_block() -> None:
    renderers: dict[str, Callable[[Any], Any]] = {
        "bundle": render_bundle,
        "export html": export_html,
        "export md": export_markdown,
    }
    results: dict[int, dict[str, float]] = {}
    for size in (40_000, 400_000, 4_000_000):
        record = with_message(size)
        results[size] = {}
        print(f"one message of {size / 1000:,.0f} KB:")
        for name, fn in renderers.items():
            t = best_of(fn, record, repeat=1 if size >= 4_000_000 else 3)
            results[size][name] = t
            print(f"  {name:12s} {t * 1e3:9.1f} ms")
    for a, b in ((40_000, 400_000), (400_000, 4_000_000)):
        print(
            f"growth {a // 1000} KB → {b // 1000} KB (fallbacks flat ≈ 1×, exports linear ≈ 10×):"
        )
        for name in renderers:
            ratio = results[b][name] / results[a][name]
            print(f"  {name:12s} {ratio:5.1f}×  n^{math.log(ratio) / math.log(b / a):.2f}")


if __name__ == "__main__":
    print("load before: " + "/".join(f"{x:.2f}" for x in os.getloadavg()))
    main()
    one_big_block()
    print("load after: " + "/".join(f"{x:.2f}" for x in os.getloadavg()))
