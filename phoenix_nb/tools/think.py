"""The think tool: a place for the model to reason out loud between actions.

It does nothing but acknowledge. Its value is that the thoughts land in the
history as a tool call — visible in the record — without being mistaken for an
answer to the user, and that it costs no process or file access, so it is
available in every mode.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from phoenix_nb.core.displays import ThinkDisplay
from phoenix_nb.core.tool_fields import THINK_THOUGHTS
from phoenix_nb.core.values import ToolResult
from phoenix_nb.tools.base import SchemaTool, ToolContext

THINK_DESCRIPTION = (
    "Think through a problem step by step before acting: plan, weigh options, or "
    "check your reasoning. The thoughts are recorded in the conversation and shown "
    "to the user; nothing is executed and no files are read or changed. Available "
    "in both Restricted and Unrestricted mode."
)


class ThinkTool(SchemaTool):
    """Records the model's thoughts; returns "recorded"."""

    writes = False  # the checkpoint recorder skips it
    group = "other"
    summary_field = THINK_THOUGHTS

    name = "think"
    description = THINK_DESCRIPTION
    input_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            THINK_THOUGHTS: {"type": "string", "description": "Your thoughts, in full."},
        },
        "required": [THINK_THOUGHTS],
    }

    async def execute(
        self, input: Mapping[str, Any], ctx: ToolContext, tool_use_id: str
    ) -> ToolResult:
        return ToolResult(
            tool_use_id=tool_use_id,
            content="recorded",
            display=ThinkDisplay(input[THINK_THOUGHTS]),
        )
