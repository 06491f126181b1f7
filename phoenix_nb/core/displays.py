"""The display payloads tools record with their results, typed once for producer and reader.

A tool returns one of these frozen dataclasses as `ToolResult.display` (the
union `ToolDisplay`); it becomes JSON only where the result becomes a stored
record (`stored_display`, called by the core's `tool_message`), as the store's
`display_data` and the record's `result.display` (docs/record-format.md). The
renderers read that JSON back through the `read` classmethods here (and
`notebook/_render/view.py`'s accessors), which tolerate missing keys and
wrong types so old records still render. The JSON keys are the field names (in
field order, so stored records keep their exact shape), which makes a renamed
field a type error in the producer's constructor and in every reader's
attribute access instead of a display that silently renders empty.

What an Unrestricted call changed on disk is not the tool's own display: the
checkpoint recorder sets `ToolResult.changes` (`core.changes.ToolChanges`),
stored next to these keys under `"changes"`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from phoenix_nb.core.changes import ToolChanges


def _text(data: object, key: str, default: str = "") -> str:
    value = data.get(key) if isinstance(data, Mapping) else None
    return value if isinstance(value, str) else default


def _int(data: object, key: str) -> int | None:
    value = data.get(key) if isinstance(data, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _flag(data: object, key: str) -> bool:
    return isinstance(data, Mapping) and data.get(key) is True


@dataclass(frozen=True)
class BashDisplay:
    """bash's result; a background job's process group and log only when it is one."""

    command: str
    exit_code: int | None
    timed_out: bool = False
    output_truncated: bool = False
    background: bool = False
    pgid: int | None = None
    log: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("pgid", "log"):
            if out[key] is None:
                del out[key]
        return out

    @classmethod
    def read(cls, display: object) -> BashDisplay:
        log = display.get("log") if isinstance(display, Mapping) else None
        return cls(
            command=_text(display, "command"),
            exit_code=_int(display, "exit_code"),
            timed_out=_flag(display, "timed_out"),
            output_truncated=_flag(display, "output_truncated"),
            background=_flag(display, "background"),
            pgid=_int(display, "pgid"),
            log=log if isinstance(log, str) else None,
        )


@dataclass(frozen=True)
class PatchDisplay:
    path: str
    diff: str  # unified diff; "" when nothing was written

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def read(cls, display: object) -> PatchDisplay:
        return cls(_text(display, "path"), _text(display, "diff"))


@dataclass(frozen=True)
class ThinkDisplay:
    thoughts: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def read(cls, display: object) -> ThinkDisplay:
        return cls(_text(display, "thoughts"))


@dataclass(frozen=True)
class AgentReport:
    """One sub-agent's line in a spawn_agents result (REQ-BED-017)."""

    agent_id: str
    task: str
    outcome: str  # a `SubAgentStatus`
    result: str
    conversation_id: str  # the child conversation, "" when none was made


@dataclass(frozen=True)
class SubAgentsDisplay:
    agents: tuple[AgentReport, ...]

    def to_json(self) -> dict[str, Any]:
        return {"agents": [asdict(a) for a in self.agents]}

    @classmethod
    def read(cls, display: object) -> SubAgentsDisplay:
        """From stored JSON; a field of the wrong type reads as its empty value (a missing
        outcome as "failure"), an entry that is not an object is skipped."""
        raw = display.get("agents") if isinstance(display, Mapping) else None
        entries = raw if isinstance(raw, list) else []
        return cls(tuple(_agent(a) for a in entries if isinstance(a, Mapping)))


def _agent(a: Mapping[str, Any]) -> AgentReport:
    def text(key: str, default: str = "") -> str:
        value = a.get(key)
        return value if isinstance(value, str) else default

    return AgentReport(
        agent_id=text("agent_id"),
        task=text("task"),
        outcome=text("outcome", "failure"),
        result=text("result"),
        conversation_id=text("conversation_id"),
    )


@dataclass(frozen=True)
class SearchTerm:
    term: str
    files: int
    hits: int
    dropped: str  # why the term was not used, "" if it was


@dataclass(frozen=True)
class SearchDisplay:
    """keyword_search's result; `ranked_by_helper` only once there were files to rank."""

    root: str
    query: str
    terms: tuple[SearchTerm, ...]
    files: tuple[str, ...]
    truncated: bool
    ranked_by_helper: bool | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "root": self.root,
            "query": self.query,
            "terms": [asdict(t) for t in self.terms],
            "files": list(self.files),
            "truncated": self.truncated,
        }
        if self.ranked_by_helper is not None:
            out["ranked_by_helper"] = self.ranked_by_helper
        return out

    @classmethod
    def read(cls, display: object) -> SearchDisplay:
        raw_terms = display.get("terms") if isinstance(display, Mapping) else None
        raw_files = display.get("files") if isinstance(display, Mapping) else None
        ranked = display.get("ranked_by_helper") if isinstance(display, Mapping) else None
        terms = tuple(
            SearchTerm(
                term=_text(t, "term"),
                files=_int(t, "files") or 0,
                hits=_int(t, "hits") or 0,
                dropped=_text(t, "dropped"),
            )
            for t in (raw_terms if isinstance(raw_terms, list) else [])
            if isinstance(t, Mapping)
        )
        files = (
            tuple(f for f in raw_files if isinstance(f, str)) if isinstance(raw_files, list) else ()
        )
        return cls(
            root=_text(display, "root"),
            query=_text(display, "query"),
            terms=terms,
            files=files,
            truncated=_flag(display, "truncated"),
            ranked_by_helper=ranked if isinstance(ranked, bool) else None,
        )


# ------------------------------------------------------------------ kernel tools


@dataclass(frozen=True)
class InspectDisplay:
    """inspect_variables: the names asked for (none: the listing) and figures attached."""

    names: tuple[str, ...]
    images: int

    def to_json(self) -> dict[str, Any]:
        return {"names": list(self.names), "images": self.images}

    @classmethod
    def read(cls, display: object) -> InspectDisplay:
        raw = display.get("names") if isinstance(display, Mapping) else None
        names = tuple(n for n in raw if isinstance(n, str)) if isinstance(raw, list) else ()
        return cls(names=names, images=_int(display, "images") or 0)


@dataclass(frozen=True)
class HistoryDisplay:
    """kernel_history: how many of the latest cells were asked for."""

    last: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def read(cls, display: object) -> HistoryDisplay:
        return cls(last=_int(display, "last") or 0)


@dataclass(frozen=True)
class RunPythonDisplay:
    """run_python: how the fork ended, the figures attached, its wall time in seconds."""

    timed_out: bool
    signal: int | None
    exit_code: int | None
    images: int
    elapsed: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def read(cls, display: object) -> RunPythonDisplay:
        elapsed = display.get("elapsed") if isinstance(display, Mapping) else None
        return cls(
            timed_out=_flag(display, "timed_out"),
            signal=_int(display, "signal"),
            exit_code=_int(display, "exit_code"),
            images=_int(display, "images") or 0,
            elapsed=float(elapsed)
            if isinstance(elapsed, int | float) and not isinstance(elapsed, bool)
            else 0.0,
        )


@dataclass(frozen=True)
class ProposalDisplay:
    """propose_cell: the code the user is offered and why."""

    proposed_cell: str
    explanation: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def read(cls, display: object) -> ProposalDisplay:
        return cls(_text(display, "proposed_cell"), _text(display, "explanation"))


@dataclass(frozen=True)
class CellEditDisplay:
    """edit_cell / insert_cell: a proposed change to a notebook cell, shown where no front
    end can apply it too. `cell_diff` is a unified diff against the cell as the kernel
    last saw it, every line as context (so it also reads as the whole new cell);
    `position` is "replace", "above" or "below"; `execution_count` the run the cell's
    source comes from, when there was one."""

    edit_id: str
    cell_id: str
    position: str
    execution_count: int | None
    new_source: str
    explanation: str
    cell_diff: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def read(cls, display: object) -> CellEditDisplay:
        return cls(
            edit_id=_text(display, "edit_id"),
            cell_id=_text(display, "cell_id"),
            position=_text(display, "position", "replace"),
            execution_count=_int(display, "execution_count"),
            new_source=_text(display, "new_source"),
            explanation=_text(display, "explanation"),
            cell_diff=_text(display, "cell_diff"),
        )


# ------------------------------------------------------------------------ errors


class ToolErrorKind(StrEnum):
    """Why a tool refused before doing anything (stored as the display's `error`)."""

    INVALID_INPUT = "invalid_input"  # the input broke the tool's schema
    KERNEL_ACCESS_OFF = "kernel_access_off"  # c.Phoenix.kernel_access = "off"
    NO_KERNEL = "no_kernel"  # no Jupyter kernel behind the conversation


@dataclass(frozen=True)
class ErrorDisplay:
    """A refusal; `problem` names the offending field of an invalid input."""

    error: ToolErrorKind
    problem: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"error": self.error.value}
        if self.problem is not None:
            out["problem"] = self.problem
        return out

    @classmethod
    def read(cls, display: object) -> ErrorDisplay | None:
        """None when the display is not a refusal this version knows."""
        try:
            kind = ToolErrorKind(_text(display, "error"))
        except ValueError:
            return None
        problem = display.get("problem") if isinstance(display, Mapping) else None
        return cls(kind, problem if isinstance(problem, str) else None)


ToolDisplay = (
    BashDisplay
    | PatchDisplay
    | ThinkDisplay
    | SubAgentsDisplay
    | SearchDisplay
    | InspectDisplay
    | HistoryDisplay
    | RunPythonDisplay
    | ProposalDisplay
    | CellEditDisplay
    | ErrorDisplay
)


def stored_display(
    display: ToolDisplay | None, changes: ToolChanges | None = None
) -> dict[str, Any] | None:
    """The JSON a tool result's display is stored as: the tool's fields, then `changes`."""
    if display is None and changes is None:
        return None
    out = display.to_json() if display is not None else {}
    if changes is not None:
        out["changes"] = changes.to_json()
    return out


# The keys that tell each display apart when the tool is not known (`read_stored`).
_TELLING_KEYS: tuple[tuple[str, Callable[[object], ToolDisplay | None]], ...] = (
    ("command", BashDisplay.read),
    ("diff", PatchDisplay.read),
    ("thoughts", ThinkDisplay.read),
    ("agents", SubAgentsDisplay.read),
    ("terms", SearchDisplay.read),
    ("names", InspectDisplay.read),
    ("last", HistoryDisplay.read),
    ("elapsed", RunPythonDisplay.read),
    ("proposed_cell", ProposalDisplay.read),
    ("edit_id", CellEditDisplay.read),
    ("error", ErrorDisplay.read),
)


def read_stored(data: object) -> tuple[ToolDisplay | None, ToolChanges | None]:
    """A stored display's JSON back as typed values, told apart by its keys.

    For where the tool that made it is not at hand: a conversation state persisted
    before displays were typed holds its finished results' displays as this JSON
    (`core.codec` reads them through here). Unknown shapes read as no display."""
    if not isinstance(data, Mapping):
        return None, None
    changes = ToolChanges.from_json(data.get("changes"))
    for key, read in _TELLING_KEYS:
        if key in data:
            return read(data), changes
    return None, changes
