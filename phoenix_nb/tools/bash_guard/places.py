"""Which paths a command must not delete or move away, after normalising them:
/, top-level directories, homes and their parents, the working directory and its
parents, .git, and globs or unknown words that can reach those."""

from __future__ import annotations

import contextlib
import fnmatch
import posixpath
import pwd
import re
from collections.abc import Sequence

from phoenix_nb.tools.bash_guard.values import EXTGLOB, GLOB_CHARS, UNKNOWN, Val

REASONS = {
    "root": "the whole filesystem (/)",
    "top": "a top-level system directory",
    "home": "a home directory",
    "above-home": "a directory that holds home directories",
    "cwd": "the working directory",
    "above-cwd": "a parent of the working directory",
    "git": "the repository's history (.git)",
    "unknown": "a path only known when the command runs",
    "maybe-cwd": "what may be the working directory (its name is not known to the check)",
}


def is_pure_wildcard(pattern: str) -> bool:
    """A glob component that matches (nearly) any name: *, .*, ?*, **, [!x]* …"""
    stripped = re.sub(r"\[[^\]]*\]", "?", pattern)
    stripped = re.sub(r"[@!+*?]\(([^)]*)\)", "*", stripped)
    return bool(stripped) and set(stripped) <= set("*?.") and any(c in stripped for c in "*?")


def glob_can_match(pattern: str, name: str) -> bool:
    """Whether a bash glob component can match `name` (dot files only by a literal dot)."""
    if name.startswith(".") and not (pattern.startswith(".") or pattern.startswith("[")):
        return False
    translated = re.sub(r"[@!+*?]\(([^)]*)\)", "*", pattern)
    return fnmatch.fnmatchcase(name, translated) or fnmatch.fnmatchcase(
        name, translated.replace("[!", "[^")
    )


class Places:
    """Where the protected places are, for one check."""

    def __init__(self, cwd: str, home: str, also: Sequence[str] = ()) -> None:
        self.cwd = posixpath.normpath(cwd)
        self.also = tuple(posixpath.normpath(a) for a in also)  # more working directories
        self.here = self.cwd  # where relative paths start (moves with `cd`)
        self.home = posixpath.normpath(home) if home else ""
        self.homes = all_homes(self.home)
        self.unknown_dirs: set[str] = set()  # where a `cd $X` went

    def judge(self, path: str) -> str | None:
        """Why deleting this absolute, normalised path recursively is refused."""
        if path == "/":
            return "root"
        parts = [p for p in path.split("/") if p]
        if ".git" in parts:
            return "git"
        if path in self.homes:
            return "home"
        if any(h.startswith(path + "/") for h in self.homes):
            return "above-home"
        if path == self.cwd:
            return "cwd"
        if self.cwd.startswith(path + "/"):
            return "above-cwd"
        if path in self.also:
            return "cwd"
        if any(a.startswith(path + "/") for a in self.also):
            return "above-cwd"
        if any(d == path or d.startswith(path + "/") for d in self.unknown_dirs):
            return "unknown"
        parent = posixpath.dirname(path)
        if (
            "\x01" in self.cwd
            and "\x01" not in posixpath.basename(path)
            and self.cwd.startswith(parent + "/")
        ):
            return "maybe-cwd"  # ../name, or cd .. && rm -r name: name may be the cwd
        if len(parts) == 1:
            return "top"
        return None

    def absolute(self, text: str) -> str:
        if text == "~" or text.startswith("~/"):
            # A literal ~ (quoted, or from a variable) names a file "~" to bash;
            # nobody means that, and a reader takes it for home: treat it as home.
            text = self.home + text[1:]
        joined = text if text.startswith("/") else posixpath.join(self.here, text)
        normal = posixpath.normpath(joined)
        return "/" + normal.lstrip("/")

    def _below(self, directory: str) -> list[str]:
        """Names in `directory` that lead to a protected place (cwd, a home)."""
        prefix = directory.rstrip("/") + "/"
        return [
            place[len(prefix) :].split("/")[0]
            for place in (self.cwd, *self.homes)
            if place.startswith(prefix)
        ]

    def judge_glob(self, val: Val) -> str | None:
        """Walk the components; a glob is judged against what its directory holds."""
        text = val.text
        base = "/" if text.startswith("/") else self.here
        components = text.split("/")
        offset = 0
        for index, component in enumerate(components):
            start = offset
            offset += len(component) + 1
            if not component:
                continue
            if not any(start + k in val.globs for k in range(len(component))):
                base = self.absolute(posixpath.join(base, component))
                if component == ".git":
                    return "git"
                continue
            if glob_can_match(component, ".git"):
                return "git"
            if base == "/":
                return "root"
            why = self.judge(base)
            if why in ("home", "cwd", "unknown") and is_pure_wildcard(component):
                return why
            for name in self._below(base):
                if "\x01" in name or glob_can_match(component, name):
                    return why or "above-cwd"
            rest = components[index + 1 :]
            if ".git" in rest:
                return "git"
            if ".." in rest:
                return "unknown"
            return None
        return self.judge(base)

    def target(self, val: Val) -> str | None:
        """Why a recursive delete of this word is refused, or None."""
        if val.found is not None:
            return None if val.found == "safe" else val.found
        if val.script:
            return None
        if val.unknown:
            if val.deferred or val.temp:
                return None
            return self._unknown(val)
        group = EXTGLOB.search(val.text)
        if group is not None:  # @(a|b), !(x) … (shopt -s extglob): judge each alternative
            choices = ["*"] if group.group(1) == "!" else group.group(2).split("|")
            for choice in choices:
                text = val.text[: group.start()] + choice + val.text[group.end() :]
                live = frozenset(i for i, ch in enumerate(text) if ch in GLOB_CHARS)
                why = self.target(Val(text, live))
                if why:
                    return why
        if val.globs:
            return self.judge_glob(val)
        if not val.text:
            return None
        return self.judge(self.absolute(val.text))

    def _unknown(self, val: Val) -> str | None:
        """A path with a run-time piece: allowed when a named sub-path follows it,
        or when it is a name inside a directory that is not protected."""
        text = val.text
        parts = text.split("/")
        if ".git" in parts:
            return "git"
        if ".." in parts:
            return "unknown"
        tail = [p for p in text[text.rfind(UNKNOWN) + 1 :].split("/") if p]
        if tail and not all(is_pure_wildcard(p) for p in tail):
            return None  # $DIR/build: a named path below whatever $DIR is
        head = text[: text.find(UNKNOWN)]
        if "/" in head:
            directory = self.absolute(head.rsplit("/", 1)[0] or "/")
            return "unknown" if self.judge(directory) else None
        if head:
            return None  # build-$X: a name in the working directory
        return "unknown"


def home_of(user: str) -> str | None:
    try:
        return pwd.getpwnam(user).pw_dir
    except (KeyError, ValueError):
        return None


def all_homes(own: str) -> frozenset[str]:
    homes = {own, "/root"}
    with contextlib.suppress(OSError):  # no passwd database: the known homes only
        homes.update(entry.pw_dir for entry in pwd.getpwall())
    return frozenset(posixpath.normpath(h) for h in homes if h and h.startswith("/"))
