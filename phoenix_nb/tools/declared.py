"""Tools the model calls but the state machine answers.

request_mode_upgrade, spawn_agents and submit_result change the conversation
itself (ask the human for write access, start sub-agents, end a sub-agent), so
the core's `transition` handles them as events, not the tool executor. They
still need a static name, description and schema for the API (REQ-BED-017), and
a `run` that refuses clearly if something routes them to the executor by mistake
— an error result, never a silent success that would desync the state machine.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from phoenix_nb.core.tool_fields import SUBMIT_RESULT as SUBMIT_RESULT_FIELD
from phoenix_nb.core.tool_fields import UPGRADE_REASON
from phoenix_nb.core.values import ToolResult
from phoenix_nb.tools.base import ToolContext

REQUEST_MODE_UPGRADE_DESCRIPTION = (
    "Ask the user for write access. Conversations start in Restricted mode: a "
    "read-only sandbox enforced by the Linux kernel (Landlock), in which bash "
    "commands can read files and run programs but cannot write, delete or rename "
    "files outside a private temporary directory ($TMPDIR), cannot open network "
    "connections, and the patch tool is disabled. Call this tool when the task "
    "needs to change files, install packages or use the network. Give a short, "
    "specific reason; the user sees it next to an Approve / Deny choice. The "
    "conversation waits for the decision; you are told the outcome in a system "
    "message. If denied, continue read-only or explain what you would change."
)

SPAWN_AGENTS_DESCRIPTION = (
    "Start sub-agents that work on independent tasks in parallel and report back. "
    "Each task is a self-contained instruction (the sub-agent sees nothing of this "
    "conversation), optionally with its own working directory (cwd, default: "
    "yours). Sub-agents run in Restricted mode — read-only, kernel-enforced — "
    "whenever the sandbox is available, so give them research, reading and "
    "analysis, not edits. Each finishes by submitting a result; you receive all "
    "results together once every sub-agent has finished, failed or timed out."
)

SUBMIT_RESULT_DESCRIPTION = (
    "Finish your task and hand the result to the agent that started you. Put "
    "everything it needs in `result`: findings, file paths and line numbers, "
    "commands that worked. Set success to false if you could not complete the "
    "task, and say why. This ends your conversation; nothing after it is seen."
)

HANDLED_BY_CONVERSATION = (
    "{name} is handled by the conversation and should not be executed directly."
)


class DeclaredTool:
    """A tool declaration whose call the state machine intercepts."""

    writes = False
    group = "other"

    def __init__(
        self,
        name: str,
        description: str,
        input_schema: Mapping[str, Any],
        summary_field: str = "",
    ) -> None:
        self.name = name
        self.description = description
        self.input_schema = input_schema
        self.summary_field = summary_field  # its one-line summary in the record

    async def run(self, input: Mapping[str, Any], ctx: ToolContext, tool_use_id: str) -> ToolResult:
        return ToolResult(
            tool_use_id=tool_use_id,
            content=HANDLED_BY_CONVERSATION.format(name=self.name),
            is_error=True,
        )


REQUEST_MODE_UPGRADE = DeclaredTool(
    "request_mode_upgrade",
    REQUEST_MODE_UPGRADE_DESCRIPTION,
    {
        "type": "object",
        "properties": {
            "reason": {
                "type": "string",
                "minLength": 1,
                "description": "Why write access is needed, shown to the user.",
            },
        },
        "required": ["reason"],
    },
    summary_field=UPGRADE_REASON,
)

SPAWN_AGENTS = DeclaredTool(
    "spawn_agents",
    SPAWN_AGENTS_DESCRIPTION,
    {
        "type": "object",
        "properties": {
            "tasks": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "properties": {
                        "task": {
                            "type": "string",
                            "minLength": 1,
                            "description": "A self-contained instruction for one sub-agent.",
                        },
                        "cwd": {
                            "type": "string",
                            "description": "Working directory (absolute, or relative to yours).",
                        },
                    },
                    "required": ["task"],
                },
            },
            "timeout": {
                "type": "number",
                "exclusiveMinimum": 0,
                "description": "Seconds each sub-agent may run before it is stopped "
                "(default and upper bound set by the user).",
            },
        },
        "required": ["tasks"],
    },
)

SUBMIT_RESULT = DeclaredTool(
    "submit_result",
    SUBMIT_RESULT_DESCRIPTION,
    {
        "type": "object",
        "properties": {
            "result": {"type": "string", "description": "Everything the parent needs."},
            "success": {
                "type": "boolean",
                "description": "false if the task could not be completed (default true).",
            },
        },
        "required": ["result"],
    },
    summary_field=SUBMIT_RESULT_FIELD,
)
