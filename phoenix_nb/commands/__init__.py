"""One place that turns "this conversation's sandbox policy and mode" into a process.

Before this package each tool that ran a process (bash, keyword_search, the
kernel tools' forks) and the MCP servers would each assemble their process
themselves: mode -> Restricted or not, the conversation's cgroup budget, the
hidden credential paths, the limits, the environment. A `CommandRunner` does
that once, for one conversation (or one MCP server), so a new kind of process
cannot forget a step. It sits under `tools/` and `mcp/` and over `sandbox/`
(import-linter layers); it calls the sandbox's own functions and adds no
mechanism of its own.

The face:

* `CommandRunner` (``runner.py``): ``spec(...)`` builds a `RunSpec`;
  ``start(...)`` runs one; ``serve(...)`` starts a long-lived process whose
  stdin and stdout stay open (an MCP stdio server), with stderr apart;
  ``environment()`` is the allowlisted environment; ``jobs`` the owner's
  background jobs; ``confine_fork(...)`` (a `ForkConfinement`) and
  ``scrub_values()`` are how a fork of the kernel is confined and what it
  scrubs, so the kernel tools' forks have no recipe of their own.
* ``environment.py``: `command_environment` (the allowlist), `withheld_summary`
  (``%phoenix status``), `fork_secrets`, `credential_files`.
* ``jobs.py``: `BackgroundJob`, `BackgroundJobs`, owned per `Phoenix`.
"""

from __future__ import annotations

from phoenix_nb.commands.environment import (
    CommandEnvironment,
    command_environment,
    credential_files,
    fork_secrets,
    withheld_summary,
)
from phoenix_nb.commands.jobs import BackgroundJob, BackgroundJobs
from phoenix_nb.commands.runner import CommandRunner, ForkConfinement

__all__ = [
    "BackgroundJob",
    "BackgroundJobs",
    "CommandEnvironment",
    "CommandRunner",
    "ForkConfinement",
    "command_environment",
    "credential_files",
    "fork_secrets",
    "withheld_summary",
]
