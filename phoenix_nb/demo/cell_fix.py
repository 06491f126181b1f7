"""The demo's cell-fix scene: the agent reads the kernel's last error and proposes an edit
to the user's failing cell (edit_cell), which the human accepts or rejects on the cell.

Asked to fix "my cell" (or a failing or broken cell), the demo calls kernel_history,
finds the cell of the last exception in what came back — by the id the front end
sent, or as `In[n]` where none was sent (nbclient, papermill) — and proposes that
cell guarded by `try`/`except` for the exception it raised. A scripted model cannot
really fix code; the guard is a real, visible change that shows the mechanism: a
diff on the cell in JupyterLab and Notebook 7, a pending proposal in the record and
`%phoenix edits` in a headless run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "CELL_FIX_STEPS",
    "asks_for_cell_fix",
    "guarded",
    "proposal_from_history",
    "without_fails_magic",
]

CELL_FIX_STEPS = ("cellhist", "celledit")  # the tool-call steps of this scene, in order
_LAST = re.compile(r"^Last exception \(cell \[(\d+)\]\): ([A-Za-z_][\w.]*)", re.MULTILINE)
_HEAD = re.compile(r"^In \[(\d+)\](?: \(cell ([^;)]+)[^)]*\))?:$")
_OUTPUT = re.compile(r"^  \[(?:stdout|stderr|result|display|error)\] ")


def asks_for_cell_fix(said: str) -> bool:
    """'fix my cell', 'my failing cell', 'this cell is broken' …"""
    said = said.lower()
    return "cell" in said and any(w in said for w in ("fix", "fail", "error", "broken"))


def without_fails_magic(source: str) -> str:
    """The cell without a first `%%phoenix_fails` line (notebook/fails.py): a fixed cell
    no longer fails on purpose, and Python code cannot follow a cell magic's line."""
    first, _, rest = source.partition("\n")
    return rest if first.strip() == "%%phoenix_fails" else source


def guarded(source: str, exception: str) -> str:
    """The cell inside `try`, its exception caught and reported; another cell magic's
    line stays first."""
    source = without_fails_magic(source)
    magic = ""
    if source.startswith("%%"):
        first, _, source = source.partition("\n")
        magic = first + "\n"
    body = "\n".join(f"    {line}" if line.strip() else "" for line in source.splitlines())
    return (
        f"{magic}try:\n{body}\nexcept {exception} as error:\n"
        f'    print(f"{exception} caught: {{error}} (the demo\'s stand-in for a real fix)")\n'
    )


def proposal_from_history(history: str) -> dict[str, str] | None:
    """edit_cell's input for the cell of the last exception, or None when there is none."""
    last = _LAST.search(history)
    if last is None:
        return None
    count, exception = last.group(1), last.group(2).rsplit(".", 1)[-1]
    lines = history.splitlines()
    for index, line in enumerate(lines):
        head = _HEAD.match(line)
        if head is None or head.group(1) != count:
            continue
        source: list[str] = []
        for body in lines[index + 1 :]:
            if _HEAD.match(body) or _OUTPUT.match(body) or body.startswith("Last exception"):
                break
            source.append(body)
        text = "\n".join(source).rstrip("\n")
        return {
            "cell_id": head.group(2) or f"In[{count}]",
            "new_source": guarded(text, exception),
            "explanation": (
                f"In [{count}] raised {exception}. This wraps the cell in try/except so it "
                "reports the error instead of stopping Run All. (The offline demo cannot "
                "really fix code; Claude would change the line that fails.)"
            ),
        }
    return None


def _prompt_of(history: str) -> str:
    """The failing cell as its prompt reads, `In [9]`."""
    last = _LAST.search(history)
    return f"`In [{last.group(1)}]`" if last is not None else "Your last cell"


Say = Callable[[str], Any]
Call = Callable[[str, str, Mapping[str, Any]], Any]


def opening(lead: str, say: Say, call: Call) -> list[Any]:
    """The scene's first turn: read the kernel's history and last error."""
    return [
        say(f"{lead}Let me read what your kernel ran and its last error."),
        call("cellhist", "kernel_history", {"last": 20}),
    ]


def after_history(history: str, is_error: bool, say: Say, call: Call) -> list[Any]:
    proposal = None if is_error else proposal_from_history(history)
    if proposal is None:
        return [say("I found no failing cell in this kernel's history: nothing to fix.")]
    return [
        # Named as the notebook shows it (its In [n] prompt), never by its raw cell id.
        say(f"{_prompt_of(history)} is the cell that failed. I'll propose a change to it:"),
        call("celledit", "edit_cell", proposal),
    ]


def after_edit(result: str, is_error: bool, say: Say) -> list[Any]:
    if is_error:
        return [say(f"The proposal did not go through: {result}")]
    return [
        say(
            "I proposed the change on your cell. In JupyterLab or Notebook 7 it shows on the "
            "cell as a diff: **Accept** replaces the cell's text (Ctrl+Z undoes it) without "
            "running it, **Reject** leaves it. Elsewhere `%phoenix edits` lists it."
        )
    ]
