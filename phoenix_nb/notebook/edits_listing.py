"""`%phoenix edits`: the agent's proposed cell edits that no one has decided yet.

For where no front end can apply them (nbconvert, papermill, VS Code without
the extension, a notebook opened later): each edit with the cell it names, the
explanation, the diff against the cell as the kernel last saw it, and the full
new source to copy by hand. Plain text only; nothing is written anywhere. Lines are
split as Python splits them and hiding characters shown as `<U+…>` (`core.marks`),
with one warning line when the new source holds any: what is listed is what runs.
"""

from __future__ import annotations

from phoenix_nb.core.marks import mark, marked_lines, source_warning
from phoenix_nb.tools.cell_edits import EditPosition, cell_diff
from phoenix_nb.tools.kernel_port import KernelPort

__all__ = ["pending_edits_text"]


def pending_edits_text(kernel: KernelPort | None) -> str:
    if kernel is None:
        return "No Jupyter kernel here, so there are no cell edits."
    pending = kernel.cell_edits().pending()
    if not pending:
        return "No cell edits are waiting: the agent proposed none, or each was decided."
    count = len(pending)
    lines = [
        f"{count} proposed cell edit{'s' if count != 1 else ''} waiting "
        "(Accept / Reject on the cell in JupyterLab or Notebook 7; here, copy by hand):"
    ]
    for edit in pending:
        lines += ["", f"{edit.id} — {edit.where()}"]
        lines += [f"  {line}" for line in marked_lines(edit.explanation.strip())]
        warning = source_warning(edit.new_source)
        if warning:
            lines += [f"  {warning}"]
        if edit.position is EditPosition.REPLACE:
            lines += ["  Diff against the cell:"]
            diff = cell_diff(edit.base, edit.new_source)
            lines += [f"    {mark(line)}" for line in diff.split("\n") if line]
        lines += ["  New source:"]
        lines += [f"    {line}" for line in marked_lines(edit.new_source)] or ["    (empty)"]
    return "\n".join(lines)
