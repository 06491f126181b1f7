"""What each command that can do damage is judged by: one explicit table.

A command's name maps to its rule; a name not in the table has no rule of its
own (the walk still follows wrappers, shells, eval and interpreters before it
gets here). Adding a rule is adding a row: grep for the name finds it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from phoenix_nb.tools.bash_guard.rules import delete, fanout, git, shells, state

if TYPE_CHECKING:
    from phoenix_nb.tools.bash_guard.judge import Judge
    from phoenix_nb.tools.bash_guard.values import Env, Val

Rule = Callable[["Judge", list["Val"], "Env", "Val | None"], None]
"""rule(walker, args, env, stdin): raise `Refused` or `TooDynamic`, or return."""

RULES: Mapping[str, Rule] = {
    "rm": delete.rm,
    "mv": delete.mv,
    "find": delete.find,
    "rsync": delete.rsync,
    "git": git.git,
    "xargs": fanout.xargs,
    "parallel": fanout.parallel,
    "su": shells.su,
    "runuser": shells.su,
    "ssh": shells.ssh,
    "script": shells.script,
    "watch": shells.watch,
    "trap": shells.trap,
    "alias": shells.alias,
    "cd": state.cd,
    "pushd": state.cd,
    "set": state.set_,
    "shift": state.shift,
    "read": state.read,
}

__all__ = ["RULES", "Rule"]
