"""Recursive deletes and moves: rm, mv, find (-delete, -exec rm), rsync
(--delete, --remove-source-files)."""

from __future__ import annotations

import posixpath
import re
from typing import TYPE_CHECKING

from phoenix_nb.tools.bash_guard.options import gnu_long
from phoenix_nb.tools.bash_guard.places import REASONS, glob_can_match, is_pure_wildcard
from phoenix_nb.tools.bash_guard.values import (
    UNKNOWN,
    Env,
    TooDynamic,
    Val,
    literal_val,
    substitute,
)

if TYPE_CHECKING:
    from phoenix_nb.tools.bash_guard.judge import Judge


_RM_LONG = (
    "force",
    "interactive",
    "one-file-system",
    "no-preserve-root",
    "preserve-root",
    "recursive",
    "dir",
    "verbose",
    "help",
    "version",
)


def rm(walker: Judge, args: list[Val], env: Env, stdin: Val | None) -> None:
    recursive = force = maybe = False
    targets: list[Val] = []
    options_done = False
    for arg in args:
        text = arg.text
        if options_done or arg.script:
            targets.append(arg)
        elif arg.unknown:
            # "$FLAGS" may hold -rf; "$DIR" is a target: both are judged.
            maybe |= not arg.deferred and text.startswith(UNKNOWN)
            targets.append(arg)
        elif text == "--":
            options_done = True
        elif text.startswith("--"):
            option = gnu_long(text, _RM_LONG)
            recursive |= option == "recursive"
            force |= option == "force"
        elif text.startswith("-") and len(text) > 1:
            recursive |= "r" in text or "R" in text
            force |= "f" in text
        else:
            targets.append(arg)
    if not (recursive or maybe):
        return
    flags = ("-rf" if force else "-r") if recursive else "…"
    for target in targets:
        why = walker.target(target, env)
        if why and not recursive and (target.unknown or why == "unknown"):
            continue  # with unknown options, only known targets are judged
        if why:
            shown = f"rm {flags} {target.shown(walker.places.home, walker.places.cwd)}"
            if not recursive:
                raise TooDynamic(
                    f"`{shown}` gets options only known when it runs, and it names {REASONS[why]}"
                )
            walker.refuse_delete(shown, why, env, "rm -r build/")


def mv(walker: Judge, args: list[Val], env: Env, stdin: Val | None) -> None:
    """Moving ~, /, .git or the working directory away is deleting it from where it was."""
    operands = [a for a in args if not (a.known and a.text.startswith("-"))]
    target_dir = any(a.text in ("-t", "--target-directory") or
                     a.text.startswith("--target-directory=") for a in args)  # fmt: skip
    sources = operands if target_dir else operands[:-1]
    for source in sources:
        why = walker.target(source, env)
        if why and why not in ("unknown", "top", "maybe-cwd"):
            shown = "mv " + " ".join(a.shown(walker.places.home, walker.places.cwd) for a in args)
            walker.refuse_delete(shown, why, env, "mv build/ /tmp/old-build/", "move away")


def find_scope(walker: Judge, args: list[Val], env: Env) -> str:
    """What `find ARGS` lists: "safe" (named files, or a harmless tree) or why not."""
    starts, expression = _find_split(args)
    narrowed = _find_narrowed(expression, acting_only=False)
    if _find_hits_git(expression, acting_only=False):
        return "git"
    for start in starts or [literal_val(".")]:
        why = walker.target(start, env)
        if why == "git" or (why and not narrowed):
            return why
    return "safe"


def find(walker: Judge, args: list[Val], env: Env, stdin: Val | None) -> None:
    starts, expression = _find_split(args)
    texts = [a.text for a in expression]
    destructive = "-delete" in texts
    found = Val(UNKNOWN, unknown=True, found=find_scope(walker, args, env))
    i = 0
    while i < len(expression):
        if texts[i] in ("-exec", "-execdir", "-ok", "-okdir"):
            end = i + 1
            while end < len(expression) and texts[end] not in (";", "+"):
                end += 1
            inner = expression[i + 1 : end]
            if inner and posixpath.basename(inner[0].text) in ("rm", "unlink", "shred"):
                destructive |= any("{}" in w.text for w in inner)
            walker.run([substitute(w, "{}", found) for w in inner], env.child("find -exec"), None)
            i = end + 1
            continue
        i += 1
    if not destructive:
        return
    narrowed = _find_narrowed(expression, acting_only=True)
    hits_git = _find_hits_git(expression, acting_only=True)
    for start in starts or [literal_val(".")]:
        why = walker.target(start, env)
        if hits_git or why == "git" or (why and not narrowed):
            shown = "find " + " ".join(a.shown(walker.places.home, walker.places.cwd) for a in args)
            walker.refuse_delete(shown, why or "git", env, "find . -name '*.pyc' -delete")


def rsync(walker: Judge, args: list[Val], env: Env, stdin: Val | None) -> None:
    valued_short = {"-e", "-f", "-T", "-B", "-M"}
    deleting = removing_sources = False
    operands: list[Val] = []
    i = 0
    while i < len(args):
        text = args[i].text
        if text == "--":
            operands.extend(args[i + 1 :])
            break
        if text.startswith("--"):
            name = text[2:].split("=", 1)[0]
            if len(name) >= 3 and ("delete".startswith(name) or name.startswith("del")):
                deleting = True
            if (len(name) >= 3 and "remove-source-files".startswith(name)) or name.startswith(
                "remove-sen"
            ):
                removing_sources = True
            if "=" not in text and name in (
                "rsh", "exclude", "include", "filter", "files-from", "temp-dir",
                "partial-dir", "backup-dir", "suffix", "chmod", "chown", "rsync-path",
                "log-file", "password-file", "port", "timeout", "bwlimit", "max-size",
                "min-size", "max-delete", "compare-dest", "copy-dest", "link-dest",
                "out-format", "usermap", "groupmap", "info", "debug", "iconv",
                "exclude-from", "include-from", "contimeout", "modify-window",
            ):  # fmt: skip
                i += 1
        elif text.startswith("-") and len(text) > 1:
            if text in valued_short:
                i += 1
        else:
            operands.append(args[i])
        i += 1
    if len(operands) < 2 and not removing_sources:
        return
    shown = "rsync " + " ".join(a.shown(walker.places.home, walker.places.cwd) for a in args)
    if deleting and operands:
        dest = operands[-1]
        why = _rsync_target(walker, dest, env)
        if why:
            walker.refuse_delete(shown, why, env, "rsync -a --delete src/ build/")
    if removing_sources:
        for source in operands[:-1] or operands:
            why = _rsync_target(walker, source, env)
            if why:
                walker.refuse_delete(shown, why, env, "rsync -a src/ build/")


def _rsync_target(walker: Judge, val: Val, env: Env) -> str | None:
    remote = re.match(r"^(?:rsync://[^/]*|[^/:]+:)(.*)$", val.text) if val.known else None
    if remote and not val.text.startswith("/"):
        path = remote.group(1)
        return "home" if path.strip("/") in ("", "~", ".") else None
    return walker.target(val, env)


def _find_split(args: list[Val]) -> tuple[list[Val], list[Val]]:
    """find's start paths and its expression (after -H/-L/-P/-D/-O)."""
    i = 0
    while i < len(args):
        text = args[i].text
        if text in ("-H", "-L", "-P") or re.fullmatch(r"-O\d?", text):
            i += 1
        elif text == "-D":
            i += 2
        else:
            break
    starts: list[Val] = []
    while i < len(args):
        text = args[i].text
        if args[i].known and (text.startswith("-") or text in ("(", "!", ",", ")")):
            break
        starts.append(args[i])
        i += 1
    return starts, args[i:]


# Tests that pick files by name (or a single file): times, sizes and owners do
# not narrow a delete of the working directory enough (.git is old and big).
_NARROWING = {
    "-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex", "-iregex",
    "-lname", "-ilname", "-empty", "-inum", "-samefile",
}  # fmt: skip


_NAME_TESTS = {"-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename"}
_ACTIONS = {"-delete", "-exec", "-execdir", "-ok", "-okdir"}


def _find_branches(expression: list[Val], acting_only: bool) -> list[list[Val]]:
    """The -o alternatives (parentheses read as transparent) that act."""
    branches: list[list[Val]] = [[]]
    for arg in expression:
        if arg.text in ("-o", "-or"):
            branches.append([])
        else:
            branches[-1].append(arg)
    if not acting_only:
        return branches
    return [b for b in branches if any(a.text in _ACTIONS for a in b)]


def _find_narrowed(expression: list[Val], *, acting_only: bool) -> bool:
    """Every acting branch is limited by a positive test of names, times, sizes …"""
    for branch in _find_branches(expression, acting_only):
        texts = [a.text for a in branch]
        acts_at = next((k for k, t in enumerate(texts) if t in _ACTIONS), len(texts))
        texts = texts[:acts_at]  # find evaluates left to right: a later test limits nothing
        narrowed = False
        for k, text in enumerate(texts):
            if text not in _NARROWING or (k > 0 and texts[k - 1] in ("!", "-not")):
                continue
            value = branch[k + 1] if k + 1 < len(branch) else None
            if text in _NAME_TESTS or text in ("-regex", "-iregex"):
                if value is None or value.unknown:
                    continue
                last = value.text.rstrip("/").rsplit("/", 1)[-1]
                if is_pure_wildcard(last) or not last or re.fullmatch(r"[.*+$^]*", last):
                    continue
            narrowed = True
        if not narrowed:
            return False
    return True


def _find_hits_git(expression: list[Val], *, acting_only: bool) -> bool:
    """An acting branch selects .git by name or path."""
    for branch in _find_branches(expression, acting_only):
        for k, arg in enumerate(branch[:-1]):
            if arg.text in _NAME_TESTS and (k == 0 or branch[k - 1].text not in ("!", "-not")):
                pattern = branch[k + 1].text
                if any(glob_can_match(p, ".git") for p in pattern.split("/") if p):
                    return True
    return False
