"""Refuse a few catastrophic commands before anything runs (REQ-BASH-007).

Checked in both modes, with or without the kernel sandbox (REQ-BASH-009): in
Unrestricted mode nothing else stands between the model and ``rm -rf ~``.
The command is parsed with tree-sitter-bash, a real bash grammar, so the
checks see every simple command wherever it sits: in pipelines, ``&&``/``||``/
``;`` chains, subshells, ``$(...)``, behind ``sudo``/``env``/``nice``/
``xargs``/``timeout``, and inside ``bash -c '...'`` / ``eval`` strings. Regexes
over the raw text would either miss ``rm -r -f ~`` or refuse ``echo "rm -rf /"``.

This is a guard rail against mistakes, not a security boundary: the sandbox
is the boundary in Restricted mode. Words built at run time (``$cmd``) are
not evaluated.
"""

from __future__ import annotations

from collections.abc import Iterator

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

_PARSER = Parser(Language(tree_sitter_bash.language()))
_MAX_DEPTH = 4  # nested bash -c strings followed

# Wrappers that run their arguments as a command: (options taking a value).
_WRAPPERS: dict[str, frozenset[str]] = {
    "sudo": frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"}),
    "doas": frozenset({"-u", "-C"}),
    "env": frozenset({"-u", "-C", "-S", "--unset", "--chdir"}),
    "command": frozenset(),
    "builtin": frozenset(),
    "exec": frozenset({"-a"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "ionice": frozenset({"-c", "-n", "-p"}),
    "nohup": frozenset(),
    "time": frozenset({"-f", "-o"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "xargs": frozenset({"-I", "-n", "-P", "-L", "-d", "-E", "-s", "-a"}),
    "timeout": frozenset({"-s", "-k", "--signal", "--kill-after"}),
    "setsid": frozenset(),
    "chroot": frozenset(),
}
_SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh"})

_DANGEROUS_RM_TARGETS = frozenset(
    {
        "/",
        "/*",
        "/.",
        "~",
        "~/",
        "~/*",
        "~/.",
        "$HOME",
        "$HOME/",
        "$HOME/*",
        "${HOME}",
        "${HOME}/",
        "${HOME}/*",
        ".git",
        ".git/",
        "./.git",
        "./.git/",
        "*",
        "./*",
        ".*",
        "./.*",
        ".",
        "./",
        "..",
        "../",
    }
)


def _word_text(node: Node) -> str:
    """The word as bash would see it before expansion, quotes removed."""
    text = (node.text or b"").decode("utf-8", "replace")
    if node.type == "raw_string" and len(text) >= 2:
        return text[1:-1]
    if node.type == "string" and len(text) >= 2:
        return text[1:-1]
    if node.type == "concatenation":
        return "".join(_word_text(child) for child in node.children)
    return text


def _commands(node: Node) -> Iterator[list[str]]:
    """Every simple command in the tree, as a list of words (name first)."""
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type == "command":
            words: list[str] = []
            for child in current.children:
                if child.type == "command_name":
                    words.append(_word_text(child.children[0]) if child.children else "")
                elif words and child.type in (
                    "word",
                    "string",
                    "raw_string",
                    "concatenation",
                    "simple_expansion",
                    "expansion",
                    "number",
                ):
                    words.append(_word_text(child))
            if words:
                yield words
        stack.extend(reversed(current.children))


def _unwrap(words: list[str]) -> list[str]:
    """Strip sudo/env/nice/xargs... so the real command is first."""
    while words:
        name = words[0].rsplit("/", 1)[-1]
        takes_value = _WRAPPERS.get(name)
        if takes_value is None:
            return words
        i = 1
        while i < len(words):
            word = words[i]
            if word == "--":
                i += 1
                break
            if name == "env" and "=" in word and not word.startswith("-"):
                i += 1
            elif word.startswith("-"):
                i += 2 if word in takes_value else 1
            else:
                break
        if name == "timeout":
            i += 1  # the duration
        words = words[i:]
    return words


def _rm_problem(args: list[str]) -> str | None:
    recursive = force = False
    targets: list[str] = []
    options_done = False
    for arg in args:
        if not options_done and arg == "--":
            options_done = True
        elif not options_done and arg.startswith("--"):
            recursive |= arg == "--recursive"
            force |= arg == "--force"
        elif not options_done and arg.startswith("-") and len(arg) > 1:
            recursive |= "r" in arg or "R" in arg
            force |= "f" in arg
        else:
            targets.append(arg)
    if not recursive:
        return None
    for target in targets:
        normal = target.rstrip("/") or "/"
        if target in _DANGEROUS_RM_TARGETS or normal in _DANGEROUS_RM_TARGETS:
            flags = "-rf" if force else "-r"
            return (
                f"Refused: `rm {flags} {target}` would delete "
                + (
                    "the repository's history"
                    if ".git" in target
                    else "everything under it"
                    if target not in ("*", "./*", ".*", "./.*", ".", "./")
                    else "every file in the working directory"
                )
                + ". Delete specific paths by name instead (e.g. rm -r build/), "
                "and never .git, ~ or /."
            )
    return None


def _git_problem(args: list[str]) -> str | None:
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in ("-C", "-c", "--git-dir", "--work-tree", "--namespace") else 1
    if i >= len(args):
        return None
    sub, rest = args[i], args[i + 1 :]
    if sub == "add":
        for arg in rest:
            if arg in ("-A", "--all", ".", "./", ":/", "*", "--no-ignore-removal") or (
                arg.startswith("-") and not arg.startswith("--") and "A" in arg
            ):
                return (
                    f"Refused: `git add {arg}` stages everything, including files that "
                    "must not be committed. Stage files by name: git add path/to/file"
                )
    if sub == "push":
        for arg in rest:
            forced = arg == "--force" or (
                arg.startswith("-") and not arg.startswith("--") and "f" in arg
            )
            if forced or (arg.startswith("+") and len(arg) > 1):
                return (
                    f"Refused: `git push {arg}` rewrites the remote's history and can "
                    "destroy other people's work. Use git push --force-with-lease if a "
                    "rewrite is really intended, or push normally."
                )
    return None


def _check_words(words: list[str], depth: int) -> str | None:
    words = _unwrap(words)
    if not words:
        return None
    name, args = words[0].rsplit("/", 1)[-1], words[1:]
    if name == "rm":
        return _rm_problem(args)
    if name == "git":
        return _git_problem(args)
    if name in _SHELLS and depth < _MAX_DEPTH:
        for i, arg in enumerate(args):
            if (
                arg.startswith("-")
                and "c" in arg
                and not arg.startswith("--")
                and i + 1 < len(args)
            ):
                return _check(args[i + 1], depth + 1)
    if name == "eval" and depth < _MAX_DEPTH:
        return _check(" ".join(args), depth + 1)
    return None


def _check(command: str, depth: int) -> str | None:
    tree = _PARSER.parse(command.encode("utf-8", "surrogatepass"))
    for words in _commands(tree.root_node):
        problem = _check_words(words, depth)
        if problem:
            return problem
    return None


def check_command(command: str) -> str | None:
    """Why `command` must not run, as a message for the model, or None if it may."""
    return _check(command, 0)
