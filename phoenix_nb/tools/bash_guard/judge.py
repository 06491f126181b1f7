"""What a rule, and the expander's command substitutions, may ask of the walk.

A port rather than the `Walker` class itself: the walk dispatches to the rules
and the expander, and they call back into it; typing them against this
Protocol keeps the imports pointing one way (walk → rules, walk → words).
"""

from __future__ import annotations

from typing import Protocol

from phoenix_nb.tools.bash_guard.places import Places
from phoenix_nb.tools.bash_guard.values import Env, Val


class Judge(Protocol):
    """The walk, as the rules see it."""

    @property
    def places(self) -> Places:
        """The protected places, relative to the directory the command runs in."""

    def run(self, words: list[Val], env: Env, stdin: Val | None, *, plain: bool = False) -> None:
        """Judge one simple command given its expanded words (name first)."""

    def check_script(self, script: str, env: Env) -> None:
        """Judge a whole script's text, as if the shell ran it in `env`."""

    def dynamic_script(
        self, value: Val | None, what: str, env: Env, positional: list[Val] | None = None
    ) -> None:
        """Judge text that will run as a script (`bash -c`, eval, a pipe into sh);
        refuse as too dynamic when the text is only known at run time."""

    def target(self, val: Val, env: Env) -> str | None:
        """Why deleting `val` (a path) would be refused, or None: a key of
        `places.REASONS`."""

    def path_key(self, text: str, env: Env) -> str:
        """`text` as an absolute, normalised path from the walk's current directory."""

    def refuse_delete(
        self, shown: str, why: str, env: Env, example: str, verb: str = "delete"
    ) -> None:
        """Raise the refusal for deleting (or moving away) `shown`, saying why and
        what to do instead."""


__all__ = ["Judge"]
