"""Which conversation gets which tools, and the one safe way to run a call.

Parents get request_mode_upgrade and spawn_agents but not submit_result;
sub-agents get submit_result but can neither spawn nor ask for write access
(they are Restricted whenever the sandbox exists, REQ-BED-018). The sets are
built once and their descriptions are static (REQ-BED-017), so the `tools`
array sent to the API never changes within a conversation.

`run_tool` is the runtime's single entry point: whatever a tool does wrong —
an unknown name, a bug that raises — becomes an error result the model can
read, so a tool fault can never leave a tool_use unanswered. Only
CancelledError passes through, because cancel is how the user stops work.

bash is imported directly, not optionally: a registry that silently dropped
bash would give the agent a different tool set without anyone noticing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from phoenix_nb.core.tool_fields import ToolTraits
from phoenix_nb.core.values import ToolResult
from phoenix_nb.tools.base import Tool, ToolContext
from phoenix_nb.tools.bash import BashTool
from phoenix_nb.tools.declared import REQUEST_MODE_UPGRADE, SPAWN_AGENTS, SUBMIT_RESULT
from phoenix_nb.tools.kernel import (
    EditCellTool,
    InsertCellTool,
    InspectVariablesTool,
    KernelHistoryTool,
    ProposeCellTool,
    RunPythonTool,
)
from phoenix_nb.tools.keyword_search import KeywordSearchTool
from phoenix_nb.tools.patch import PatchTool
from phoenix_nb.tools.think import ThinkTool

log = logging.getLogger(__name__)


def tools_for(*, is_sub_agent: bool) -> tuple[Tool, ...]:
    """The tool set of a parent or a sub-agent conversation, in a stable order.

    The kernel tools are declared in both modes and whether or not kernel
    access is on (REQ-BED-017: the tools array never changes); sub-agents get
    only the two that read (inspect_variables, kernel_history): proposing
    cells, editing the user's cells and the scratchpad belong to the
    conversation the user talks to.
    """
    common: tuple[Tool, ...] = (BashTool(), PatchTool(), KeywordSearchTool(), ThinkTool())
    kernel_read: tuple[Tool, ...] = (InspectVariablesTool(), KernelHistoryTool())
    if is_sub_agent:
        return (*common, *kernel_read, SUBMIT_RESULT)
    return (
        *common,
        *kernel_read,
        RunPythonTool(),
        ProposeCellTool(),
        EditCellTool(),
        InsertCellTool(),
        REQUEST_MODE_UPGRADE,
        SPAWN_AGENTS,
    )


def api_tool_specs(tools: Iterable[Tool]) -> list[dict[str, Any]]:
    """The `tools` array of a Messages API request."""
    return [
        {"name": t.name, "description": t.description, "input_schema": dict(t.input_schema)}
        for t in tools
    ]


def tool_traits(tools: Iterable[Tool]) -> ToolTraits:
    """The record's table of what `tools` declare (each one's group and summary field),
    handed to the projection as a value: the core names no tool."""
    return ToolTraits.of((t.name, t.group, t.summary_field) for t in tools)


def find_tool(tools: Iterable[Tool], name: str) -> Tool | None:
    return next((t for t in tools if t.name == name), None)


async def run_tool(
    tools: Iterable[Tool],
    name: str,
    input: Any,
    ctx: ToolContext,
    tool_use_id: str,
) -> ToolResult:
    """Run one call; every failure except cancellation becomes an error result."""
    tools = tuple(tools)
    tool = find_tool(tools, name)
    if tool is None:
        available = ", ".join(t.name for t in tools)
        return ToolResult(
            tool_use_id=tool_use_id,
            content=f"Unknown tool {name!r}. Available tools: {available}.",
            is_error=True,
        )
    if not isinstance(input, Mapping):
        return ToolResult(
            tool_use_id=tool_use_id,
            content=f"Invalid input for {name}: input must be an object, "
            f"got {type(input).__name__}.",
            is_error=True,
        )
    try:
        result = await tool.run(input, ctx, tool_use_id)
    except Exception as error:  # a tool bug must not leave the tool_use unanswered
        log.exception("tool %s raised", tool.name)
        return ToolResult(
            tool_use_id=tool_use_id,
            content=(
                f"Tool {tool.name} failed unexpectedly: {type(error).__name__}: {error}. "
                "This is a bug in the tool, not in your input; try another approach."
            ),
            is_error=True,
        )
    if not isinstance(result, ToolResult):
        return ToolResult(
            tool_use_id=tool_use_id,
            content=f"Tool {tool.name} returned no result (a bug in the tool).",
            is_error=True,
        )
    return result
