"""Commands that hand a string to a shell: su/runuser -c, ssh, script -c, watch,
trap, alias."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING

from phoenix_nb.tools.bash_guard.values import Env, TooDynamic, Val, join_words

if TYPE_CHECKING:
    from phoenix_nb.tools.bash_guard.judge import Judge


def _command_option(walker: Judge, via: str, args: list[Val], env: Env) -> None:
    """-c CMD / -qcCMD / --command[=]CMD: CMD runs in a shell."""
    for i, arg in enumerate(args):
        text = arg.text
        if text.startswith("--command"):
            if "=" in text:
                walker.dynamic_script(replace(arg, text=text.split("=", 1)[1]), via, env)
            elif i + 1 < len(args):
                walker.dynamic_script(args[i + 1], via, env)
        elif re.fullmatch(r"-[A-Za-z]*c.*", text) and not text.startswith("--"):
            rest = text[text.index("c") + 1 :]
            if rest:
                walker.dynamic_script(replace(arg, text=rest), via, env)
            elif i + 1 < len(args):
                walker.dynamic_script(args[i + 1], via, env)


def su(walker: Judge, args: list[Val], env: Env, stdin: Val | None) -> None:
    _command_option(walker, "su -c", args, env)


def ssh(walker: Judge, args: list[Val], env: Env, stdin: Val | None) -> None:
    valued = set("bcDEeFIiJLlmOopQRSWw")
    i = 0
    while i < len(args) and args[i].text.startswith("-"):
        flags = args[i].text[1:]
        i += 2 if flags and flags[-1] in valued and len(flags) == 1 else 1
    remote = args[i + 1 :]
    if remote:
        walker.dynamic_script(join_words(remote, " "), "ssh", env.child("ssh", home="~"))


def script(walker: Judge, args: list[Val], env: Env, stdin: Val | None) -> None:
    _command_option(walker, "script -c", args, env)


def watch(walker: Judge, args: list[Val], env: Env, stdin: Val | None) -> None:
    i = 0
    while i < len(args) and args[i].text.startswith("-"):
        i += 2 if args[i].text in ("-n", "--interval", "-d", "-q") else 1
    if i < len(args):
        walker.dynamic_script(join_words(args[i:], " "), "watch", env)


def trap(walker: Judge, args: list[Val], env: Env, stdin: Val | None) -> None:
    if args and not args[0].text.startswith("-"):
        walker.dynamic_script(args[0], "trap", env)


def alias(walker: Judge, args: list[Val], env: Env, stdin: Val | None) -> None:
    for arg in args:
        name, eq, value = arg.text.partition("=")
        if eq:
            if arg.unknown:
                env.aliases[name] = "\0"
                raise TooDynamic(f"alias {name} is only known when it runs")
            env.aliases[name] = value
            walker.check_script(value, env.child(f"alias {name}"))
