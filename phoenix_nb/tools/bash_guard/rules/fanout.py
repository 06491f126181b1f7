"""Commands that run another command once per input item: xargs, parallel."""

from __future__ import annotations

from typing import TYPE_CHECKING

from phoenix_nb.tools.bash_guard.values import UNKNOWN_VAL, Env, Val, literal_val, substitute
from phoenix_nb.tools.bash_guard.words import ansi_c, expand_literal_tilde, shell_split

if TYPE_CHECKING:
    from phoenix_nb.tools.bash_guard.judge import Judge


def xargs(walker: Judge, args: list[Val], env: Env, stdin: Val | None) -> None:
    i = 0
    replace_str: str | None = None
    delimiter: str | None = None
    from_file = False
    valued = {"-n", "-L", "-P", "-s", "-E", "-e", "-l", "--max-args", "--max-procs"}
    while i < len(args):
        text = args[i].text
        if text == "--":
            i += 1
            break
        if not text.startswith("-") or text == "-":
            break
        if text in ("-I", "--replace") and i + 1 < len(args):
            replace_str = args[i + 1].text
            i += 2
            continue
        if text.startswith("-I") or text.startswith("--replace="):
            replace_str = text[2:] if text.startswith("-I") else text.split("=", 1)[1]
        elif text.startswith("-i"):
            replace_str = text[2:] or "{}"
        elif text in ("-0", "--null"):
            delimiter = "\0"
        elif text in ("-d", "--delimiter") and i + 1 < len(args):
            delimiter = ansi_c(args[i + 1].text)
            i += 2
            continue
        elif text.startswith("-d") or text.startswith("--delimiter="):
            delimiter = ansi_c(text[2:] if text.startswith("-d") else text.split("=", 1)[1])
        elif text in ("-a", "--arg-file") or text.startswith(("-a", "--arg-file=")):
            from_file = True
            if text in ("-a", "--arg-file"):
                i += 1
        elif text in valued:
            i += 1
        i += 1
    command = args[i:] or [literal_val("echo")]
    if from_file or stdin is None or (stdin.unknown and stdin.found is None):
        items: list[Val] = [UNKNOWN_VAL]
    elif stdin.found is not None:
        items = [stdin]
    else:
        if delimiter:
            raw = stdin.text.split(delimiter)
        elif replace_str:
            raw = [line.strip() for line in stdin.text.split("\n")]  # -I: one item a line
        else:
            raw = shell_split(stdin.text)
        items = [literal_val(item) for item in raw if item]
        items = [expand_literal_tilde(v, env) for v in items]
    if replace_str:
        for item in items:
            substituted = [substitute(word, replace_str, item) for word in command]
            walker.run(substituted, env.child("xargs"), None)
    else:
        walker.run([*command, *items], env.child("xargs"), None)


def parallel(walker: Judge, args: list[Val], env: Env, stdin: Val | None) -> None:
    if any(a.text in (":::", "::::") for a in args):
        split = next(i for i, a in enumerate(args) if a.text in (":::", "::::"))
        command, items = args[:split], args[split + 1 :]
        if args[split].text == "::::":
            items = [UNKNOWN_VAL]
    else:
        command, items = args, [stdin or UNKNOWN_VAL]
    while command and command[0].text.startswith("-"):
        command = command[1:]
    for item in items:
        words = [substitute(w, "{}", item) for w in command]
        if not any("{}" in w.text for w in command):
            words.append(item)
        walker.run(words, env.child("parallel"), None)
