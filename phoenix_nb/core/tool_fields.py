"""The input fields the record and the renderers read from our tools' calls, stated once,
and `ToolTraits`, the table of what each tool of a conversation says about itself.

The tools (the producers) declare these names in their input schemas; the
record projection (`core/cycles.py`) and every renderer read calls by the same
names, and a test holds each tool's schema to them. A renamed field then fails
a test instead of rendering empty — as it did when the think tool stored
`thoughts` while the record and all three renderers read `thought`.

Which group a call joins in the record and which input field summarises it are
each tool's own traits (`Tool.group`, `Tool.summary_field`, declared on the tool,
an MCP server's too); the registry gathers them into one `ToolTraits` that the
projection is given as a value (in `RecordHeader.tools`), so the pure core names
no tool and a new tool edits no table here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

BASH_COMMAND = "command"
PATCH_PATH = "path"
SEARCH_QUERY = "query"
THINK_THOUGHTS = "thoughts"
UPGRADE_REASON = "reason"
SUBMIT_RESULT = "result"

OTHER_GROUP = "other"  # the record's group of a call whose tool declares none (or is gone)


@dataclass(frozen=True)
class ToolTraits:
    """Each tool's record group and summary field, by tool name (plain data: it is
    pickled with a record snapshot to the process that builds the record).

    A name the table does not know (a tool of an older version, an MCP server no
    longer connected) is in the "other" group with no summary: its calls still render.
    """

    groups: Mapping[str, str] = field(default_factory=dict)
    summary_fields: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, declared: Iterable[tuple[str, str, str]]) -> ToolTraits:
        """The table of (name, group, summary_field) as the tools declare them."""
        rows = list(declared)
        return cls(
            groups={name: group for name, group, _ in rows if group},
            summary_fields={name: summary for name, _, summary in rows if summary},
        )

    def group(self, name: str) -> str:
        return self.groups.get(name, OTHER_GROUP)

    def summary_field(self, name: str) -> str:
        """The input field that summarises a call on one line ("" for none)."""
        return self.summary_fields.get(name, "")


NO_TOOL_TRAITS = ToolTraits()
