"""What a checkpoint is, what a revert did, and what a tool call changed: typed payloads.

These frozen dataclasses are shared by the producer (`checkpoints.recorder`)
and the consumers (the record's renderers, `%phoenix checkpoints`, the Revert
button). Renaming a field fails type-checking in both places instead of
rendering empty. The module is pure: no I/O, so renderers may import it.

What one tool call changed (`FileChange`, `ToolChanges`, `changes_of`) lives in
`phoenix_nb.core.changes`, since the core's `ToolResult` carries it; it is
re-exported here for the checkpoint code and its readers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from phoenix_nb.core.changes import CHANGE_KINDS as CHANGE_KINDS
from phoenix_nb.core.changes import NOT_RESTORABLE as NOT_RESTORABLE
from phoenix_nb.core.changes import ChangeKind as ChangeKind
from phoenix_nb.core.changes import FileChange as FileChange
from phoenix_nb.core.changes import ToolChanges as ToolChanges
from phoenix_nb.core.changes import changes_of as changes_of

CheckpointKind = Literal["approval", "turn", "before", "after", "pre-revert", "revert"]


@dataclass(frozen=True)
class Checkpoint:
    """One snapshot of the working tree, numbered from 1 per conversation."""

    number: int
    kind: CheckpointKind
    created_at: str  # ISO 8601, UTC
    commit: str
    tool_use_id: str | None = None
    tool: str | None = None
    files_changed: int = 0  # for "after": how many files the call changed
    reverted_to: int | None = None  # for "revert": the checkpoint restored

    def label(self) -> str:
        if self.kind in ("before", "after"):
            return f"{self.kind} {self.tool or 'tool'} ({self.tool_use_id or '?'})"
        if self.kind == "revert":
            return f"revert to {self.reverted_to}"
        return self.kind


@dataclass(frozen=True)
class RevertReport:
    """What a revert did (or, when `refused`, why it did nothing)."""

    target: int
    restored: tuple[str, ...] = ()  # modified since, written back byte for byte
    recreated: tuple[str, ...] = ()  # deleted since, written back
    removed: tuple[str, ...] = ()  # created since, removed
    modes: tuple[str, ...] = ()  # permission bits put back
    not_restorable: tuple[str, ...] = ()  # over the size limit at the target: left as they are
    foreign: tuple[str, ...] = ()  # changed by someone else since the agent wrote them
    refused: bool = False
    pruned_gap: bool = False  # checkpoints in between were pruned: authorship unknown
    pre_revert: int | None = None  # checkpoint of the tree just before the revert
    post_revert: int | None = None

    @property
    def touched(self) -> tuple[str, ...]:
        return tuple(sorted({*self.restored, *self.recreated, *self.removed, *self.modes}))

    def lines(self) -> list[str]:
        out = []
        for label, paths in (
            ("restored", self.restored),
            ("recreated", self.recreated),
            ("removed", self.removed),
            ("mode restored", self.modes),
            ("NOT restorable (over the size limit, left as is)", self.not_restorable),
        ):
            out += [f"  {label}: {p}" for p in paths]
        return out

    def agent_message(self) -> str:
        """The synthetic system message that tells the agent what the user undid."""
        head = (
            f"The user reverted the working tree to checkpoint {self.target}; files you "
            "changed since then are back as they were. Re-read files before editing them."
        )
        if not self.touched and not self.not_restorable:
            return head + " No file needed restoring."
        return head + "\n" + "\n".join(self.lines())


@dataclass(frozen=True)
class PruneReport:
    """Checkpoints removed by the age/size policy, kept so the user is told."""

    removed: tuple[int, ...] = ()
    reason: str = ""
    when: str = ""
    bytes_before: int = 0
    bytes_after: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)
