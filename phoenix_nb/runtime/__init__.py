"""The runtime: conversations that run the core's effects against the world.

Its public names are the package's front door (`phoenix_nb.Phoenix`,
`Conversation`, `Settings`, from `manager` and `settings`). `Phoenix` owns
what its conversations share (store, providers, checkpoints, sandbox policy,
background jobs, sub-agent spawner; docs/architecture.md says who owns what);
`conversation.ConversationRuntime` is the loop of one conversation (queue →
`core.transition` → persist → dispatch); `executors` run the LLM and tool
effects and the retry timers, `subagents` the spawns, `turn_pool` the turn budget
a turn's sub-agents share; the executors are
reached through the typing.Protocol ports in `ports`, whose docstrings are
the contract. `claim` takes a conversation (lease, work marker, fresh read)
and restores one left mid-work; `updates` is what watchers receive;
`pending` lists what waits for a person (an upgrade request, …) and answers it by id
from any front end (`mcp_requests`: MCP servers awaiting approval are one kind);
`settings` is the one Settings, each default written once.
`snapshot` is a conversation's whole record to be built off the kernel's loop,
`child_spend` what its finished sub-agents spent; `long_lived` keeps what lives as
long as the kernel (a history read from the store) out of full garbage collections.
`gateway_link` reports the user's decisions to a JupyterHub's phoenix gateway.

Its face is its modules, listed below and pinned by
tests/runtime/test_front_door.py.
"""

__all__ = [
    "child_spend",
    "claim",
    "conversation",
    "executors",
    "gateway_link",
    "lease",
    "long_lived",
    "manager",
    "mcp_requests",
    "pending",
    "ports",
    "prompts",
    "settings",
    "snapshot",
    "subagents",
    "turn_pool",
    "updates",
]
