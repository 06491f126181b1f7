"""Turn a `%%phoenix` cell (and `%phoenix …` lines) into awaited calls.

A cell magic cannot be async, and IPython does not await what a magic returns
(docs/platform-facts.md). An input transformer can: it rewrites the cell, before IPython
compiles it, into a top-level `await` of the turn, so the kernel's own loop runs
the agent while the cell is "busy" — widget clicks still arrive (ipykernel 7.4),
"Run All" still runs cells in order, and kernel interrupt cancels the awaited
task.

The calls go to `extension.py`'s entry points, which the extension has imported
already: they await the imports `%load_ext` started (warmup.py) before importing
the cell's and the commands' modules, so the kernel's loop never blocks on a
module another thread is half-way through importing.
"""

from __future__ import annotations

import re

_HEADER = re.compile(r"^%%phoenix(?:[ \t]+(?P<args>[^\n]*))?[ \t]*$")
_LINE = re.compile(r"^%phoenix(?:[ \t]+(?P<args>[^\n]*))?[ \t]*$")
_EXTENSION = "__import__('phoenix_nb.notebook.extension', fromlist=['run_cell'])"
ENTRY_POINT = f"{_EXTENSION}.run_cell"
LINE_ENTRY = f"{_EXTENSION}.run_line"


def transform_phoenix_cell(lines: list[str]) -> list[str]:
    """Rewrite `%%phoenix [args]\\n<message>` into `await run_cell(args, message)`.

    Only a first line that is exactly `%%phoenix` or `%%phoenix <args>` matches;
    `%%phoenixfoo` is left for IPython to report as an unknown magic.
    """
    if not lines:
        return lines
    first = lines[0].rstrip("\r\n")
    match = _HEADER.match(first)
    if match is None:
        return lines
    args = match.group("args") or ""
    body = "".join(lines[1:])
    return [f"await {ENTRY_POINT}({args!r}, {body!r})\n"]


def transform_phoenix_lines(lines: list[str]) -> list[str]:
    """Rewrite unindented `%phoenix …` lines into awaited `run_line(args)` calls."""
    if not any(line.startswith("%phoenix") for line in lines):
        return lines
    out = []
    for line in lines:
        match = _LINE.match(line.rstrip("\r\n"))
        if match is None:
            out.append(line)
        else:
            out.append(f"await {LINE_ENTRY}({(match.group('args') or '')!r})\n")
    return out
