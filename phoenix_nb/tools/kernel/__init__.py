"""The kernel tools: the agent sees the Jupyter kernel it lives in, and never changes it.

What this package gives the rest of phoenix_nb (import these from here):

* the six tools the registry declares: `InspectVariablesTool` and
  `KernelHistoryTool` (they read; sub-agents get these two), `RunPythonTool`
  (a scratchpad), `ProposeCellTool`, `EditCellTool` and `InsertCellTool` (they
  hand cells to the human, who decides);
* `outcome_note`: what the human decided about the agent's cell edits, as the
  note the runtime puts before the next message.

One mechanism a file:

* `access.py`: the port or the reason there is none, the secrets a fork must
  scrub, redaction on the way out, and `fork_job`, the one way a tool starts a
  fork;
* `fork.py`: the copy-on-write fork of the kernel (confinement, the child's
  channels, the parent's wait), so no user object is ever touched in the kernel
  process;
* `summarize.py`: bounded summaries of user objects, run inside that fork;
* `reads.py`, `run_python.py`, `proposals.py`: the tools themselves.

What the tools may know of the kernel is the port in `tools/kernel_port.py`,
with the edit book in `tools/cell_edits.py`. They sit beside `tools/base.py`,
not in this package, because every tool's context carries the port
(`ToolContext.kernel`): below the tools, not among them.
"""

from __future__ import annotations

from phoenix_nb.tools.kernel.proposals import (
    EditCellTool,
    InsertCellTool,
    ProposeCellTool,
    outcome_note,
)
from phoenix_nb.tools.kernel.reads import InspectVariablesTool, KernelHistoryTool
from phoenix_nb.tools.kernel.run_python import RunPythonTool

__all__ = [
    "EditCellTool",
    "InsertCellTool",
    "InspectVariablesTool",
    "KernelHistoryTool",
    "ProposeCellTool",
    "RunPythonTool",
    "outcome_note",
]
