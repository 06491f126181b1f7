"""What one tool call changed on disk, typed once for the recorder, the record and the renderers.

The checkpoint recorder (`phoenix_nb.checkpoints.recorder`) attaches a
`ToolChanges` to the tool's `ToolResult.changes`; it is stored next to the tool's
own display under `"changes"` (docs/record-format.md, `result.display.changes`)
and read back by the renderers, `%phoenix checkpoints` and the Revert button
with `changes_of`. It lives in the core because `ToolResult` carries it; the
module is pure (no I/O), so every layer may import it.

JSON shapes:

    {"before": 3, "after": 4, "files": [FileChange...], "omitted": 0,
     "diff_truncated": false, "error": null}
    FileChange: {"path", "kind": added|modified|deleted|mode, "old_mode", "new_mode",
                 "diff", "binary", "stored", "size"}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

ChangeKind = Literal["added", "modified", "deleted", "mode"]
CHANGE_KINDS: tuple[ChangeKind, ...] = ("added", "modified", "deleted", "mode")

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
