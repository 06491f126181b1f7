"""What the walk knows: a word after expansion (`Val`), the shell state it tracks
(`Env`), and the two verdicts it raises (`Refused`, `TooDynamic`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from tree_sitter import Node

_MAX_DEPTH = 24  # nested shells, evals, functions and aliases followed
MAX_WORDS = 512  # brace expansion and loop values considered per word
MAX_STEPS = 50_000  # tree nodes and commands visited per check (about 0.5 s at worst)
UNKNOWN = "\0"  # stands for text only known at run time
# When the working directory is not given, it is a deep path of unknowable
# names: its parents are then recognisable without knowing them.
FAKE_CWD = "/\x01cwd1/\x01cwd2/\x01cwd3/\x01cwd4/\x01cwd5/\x01cwd6/\x01cwd7/\x01cwd8"
GLOB_CHARS = frozenset("*?[")


class Refused(Exception):
    """Raised inside the interpreter with the message for the model."""


class TooDynamic(Exception):
    """Raised when what would run cannot be known; carries what is unknown."""


class TooMany(TooDynamic):
    """A brace expansion too large to follow word by word."""


@dataclass(frozen=True)
class Val:
    """A word after expansion: its text, which characters are live globs, what is unknown."""

    text: str
    globs: frozenset[int] = frozenset()  # indexes of unquoted * ? [ in text
    unknown: bool = False  # holds text only known at run time (UNKNOWN marks where)
    deferred: bool = False  # unknown only as a function parameter, judged at each call
    temp: bool = False  # a fresh path from mktemp
    found: str | None = None  # a path find/xargs produce: "safe" or why it is not
    script: bool = False  # a <(…) path: its text is what reading the file gives

    @property
    def known(self) -> bool:
        return not self.unknown

    def shown(self, home: str, cwd: str = FAKE_CWD) -> str:
        """The word as the model can read it: ~ for home, . for the working directory."""
        text = self.text.replace(UNKNOWN, "…")
        if text == cwd or text.startswith(cwd + "/"):
            return "." + text[len(cwd) :]
        if home and (text == home or text.startswith(home + "/")):
            return "~" + text[len(home) :]
        return text


def literal_val(text: str) -> Val:
    return Val(text)


UNKNOWN_VAL = Val(UNKNOWN, unknown=True)


@dataclass
class Atom:
    """One character of a word being expanded, or one unknown piece."""

    char: str
    quoted: bool = False  # quoted or escaped: never a glob, brace or split point
    split: bool = False  # came from an unquoted expansion: subject to word splitting
    unknown: bool = False
    deferred: bool = False
    temp: bool = False
    found: str | None = None
    brk: bool = False  # a word boundary "$@" keeps between parameters


@dataclass
class Env:
    """What the interpreter knows at a point of the script."""

    cwd: str
    home: str
    vars: dict[str, Val | None] = field(default_factory=dict)  # None: unknown
    funcs: dict[str, tuple[Node, bytes]] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    git_aliases: dict[str, str | None] = field(default_factory=dict)
    positional: list[Val] | None = field(default_factory=list)  # None: unknown
    arg0: Val = field(default_factory=lambda: Val("bash"))
    files: dict[str, Val | None] = field(default_factory=dict)  # written by this command
    deferred: bool = False
    depth: int = 0
    via: tuple[str, ...] = ()

    def child(self, via: str, **changes: object) -> Env:
        """A copy for a nested scope; `via` names it in messages ("" names nothing)."""
        if self.depth + 1 > _MAX_DEPTH:
            raise TooDynamic(f"it nests commands more than {_MAX_DEPTH} levels deep")
        new = replace(self, depth=self.depth + 1, via=(*self.via, via) if via else self.via)
        new.vars = dict(self.vars)
        new.funcs = dict(self.funcs)
        new.aliases = dict(self.aliases)
        new.git_aliases = dict(self.git_aliases)
        new.files = self.files  # one filesystem
        for key, value in changes.items():
            setattr(new, key, value)
        return new


def join_unknown(values: Sequence[Val]) -> Val:
    return Val(
        " ".join(v.text for v in values),
        unknown=True,
        deferred=all(v.deferred or v.known for v in values),
    )


def substitute(word: Val, token: str, value: Val) -> Val:
    if token not in word.text:
        return word
    if word.text == token:
        return value
    text = word.text.replace(token, value.text)
    return Val(text, frozenset(), value.unknown or word.unknown, value.deferred, value.temp,
               value.found)  # fmt: skip


def join_words(values: Sequence[Val], sep: str) -> Val:
    text = sep.join(v.text for v in values)
    unknown = any(v.unknown for v in values)
    deferred = unknown and all(v.deferred for v in values if v.unknown)
    return Val(text, unknown=unknown, deferred=deferred)


def first_line(exc: BaseException) -> str:
    return str(exc).split(". ")[0].removeprefix("Refused: ")


EXTGLOB = re.compile(r"([@!+*?])\(([^()]*)\)")
