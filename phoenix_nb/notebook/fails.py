"""`%%phoenix_fails`: a cell that fails on purpose without failing the run.

Notebooks that teach debugging (the tour) need a cell that really raises, so the agent
has a real traceback to read with `kernel_history`. papermill 2.7 fails a whole run on
any `error` output, whatever the cell's `raises-exception` tag says, and JupyterLab's
Run All stops at one. So this magic runs the cell's code itself and, when it raises:

* shows IPython's own traceback (same formatter, `Cell In[n], line m` headers, colours)
  on stderr — JupyterLab and Notebook 7 draw stderr and error outputs alike;
* leaves the exception where debuggers and phoenix's kernel tools look:
  `sys.last_type/last_value/last_traceback` (and `sys.last_exc` on 3.12+), as
  IPython's `showtraceback` does, and the cell's execution count as the kernel's last
  error (`OutputRecorder.note_error`, which an `error` message sets otherwise);
* does not fail the cell: the execute reply is `ok`, so Run All, nbconvert and
  papermill go on.

The code is compiled through the shell's caching compiler (the traceback shows the
cell's source lines) and runs in the user namespace; IPython's input transformers
apply (`%magic` lines work). A last expression is not displayed (it is `exec`, as
`%%time` does), and top-level `await` is not supported.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["run_failing_cell"]


def run_failing_cell(shell: Any, body: str) -> BaseException | None:
    """Run `body` in the user namespace; an exception is shown, kept, and returned."""
    count = _this_cell(shell)
    code = shell.transform_cell(body)
    filename = shell.compile.cache(code, count, body)
    try:
        compiled = shell.compile(code, filename, "exec")
        exec(compiled, shell.user_global_ns, shell.user_ns)
    except Exception as error:  # the point of the magic: shown and kept, not raised
        etype, tb = type(error), error.__traceback__
        if tb is not None and tb.tb_frame.f_code is run_failing_cell.__code__:
            tb = tb.tb_next  # start at the cell, not at this function
        sys.last_type, sys.last_value, sys.last_traceback = etype, error, tb
        if sys.version_info >= (3, 12):
            sys.last_exc = error
        stb = shell.InteractiveTB.structured_traceback(etype, error, tb)
        sys.stdout.flush()
        print(shell.InteractiveTB.stb2text(stb), file=sys.stderr, flush=True)
        _note_error(shell, count)
        return error
    return None


def _this_cell(shell: Any) -> int:
    """The running cell's number, as kernel_history numbers cells: its index in the input
    history, stored before the cell runs. (`shell.execution_count` is already the next
    cell's number while a cell runs in IPython 8 and later.)"""
    inputs = getattr(getattr(shell, "history_manager", None), "input_hist_raw", None)
    if isinstance(inputs, list) and inputs:
        return len(inputs) - 1
    return int(getattr(shell, "execution_count", 0) or 0)


def _note_error(shell: Any, count: int) -> None:
    """Tell the kernel tools' recorder which cell raised last (no `error` message did)."""
    from phoenix_nb.notebook.session import get_session

    kernel = get_session(shell).kernel
    if kernel is not None:
        kernel.recorder.note_error(count)
