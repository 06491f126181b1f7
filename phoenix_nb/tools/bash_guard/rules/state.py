"""Builtins that change what the walk knows for later commands: cd/pushd, set,
shift, read."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from phoenix_nb.tools.bash_guard.values import Env, Val, literal_val
from phoenix_nb.tools.bash_guard.words import shell_split

if TYPE_CHECKING:
    from phoenix_nb.tools.bash_guard.judge import Judge


def cd(walker: Judge, args: list[Val], env: Env, stdin: Val | None) -> None:
    operands = [a for a in args if not (a.known and a.text.startswith("-") and a.text != "-")]
    if not operands:
        env.cwd = env.home
    elif operands[0].unknown or operands[0].text == "-":
        unknown = f"/\x02dir{len(walker.places.unknown_dirs)}"
        walker.places.unknown_dirs.add(unknown)
        env.cwd = unknown
    else:
        env.cwd = walker.path_key(operands[0].text, env)


def set_(walker: Judge, args: list[Val], env: Env, stdin: Val | None) -> None:
    for i, arg in enumerate(args):
        if arg.text == "--" or not arg.text.startswith(("-", "+")):
            env.positional = args[i + 1 :] if arg.text == "--" else args[i:]
            return


def shift(walker: Judge, args: list[Val], env: Env, stdin: Val | None) -> None:
    count = int(args[0].text) if args and args[0].text.isdigit() else 1
    if env.positional is not None:
        env.positional = env.positional[count:]


def read(walker: Judge, args: list[Val], env: Env, stdin: Val | None) -> None:
    names = [a.text for a in args if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", a.text)]
    values = shell_split(stdin.text) if stdin is not None and stdin.known else None
    for index, name in enumerate(names):
        if values is None or index >= len(values):
            env.vars[name] = None if values is None else literal_val("")
        elif index == len(names) - 1:
            env.vars[name] = literal_val(" ".join(values[index:]))
        else:
            env.vars[name] = literal_val(values[index])
