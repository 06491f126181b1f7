"""The kernel comm that carries proposed cell edits to the front end and decisions back.

The kernel opens one comm (target `phoenix.cell_edits`) when it first has an
edit to show; the labextension registers that target on every notebook's
kernel connection, and after a page reload it finds the open comm again
(`comm_info_request`) and says `hello`, which resends every pending edit. A
front end without the extension (VS Code, nbclient) either ignores the comm or
closes it; then the edits stay pending, and the next edit opens a fresh comm.

Messages (the `data` of comm messages), kernel → front end:
  {"type": "sync", "edits": [CellEdit JSON, …]}   every pending edit (open, hello)
  {"type": "edit", "edit": CellEdit JSON}          one new edit
  {"type": "resolved", "id", "outcome"}            decided (by any front end)
front end → kernel:
  {"type": "hello"}
  {"type": "outcome", "id", "outcome": accepted|rejected|gone,
   "source"?: the cell's text after acceptance, "new_cell_id"?: an inserted cell's id}

Anything else, or a malformed field, is ignored: the front end is not trusted to
name edits that do not exist or to set an outcome twice (`EditBook.resolve`).
Handlers may run on a subshell thread; the book locks, and a comm send is safe
from any thread.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Mapping
from typing import Any

from phoenix_nb.tools.cell_edits import CellEdit, EditBook, EditOutcome

__all__ = ["TARGET", "EditChannel"]

TARGET = "phoenix.cell_edits"
_DECISIONS = {o.value: o for o in (EditOutcome.ACCEPTED, EditOutcome.REJECTED, EditOutcome.GONE)}
log = logging.getLogger(__name__)


class EditChannel:
    """The kernel's end of the comm: sends edits as they are proposed, records decisions."""

    def __init__(self, book: EditBook) -> None:
        self.book = book
        self._comm: Any = None
        self._lock = threading.Lock()
        self._closed = False
        book.on_propose(self._send_edit)

    def _sync(self) -> dict[str, Any]:
        return {"type": "sync", "edits": [e.to_json() for e in self.book.pending()]}

    def _send_edit(self, edit: CellEdit) -> None:
        with self._lock:
            if self._closed:
                return
            if self._comm is None:
                self._comm = self._open()  # the open message carries every pending edit
                return
            comm = self._comm
        self._send(comm, {"type": "edit", "edit": edit.to_json()})

    def _open(self) -> Any:
        try:
            import comm as comm_package

            opened = comm_package.create_comm(target_name=TARGET, data=self._sync())
        except Exception:  # no kernel to talk to: the edits stay pending
            log.debug("no comm for cell edits", exc_info=True)
            return None
        opened.on_msg(self._on_msg)
        opened.on_close(self._on_close)
        return opened

    def _on_close(self, _msg: Any) -> None:
        with self._lock:
            self._comm = None

    @staticmethod
    def _send(comm: Any, data: Mapping[str, Any]) -> None:
        with contextlib.suppress(Exception):  # a closed socket must not fail the tool
            comm.send(dict(data))

    def _on_msg(self, msg: Mapping[str, Any]) -> None:
        content = msg.get("content") if isinstance(msg, Mapping) else None
        data = content.get("data") if isinstance(content, Mapping) else None
        if not isinstance(data, Mapping):
            return
        comm = self._comm
        if comm is None:
            return
        kind = data.get("type")
        if kind == "hello":
            self._send(comm, self._sync())
        elif kind == "outcome":
            self.receive_outcome(data)

    def receive_outcome(self, data: Mapping[str, Any]) -> bool:
        """Record one decision from a front end; True when it changed the book."""
        edit_id, outcome = data.get("id"), _DECISIONS.get(str(data.get("outcome")))
        source, new_cell = data.get("source"), data.get("new_cell_id")
        if not isinstance(edit_id, str) or outcome is None:
            return False
        changed = self.book.resolve(
            edit_id,
            outcome,
            source=source if isinstance(source, str) else None,
            new_cell_id=new_cell if isinstance(new_cell, str) and new_cell else None,
        )
        comm = self._comm
        if changed and comm is not None:
            self._send(comm, {"type": "resolved", "id": edit_id, "outcome": outcome.value})
        return changed

    def close(self) -> None:
        with self._lock:
            self._closed = True
            comm, self._comm = self._comm, None
        if comm is not None:
            with contextlib.suppress(Exception):
                comm.close()
