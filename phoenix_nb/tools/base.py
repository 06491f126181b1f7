"""What every tool is and what it is given.

A tool is a name, a static description and schema (REQ-BED-017: descriptions
never change with the mode), and an async `run` that never raises for bad input:
a missing or mistyped field becomes an error `ToolResult` naming the field.
`SchemaTool` does that check once, against the tool's declared schema, so a
tool's own `execute` starts from input of the declared shape.
What a tool shows beyond the model's text is its result's `display`, one of the
frozen dataclasses in `core/displays.py` (`ToolDisplay`), never a dict: the
renderers read the same types back from the stored record.
Cancelling the task that awaits `run` must stop the tool's work (and kill any
process tree it started) and let `CancelledError` propagate.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from phoenix_nb.commands import CommandRunner
from phoenix_nb.core.tool_fields import OTHER_GROUP
from phoenix_nb.core.values import Mode, ToolResult
from phoenix_nb.tools.kernel_port import KernelPort
from phoenix_nb.tools.schema import invalid_input_result, validate

HelperLlm = Callable[[str, str], Awaitable[str]]  # (system, prompt) -> text


@dataclass(frozen=True)
class ToolContext:
    """What one tool call is given, as values.

    How a process of the conversation starts (policy, sandbox, environment,
    background jobs, the live credentials a fork scrubs) is one field,
    ``commands`` (`phoenix_nb.commands.CommandRunner`), made per conversation by
    the runtime: a tool that starts a process holds no recipe of its own.
    """

    cwd: Path  # fixed at conversation creation (REQ-BED-010)
    mode: Mode
    commands: CommandRunner = field(default_factory=CommandRunner)
    conversation_id: str = ""
    helper_llm: HelperLlm | None = None  # small-model calls (keyword_search ranking)
    kernel: KernelPort | None = None  # the Jupyter kernel the conversation lives in (kernel tools)
    kernel_access: bool = True  # c.Phoenix.kernel_access: off keeps the kernel tools declared only


@runtime_checkable
class Tool(Protocol):
    """A tool, with its traits declared on it (not in tables elsewhere), so that a new
    tool, an MCP server's among them, says them itself.

    ``writes``: whether a call can change files; the checkpoint recorder snapshots
    the working tree around calls that can (and only those).
    ``group``: the record's group of its calls (docs/record-format.md: "read",
    "write", "bash", "mcp", "other"); adjacent calls of one group fold together.
    ``summary_field``: the input field whose value is the call's one-line summary
    in the record ("" for none). The registry hands these to the record projection
    as one `core.tool_fields.ToolTraits` (`registry.tool_traits`).
    """

    name: str
    description: str
    input_schema: Mapping[str, Any]
    writes: bool
    group: str
    summary_field: str

    async def run(
        self, input: Mapping[str, Any], ctx: ToolContext, tool_use_id: str
    ) -> ToolResult: ...


class SchemaTool(ABC):
    """A tool whose input is checked against its `input_schema` before it runs.

    The model sends missing fields, wrong types and the junk of a truncated
    stream; every tool answers that with the same error (`invalid_input_result`,
    naming the first bad field), written here once. Subclasses implement
    `execute`, which sees only input of the declared shape; checks a schema
    cannot say (one field's meaning given another) stay in `execute`.
    """

    name: str
    description: str
    input_schema: Mapping[str, Any]
    writes: bool = True  # unless the tool says otherwise: checkpointed (the safe side)
    group: str = OTHER_GROUP  # unless the tool says otherwise
    summary_field: str = ""  # unless the tool says otherwise: no summary line

    async def run(self, input: Mapping[str, Any], ctx: ToolContext, tool_use_id: str) -> ToolResult:
        problem = validate(input, self.input_schema)
        if problem:
            return invalid_input_result(tool_use_id, self.name, problem)
        return await self.execute(input, ctx, tool_use_id)

    @abstractmethod
    async def execute(
        self, input: Mapping[str, Any], ctx: ToolContext, tool_use_id: str
    ) -> ToolResult:
        """The tool's work, on input that matches `input_schema`."""


RESTRICTED_PATCH_MESSAGE = (
    "Patch tool is disabled in Restricted mode. Use request_mode_upgrade to request write access."
)
