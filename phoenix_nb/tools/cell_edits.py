"""Edits to the user's cells as proposals: what was proposed, and what the human decided.

The agent never writes a cell. `edit_cell` and `insert_cell` put a `CellEdit`
in the kernel's `EditBook`; a front end that can apply it (the labextension,
over a kernel comm) shows it on the cell and reports the human's decision back
(`resolve`). Where no front end listens (nbconvert, papermill, a saved
notebook) the edit stays pending: the record shows it and `%phoenix edits`
lists it. Nothing here touches a file.

The outcome reaches the agent with the conversation's next message
(`take_report`): a decision the agent has not yet heard of, or once, that an
edit is still pending. The book is shared by the kernel's shell thread and
comm handlers (which may run on a subshell thread), so every method holds one
lock and returns plain values, never the live state.
"""

from __future__ import annotations

import difflib
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

__all__ = [
    "CellEdit",
    "CellSeen",
    "EditBook",
    "EditOutcome",
    "EditPosition",
    "EditRecord",
    "cell_diff",
    "cell_marks",
    "new_edit_id",
]


class EditPosition(StrEnum):
    """Where the new source goes: over the named cell, or in a new cell beside it."""

    REPLACE = "replace"
    ABOVE = "above"
    BELOW = "below"


class EditOutcome(StrEnum):
    PENDING = "pending"  # no one has decided (or no front end has seen it)
    ACCEPTED = "accepted"  # the human applied it to the live notebook (not run)
    REJECTED = "rejected"  # the human declined it; the cell is as it was
    GONE = "gone"  # the named cell no longer exists in the notebook


@dataclass(frozen=True)
class CellEdit:
    """One proposal. `base` is the cell's source the agent's edit is against (what the
    kernel last saw of the cell: its last run, or an accepted edit since); a front end
    whose cell no longer reads `base` shows the conflict instead of overwriting."""

    id: str
    conversation_id: str
    cell_id: str  # the cell replaced, or the one a new cell goes above/below
    position: EditPosition
    new_source: str
    explanation: str
    base: str = ""
    execution_count: int | None = None  # the run `base` comes from, None when not a run

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "conversation_id": self.conversation_id,
            "cell_id": self.cell_id,
            "position": self.position.value,
            "new_source": self.new_source,
            "explanation": self.explanation,
            "base": self.base,
            "execution_count": self.execution_count,
        }

    def where(self) -> str:
        """'cell 3f2a… (In [4])' or 'a new cell below cell 3f2a…', for people and the agent."""
        run = f" (In [{self.execution_count}])" if self.execution_count is not None else ""
        if self.position is EditPosition.REPLACE:
            return f"cell {self.cell_id}{run}"
        return f"a new cell {self.position.value} cell {self.cell_id}{run}"


@dataclass(frozen=True)
class EditRecord:
    """An edit with what became of it. `source` is the cell's text after acceptance (the
    human may have merged it with their own edit); `new_cell_id` the id of an inserted cell."""

    edit: CellEdit
    outcome: EditOutcome = EditOutcome.PENDING
    source: str | None = None
    new_cell_id: str | None = None
    reported: EditOutcome | None = None  # the outcome the agent last heard of


def new_edit_id() -> str:
    return f"edit-{uuid.uuid4().hex[:8]}"


def cell_diff(old: str, new: str, *, label: str = "cell") -> str:
    """A unified diff of two cell sources with every line as context, so the diff also
    reads as the whole new cell; "" when they are the same."""
    if old == new:
        return ""
    a, b = old.splitlines(), new.splitlines()
    lines = difflib.unified_diff(
        a, b, f"{label} (now)", f"{label} (proposed)", n=max(len(a), len(b)), lineterm=""
    )
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class CellSeen:
    """What the kernel last knew of a cell's source: from a run (`execution_count`), or
    from an edit the human accepted since (`accepted`: that edit's id)."""

    source: str
    execution_count: int | None = None
    accepted: str | None = None


def cell_marks(
    cell_id: str | None, execution_count: int, source: str, cells: Mapping[str, CellSeen]
) -> str:
    """kernel_history's words on one run: ' (cell 3f2a…)' and, when the kernel has seen
    that cell change since this run, what changed it: a later run, or an accepted edit."""
    if cell_id is None:
        return ""
    seen = cells.get(cell_id)
    mark = f" (cell {cell_id}"
    if seen is None or seen.execution_count == execution_count:
        return mark + ")"
    if seen.accepted is not None:
        return mark + f"; changed since: the user accepted edit {seen.accepted})"
    if seen.source != source:
        return mark + (
            f"; changed since: run again with other source as In [{seen.execution_count}])"
        )
    return mark + f"; run again unchanged as In [{seen.execution_count}])"


Listener = Callable[[CellEdit], None]


class EditBook:
    """The kernel's proposals and their outcomes (bounded: oldest settled ones drop)."""

    MAX_RECORDS = 500

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: dict[str, EditRecord] = {}
        self._listeners: list[Listener] = []
        self._changes: list[Callable[[], None]] = []
        self._cells: dict[str, CellSeen] = {}

    def saw_run(self, cell_id: str, source: str, execution_count: int | None) -> None:
        """The kernel ran the cell `cell_id` (as the front end named it) with `source`."""
        with self._lock:
            self._cells.pop(cell_id, None)  # keep insertion order = last seen
            self._cells[cell_id] = CellSeen(source, execution_count)
            while len(self._cells) > self.MAX_RECORDS * 4:
                del self._cells[next(iter(self._cells))]

    def cell(self, cell_id: str) -> CellSeen | None:
        with self._lock:
            return self._cells.get(cell_id)

    def cells(self) -> dict[str, CellSeen]:
        """A copy of what the kernel knows of each named cell (safe to hand to a fork)."""
        with self._lock:
            return dict(self._cells)

    def on_propose(self, listener: Listener) -> None:
        """Call `listener` with each new edit (the comm sends it to the front end)."""
        with self._lock:
            self._listeners.append(listener)

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call `listener()` after an edit is proposed or decided (the process's pending
        list redraws): on the proposing or deciding thread, outside the book's lock."""
        with self._lock:
            self._changes.append(listener)

    def propose(self, edit: CellEdit) -> None:
        with self._lock:
            self._records[edit.id] = EditRecord(edit)
            self._trim()
            listeners = list(self._listeners)
            changes = list(self._changes)
        for listener in listeners:
            listener(edit)
        for change in changes:
            change()

    def _trim(self) -> None:
        settled = [k for k, r in self._records.items() if r.outcome is not EditOutcome.PENDING]
        while len(self._records) > self.MAX_RECORDS and settled:
            del self._records[settled.pop(0)]

    def resolve(
        self,
        edit_id: str,
        outcome: EditOutcome,
        *,
        source: str | None = None,
        new_cell_id: str | None = None,
    ) -> bool:
        """Record the human's decision; False when the edit is unknown or already decided."""
        with self._lock:
            record = self._records.get(edit_id)
            if record is None or record.outcome is not EditOutcome.PENDING:
                return False
            if outcome is EditOutcome.PENDING:
                return False
            self._records[edit_id] = replace(
                record, outcome=outcome, source=source, new_cell_id=new_cell_id
            )
            if outcome is EditOutcome.ACCEPTED:
                text = source if source is not None else record.edit.new_source
                target = (
                    record.edit.cell_id
                    if record.edit.position is EditPosition.REPLACE
                    else new_cell_id
                )
                if target:
                    self._cells.pop(target, None)
                    self._cells[target] = CellSeen(text, None, edit_id)
            changes = list(self._changes)
        for change in changes:
            change()
        return True

    def get(self, edit_id: str) -> EditRecord | None:
        with self._lock:
            return self._records.get(edit_id)

    def records(self, conversation_id: str | None = None) -> list[EditRecord]:
        with self._lock:
            return [
                r
                for r in self._records.values()
                if conversation_id in (None, r.edit.conversation_id)
            ]

    def pending(self, conversation_id: str | None = None) -> list[CellEdit]:
        return [r.edit for r in self.records(conversation_id) if r.outcome is EditOutcome.PENDING]

    def take_report(self, conversation_id: str) -> str:
        """What the agent has not yet heard of its edits ("" when nothing); marks it heard."""
        lines: list[str] = []
        with self._lock:
            for key, record in list(self._records.items()):
                if record.edit.conversation_id != conversation_id:
                    continue
                if record.reported is record.outcome:
                    continue
                lines.append(_outcome_line(record))
                self._records[key] = replace(record, reported=record.outcome)
        if not lines:
            return ""
        return "What the user did with your proposed cell edits:\n" + "\n".join(lines)


def _outcome_line(record: EditRecord) -> str:
    edit = record.edit
    head = f"- {edit.id} ({edit.where()}): "
    if record.outcome is EditOutcome.ACCEPTED:
        if edit.position is not EditPosition.REPLACE:
            made = f" as cell {record.new_cell_id}" if record.new_cell_id else ""
            return head + f"accepted — the new cell was inserted{made}, not run."
        if record.source is not None and record.source != edit.new_source:
            return (
                head + "accepted, merged with the user's own edit — the cell now reads "
                "(not run):\n" + _indented(record.source)
            )
        return head + "accepted — the cell now holds your new source; it has not been run."
    if record.outcome is EditOutcome.REJECTED:
        return head + "rejected — the cell is unchanged."
    if record.outcome is EditOutcome.GONE:
        return head + "the cell no longer exists in the notebook; nothing was changed."
    return head + (
        "still pending — the user has not decided (or no front end that can apply it "
        "is open; it is listed by `%phoenix edits`)."
    )


def _indented(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines()) or "    (empty)"
