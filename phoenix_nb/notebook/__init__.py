"""The Jupyter side: magics, the cell's live view, the record's fallbacks.

`%load_ext phoenix_nb` (`extension.load`) registers the `%%phoenix` input
transformer (`transformer.transform_phoenix_cell`) and the `%phoenix` line
commands (`magics`, also rewritten into awaited calls). `cell.run_cell` runs one turn and its
`TurnView` re-renders the record while updates arrive; `render.render_bundle`
adds the html/markdown/plain fallbacks (private pieces in `_render`).
`warmup.WarmUp` imports the rest on a thread, awaited by the
first cell. `session.Session` (one per kernel, `get_session()`) holds the `Phoenix` and
turns `c.Phoenix.*` into `Settings`; `ipython_kernel.IPythonKernel` is the only
code of the kernel tools that touches IPython.

Its face is its modules, listed below and pinned by
tests/runtime/test_front_door.py.
"""

__all__ = [
    "binding",
    "busy",
    "cell",
    "cell_edits_comm",
    "chat",
    "controls",
    "decorate",
    "edits_listing",
    "encoded_display",
    "export",
    "extension",
    "fails",
    "interrupt",
    "ipython_kernel",
    "magics",
    "mcp_lines",
    "options",
    "panel_comm",
    "pending_comm",
    "render",
    "session",
    "throttle",
    "thumbnails",
    "transformer",
    "undo",
    "warmup",
    "whole_record",
]
