"""The tools the agent calls.

Each tool is a `base.Tool`: a name, a static description and input schema
(the tools array never changes within a conversation), and
`run(input, ctx, tool_use_id) -> ToolResult`, which never raises for bad
input (an error result names the field) and, when cancelled, returns only
once the processes it started are dead. `registry.tools_for` gives a parent
or a sub-agent its set; `registry.run_tool` is the runtime's one entry point
(unknown names, non-object input and tool bugs become error results).
`base.ToolContext` carries everything a call needs as values: cwd, mode, the
conversation's `commands.CommandRunner` (its `SandboxPolicy`, sandbox, environment
and the owner's `BackgroundJobs`), the kernel port; no tool keeps process-wide
state. `declared` holds the tools the state machine answers
itself (request_mode_upgrade, spawn_agents, submit_result).

Its face is its modules, listed below and pinned by
tests/runtime/test_front_door.py.
"""

__all__ = [
    "base",
    "bash",
    "bash_guard",
    "cell_edits",
    "declared",
    "kernel",
    "kernel_port",
    "keyword_search",
    "patch",
    "registry",
    "schema",
    "think",
]
