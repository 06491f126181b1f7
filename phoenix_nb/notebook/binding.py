"""Which conversation belongs to which notebook, kept in the store folder.

A kernel restart forgets everything in memory, but the notebook's conversation
should not be forgotten with it. Jupyter Server starts each kernel with
`JPY_SESSION_NAME` set to the notebook's path (a user may also set it by hand,
e.g. `%env JPY_SESSION_NAME=analysis.ipynb` before the first `%%phoenix`), so
the notebook's current conversation is written to `notebooks.json` beside the
store's journals and read back by the next kernel of the same notebook.

One small JSON object, replaced atomically under a file lock: several kernels
(several notebooks) write it, and a crash mid-write must leave the old mapping.
The store's journals are the wrong place: they hold conversations, and this is
a fact about notebooks.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from filelock import FileLock

SESSION_ENV = "JPY_SESSION_NAME"
FILE_NAME = "notebooks.json"


def notebook_key(environ: Mapping[str, str], cwd: Path) -> str | None:
    """The notebook this kernel serves, as an absolute path, or None when unknown.

    Jupyter Server passes a path relative to its root while the kernel runs in the
    notebook's folder, so a relative name is the file name in the kernel's folder.
    """
    name = environ.get(SESSION_ENV, "").strip()
    if not name:
        return None
    path = Path(name).expanduser()
    if not path.is_absolute():
        path = cwd / path.name
    return str(path)


Shown = tuple[int, int]  # (index of the last cycle shown, steps of it shown)


class NotebookBindings:
    """Per notebook path: the slug of its current conversation and how much of each
    conversation its records already show (so `history` shows only what is new)."""

    def __init__(self, root: Path) -> None:
        self.path = root / FILE_NAME
        self._lock = FileLock(str(root / (FILE_NAME + ".lock")))

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, dict)}

    def _update(self, notebook: str, change: Callable[[dict[str, Any]], None]) -> None:
        try:
            self._write(notebook, change)
        except OSError:
            # A store that cannot be written: the binding is a convenience, not a reason to
            # fail a command that only reads. Every command says a read-only store is so,
            # and a full disk is reported by the next message's save.
            with contextlib.suppress(OSError):
                self.path.with_suffix(".tmp").unlink()

    def _write(self, notebook: str, change: Callable[[dict[str, Any]], None]) -> None:
        with self._lock:
            data = self._read()
            entry = data.setdefault(notebook, {})
            before = json.dumps(entry, sort_keys=True)
            change(entry)
            if json.dumps(entry, sort_keys=True) == before:
                return
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
            os.replace(tmp, self.path)

    def get(self, notebook: str) -> str | None:
        slug = self._read().get(notebook, {}).get("conversation")
        return slug if isinstance(slug, str) else None

    def set(self, notebook: str, slug: str) -> None:
        self._update(notebook, lambda entry: entry.__setitem__("conversation", slug))

    def shown(self, notebook: str, slug: str) -> Shown | None:
        value = self._read().get(notebook, {}).get("shown", {}).get(slug)
        if isinstance(value, list) and len(value) == 2 and all(isinstance(x, int) for x in value):
            return (value[0], value[1])
        return None

    def set_shown(self, notebook: str, slug: str, shown: Shown) -> None:
        def change(entry: dict[str, Any]) -> None:
            marks = entry.get("shown")
            if not isinstance(marks, dict):
                marks = entry["shown"] = {}
            marks[slug] = list(shown)

        self._update(notebook, change)
