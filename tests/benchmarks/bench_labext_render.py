"""Render cost of the conversation record in real JupyterLab + Chromium, by record size.

While the agent streams, the kernel replaces the whole record in place (throttled),
so the renderer redraws everything each time: its cost must grow no faster than
the record. Baseline, measured in the same run and page setup: the sample record
(tests/browser/fixtures). Larger records repeat its cycles with fresh call ids.
A second series starts from a record of 20 proposed cell edits (edit_cell calls
with their diffs, as a headless run leaves them) and grows it the same way.
Figures come from the renderer's own `phoenix-render` performance entries (the
time from renderModel's start to the DOM being in place, Markdown included),
taken in a warm page, as during streaming: each notebook is opened from the file
browser after a warm-up notebook has loaded the Markdown parser.

Run: /work/venv/bin/python tests/benchmarks/bench_labext_render.py
"""

from __future__ import annotations

import copy
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.browser.lab import (
    LabPage,
    launch_browser,
    load_fixture,
    record_output,
    running_lab,
    write_notebook,
)

FACTORS = (1, 10, 40)
PROPOSALS = 20
EDIT_FACTORS = (1, 10)
REPEATS = 5


def scaled(record: dict[str, Any], factor: int) -> dict[str, Any]:
    """The sample's cycles repeated `factor` times, ids made unique as a producer would."""
    out = copy.deepcopy(record)
    cycles = []
    for copy_index in range(factor):
        for cycle in copy.deepcopy(record["cycles"]):
            cycle["index"] = len(cycles)
            for step in cycle["steps"]:
                for group in step.get("tool_groups", []):
                    for call in group["calls"]:
                        call["id"] = f"{call['id']}-{copy_index}"
            cycles.append(cycle)
    out["cycles"] = cycles
    return out


def with_proposals(record: dict[str, Any], count: int) -> dict[str, Any]:
    """One cycle whose agent proposes `count` cell edits, each a 12-line cell changed in one
    line (the diff shows every line, as the record stores it)."""
    out = copy.deepcopy(record)
    steps: list[dict[str, Any]] = [{"kind": "user", "user_kind": "direct", "text": "Fix my cells."}]
    for i in range(count):
        old = [f"value_{i}_{n} = load({n})" for n in range(12)]
        new = [*old[:6], f"value_{i}_6 = load(6) or 0", *old[7:]]
        diff = "\n".join(
            ["--- cell (now)", "+++ cell (proposed)", "@@ -1,12 +1,12 @@"]
            + [f" {line}" for line in old[:6]]
            + [f"-{old[6]}", f"+{new[6]}"]
            + [f" {line}" for line in old[7:]]
        )
        call = {
            "id": f"toolu_edit_{i}",
            "name": "edit_cell",
            "input": {"cell_id": f"cell-{i}", "new_source": "\n".join(new), "explanation": "x"},
            "result": {
                "content": f"Proposed edit edit-{i}.",
                "is_error": False,
                "display": {
                    "edit_id": f"edit-{i}",
                    "cell_id": f"cell-{i}",
                    "position": "replace",
                    "execution_count": i + 1,
                    "new_source": "\n".join(new),
                    "explanation": f"Guard load({6}) in cell {i}: it returns None when empty.",
                    "cell_diff": diff + "\n",
                },
            },
        }
        item = {"type": "assistant", "text": f"Proposing edit {i}."}
        steps.append(
            {"kind": "ai", "item": item, "tool_groups": [{"group": "other", "calls": [call]}]}
        )
    out["cycles"] = [{"index": 0, "steps": steps}]
    return out


def render_ms(lab: LabPage, name: str) -> float:
    """Opens `name` from the file browser (the app and its Markdown parser already warm)."""
    page = lab.page
    before = page.evaluate("() => performance.getEntriesByName('phoenix-render').length")
    page.locator(".jp-DirListing-item", has_text=name).dblclick()
    handle = page.wait_for_function(
        "(n) => { const e = performance.getEntriesByName('phoenix-render');"
        " return e.length > n ? e[e.length - 1].duration : null; }",
        arg=before,
        timeout=120_000,
    )
    return float(handle.json_value())


def main() -> None:
    sample = load_fixture("sample_record.json")
    steps = sum(len(c["steps"]) for c in sample["cycles"])
    edits = with_proposals(sample, PROPOSALS)
    results: dict[int, list[float]] = {f: [] for f in FACTORS}
    edit_results: dict[int, list[float]] = {f: [] for f in EDIT_FACTORS}
    with (
        tempfile.TemporaryDirectory() as tmp,
        running_lab(Path(tmp)) as server,
        sync_playwright() as playwright,
    ):
        browser = launch_browser(playwright)
        root = server.root
        for warm in ("warmup.ipynb", "warmup-2.ipynb"):
            write_notebook(root, warm, [("x", [record_output(sample, "<b/>", "x")])])
        for factor in FACTORS:
            record = scaled(sample, factor)
            for repeat in range(REPEATS):
                cells = [("%%phoenix\nx", [record_output(record, "<b/>", "x")])]
                write_notebook(root, f"bench-{factor}-{repeat}.ipynb", cells)
        for factor in EDIT_FACTORS:
            record = scaled(edits, factor)
            for repeat in range(REPEATS):
                cells = [("%%phoenix\nx", [record_output(record, "<b/>", "x")])]
                write_notebook(root, f"edits-{factor}-{repeat}.ipynb", cells)
        for repeat in range(REPEATS):
            context = browser.new_context(viewport={"width": 1280, "height": 1000})
            lab = LabPage(context.new_page(), server)
            lab.open_notebook("warmup.ipynb")  # first render pays for loading the Markdown parser
            render_ms(lab, "warmup-2.ipynb")  # first open from the file browser pays extra too
            order = FACTORS[repeat % len(FACTORS) :] + FACTORS[: repeat % len(FACTORS)]
            for factor in order:  # rotated so machine load falls on all sizes alike
                results[factor].append(render_ms(lab, f"bench-{factor}-{repeat}.ipynb"))
            for factor in EDIT_FACTORS:
                edit_results[factor].append(render_ms(lab, f"edits-{factor}-{repeat}.ipynb"))
            context.close()
        browser.close()
    base = statistics.median(results[1])
    print(f"baseline: sample record ({steps} steps) renders in {base:.1f} ms (median of {REPEATS})")
    for factor in FACTORS:
        ms = statistics.median(results[factor])
        ratio = ms / base
        print(
            f"x{factor:<3} ({steps * factor:>4} steps): {ms:8.1f} ms  ratio {ratio:6.2f}"
            f"  ratio/size {ratio / factor:5.2f}  (<= 1 means no worse than linear)"
        )
    edit_base = statistics.median(edit_results[1])
    print(
        f"{PROPOSALS} proposed cell edits render in {edit_base:.1f} ms "
        f"(ratio {edit_base / base:.2f} to the sample record)"
    )
    for factor in EDIT_FACTORS:
        ms = statistics.median(edit_results[factor])
        ratio = ms / edit_base
        print(
            f"x{factor:<3} ({PROPOSALS * factor:>4} proposals): {ms:8.1f} ms  ratio {ratio:6.2f}"
            f"  ratio/size {ratio / factor:5.2f}  (<= 1 means no worse than linear)"
        )


if __name__ == "__main__":
    main()
