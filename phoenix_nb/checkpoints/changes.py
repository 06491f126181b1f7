"""What a tool call changed, what a checkpoint is, what a revert did: typed payloads.

These frozen dataclasses are shared by the producer (`checkpoints.recorder`,
which attaches a `ToolChanges` to a tool result's display under `"changes"`)
and the consumers (the record's renderers, `%phoenix checkpoints`, the Revert
button). Renaming a field fails type-checking in both places instead of
rendering empty. The module is pure: no I/O, so renderers may import it.

JSON shapes (docs/record-format.md, `result.display.changes`):

    {"before": 3, "after": 4, "files": [FileChange...], "omitted": 0,
     "diff_truncated": false, "error": null}
    FileChange: {"path", "kind": added|modified|deleted|mode, "old_mode", "new_mode",
                 "diff", "binary", "stored", "size"}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

ChangeKind = Literal["added", "modified", "deleted", "mode"]
CHANGE_KINDS: tuple[ChangeKind, ...] = ("added", "modified", "deleted", "mode")

CheckpointKind = Literal["approval", "turn", "before", "after", "pre-revert", "revert"]

# What the renderers say about a file kept by hash only (over the size limit).
NOT_RESTORABLE = "not restorable (over the size limit: recorded by hash only)"


def _str(value: Any, default: str = "") -> str:
    return value if isinstance(value, str) else default


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


@dataclass(frozen=True)
class FileChange:
    """One file a tool call (or someone else) changed.

    Modes are permission bits in octal ("0644", "0755", "0600") or "link" for a
    symbolic link; `old_mode` is None for an added file, `new_mode` for a deleted one.
    `stored` is False for a file over the size limit: its content was recorded
    by hash only, so a revert cannot bring this version back.
    """

    path: str
    kind: ChangeKind
    old_mode: str | None = None
    new_mode: str | None = None
    diff: str = ""  # unified diff of this file ("" when binary, not stored or mode-only)
    binary: bool = False
    stored: bool = True
    size: int | None = None  # bytes after the change (None when deleted)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind,
            "old_mode": self.old_mode,
            "new_mode": self.new_mode,
            "diff": self.diff,
            "binary": self.binary,
            "stored": self.stored,
            "size": self.size,
        }

    @classmethod
    def from_json(cls, data: Any) -> FileChange | None:
        """A change read tolerantly from a record; None when it is not one."""
        if not isinstance(data, Mapping) or not isinstance(data.get("path"), str):
            return None
        kind = data.get("kind")
        size = data.get("size")
        return cls(
            path=data["path"],
            kind=cast(ChangeKind, kind) if kind in CHANGE_KINDS else "modified",
            old_mode=_opt_str(data.get("old_mode")),
            new_mode=_opt_str(data.get("new_mode")),
            diff=_str(data.get("diff")),
            binary=data.get("binary") is True,
            stored=data.get("stored") is not False,
            size=size if isinstance(size, int) and not isinstance(size, bool) else None,
        )

    def describe(self) -> str:
        """One line: "modified src/app.py", "mode run.sh 0644 → 0755"."""
        line = f"{self.kind} {self.path}"
        if self.kind == "mode" or (
            self.old_mode and self.new_mode and self.old_mode != self.new_mode
        ):
            line += f" ({self.old_mode} → {self.new_mode})"
        if not self.stored:
            line += f" — {NOT_RESTORABLE}"
        return line


@dataclass(frozen=True)
class ToolChanges:
    """The files one Unrestricted tool call changed: checkpoint `before` to `after`."""

    before: int
    after: int
    files: tuple[FileChange, ...] = ()
    omitted: int = 0  # files left out of `files` (the list is capped)
    diff_truncated: bool = False  # some diffs were cut to keep the record small
    error: str | None = None  # set when the changes could not be recorded

    @property
    def count(self) -> int:
        return len(self.files) + self.omitted

    def summary(self, tool: str) -> str:
        """ "bash changed 3 files", "patch changed 1 file", "bash changed no files"."""
        if self.error:
            return f"{tool}: changes not recorded ({self.error})"
        n = self.count
        if n == 0:
            return f"{tool} changed no files"
        return f"{tool} changed {n} file{'s' if n != 1 else ''}"

    def to_json(self) -> dict[str, Any]:
        return {
            "before": self.before,
            "after": self.after,
            "files": [f.to_json() for f in self.files],
            "omitted": self.omitted,
            "diff_truncated": self.diff_truncated,
            "error": self.error,
        }

    @classmethod
    def from_json(cls, data: Any) -> ToolChanges | None:
        """Changes read tolerantly from a record (never raises); None when absent."""
        if not isinstance(data, Mapping):
            return None
        raw = data.get("files")
        files = raw if isinstance(raw, Sequence) and not isinstance(raw, str | bytes) else ()
        parsed = tuple(c for c in (FileChange.from_json(f) for f in files) if c is not None)
        return cls(
            before=_int(data.get("before")),
            after=_int(data.get("after")),
            files=parsed,
            omitted=_int(data.get("omitted")),
            diff_truncated=data.get("diff_truncated") is True,
            error=_opt_str(data.get("error")),
        )


def changes_of(display: Any) -> ToolChanges | None:
    """The changes attached to a tool result's display, if any."""
    if not isinstance(display, Mapping):
        return None
    return ToolChanges.from_json(display.get("changes"))


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
