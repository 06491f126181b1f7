"""The kernel reads busy for as long as a cell runs, whatever it answers meanwhile.

JupyterLab 4.4+ sends widget comm messages over a kernel subshell
(`commsOverSubshells`, by default one subshell per comm target) and creates that
subshell with a control-channel request. ipykernel 7 handles each such message on
its own thread with its own busy/idle status pair, parented to that message, while
the cell that displayed the widget is still awaiting. JupyterLab's kernel status
follows every status message on IOPub whatever its parent, so the idle that ends a
button click (or any widget traffic) turns the indicator to "Idle" for the rest of
a `%%phoenix` turn — though the cell shows `[*]` and the next cell waits.

Neither side is wrong alone, and neither can be changed from here; what phoenix can
do is say the truth again: after any other request's idle, while an execute request
is still running, the kernel publishes busy once more, parented to that execute
request. The front end reads idle then busy, and the cell's own idle still ends it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

__all__ = ["keep_busy_while_executing"]

_MARK = "_phoenix_keeps_busy"


def _header(parent: Any) -> Mapping[str, Any]:
    header = parent.get("header") if isinstance(parent, Mapping) else None
    return header if isinstance(header, Mapping) else {}


def keep_busy_while_executing(kernel: Any) -> bool:
    """Wrap `kernel._publish_status` (ipykernel's, once); False when there is none."""
    publish = getattr(kernel, "_publish_status", None)
    get_parent = getattr(kernel, "get_parent", None)
    if publish is None or get_parent is None or getattr(kernel, _MARK, False):
        return False
    running: dict[str, Any] = {}  # msg_id -> parent of each execute request under way
    lock = threading.Lock()  # subshell threads publish too

    def publish_status(status: str, channel: str, parent: Any = None) -> None:
        actual = parent or get_parent(channel)
        header = _header(actual)
        msg_id = header.get("msg_id")
        if header.get("msg_type") == "execute_request" and isinstance(msg_id, str):
            # Under the lock, so a re-said busy can never follow the cell's own idle.
            with lock:
                publish(status, channel, parent)
                if status == "busy":
                    running[msg_id] = actual
                elif status == "idle":
                    running.pop(msg_id, None)
            return
        publish(status, channel, parent)
        if status == "idle":
            with lock:
                if running:
                    publish("busy", "shell", list(running.values())[-1])

    kernel._publish_status = publish_status
    setattr(kernel, _MARK, True)
    return True
