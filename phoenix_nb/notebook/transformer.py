"""Turn a `%%phoenix` cell into an awaited agent turn.

A cell magic cannot be async, and IPython does not await what a magic returns
(docs/platform-facts.md). An input transformer can: it rewrites the cell, before IPython
compiles it, into a top-level `await` of the turn, so the kernel's own loop runs
the agent while the cell is "busy" — widget clicks still arrive (ipykernel 7.4),
"Run All" still runs cells in order, and kernel interrupt cancels the awaited
task.
"""

from __future__ import annotations

import re

_HEADER = re.compile(r"^%%phoenix(?:[ \t]+(?P<args>[^\n]*))?[ \t]*$")
ENTRY_POINT = "__import__('phoenix_nb.notebook.cell', fromlist=['run_cell']).run_cell"


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
