"""The display payloads tools record with their results, typed once for producer and reader.

A tool result's `display` is persisted as JSON (the store's `display_data`, the
record's `result.display`, docs/record-format.md) and read back by the
renderers. Both sides go through these frozen dataclasses: a tool builds one and
stores `to_json()`; a renderer gets one back from `read_*` in
`notebook/_render/view.py`. The JSON keys are the field names (`asdict`, in
field order, so stored records keep their exact shape), which makes a renamed
field a type error in the producer's constructor and in every reader's
attribute access instead of a display that silently renders empty.

Other display keys (a background job's `pgid`/`log`, the checkpoints' `changes`)
are added next to these by their owners and are not read through this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class BashDisplay:
    command: str
    exit_code: int | None
    timed_out: bool = False
    output_truncated: bool = False
    background: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PatchDisplay:
    path: str
    diff: str  # unified diff; "" when nothing was written

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ThinkDisplay:
    thoughts: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


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
