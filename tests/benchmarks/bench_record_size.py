"""Benchmark: what the executed quickstart weighs, and how much of it is phoenix's.

Run: /work/venv/bin/python tests/benchmarks/bench_record_size.py [--big-blocks-only]

The executed quickstart's HTML (nbconvert's default `--to html`) should be at
most half of BASELINE_HTML (434 KB, before the record was made light). This
script measures, in one run, with the same nbconvert and the same quickstart:

  * an EMPTY notebook (no cells) converted with `jupyter nbconvert --to html`:
    nbconvert's own page (its inlined JupyterLab stylesheets), the floor any
    notebook's HTML stands on;
  * the quickstart with its outputs cleared, converted the same way: the floor plus
    the quickstart's own Markdown and code cells;
  * the quickstart executed headless with the offline demo model (as its README
    says), as .ipynb and converted to HTML.

The outputs' share is the executed HTML minus the cleared HTML; phoenix's records'
share is the executed HTML minus the same notebook with only the outputs carrying
the conversation record removed. Every figure is printed as a ratio to the 434 KB
(433,914 B) baseline the issue measured and to its 217 KB target, so a reader sees
at once that an empty notebook's page is already above the target (no change in
phoenix's outputs can reach it) and how large phoenix's own part is. Nothing here is timed.

Then, big blocks (target: each adds <= 1.5 MB to the .ipynb, because the record's JSON
carries a block once and the three fallbacks show only a bounded head and tail of it):

  * a 1 MB assistant message, through a real kernel and the fake Messages API;
  * a bash command printing 1 MB, through the same kernel (the tool keeps a head and a
    tail of it in the result);
  * a 1 MB tool result and a 1 MB message put into a record directly (as a tool without
    its own bound, or an edited notebook, would have it), rendered by `render_bundle`.

Each is the saved cell's size minus the same cell with a one-line block, so the figures
are what the block itself costs.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import nbformat

from phoenix_nb.notebook.render import render_bundle
from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.notebook.kernel_harness import Execution, loaded_kernel
from tests.test_quickstart import offline_env

ONE_MB = 1_000_000
BIG_BLOCK_TARGET = 1_500_000
FIXTURE = Path(__file__).resolve().parents[1] / "notebook" / "fixtures" / "record_full.json"

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
BASELINE_HTML = 433_914  # the executed quickstart's HTML before the record was made light
BASELINE_IPYNB = 252_584  # and its .ipynb
TARGET_HTML = BASELINE_HTML // 2
MIME = "application/vnd.phoenix.conversation+json"


def _nbconvert(args: list[str], cwd: Path, env: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise SystemExit(f"nbconvert {args} failed:\n{done.stderr[-3000:]}")


def _cleared(source: Path, target: Path) -> None:
    notebook = json.loads(source.read_text(encoding="utf-8"))
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
    target.write_text(json.dumps(notebook, indent=1), encoding="utf-8")


def _without_phoenix(source: Path, target: Path) -> None:
    """The executed notebook minus phoenix's outputs (its records and its printed lines
    stay in other cells' outputs: only outputs carrying the record MIME type go)."""
    notebook = json.loads(source.read_text(encoding="utf-8"))
    for cell in notebook["cells"]:
        cell["outputs"] = [o for o in cell.get("outputs", []) if MIME not in o.get("data", {})]
    target.write_text(json.dumps(notebook, indent=1), encoding="utf-8")


def _empty(target: Path) -> None:
    notebook = {
        "cells": [],
        "metadata": {"language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    target.write_text(json.dumps(notebook), encoding="utf-8")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="phoenix-size-") as tmp:
        root = Path(tmp)
        work = root / "notebooks"
        shutil.copytree(NOTEBOOKS, work, ignore=shutil.ignore_patterns("scratch", "__pycache__"))
        env = offline_env(root / "home")
        _empty(work / "empty.ipynb")
        _cleared(work / "quickstart.ipynb", work / "cleared.ipynb")
        _nbconvert(
            ["--to", "notebook", "--execute", "quickstart.ipynb", "--output", "executed.ipynb"],
            work,
            env,
        )
        _without_phoenix(work / "executed.ipynb", work / "norecords.ipynb")
        for name in ("empty", "cleared", "executed", "norecords"):
            _nbconvert(["--to", "html", f"{name}.ipynb"], work, env)
        size = {p.name: p.stat().st_size for p in work.glob("*.*") if p.is_file()}

    empty, cleared, executed = size["empty.html"], size["cleared.html"], size["executed.html"]
    share = executed - cleared
    records = executed - size["norecords.html"]
    ipynb = size["executed.ipynb"]
    print(f"nbconvert {_version()} --to html (its default lab template), one run\n")
    rows = [
        ("empty notebook, HTML (nbconvert's floor)", empty),
        ("quickstart, outputs cleared, HTML", cleared),
        ("quickstart, executed, HTML", executed),
        ("  of it every output (executed - cleared)", share),
        ("  of it phoenix's records (all three fallbacks)", records),
        ("  of it the quickstart's own cells (cleared - empty)", cleared - empty),
    ]
    print(f"{'':52} {'bytes':>9}  {'/ 434 KB':>8}  {'/ target 217 KB':>15}")
    for label, value in rows:
        print(
            f"{label:52} {value:>9,}  {value / BASELINE_HTML:>7.3f}x  {value / TARGET_HTML:>14.3f}x"
        )
    print()
    print(f"phoenix's records in the executed HTML: {records / executed:.3f} of the page")
    print(f"every output in the executed HTML: {share / executed:.3f} of the page")
    print(f"nbconvert's floor of the executed HTML: {empty / executed:.3f} of the page")
    print(
        f"executed .ipynb: {ipynb:,} B = {ipynb / BASELINE_IPYNB:.3f}x the issue's "
        f"{BASELINE_IPYNB:,} B (target <= 0.5x)"
    )
    verdict = "reachable" if empty <= TARGET_HTML else "UNREACHABLE by any change in phoenix"
    print(
        f"HTML target {TARGET_HTML:,} B: an empty notebook's page alone is "
        f"{empty / TARGET_HTML:.3f}x it, the cleared quickstart {cleared / TARGET_HTML:.3f}x "
        f"-> {verdict}"
    )


def _ipynb_bytes(outputs: list[dict[str, Any]]) -> int:
    """The size of a one-cell notebook holding `outputs` as a front end saves them."""
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("%%phoenix\nreport")
    for o in outputs:
        if o.get("type") == "stream":
            cell.outputs.append(nbformat.v4.new_output("stream", name=o["name"], text=o["text"]))
        elif "data" in o:
            cell.outputs.append(nbformat.v4.new_output("display_data", data=o["data"]))
    nb.cells.append(cell)
    return len(nbformat.writes(nb).encode())


def _cell_bytes(execution: Execution) -> int:
    return _ipynb_bytes(execution.final_outputs())


def big_blocks() -> list[tuple[str, int]]:
    """(what, bytes the block adds to the .ipynb) for each big block (module docstring)."""
    rows: list[tuple[str, int]] = []
    big = ("All work and no play makes Jack a dull boy. " * 25 + "\n") * (ONE_MB // 1_101 + 1)
    big = big[:ONE_MB]
    with (
        tempfile.TemporaryDirectory(prefix="phoenix-big-") as tmp,
        FakeAnthropic() as fake,
        loaded_kernel(Path(tmp), fake.base_url) as kernel,
    ):
        sizes = []
        for n, answer in enumerate(("A short answer.", big)):
            fake.clear()
            fake.script(Turn([text(answer, chunk=65_536)]))
            cell = kernel.run(f"%%phoenix --name msg{n}\nreport", timeout=300)
            assert cell.status == "ok", cell.error()
            sizes.append(_cell_bytes(cell))
        rows.append(("1 MB assistant message (real kernel)", sizes[1] - sizes[0]))
        sizes = []
        for n, count in enumerate((1, ONE_MB)):
            fake.clear()
            command = f"head -c {count} /dev/zero | tr '\\0' x"
            fake.script(Turn([tool_use("bash", {"command": command})]), Turn([text("Done.")]))
            cell = kernel.run(f"%%phoenix --name out{n}\nreport", timeout=300)
            assert cell.status == "ok", cell.error()
            sizes.append(_cell_bytes(cell))
        rows.append(("bash printing 1 MB (real kernel; the tool bounds it)", sizes[1] - sizes[0]))
    record = json.loads(FIXTURE.read_text())

    def with_block(where: str, block: str) -> int:
        changed = copy.deepcopy(record)
        if where == "output":
            call = changed["cycles"][0]["steps"][2]["tool_groups"][1]["calls"][1]
            call["result"]["content"] = block
        else:
            changed["cycles"][0]["steps"][2]["item"]["text"] = block
        return _ipynb_bytes([{"data": render_bundle(changed)}])

    for where, label in (("output", "1 MB tool result"), ("message", "1 MB message")):
        added = with_block(where, big) - with_block(where, "short")
        rows.append((f"{label} in a record (render_bundle)", added))
    return rows


def print_big_blocks() -> None:
    print("\nbig blocks: bytes each adds to the saved .ipynb (target <= 1.5 MB each)")
    for label, added in big_blocks():
        verdict = "ok" if added <= BIG_BLOCK_TARGET else "OVER"
        print(
            f"{label:58} {added:>10,} B  {added / ONE_MB:>5.2f}x the block  "
            f"{added / BIG_BLOCK_TARGET:>5.2f}x target  {verdict}"
        )


def _version() -> str:
    import nbconvert

    return str(nbconvert.__version__)


if __name__ == "__main__":
    if "--big-blocks-only" not in sys.argv:
        main()
    print_big_blocks()
