"""Refuse catastrophic commands before anything runs (REQ-BASH-007): a guard rail.

Checked in both modes, with or without the kernel sandbox (REQ-BASH-009): in
Unrestricted mode nothing else stands between the model and ``rm -rf ~``.
This is a guard rail against mistakes and against spellings that slip past a
reader, **not** a security boundary: the kernel sandbox is the boundary in
Restricted mode, and a determined program (a Python script, a Makefile) can
always do what bash text does not show.

What it refuses:

* recursive deletes (``rm -r``, ``find … -delete`` or ``-exec rm``, ``rsync
  --delete`` / ``--remove-source-files``, ``mv`` away) of ``/`` or a
  top-level directory, any home directory (``~``, ``~user``, ``$HOME`` …) or
  a parent of one, the working directory or a parent of it, anything in
  ``.git``, or a glob or brace that can match those;
* ``git add`` / ``git stage`` of everything (``-A``, ``--all`` and its
  abbreviations, ``.``, ``:/``, ``*``, the working directory by any name);
* ``git push`` that overwrites or deletes remote history (``--force`` and
  abbreviations, ``-f``, ``+ref``, ``:ref``, ``--delete``/``-d``,
  ``--mirror``, ``--prune``, and the same through ``git -c`` config);
* anything too dynamic to judge that could be one of these (``eval`` of
  computed text, ``curl … | sh``, a command name or script that only exists
  at run time): refused with why and how to write it plainly.

How: the command is parsed with tree-sitter-bash (a real bash grammar) and
then *interpreted* far enough to see what bash will run. Each word is
expanded the way bash expands it — quote and escape removal, ANSI-C
``$'…'``, brace expansion, ``~``/``~user``, ``$HOME``/``${HOME…}``,
``$PWD``/``$(pwd)``, variables assigned earlier in the same command, word
splitting of unquoted expansions — and each path is normalised (``..``,
``//``, trailing ``/``) before it is judged. Commands are followed wherever
they go: wrappers (``sudo``, ``env``, ``nice``, ``timeout``, ``command``,
``exec`` …), aliases, functions (checked again with the arguments of each
call), ``for`` loops, ``bash -c`` / ``sh -c`` / ``su -c`` / ``watch`` /
``trap`` / ``script -c`` / ``ssh`` strings to any depth (with ``$0``,
``$1``… bound), ``eval``, here-strings, here-documents, pipes (through
``tee``/``cat``) and process substitutions into a shell, ``/dev/stdin``,
scripts written earlier in the same command, ``xargs`` (with what the
producer writes), ``find -exec``, ``cd``, ``git -c alias.*``, ``git config
alias.*`` and ``GIT_CONFIG_KEY_n``; code given to python/perl/ruby/node that
hands a string to a shell or deletes a tree is checked by a heuristic.
Where a target cannot be known, the check denies; the work per check is
bounded (a loop of plain names takes one pass, a huge brace is one unknown
word, a step budget ends the rest).
Regexes over the raw text would either miss ``r\\m -rf ~`` or refuse
``echo "rm -rf /"``.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import posixpath
import pwd
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

__all__ = ["check_command", "expand_word"]

_PARSER = Parser(Language(tree_sitter_bash.language()))
_MAX_DEPTH = 24  # nested shells, evals, functions and aliases followed
_MAX_WORDS = 512  # brace expansion and loop values considered per word
_MAX_STEPS = 50_000  # tree nodes and commands visited per check (about 0.5 s at worst)
_UNKNOWN = "\0"  # stands for text only known at run time
# When the working directory is not given, it is a deep path of unknowable
# names: its parents are then recognisable without knowing them.
_FAKE_CWD = "/\x01cwd1/\x01cwd2/\x01cwd3/\x01cwd4/\x01cwd5/\x01cwd6/\x01cwd7/\x01cwd8"
_GLOB_CHARS = frozenset("*?[")
_EXTGLOB = re.compile(r"([@!+*?])\(([^()]*)\)")
_INTERPRETER = re.compile(r"python[\d.]*|pypy[\d.]*|perl|ruby|node(js)?|php[\d.]*|deno|bun")
_STRING_LITERAL = re.compile(r"'((?:\\.|[^'\\\n])*)'|\"((?:\\.|[^\"\\\n])*)\"")
_SHELL_API = re.compile(
    r"os\.system|os\.popen|subprocess|\bsystem\s*\(|\bexec[a-z]*\s*\(|child_process|"
    r"execSync|spawnSync|shell_exec|passthru|popen|`"
)
_TREE_DELETE = re.compile(r"rmtree|rm_rf|\brm_r\b|rimraf|\brmSync\b|\bfs\.rm\b|remove_tree|rm\(")
_HOME_EXPR = re.compile(
    r"expanduser|Path\.home|homedir|ENV\[.HOME.\]|environ\[.HOME.\]|getenv\(.HOME."
)
_STDIN_PATHS = frozenset({"/dev/stdin", "/dev/fd/0", "/proc/self/fd/0", "-"})
# Names a same-named function must not hide: the plain command is judged too.
_DANGEROUS_NAMES = frozenset({"rm", "git", "find", "rsync", "xargs", "eval", "bash", "sh"})
_SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "rbash"})


class _Refused(Exception):
    """Raised inside the interpreter with the message for the model."""


class _TooDynamic(Exception):
    """Raised when what would run cannot be known; carries what is unknown."""


class _TooMany(_TooDynamic):
    """A brace expansion too large to follow word by word."""


# ----------------------------------------------------------------------- values


@dataclass(frozen=True)
class Val:
    """A word after expansion: its text, which characters are live globs, what is unknown."""

    text: str
    globs: frozenset[int] = frozenset()  # indexes of unquoted * ? [ in text
    unknown: bool = False  # holds text only known at run time (_UNKNOWN marks where)
    deferred: bool = False  # unknown only as a function parameter, judged at each call
    temp: bool = False  # a fresh path from mktemp
    found: str | None = None  # a path find/xargs produce: "safe" or why it is not
    script: bool = False  # a <(…) path: its text is what reading the file gives

    @property
    def known(self) -> bool:
        return not self.unknown

    def shown(self, home: str, cwd: str = _FAKE_CWD) -> str:
        """The word as the model can read it: ~ for home, . for the working directory."""
        text = self.text.replace(_UNKNOWN, "…")
        if text == cwd or text.startswith(cwd + "/"):
            return "." + text[len(cwd) :]
        if home and (text == home or text.startswith(home + "/")):
            return "~" + text[len(home) :]
        return text


def _lit(text: str) -> Val:
    return Val(text)


_UNKNOWN_VAL = Val(_UNKNOWN, unknown=True)


@dataclass
class _Atom:
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
            raise _TooDynamic(f"it nests commands more than {_MAX_DEPTH} levels deep")
        new = replace(self, depth=self.depth + 1, via=(*self.via, via) if via else self.via)
        new.vars = dict(self.vars)
        new.funcs = dict(self.funcs)
        new.aliases = dict(self.aliases)
        new.git_aliases = dict(self.git_aliases)
        new.files = self.files  # one filesystem
        for key, value in changes.items():
            setattr(new, key, value)
        return new


# ------------------------------------------------------------ word expansion


def _ansi_c(body: str) -> str:
    """The value of $'…' (bash's ANSI-C quoting)."""
    simple = {
        "a": "\a",
        "b": "\b",
        "e": "\x1b",
        "E": "\x1b",
        "f": "\f",
        "n": "\n",
        "r": "\r",
        "t": "\t",
        "v": "\v",
        "\\": "\\",
        "'": "'",
        '"': '"',
        "?": "?",
    }
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\" or i + 1 >= len(body):
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in simple:
            out.append(simple[nxt])
            i += 2
        elif nxt in "01234567":
            digits = re.match(r"[0-7]{1,3}", body[i + 1 :])
            assert digits is not None
            out.append(chr(int(digits.group(), 8) & 0xFF))
            i += 1 + len(digits.group())
        elif nxt in "xuU":
            limit = {"x": 2, "u": 4, "U": 8}[nxt]
            digits = re.match(f"[0-9A-Fa-f]{{1,{limit}}}", body[i + 2 :])
            if digits:
                out.append(chr(min(int(digits.group(), 16), 0x10FFFF)))
                i += 2 + len(digits.group())
            else:
                out.append("\\" + nxt)
                i += 2
        elif nxt == "c" and i + 2 < len(body):
            out.append(chr(ord(body[i + 2]) & 0x1F))
            i += 3
        else:
            out.append("\\" + nxt)
            i += 2
    return "".join(out)


def _matching(text: str, start: int, open_: str, close: str) -> int:
    """Index just past the `close` matching text[start] == open_, quote-aware."""
    depth = 0
    i = start
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "'" and open_ != "{":
            end = text.find("'", i + 1)
            i = len(text) if end < 0 else end + 1
            continue
        if ch == '"':
            j = i + 1
            while j < len(text) and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if ch == open_:
            depth += 1
        elif ch == close:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return len(text)


class _Expander:
    """Expands one word's source text into atoms, then into words."""

    def __init__(self, env: Env, checker: _Interpreter) -> None:
        self.env = env
        self.checker = checker

    # -- parameters and substitutions ------------------------------------------------
    def _var(self, name: str) -> Val | None:
        env = self.env
        if name.isdigit():
            index = int(name)
            if index == 0:
                return env.arg0
            if env.positional is None:
                return None
            return env.positional[index - 1] if index <= len(env.positional) else _lit("")
        if name in ("@", "*"):
            if env.positional is None:
                return None
            return (
                _lit(" ".join(v.text for v in env.positional))
                if all(v.known for v in env.positional)
                else _join_unknown(env.positional)
            )
        if name == "#":
            return None if env.positional is None else _lit(str(len(env.positional)))
        if name in env.vars:
            return env.vars[name]
        if name == "HOME":
            return _lit(env.home)
        if name == "PWD":
            return _lit(env.cwd)
        return None

    def _param_atoms(self, name: str, quoted: bool) -> list[_Atom]:
        """$name; "$@" is one word per positional parameter even when quoted."""
        positional = self.env.positional
        if name != "@" or positional is None:
            return _value_atoms(self._var(name), quoted)
        atoms: list[_Atom] = []
        for index, value in enumerate(positional):
            if index:
                atoms.append(_Atom("", brk=True))  # a word boundary bash keeps
            atoms.append(_Atom("", quoted=True))
            atoms.extend(_value_atoms(value, quoted))
        return atoms

    def _param(self, body: str) -> Val | None:
        """${…}: the usual operators on a known value; anything else stays unknown."""
        if body.startswith("#") and len(body) > 1:
            return None  # length
        if body.startswith("!"):
            return None  # indirection
        name_match = re.match(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-]", body)
        if not name_match:
            return None
        name, rest = name_match.group(), body[name_match.end() :]
        value = self._var(name)
        if not rest:
            return value
        op = re.match(r":?[-=?+]", rest)
        if op:
            word = rest[op.end() :]
            colon = op.group().startswith(":")
            kind = op.group()[-1]
            alternative = self._expand_text(word, quoted=True)  # its $(…) are checked too
            if value is None:
                return None
            is_set = value.unknown or bool(value.text) or not colon
            if kind in "-=":
                return value if is_set else alternative
            if kind == "?":
                return value
            return alternative if is_set else _lit("")
        if value is None:
            return None
        if re.match(r"(%%?|##?)", rest):
            # Trimming a suffix or prefix (${HOME%/}): the result is still
            # rooted where the value is, so keep the value when it is a path.
            pattern = rest.lstrip("%#")
            if value.known and rest[0] == "%" and value.text.endswith(pattern.rstrip("*")):
                trimmed = value.text[: len(value.text) - len(pattern.rstrip("*"))]
                return _lit(trimmed or value.text) if pattern else value
            return replace(value, unknown=True) if rest[0] == "#" else value
        return replace(value, unknown=True)  # substrings, replacements, case changes

    def _substitution(self, inner: str) -> Val | None:
        """$(…) / `…`: pwd, echo, printf and mktemp are known; the rest is not."""
        self.checker.check_script(inner, self.env.child("$(…)"))
        words = _simple_words(inner, self.env, self.checker)
        if words is None or not words:
            return None
        name = posixpath.basename(words[0].text)
        if name == "pwd":
            return _lit(self.env.cwd)
        if name in ("echo", "printf"):
            out = _echo_output(name, words[1:])
            return None if out is None else _lit(out.rstrip("\n"))
        if name == "mktemp":
            return Val(_UNKNOWN, unknown=True, temp=True)
        if name == "basename" and len(words) > 1 and words[1].known:
            return _lit(posixpath.basename(words[1].text.rstrip("/")))
        return None

    # -- the lexer ------------------------------------------------------------------
    def atoms(self, src: str, *, quoted: bool = False) -> list[_Atom]:
        out: list[_Atom] = []
        i = 0
        n = len(src)
        while i < n:
            ch = src[i]
            if ch == "\\":
                if i + 1 < n:
                    nxt = src[i + 1]
                    if nxt == "\n":
                        pass  # line continuation
                    elif quoted and nxt not in '$`"\\':
                        out.append(_Atom("\\", quoted=True))
                        out.append(_Atom(nxt, quoted=True))
                    else:
                        out.append(_Atom(nxt, quoted=True))
                i += 2
                continue
            if ch == "'" and not quoted:
                end = src.find("'", i + 1)
                end = n if end < 0 else end
                out.append(_Atom("", quoted=True))  # "" is still a word
                out.extend(_Atom(c, quoted=True) for c in src[i + 1 : end])
                i = end + 1
                continue
            if ch == '"' and not quoted:
                j = i + 1
                while j < n and src[j] != '"':
                    if src[j] == "\\":
                        j += 2
                    elif src.startswith("$(", j):
                        j = _matching(src, j + 1, "(", ")")
                    elif src.startswith("${", j):
                        j = _matching(src, j + 1, "{", "}")
                    elif src[j] == "`":
                        end = src.find("`", j + 1)
                        j = n if end < 0 else end + 1
                    else:
                        j += 1
                out.append(_Atom("", quoted=True))
                out.extend(self.atoms(src[i + 1 : j], quoted=True))
                i = j + 1
                continue
            if ch == "$" and i + 1 < n:
                nxt = src[i + 1]
                if nxt == "'" and not quoted:
                    end = i + 2
                    while end < n and src[end] != "'":
                        end += 2 if src[end] == "\\" else 1
                    out.append(_Atom("", quoted=True))
                    out.extend(_Atom(c, quoted=True) for c in _ansi_c(src[i + 2 : end]))
                    i = end + 1
                    continue
                if nxt == '"' and not quoted:
                    i += 1  # $"…" is a translated "…"
                    continue
                if src.startswith("$((", i):
                    end = _matching(src, i + 1, "(", ")")
                    out.append(_Atom(_UNKNOWN, quoted=quoted, split=not quoted, unknown=True))
                    i = end
                    continue
                if nxt == "(":
                    end = _matching(src, i + 1, "(", ")")
                    value = self._substitution(src[i + 2 : end - 1])
                    out.extend(_value_atoms(value, quoted))
                    i = end
                    continue
                if nxt == "{":
                    end = _matching(src, i + 1, "{", "}")
                    body = src[i + 2 : end - 1]
                    if body == "@":
                        out.extend(self._param_atoms("@", quoted))
                    else:
                        out.extend(_value_atoms(self._param(body), quoted))
                    i = end
                    continue
                name = re.match(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]|[@*#?$!-]", src[i + 1 :])
                if name:
                    out.extend(self._param_atoms(name.group(), quoted))
                    i += 1 + len(name.group())
                    continue
            if ch == "`":
                end = src.find("`", i + 1)
                end = n if end < 0 else end
                inner = src[i + 1 : end].replace("\\`", "`").replace("\\\\", "\\")
                out.extend(_value_atoms(self._substitution(inner), quoted))
                i = end + 1
                continue
            out.append(_Atom(ch, quoted=quoted))
            i += 1
        return out

    def _expand_text(self, src: str, *, quoted: bool) -> Val:
        return _atoms_to_val(self.atoms(src, quoted=quoted))

    def words(self, src: str) -> list[Val]:
        """Every word bash makes of one source word (braces, tilde, splitting)."""
        results: list[Val] = []
        ifs = self.env.vars.get("IFS", _lit(" \t\n"))
        separators = " \t\n" if ifs is None or ifs.unknown else ifs.text
        atoms_of_word = self.atoms(src)  # substitutions inside are checked here
        try:
            expanded = _brace_expand(atoms_of_word)
        except _TooMany:
            return [_UNKNOWN_VAL]  # {1..100000}: judged as a word only known at run time
        for atoms in expanded:
            atoms = self._tilde(atoms)
            if (ifs is None or ifs.unknown) and any(a.split and not a.brk for a in atoms):
                atoms = [_Atom(_UNKNOWN, unknown=True)]  # IFS only known at run time
            for piece in _split(atoms, separators):
                results.append(_atoms_to_val(piece))
                if len(results) > _MAX_WORDS:
                    return [_UNKNOWN_VAL]
        return results

    def _tilde(self, atoms: list[_Atom]) -> list[_Atom]:
        if not atoms or atoms[0].char != "~" or atoms[0].quoted or atoms[0].split:
            return atoms
        end = 1
        while end < len(atoms) and atoms[end].char != "/" and not atoms[end].quoted:
            end += 1
        if end < len(atoms) and atoms[end].char != "/":
            return atoms  # a quoted character in the user name: no expansion
        user = "".join(a.char for a in atoms[1:end])
        if not user:
            assigned = self.env.vars.get("HOME", _lit(self.env.home))
            if assigned is None or assigned.unknown:
                return [_Atom(_UNKNOWN, unknown=True), *atoms[end:]]
            home = assigned.text
        elif user == "+":
            home = self.env.cwd
        elif user == "-":
            return [_Atom(_UNKNOWN, unknown=True), *atoms[end:]]
        else:
            found = _home_of(user)
            if found is None:
                return atoms
            home = found
        return [_Atom(c, quoted=True) for c in home] + atoms[end:]


def _join_unknown(values: Sequence[Val]) -> Val:
    return Val(
        " ".join(v.text for v in values),
        unknown=True,
        deferred=all(v.deferred or v.known for v in values),
    )


def _value_atoms(value: Val | None, quoted: bool) -> list[_Atom]:
    if value is None:
        return [_Atom(_UNKNOWN, quoted=quoted, split=not quoted, unknown=True)]
    if value.unknown and not value.text.strip(_UNKNOWN):
        return [
            _Atom(
                _UNKNOWN,
                quoted=quoted,
                split=not quoted,
                unknown=True,
                deferred=value.deferred,
                temp=value.temp,
                found=value.found,
            )
        ]
    atoms = []
    for ch in value.text:
        atoms.append(
            _Atom(
                ch,
                quoted=quoted,
                split=not quoted,
                unknown=ch == _UNKNOWN,
                deferred=value.deferred,
                temp=value.temp,
                found=value.found,
            )
        )
    return atoms


def _atoms_to_val(atoms: list[_Atom]) -> Val:
    text = "".join(a.char for a in atoms)
    globs: set[int] = set()
    offset = 0
    for atom in atoms:  # offsets in text: empty placeholders take no room
        if atom.char in _GLOB_CHARS and not atom.quoted and not atom.unknown:
            globs.add(offset)
        offset += len(atom.char)
    unknown = any(a.unknown for a in atoms)
    deferred = unknown and all(a.deferred for a in atoms if a.unknown)
    found = next((a.found for a in atoms if a.found is not None), None)
    temp = any(a.temp for a in atoms)
    return Val(text, frozenset(globs), unknown, deferred, temp, found)


def _split(atoms: list[_Atom], separators: str = " \t\n") -> list[list[_Atom]]:
    """Word splitting on $IFS: only characters from unquoted expansions split."""
    words: list[list[_Atom]] = []
    current: list[_Atom] = []
    for atom in atoms:
        if atom.brk or (atom.split and atom.char and atom.char in separators):
            if current:
                words.append(current)
            current = []
        else:
            current.append(atom)
    if current:
        words.append(current)
    return words


def _brace_expand(atoms: list[_Atom]) -> list[list[_Atom]]:
    """Bash brace expansion over unquoted braces: {a,b}, {1..3}, nested."""
    depth = 0
    start = -1
    for i, atom in enumerate(atoms):
        if atom.quoted or atom.split or atom.unknown:
            continue
        if atom.char == "{":
            if depth == 0:
                start = i
            depth += 1
        elif atom.char == "}" and depth:
            depth -= 1
            if depth == 0:
                inner = atoms[start + 1 : i]
                options = _brace_options(inner)
                if options is None:
                    continue
                head, tail = atoms[:start], atoms[i + 1 :]
                out: list[list[_Atom]] = []
                for option in options:
                    for expanded in _brace_expand(head + option + tail):
                        out.append(expanded)
                        if len(out) > _MAX_WORDS:
                            raise _TooMany("a brace expands to too many words to check")
                return out
    return [atoms]


def _brace_options(inner: list[_Atom]) -> list[list[_Atom]] | None:
    parts: list[list[_Atom]] = [[]]
    depth = 0
    for atom in inner:
        live = not (atom.quoted or atom.split or atom.unknown)
        if live and atom.char == "{":
            depth += 1
        elif live and atom.char == "}":
            depth -= 1
        if live and atom.char == "," and depth == 0:
            parts.append([])
        else:
            parts[-1].append(atom)
    if len(parts) > 1:
        return parts
    text = "".join(a.char for a in inner)
    seq = re.fullmatch(r"(-?\d+)\.\.(-?\d+)(?:\.\.(-?\d+))?|([A-Za-z])\.\.([A-Za-z])", text)
    if not seq:
        return None
    if seq.group(4):
        lo, hi = ord(seq.group(4)), ord(seq.group(5))
        step = 1 if hi >= lo else -1
        return [[_Atom(chr(c))] for c in range(lo, hi + step, step)][:_MAX_WORDS]
    lo, hi = int(seq.group(1)), int(seq.group(2))
    step = abs(int(seq.group(3) or 1)) or 1
    step = step if hi >= lo else -step
    values = range(lo, hi + (1 if step > 0 else -1), step)
    if len(values) > _MAX_WORDS:
        raise _TooMany("a brace sequence expands to too many words to check")
    return [[_Atom(c) for c in str(v)] for v in values]


def _home_of(user: str) -> str | None:
    try:
        return pwd.getpwnam(user).pw_dir
    except (KeyError, ValueError):
        return None


def _all_homes(own: str) -> frozenset[str]:
    homes = {own, "/root"}
    with contextlib.suppress(OSError):  # no passwd database: the known homes only
        homes.update(entry.pw_dir for entry in pwd.getpwall())
    return frozenset(posixpath.normpath(h) for h in homes if h and h.startswith("/"))


def _echo_output(name: str, args: Sequence[Val]) -> str | None:
    """What echo / printf print, when their arguments are known."""
    if any(a.unknown for a in args):
        return None
    words = [a.text for a in args]
    if name == "echo":
        newline, escapes = "\n", False
        while words and re.fullmatch(r"-[neE]+", words[0]):
            newline = "" if "n" in words[0] else newline
            escapes = "e" in words[0] or escapes
            words = words[1:]
        text = " ".join(words)
        return (_ansi_c(text) if escapes else text) + newline
    if not words:
        return ""
    return _printf(words[0], words[1:])


_PRINTF_SPEC = re.compile(r"(%[-+ #0]*\d*(?:\.\d+)?[sbdiqcxXoufeEgG%])")


def _printf(fmt: str, args: list[str]) -> str:
    """printf's output: the format reused until the arguments run out."""
    pending = list(args)
    out: list[str] = []
    while True:
        consumed = False
        for piece in _PRINTF_SPEC.split(fmt):
            if not _PRINTF_SPEC.fullmatch(piece):
                out.append(_ansi_c(piece))
            elif piece == "%%":
                out.append("%")
            else:
                arg = pending.pop(0) if pending else ""
                out.append(_ansi_c(arg) if piece.endswith("b") else arg)
                consumed = True
        if not pending or not consumed:
            return "".join(out)


def _simple_words(script: str, env: Env, checker: _Interpreter) -> list[Val] | None:
    """The words of a script that is one simple command, else None."""
    tree = _PARSER.parse(script.encode("utf-8", "surrogatepass"))
    commands = [c for c in tree.root_node.children if c.type not in ("comment", ";", "\n")]
    if len(commands) != 1 or commands[0].type != "command":
        return None
    source = script.encode("utf-8", "surrogatepass")
    expander = _Expander(env, checker)
    words: list[Val] = []
    for group in _word_groups(commands[0], source):
        words.extend(expander.words(_group_src(group, source)))
    return words


def _src(node: Node, source: bytes) -> str:
    return source[node.start_byte : node.end_byte].decode("utf-8", "surrogatepass")


# Bytes between two nodes that bash reads as nothing at all: line continuations.
_NOTHING_BETWEEN = re.compile(rb"(?:\\\n)*")


def _word_groups(command: Node, source: bytes) -> list[list[Node]]:
    """The command's words as bash splits them: one list of grammar nodes per word.

    The grammar splits some single bash words in two: it reads a line
    continuation as a blank (`r\\<newline>m` is the one word `rm` to bash) and
    ends a command name at a backquote (`r`true`m` is `rm`). Nodes that touch,
    or are separated only by line continuations, are one word; judging them
    apart would judge a command bash never runs and miss the one it does.
    """
    groups: list[list[Node]] = []
    previous: Node | None = None
    for child in command.children:
        if child.type == "variable_assignment" or child.type.endswith("redirect"):
            previous = None
            continue
        glued = previous is not None and _NOTHING_BETWEEN.fullmatch(
            source[previous.end_byte : child.start_byte]
        )
        if glued:
            groups[-1].append(child)
        else:
            groups.append([child])
        previous = child
    return groups


def _group_src(group: Sequence[Node], source: bytes) -> str:
    """One bash word's source text (continuations kept: the expander drops them)."""
    return source[group[0].start_byte : group[-1].end_byte].decode("utf-8", "surrogatepass")


# ------------------------------------------------------------- judging paths


_REASONS = {
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


def _is_pure_wildcard(pattern: str) -> bool:
    """A glob component that matches (nearly) any name: *, .*, ?*, **, [!x]* …"""
    stripped = re.sub(r"\[[^\]]*\]", "?", pattern)
    stripped = re.sub(r"[@!+*?]\(([^)]*)\)", "*", stripped)
    return bool(stripped) and set(stripped) <= set("*?.") and any(c in stripped for c in "*?")


def _glob_can_match(pattern: str, name: str) -> bool:
    """Whether a bash glob component can match `name` (dot files only by a literal dot)."""
    if name.startswith(".") and not (pattern.startswith(".") or pattern.startswith("[")):
        return False
    translated = re.sub(r"[@!+*?]\(([^)]*)\)", "*", pattern)
    return fnmatch.fnmatchcase(name, translated) or fnmatch.fnmatchcase(
        name, translated.replace("[!", "[^")
    )


class _Places:
    """Where the protected places are, for one check."""

    def __init__(self, cwd: str, home: str, also: Sequence[str] = ()) -> None:
        self.cwd = posixpath.normpath(cwd)
        self.also = tuple(posixpath.normpath(a) for a in also)  # more working directories
        self.here = self.cwd  # where relative paths start (moves with `cd`)
        self.home = posixpath.normpath(home) if home else ""
        self.homes = _all_homes(self.home)
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
            if _glob_can_match(component, ".git"):
                return "git"
            if base == "/":
                return "root"
            why = self.judge(base)
            if why in ("home", "cwd", "unknown") and _is_pure_wildcard(component):
                return why
            for name in self._below(base):
                if "\x01" in name or _glob_can_match(component, name):
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
        group = _EXTGLOB.search(val.text)
        if group is not None:  # @(a|b), !(x) … (shopt -s extglob): judge each alternative
            choices = ["*"] if group.group(1) == "!" else group.group(2).split("|")
            for choice in choices:
                text = val.text[: group.start()] + choice + val.text[group.end() :]
                live = frozenset(i for i, ch in enumerate(text) if ch in _GLOB_CHARS)
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
        tail = [p for p in text[text.rfind(_UNKNOWN) + 1 :].split("/") if p]
        if tail and not all(_is_pure_wildcard(p) for p in tail):
            return None  # $DIR/build: a named path below whatever $DIR is
        head = text[: text.find(_UNKNOWN)]
        if "/" in head:
            directory = self.absolute(head.rsplit("/", 1)[0] or "/")
            return "unknown" if self.judge(directory) else None
        if head:
            return None  # build-$X: a name in the working directory
        return "unknown"


# ------------------------------------------------------------- the commands


_WRAPPERS: dict[str, frozenset[str]] = {
    # name: options that take a value
    "sudo": frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-R", "-T"}),
    "doas": frozenset({"-u", "-C"}),
    "env": frozenset({"-u", "-C", "-S", "--unset", "--chdir", "--split-string"}),
    "command": frozenset(),
    "builtin": frozenset(),
    "exec": frozenset({"-a"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "ionice": frozenset({"-c", "-n", "-p", "--class", "--classdata"}),
    "nohup": frozenset(),
    "time": frozenset({"-f", "-o", "--format", "--output"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "timeout": frozenset({"-s", "-k", "--signal", "--kill-after"}),
    "setsid": frozenset(),
    "chroot": frozenset({"--userspec", "--groups"}),
    "chrt": frozenset(),
    "taskset": frozenset(),
    "unbuffer": frozenset(),
    "fakeroot": frozenset(),
    "strace": frozenset({"-o", "-e", "-p", "-s", "-u"}),
    "ltrace": frozenset({"-o", "-e", "-p", "-s", "-u"}),
    "flock": frozenset({"-w", "-E", "--timeout", "--conflict-exit-code"}),
    "unshare": frozenset(),
    "nsenter": frozenset({"-t", "--target"}),
    "firejail": frozenset(),
    "catchsegv": frozenset(),
    "busybox": frozenset(),
    "then": frozenset(),
    "do": frozenset(),
    "!": frozenset(),
}
# After their options these take one more operand before the command.
_WRAPPER_OPERANDS = {"timeout": 1, "chroot": 1, "flock": 1, "taskset": 1, "chrt": 1}

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


def _gnu_long(arg: str, options: Sequence[str]) -> str | None:
    """GNU getopt: an exact long option, else a unique abbreviation, else None."""
    name = arg[2:].split("=", 1)[0]
    if name in options:
        return name
    candidates = [o for o in options if o.startswith(name)]
    return candidates[0] if len(candidates) == 1 else None


def _prefix_of(arg: str, *names: str) -> bool:
    """A long option that abbreviates any of `names` (ambiguous ones count: deny)."""
    name = arg[2:].split("=", 1)[0]
    return arg.startswith("--") and bool(name) and any(n.startswith(name) for n in names)


class _Interpreter:
    """Walks the tree in order, tracking what it can know, and refuses on the first problem."""

    def __init__(self, places: _Places, *, quiet: bool = False) -> None:
        self.places = places
        self.quiet = quiet  # only computing values (a producer's output): judge nothing
        self.steps = 0  # bounded: loops, calls and nesting cannot make a check run long

    def _step(self) -> None:
        self.steps += 1
        if self.steps > _MAX_STEPS:
            raise _TooDynamic("it is too large to follow step by step (loops, calls, nesting)")

    def _target(self, val: Val, env: Env) -> str | None:
        self.places.here = env.cwd
        return self.places.target(val)

    # -- entry points -------------------------------------------------------------------
    def check_script(self, script: str, env: Env) -> None:
        if self.quiet:
            return
        source = script.encode("utf-8", "surrogatepass")
        tree = _PARSER.parse(source)
        self.node(tree.root_node, source, env)

    def dynamic_script(
        self, value: Val | None, what: str, env: Env, positional: list[Val] | None = None
    ) -> None:
        """Check text that will run as a script (bash -c, eval, a pipe into sh …)."""
        if value is None or value.unknown:
            if value is not None and value.deferred:
                return
            raise _TooDynamic(f"{what} runs text that is only known when the command runs")
        inner = env.child(what) if positional is None else env.child(what, positional=positional)
        self.check_script(value.text, inner)

    # -- tree walking -------------------------------------------------------------------
    def node(self, node: Node, source: bytes, env: Env, stdin: Val | None = None) -> None:
        self._step()
        kind = node.type
        if kind == "command":
            self.command(node, source, env, stdin)
        elif kind == "pipeline":
            self.pipeline(node, source, env, stdin)
        elif kind == "redirected_statement":
            self.redirected(node, source, env, stdin)
        elif kind == "variable_assignment":
            self.assign(node, source, env)
        elif kind == "declaration_command":
            # declare -n makes a name refer to another variable: not followed
            nameref = any(
                c.type == "word" and re.fullmatch(r"[-+][a-zA-Z]*n[a-zA-Z]*", _src(c, source))
                for c in node.children
            )
            for child in node.children:
                if child.type == "variable_assignment":
                    self.assign(child, source, env)
                    name = child.child_by_field_name("name")
                    if nameref and name is not None:
                        env.vars[_src(name, source)] = None
                elif child.type == "variable_name":
                    env.vars[_src(child, source)] = None
        elif kind == "function_definition":
            self.define(node, source, env)
        elif kind == "for_statement":
            self.for_loop(node, source, env)
        elif kind in ("comment", "heredoc_body", "heredoc_start", "heredoc_end"):
            return
        else:
            for child in node.children:
                self.node(child, source, env, stdin if kind == "subshell" else None)

    def assign(self, node: Node, source: bytes, env: Env) -> None:
        name_node = node.child_by_field_name("name")
        value_node = node.child_by_field_name("value")
        if name_node is None:
            return
        name = _src(name_node, source)
        if value_node is None:
            env.vars[name] = _lit("")
            return
        if value_node.type == "array":
            env.vars[name] = None
            return
        expander = _Expander(env, self)
        atoms = expander._tilde(expander.atoms(_src(value_node, source)))
        env.vars[name] = _atoms_to_val(atoms)

    def define(self, node: Node, source: bytes, env: Env) -> None:
        name_node = node.child_by_field_name("name")
        body = node.child_by_field_name("body")
        if name_node is None or body is None:
            return
        env.funcs[_src(name_node, source)] = (body, source)
        # Judged once with unknown arguments (what it does on its own), and
        # again at every call with the arguments it gets.
        deferred = Val(_UNKNOWN, unknown=True, deferred=True)
        self.node(body, source, env.child("a function", positional=[deferred] * 9))

    def for_loop(self, node: Node, source: bytes, env: Env) -> None:
        var_node = node.child_by_field_name("variable")
        body = node.child_by_field_name("body")
        listed: list[Val] = []
        saw_in = False
        expander = _Expander(env, self)
        for child in node.children:
            if child.type == "in":
                saw_in = True
            elif saw_in and child.type not in (";", "do_group", "\n") and child != body:
                listed.extend(expander.words(_src(child, source)))
        values = listed if saw_in else env.positional  # None: unknown
        if var_node is None or body is None:
            return
        name = _src(var_node, source)
        for value in _loop_values(values) if values else [None]:
            env.vars[name] = value
            self.node(body, source, env)

    def pipeline(self, node: Node, source: bytes, env: Env, stdin: Val | None) -> None:
        self._chain([c for c in node.children if c.type not in ("|", "|&")], source, env, stdin)

    def _chain(self, parts: list[Node], source: bytes, env: Env, stdin: Val | None) -> None:
        """Each part of a pipe reads what the previous one writes (unknown unless computed)."""
        previous = stdin
        for part in parts:
            self.node(part, source, env, previous)
            previous = self._output(part, source, env, previous) or _UNKNOWN_VAL

    def redirected(self, node: Node, source: bytes, env: Env, stdin: Val | None) -> None:
        body = node.child_by_field_name("body")
        feed = stdin
        later: list[Node] = []
        for child in node.children:
            if child.type == "herestring_redirect":
                feed = self._herestring(child, source, env)
            elif child.type == "heredoc_redirect":
                feed = self._heredoc(child, source, env)
                later.extend(c for c in child.children if c.type in ("pipeline", "command"))
                for inner in child.children:
                    if inner.type == "file_redirect":
                        self.node(inner, source, env)
            elif child.type == "file_redirect":
                self.node(child, source, env)
                if any(c.type in ("<", "<&") for c in child.children):
                    feed = self._file_feed(child, source, env)
        if body is not None:
            self.node(body, source, env, feed)
            self._remember_writes(node, body, source, env, feed)
        for extra in later:
            out = self._output(body, source, env, feed) if body is not None else None
            parts = (
                [c for c in extra.children if c.type not in ("|", "|&")]
                if extra.type == "pipeline"
                else [extra]
            )
            self._chain(parts, source, env, out or _UNKNOWN_VAL)

    def _file_feed(self, redirect: Node, source: bytes, env: Env) -> Val | None:
        """`< file`: a file this command wrote is known; any other file is not read."""
        target = redirect.child_by_field_name("destination") or redirect.children[-1]
        words = _Expander(env, self).words(_src(target, source))
        if len(words) == 1 and words[0].known:
            return env.files.get(self._path_key(words[0].text, env))
        return None

    def _remember_writes(
        self, node: Node, body: Node, source: bytes, env: Env, feed: Val | None
    ) -> None:
        """`echo … > f` / `cat > f <<EOF`: remember what f holds, for `bash f` later."""
        for child in node.children:
            if child.type == "heredoc_redirect":
                child_redirects = [c for c in child.children if c.type == "file_redirect"]
            elif child.type == "file_redirect":
                child_redirects = [child]
            else:
                continue
            for redirect in child_redirects:
                ops = [c.type for c in redirect.children]
                if not any(op in (">", ">>", ">|", "&>", "&>>") for op in ops):
                    continue
                target = redirect.child_by_field_name("destination") or redirect.children[-1]
                words = _Expander(env, self).words(_src(target, source))
                if len(words) != 1 or words[0].unknown:
                    continue
                key = self._path_key(words[0].text, env)
                out = self._output(body, source, env, feed)
                before = env.files.get(key) if ">>" in ops or "&>>" in ops else _lit("")
                if out is None or before is None:
                    env.files[key] = None
                else:
                    env.files[key] = _lit(before.text + out.text)

    def _herestring(self, node: Node, source: bytes, env: Env) -> Val | None:
        word = next((c for c in node.children if c.type != "<<<"), None)
        if word is None:
            return None
        return _joined(_Expander(env, self).words(_src(word, source)), " ")

    def _heredoc(self, node: Node, source: bytes, env: Env) -> Val | None:
        start = next((c for c in node.children if c.type == "heredoc_start"), None)
        body = next((c for c in node.children if c.type == "heredoc_body"), None)
        if body is None:
            return _lit("")
        text = _src(body, source)
        delimiter = _src(start, source) if start is not None else ""
        if any(q in delimiter for q in "'\"\\"):
            return _lit(text)
        return _atoms_to_val(_Expander(env, self).atoms(text, quoted=True))

    def _output(self, node: Node | None, source: bytes, env: Env, stdin: Val | None) -> Val | None:
        """What a command writes to a pipe, when it is known (echo, printf, cat of stdin, find)."""
        while node is not None and node.type == "redirected_statement":
            node = node.child_by_field_name("body")
        if node is None or node.type != "command":
            return None
        words = self.words_of(node, source, env, check=False)
        if not words or words[0].unknown:
            return None
        name = posixpath.basename(words[0].text)
        if name in ("echo", "printf"):
            out = _echo_output(name, words[1:])
            return None if out is None else _lit(out)
        if (name == "cat" and len(words) == 1) or name == "tee":
            return stdin
        if name == "find":
            return Val(_UNKNOWN, unknown=True, found=self._find_scope(words[1:], env))
        return None

    # -- one simple command -----------------------------------------------------------
    def words_of(self, node: Node, source: bytes, env: Env, *, check: bool = True) -> list[Val]:
        """The command's words after expansion (substitutions inside are checked once)."""
        expander = _Expander(env if check else env.child("output"), self)
        if not check:
            expander.checker = _Interpreter(self.places, quiet=True)
        words: list[Val] = []
        for group in _word_groups(node, source):
            child = group[0]
            if len(group) > 1:
                if any(c.type == "process_substitution" for c in group):
                    raise _TooDynamic("a word glues a process substitution to other text")
                words.extend(expander.words(_group_src(group, source)))
            elif child.type == "process_substitution":
                inner = _src(child, source)[2:-1]
                if check:
                    self.check_script(inner, env.child("<(…)"))
                single = _single_command(inner)
                out = (
                    self._output(single, inner.encode("utf-8", "surrogatepass"), env, None)
                    if single is not None
                    else None
                )
                words.append(Val(out.text if out else _UNKNOWN, unknown=out is None or out.unknown,
                                 script=True))  # fmt: skip
            else:
                words.extend(expander.words(_src(child, source)))
        return words

    def command(self, node: Node, source: bytes, env: Env, stdin: Val | None) -> None:
        # FOO=1 cmd: FOO is for cmd's run only, set after its words are expanded.
        prefix = env
        for child in node.children:
            if child.type == "variable_assignment":
                prefix = prefix.child("") if prefix is env else prefix
                self.assign(child, source, prefix)
            elif child.type == "herestring_redirect":
                stdin = self._herestring(child, source, env)
            elif child.type.endswith("redirect"):
                self.node(child, source, env)  # $(…) in a redirection target
        if not any(c.type == "command_name" for c in node.children):
            return
        words = self.words_of(node, source, env)
        glued = node.next_sibling
        if (
            glued is not None
            and glued.type == "subshell"
            and glued.start_byte == node.end_byte
            and words
            and words[-1].text[-1:] in ("@", "!", "+", "*", "?")
        ):
            # extglob: `@(.git)` reads as a word and a subshell to the grammar
            group = _Expander(env, self).words(words[-1].text + _src(glued, source))
            words = [*words[:-1], *group]
        self.run(words, prefix, stdin)

    def run(self, words: list[Val], env: Env, stdin: Val | None, *, plain: bool = False) -> None:
        """Judge one command given its expanded words (name first).

        `plain`: reached through a wrapper (command, sudo, env …), which runs
        the program itself, never a shell function or alias of that name.
        """
        self._step()
        while words and words[0].known and not words[0].text:
            words = words[1:]  # an empty expansion as the name: the next word runs
        if not words:
            return
        head = words[0]
        if head.unknown:
            if not head.deferred:
                self.unknown_name(words, env, stdin)
            return
        name = posixpath.basename(head.text)
        args = words[1:]
        if not plain and head.text in env.aliases:
            # `bash -c` expands aliases only after `shopt -s expand_aliases`:
            # judge the alias and, below, the command itself.
            inner = env.child(f"alias {head.text}")
            expansion = inner.aliases.pop(head.text)
            self.run([*(_lit(w) for w in _shell_split(expansion)), *args], inner, stdin)
        if not plain and head.text in env.funcs:
            body, body_source = env.funcs[head.text]
            self.node(body, body_source, env.child(f"{head.text}()", positional=args), stdin)
            if name not in _DANGEROUS_NAMES:
                return  # a function of its own name: what it runs was judged
        written = env.files.get(self._path_key(head.text, env)) if "/" in head.text else None
        if written is not None:
            self.dynamic_script(written, head.text, env, args)
        if name in _WRAPPERS:
            inner = env
            if name == "env":
                for arg in args:
                    key, eq, value = arg.text.partition("=")
                    if not eq or key.startswith("-"):
                        break
                    inner = inner.child("") if inner is env else inner
                    inner.vars[key] = None if arg.unknown else _lit(value)
            self.run(self._unwrap(name, args), inner, stdin, plain=True)
        elif name in _SHELLS:
            self.shell(name, args, env, stdin)
        elif name == "eval":
            self.dynamic_script(_joined(args, " "), "eval", env)
        elif _INTERPRETER.fullmatch(name):
            self.interpreter(name, args, env, stdin)
        elif name in ("source", "."):
            self._script_file(name, args[0] if args else None, args[1:], env, stdin)
        else:
            handler = getattr(self, "cmd_" + re.sub(r"\W", "_", name), None)
            if handler is not None:
                handler(args, env, stdin)

    def _path_key(self, text: str, env: Env) -> str:
        self.places.here = env.cwd
        return self.places.absolute(text)

    def _script_file(
        self, via: str, script: Val | None, args: list[Val], env: Env, stdin: Val | None
    ) -> None:
        """A script named by path: <(…), /dev/stdin, or a file written earlier in this command."""
        if script is None:
            return
        if script.script:
            self.dynamic_script(None if script.unknown else script, f"{via} <(…)", env, args)
        elif script.known and script.text in _STDIN_PATHS:
            self.dynamic_script(stdin, f"{via} reading a script from its input", env, args)
        elif script.known and self._path_key(script.text, env) in env.files:
            self.dynamic_script(env.files[self._path_key(script.text, env)], via, env, args)

    def unknown_name(self, words: list[Val], env: Env, stdin: Val | None) -> None:
        """A command name known only at run time: refuse if it could be a dangerous one."""
        for candidate in ("rm", "git", "find", "rsync", "bash", "eval"):
            try:
                self.run([_lit(candidate), *words[1:]], env.child("a computed command"), stdin)
            except (_Refused, _TooDynamic) as exc:
                raise _TooDynamic(
                    "its command name is only known when it runs, and as "
                    f"`{candidate}` it would be refused ({_first_line(exc)})"
                ) from exc

    def _unwrap(self, name: str, args: list[Val]) -> list[Val]:
        takes_value = _WRAPPERS[name]
        i = 0
        if name == "busybox":
            return args
        while i < len(args):
            text = args[i].text
            if text == "--":
                i += 1
                break
            if name == "env":
                split = _env_split_string(args, i)
                if split is not None:
                    return split
                if "=" in text and not text.startswith("-"):
                    i += 1
                    continue
            if name == "command" and text in ("-v", "-V"):
                return []  # prints what the name is, runs nothing
            if text.startswith("-") and len(text) > 1:
                i += 2 if text in takes_value else 1
            else:
                break
        return args[i + _WRAPPER_OPERANDS.get(name, 0) :]

    # -- shells and scripts ------------------------------------------------------------
    def shell(self, name: str, args: list[Val], env: Env, stdin: Val | None) -> None:
        from_command = reads_stdin = False
        i = 0
        while i < len(args):
            arg = args[i]
            if arg.unknown:
                if arg.deferred:
                    return
                raise _TooDynamic(f"`{name}` gets options or a script only known when it runs")
            text = arg.text
            if text == "--" or text == "-":
                i += 1
                break
            if text in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
                i += 2
                continue
            if text.startswith("--"):
                i += 1
                continue
            if text.startswith(("-", "+")) and len(text) > 1:
                from_command |= "c" in text[1:] and text[0] == "-"
                reads_stdin |= "s" in text[1:] and text[0] == "-"
                i += 1
                continue
            break
        rest = args[i:]
        if from_command:
            if rest:
                inner = env.child("", arg0=rest[1]) if len(rest) > 1 else env
                self.dynamic_script(rest[0], f"{name} -c", inner, rest[2:])
            return
        if rest and not reads_stdin:
            # bash <(…), bash /dev/stdin, bash file-written-above; other files are not read
            self._script_file(name, rest[0], rest[1:], env, stdin)
            return
        if stdin is not None:
            self.dynamic_script(stdin, f"{name} reading a script from its input", env, rest)

    def _command_option(self, via: str, args: list[Val], env: Env) -> None:
        """-c CMD / -qcCMD / --command[=]CMD: CMD runs in a shell."""
        for i, arg in enumerate(args):
            text = arg.text
            if text.startswith("--command"):
                if "=" in text:
                    self.dynamic_script(replace(arg, text=text.split("=", 1)[1]), via, env)
                elif i + 1 < len(args):
                    self.dynamic_script(args[i + 1], via, env)
            elif re.fullmatch(r"-[A-Za-z]*c.*", text) and not text.startswith("--"):
                rest = text[text.index("c") + 1 :]
                if rest:
                    self.dynamic_script(replace(arg, text=rest), via, env)
                elif i + 1 < len(args):
                    self.dynamic_script(args[i + 1], via, env)

    def interpreter(self, name: str, args: list[Val], env: Env, stdin: Val | None) -> None:
        """python -c / perl -e / node -e …: shell commands and tree deletes in the code.

        A heuristic (the code is not bash): string literals handed to a
        shell-running API are judged as scripts, and a recursive delete of a
        home, / or the working directory is refused.
        """
        code: Val | None = None
        for i, arg in enumerate(args):
            if arg.text in ("-c", "-e", "-E", "-r", "-p", "--eval", "--print") and i + 1 < len(
                args
            ):
                code = args[i + 1]
                break
            if not arg.text.startswith("-") or arg.text == "-":
                if arg.text == "-" or arg.text in _STDIN_PATHS:
                    code = stdin
                break
        else:
            code = stdin if stdin is not None and not args else None
        if code is None or code.unknown:
            return
        text = code.text
        via = f"{name} code"
        literals = [a or b for a, b in _STRING_LITERAL.findall(text)]
        if _SHELL_API.search(text):
            scripts = list(literals)
            for group in re.findall(r"\[([^\[\]]*)\]", text):  # ["rm", "-rf", "/"]
                words = [a or b for a, b in _STRING_LITERAL.findall(group)]
                if words:
                    scripts.append(" ".join(shlex.quote(w) for w in words))
            for script in scripts:
                self.dynamic_script(_lit(script), via, env)
        if _TREE_DELETE.search(text):
            homeish = _HOME_EXPR.search(text)
            for literal in [*literals, *(["~"] if homeish else [])]:
                if not literal or "\n" in literal:
                    continue
                why = self._target(_lit(literal), env)
                if why in ("root", "home", "above-home", "cwd", "above-cwd", "git"):
                    self._refuse_delete(f"{name} … {literal}", why, env.child(via), "rm -r build/")

    def cmd_su(self, args: list[Val], env: Env, stdin: Val | None) -> None:
        self._command_option("su -c", args, env)

    cmd_runuser = cmd_su

    def cmd_ssh(self, args: list[Val], env: Env, stdin: Val | None) -> None:
        valued = set("bcDEeFIiJLlmOopQRSWw")
        i = 0
        while i < len(args) and args[i].text.startswith("-"):
            flags = args[i].text[1:]
            i += 2 if flags and flags[-1] in valued and len(flags) == 1 else 1
        remote = args[i + 1 :]
        if remote:
            self.dynamic_script(_joined(remote, " "), "ssh", env.child("ssh", home="~"))

    def cmd_script(self, args: list[Val], env: Env, stdin: Val | None) -> None:
        self._command_option("script -c", args, env)

    def cmd_watch(self, args: list[Val], env: Env, stdin: Val | None) -> None:
        i = 0
        while i < len(args) and args[i].text.startswith("-"):
            i += 2 if args[i].text in ("-n", "--interval", "-d", "-q") else 1
        if i < len(args):
            self.dynamic_script(_joined(args[i:], " "), "watch", env)

    def cmd_trap(self, args: list[Val], env: Env, stdin: Val | None) -> None:
        if args and not args[0].text.startswith("-"):
            self.dynamic_script(args[0], "trap", env)

    def cmd_cd(self, args: list[Val], env: Env, stdin: Val | None) -> None:
        operands = [a for a in args if not (a.known and a.text.startswith("-") and a.text != "-")]
        if not operands:
            env.cwd = env.home
        elif operands[0].unknown or operands[0].text == "-":
            unknown = f"/\x02dir{len(self.places.unknown_dirs)}"
            self.places.unknown_dirs.add(unknown)
            env.cwd = unknown
        else:
            env.cwd = self._path_key(operands[0].text, env)

    cmd_pushd = cmd_cd

    def cmd_set(self, args: list[Val], env: Env, stdin: Val | None) -> None:
        for i, arg in enumerate(args):
            if arg.text == "--" or not arg.text.startswith(("-", "+")):
                env.positional = args[i + 1 :] if arg.text == "--" else args[i:]
                return

    def cmd_shift(self, args: list[Val], env: Env, stdin: Val | None) -> None:
        count = int(args[0].text) if args and args[0].text.isdigit() else 1
        if env.positional is not None:
            env.positional = env.positional[count:]

    def cmd_read(self, args: list[Val], env: Env, stdin: Val | None) -> None:
        names = [a.text for a in args if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", a.text)]
        values = _shell_split(stdin.text) if stdin is not None and stdin.known else None
        for index, name in enumerate(names):
            if values is None or index >= len(values):
                env.vars[name] = None if values is None else _lit("")
            elif index == len(names) - 1:
                env.vars[name] = _lit(" ".join(values[index:]))
            else:
                env.vars[name] = _lit(values[index])

    def cmd_alias(self, args: list[Val], env: Env, stdin: Val | None) -> None:
        for arg in args:
            name, eq, value = arg.text.partition("=")
            if eq:
                if arg.unknown:
                    env.aliases[name] = "\0"
                    raise _TooDynamic(f"alias {name} is only known when it runs")
                env.aliases[name] = value
                self.check_script(value, env.child(f"alias {name}"))

    def cmd_xargs(self, args: list[Val], env: Env, stdin: Val | None) -> None:
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
                delimiter = _ansi_c(args[i + 1].text)
                i += 2
                continue
            elif text.startswith("-d") or text.startswith("--delimiter="):
                delimiter = _ansi_c(text[2:] if text.startswith("-d") else text.split("=", 1)[1])
            elif text in ("-a", "--arg-file") or text.startswith(("-a", "--arg-file=")):
                from_file = True
                if text in ("-a", "--arg-file"):
                    i += 1
            elif text in valued:
                i += 1
            i += 1
        command = args[i:] or [_lit("echo")]
        if from_file or stdin is None or (stdin.unknown and stdin.found is None):
            items: list[Val] = [_UNKNOWN_VAL]
        elif stdin.found is not None:
            items = [stdin]
        else:
            if delimiter:
                raw = stdin.text.split(delimiter)
            elif replace_str:
                raw = [line.strip() for line in stdin.text.split("\n")]  # -I: one item a line
            else:
                raw = _shell_split(stdin.text)
            items = [_lit(item) for item in raw if item]
            items = [_expand_literal_tilde(v, env) for v in items]
        if replace_str:
            for item in items:
                substituted = [_substitute(word, replace_str, item) for word in command]
                self.run(substituted, env.child("xargs"), None)
        else:
            self.run([*command, *items], env.child("xargs"), None)

    def cmd_parallel(self, args: list[Val], env: Env, stdin: Val | None) -> None:
        if any(a.text in (":::", "::::") for a in args):
            split = next(i for i, a in enumerate(args) if a.text in (":::", "::::"))
            command, items = args[:split], args[split + 1 :]
            if args[split].text == "::::":
                items = [_UNKNOWN_VAL]
        else:
            command, items = args, [stdin or _UNKNOWN_VAL]
        while command and command[0].text.startswith("-"):
            command = command[1:]
        for item in items:
            words = [_substitute(w, "{}", item) for w in command]
            if not any("{}" in w.text for w in command):
                words.append(item)
            self.run(words, env.child("parallel"), None)

    # -- deleting ------------------------------------------------------------------------
    def _refuse_delete(
        self, shown: str, why: str, env: Env, example: str, verb: str = "delete"
    ) -> None:
        where = f" (reached through {' → '.join(env.via)})" if env.via else ""
        if why == "unknown":
            raise _TooDynamic(
                f"`{shown}` deletes recursively a path that is only known when it runs{where}"
            )
        raise _Refused(
            f"Refused: `{shown}` would {verb} {_REASONS[why]}{where}. "
            f"{verb.capitalize()} specific paths by name instead (e.g. {example}), "
            "and never .git, ~ or /."
        )

    def cmd_rm(self, args: list[Val], env: Env, stdin: Val | None) -> None:
        recursive = force = maybe = False
        targets: list[Val] = []
        options_done = False
        for arg in args:
            text = arg.text
            if options_done or arg.script:
                targets.append(arg)
            elif arg.unknown:
                # "$FLAGS" may hold -rf; "$DIR" is a target: both are judged.
                maybe |= not arg.deferred and text.startswith(_UNKNOWN)
                targets.append(arg)
            elif text == "--":
                options_done = True
            elif text.startswith("--"):
                option = _gnu_long(text, _RM_LONG)
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
            why = self._target(target, env)
            if why and not recursive and (target.unknown or why == "unknown"):
                continue  # with unknown options, only known targets are judged
            if why:
                shown = f"rm {flags} {target.shown(self.places.home, self.places.cwd)}"
                if not recursive:
                    raise _TooDynamic(
                        f"`{shown}` gets options only known when it runs, and it names "
                        f"{_REASONS[why]}"
                    )
                self._refuse_delete(shown, why, env, "rm -r build/")

    def cmd_mv(self, args: list[Val], env: Env, stdin: Val | None) -> None:
        """Moving ~, /, .git or the working directory away is deleting it from where it was."""
        operands = [a for a in args if not (a.known and a.text.startswith("-"))]
        target_dir = any(a.text in ("-t", "--target-directory") or
                         a.text.startswith("--target-directory=") for a in args)  # fmt: skip
        sources = operands if target_dir else operands[:-1]
        for source in sources:
            why = self._target(source, env)
            if why and why not in ("unknown", "top", "maybe-cwd"):
                shown = "mv " + " ".join(a.shown(self.places.home, self.places.cwd) for a in args)
                self._refuse_delete(shown, why, env, "mv build/ /tmp/old-build/", "move away")

    def _find_scope(self, args: list[Val], env: Env) -> str:
        """What `find ARGS` lists: "safe" (named files, or a harmless tree) or why not."""
        starts, expression = _find_split(args)
        narrowed = _find_narrowed(expression, acting_only=False)
        if _find_hits_git(expression, acting_only=False):
            return "git"
        for start in starts or [_lit(".")]:
            why = self._target(start, env)
            if why == "git" or (why and not narrowed):
                return why
        return "safe"

    def cmd_find(self, args: list[Val], env: Env, stdin: Val | None) -> None:
        starts, expression = _find_split(args)
        texts = [a.text for a in expression]
        destructive = "-delete" in texts
        found = Val(_UNKNOWN, unknown=True, found=self._find_scope(args, env))
        i = 0
        while i < len(expression):
            if texts[i] in ("-exec", "-execdir", "-ok", "-okdir"):
                end = i + 1
                while end < len(expression) and texts[end] not in (";", "+"):
                    end += 1
                inner = expression[i + 1 : end]
                if inner and posixpath.basename(inner[0].text) in ("rm", "unlink", "shred"):
                    destructive |= any("{}" in w.text for w in inner)
                self.run(
                    [_substitute(w, "{}", found) for w in inner], env.child("find -exec"), None
                )
                i = end + 1
                continue
            i += 1
        if not destructive:
            return
        narrowed = _find_narrowed(expression, acting_only=True)
        hits_git = _find_hits_git(expression, acting_only=True)
        for start in starts or [_lit(".")]:
            why = self._target(start, env)
            if hits_git or why == "git" or (why and not narrowed):
                shown = "find " + " ".join(a.shown(self.places.home, self.places.cwd) for a in args)
                self._refuse_delete(shown, why or "git", env, "find . -name '*.pyc' -delete")

    def cmd_rsync(self, args: list[Val], env: Env, stdin: Val | None) -> None:
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
        shown = "rsync " + " ".join(a.shown(self.places.home, self.places.cwd) for a in args)
        if deleting and operands:
            dest = operands[-1]
            why = self._rsync_target(dest, env)
            if why:
                self._refuse_delete(shown, why, env, "rsync -a --delete src/ build/")
        if removing_sources:
            for source in operands[:-1] or operands:
                why = self._rsync_target(source, env)
                if why:
                    self._refuse_delete(shown, why, env, "rsync -a src/ build/")

    def _rsync_target(self, val: Val, env: Env) -> str | None:
        remote = re.match(r"^(?:rsync://[^/]*|[^/:]+:)(.*)$", val.text) if val.known else None
        if remote and not val.text.startswith("/"):
            path = remote.group(1)
            return "home" if path.strip("/") in ("", "~", ".") else None
        return self._target(val, env)

    # -- git ------------------------------------------------------------------------------
    def cmd_git(self, args: list[Val], env: Env, stdin: Val | None) -> None:
        valued = {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path",
                  "--super-prefix", "--config-env", "--list-cmds"}  # fmt: skip
        aliases = dict(env.git_aliases)
        config: dict[str, str | None] = {}
        for var, held in env.vars.items():  # GIT_CONFIG_KEY_n=alias.p GIT_CONFIG_VALUE_n=…
            number = re.fullmatch(r"GIT_CONFIG_KEY_(\d+)", var)
            if number is None:
                continue
            if held is None or held.unknown:
                raise _TooDynamic("git gets configuration only known when it runs")
            given = env.vars.get(f"GIT_CONFIG_VALUE_{number.group(1)}")
            config[held.text.lower()] = None if given is None or given.unknown else given.text
            if held.text.lower().startswith("alias."):
                aliases[held.text.lower()[6:]] = config[held.text.lower()]
        i = 0
        while i < len(args) and args[i].text.startswith("-"):
            text = args[i].text
            setting: Val | None = None
            if text == "-c" and i + 1 < len(args):
                setting = args[i + 1]
            elif text.startswith("-c") and len(text) > 2:
                setting = Val(text[2:], unknown=args[i].unknown)
            elif text.startswith("--config-env"):
                pair = (
                    text.split("=", 1)[1]
                    if "=" in text
                    else (args[i + 1].text if i + 1 < len(args) else "")
                )
                key = pair.split("=", 1)[0].lower()
                config[key] = None
                if key.startswith("alias."):
                    aliases[key[6:]] = None
            if setting is not None:
                key, _, value = setting.text.partition("=")
                key = key.lower()
                config[key] = None if setting.unknown else value
                if key.startswith("alias."):
                    aliases[key[6:]] = None if setting.unknown else value
            i += 2 if text in valued and "=" not in text else 1
        if i >= len(args):
            return
        sub = args[i]
        rest = args[i + 1 :]
        if sub.unknown:
            if sub.deferred:
                return
            raise _TooDynamic("its git subcommand is only known when it runs")
        name = sub.text
        if name in aliases and name not in _GIT_BUILTINS:
            expansion = aliases[name]
            if expansion is None:
                raise _TooDynamic(f"git alias `{name}` is only known when it runs")
            inner = env.child(f"git alias {name}")
            inner.git_aliases = {k: v for k, v in aliases.items() if k != name}
            if expansion.startswith("!"):
                script = expansion[1:]
                self.check_script(script, inner.child("git alias", positional=list(rest)))
                return
            split = [_lit(w) for w in _shell_split(expansion)]
            self.cmd_git([*args[:i], *split, *rest], inner, stdin)
            return
        if name in ("add", "stage"):
            self._git_add(name, rest, env)
        elif name == "push":
            self._git_push(rest, config, env)
        elif name == "config":
            self._git_config(rest, env)

    def _git_config(self, rest: list[Val], env: Env) -> None:
        plain = [a for a in rest if not a.text.startswith("-")]
        if len(plain) >= 2 and plain[0].text.lower().startswith("alias."):
            key = plain[0].text[6:]
            env.git_aliases[key] = None if plain[1].unknown else plain[1].text

    def _git_add(self, name: str, rest: list[Val], env: Env) -> None:
        options_done = False
        for arg in rest:
            text = arg.text
            everything = False
            if not options_done and text == "--":
                options_done = True
                continue
            if not options_done and text.startswith("--"):
                everything = _prefix_of(text, "all") or (
                    len(text) >= 7 and _prefix_of(text, "no-ignore-removal")
                )
            elif not options_done and text.startswith("-") and len(text) > 1:
                everything = "A" in text[1:]
            else:
                everything = self._pathspec_everything(arg, env)
            if everything:
                where = f" (reached through {' → '.join(env.via)})" if env.via else ""
                shown = arg.shown(self.places.home, self.places.cwd)
                raise _Refused(
                    f"Refused: `git {name} {shown}` stages everything, "
                    f"including files that must not be committed{where}. "
                    "Stage files by name: git add path/to/file"
                )

    def _pathspec_everything(self, arg: Val, env: Env) -> bool:
        text = arg.text
        if arg.unknown:
            return not arg.deferred and arg.found is None and text.strip(_UNKNOWN + "/") == ""
        magic = re.match(r"^:(\([^)]*\)|[/!^]*)", text)
        if magic and magic.group():
            # :/ (top), :(top), :!x / :^x (everything but x), :(glob)** …
            rest = text[magic.end() :]
            return rest in ("", ".", "*", "/") or _is_pure_wildcard(rest) or "!" in magic.group()
        directory, _, last = text.rstrip("/").rpartition("/")
        self.places.here = env.cwd
        if _is_pure_wildcard(last) or last == "**":
            # git matches the pattern itself: * stages everything under the directory
            where = self.places.judge(self.places.absolute(directory or "."))
            return where in ("cwd", "above-cwd", "root", "home", "above-home")
        why = self.places.judge(self.places.absolute(text))
        return why in ("cwd", "above-cwd", "root", "home", "above-home")

    def _git_push(self, rest: list[Val], config: dict[str, str | None], env: Env) -> None:
        problem: str | None = None
        shown = ""
        operands: list[Val] = []
        i = 0
        options_done = False
        while i < len(rest):
            arg = rest[i]
            text = arg.text
            if not options_done and text == "--":
                options_done = True
            elif not options_done and text.startswith("--"):
                name = text[2:].split("=", 1)[0]
                if (
                    name.startswith("force-with-lease")
                    or name.startswith("force-if-includes")
                    or (len(name) > 6 and "force-with-lease".startswith(name))
                ):
                    pass
                elif _prefix_of(text, "force", "mirror", "delete", "prune"):
                    problem, shown = problem or text, shown or text
                elif name in ("repo", "receive-pack", "exec", "push-option") and "=" not in text:
                    i += 1
            elif not options_done and text.startswith("-") and len(text) > 1:
                flags = text[1:]
                for k, flag in enumerate(flags):
                    if flag in "fd":
                        problem, shown = problem or text, shown or text
                    if flag == "o":
                        if k == len(flags) - 1:
                            i += 1
                        break
            else:
                operands.append(arg)
            i += 1
        for ref in operands[1:]:
            if ref.unknown and not ref.deferred:
                raise _TooDynamic("git push gets a refspec only known when it runs")
            if ref.text == ":":
                continue  # push matching branches
            if ref.text.startswith(("+", ":")) or (
                ":" in ref.text and ref.text.split(":")[0] == ""
            ):
                problem, shown = problem or ref.text, shown or ref.text
        for key, value in config.items():
            if re.fullmatch(r"remote\..*\.mirror", key) and (value or "true").lower() in (
                "true", "yes", "on", "1", ""
            ):  # fmt: skip
                problem, shown = problem or f"-c {key}", shown or f"-c {key}={value}"
            if re.fullmatch(r"remote\..*\.push", key) and (
                value is None or value.startswith(("+", ":"))
            ):
                problem, shown = problem or f"-c {key}", shown or f"-c {key}={value}"
        if problem:
            where = f" (reached through {' → '.join(env.via)})" if env.via else ""
            raise _Refused(
                f"Refused: `git push {shown}` rewrites the remote's history (overwriting or "
                f"deleting what is there) and can destroy other people's work{where}. Use "
                "git push --force-with-lease if a rewrite is really intended, or push normally."
            )


_GIT_BUILTINS = frozenset(
    {"add", "stage", "push", "commit", "status", "log", "diff", "config", "fetch", "pull"}
)


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
                if _is_pure_wildcard(last) or not last or re.fullmatch(r"[.*+$^]*", last):
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
                if any(_glob_can_match(p, ".git") for p in pattern.split("/") if p):
                    return True
    return False


def _substitute(word: Val, token: str, value: Val) -> Val:
    if token not in word.text:
        return word
    if word.text == token:
        return value
    text = word.text.replace(token, value.text)
    return Val(text, frozenset(), value.unknown or word.unknown, value.deferred, value.temp,
               value.found)  # fmt: skip


def _joined(values: Sequence[Val], sep: str) -> Val:
    text = sep.join(v.text for v in values)
    unknown = any(v.unknown for v in values)
    deferred = unknown and all(v.deferred for v in values if v.unknown)
    return Val(text, unknown=unknown, deferred=deferred)


def _expand_literal_tilde(value: Val, env: Env) -> Val:
    """xargs items are not tilde-expanded by bash, but a literal ~ there is as alarming."""
    if value.text == "~" or value.text.startswith("~/"):
        return _lit(env.home + value.text[1:])
    return value


def _shell_split(text: str) -> list[str]:
    try:
        return shlex.split(text, posix=True)
    except ValueError:
        return text.split()


# Words that change what a command does when a variable holds them.
_MEANINGFUL_WORDS = frozenset(
    {"rm", "git", "find", "rsync", "xargs", "eval", "source", "exec", "command", "env",
     "sudo", "doas", "parallel", "trap", "watch", "su", "script", "ssh", "alias",
     "add", "stage", "push", "config", "cd", "set", "read", "declare"}
    | _SHELLS
    | _WRAPPERS.keys()
)  # fmt: skip
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_+,=:@%-]*")


def _loop_values(values: list[Val]) -> list[Val | None]:
    """The loop values worth a pass each: plain names all behave alike for these checks
    (a name in the working directory, not .git), so one stands for all of them."""
    kept: list[Val | None] = []
    plain_seen = False
    for value in values[:_MAX_WORDS]:
        plain = (
            value.known
            and not value.globs
            and bool(_PLAIN_NAME.fullmatch(value.text))
            and value.text not in _MEANINGFUL_WORDS
            and not _INTERPRETER.fullmatch(value.text)
        )
        if plain and plain_seen:
            continue
        plain_seen |= plain
        kept.append(value)
    if len(values) > _MAX_WORDS:
        kept.append(None)
    return kept


def _first_line(exc: BaseException) -> str:
    return str(exc).split(". ")[0].removeprefix("Refused: ")


def _env_split_string(args: list[Val], i: int) -> list[Val] | None:
    """env -S 'cmd args' / --split-string=…: the words it will run."""
    text = args[i].text
    if text in ("-S", "--split-string") and i + 1 < len(args):
        return [*(_lit(w) for w in _shell_split(args[i + 1].text)), *args[i + 2 :]]
    if text.startswith("-S") and len(text) > 2:
        return [*(_lit(w) for w in _shell_split(text[2:])), *args[i + 1 :]]
    if text.startswith("--split-string="):
        return [*(_lit(w) for w in _shell_split(text.split("=", 1)[1])), *args[i + 1 :]]
    return None


def _single_command(script: str) -> Node | None:
    tree = _PARSER.parse(script.encode("utf-8", "surrogatepass"))
    commands = [c for c in tree.root_node.children if c.type == "command"]
    return commands[0] if len(commands) == 1 else None


def _too_dynamic_message(command: str, why: str) -> str:
    short = command if len(command) <= 80 else command[:77] + "..."
    return (
        f"Refused: cannot check `{short}`: {why}, so the safety check cannot see what it "
        "would do. Write the command out plainly (literal command names and paths, no "
        "eval, no script piped into a shell) and run it again."
    )


def check_command(command: str, *, cwd: str | os.PathLike[str] | None = None) -> str | None:
    """Why `command` must not run, as a message for the model, or None if it may.

    `cwd` is the directory the command runs in. Without it, relative paths
    start in an unknown directory (whose parents are still recognised) and
    the process's own working directory is protected by its absolute name.
    """
    home = os.environ.get("HOME") or _home_of(_current_user()) or "/root"
    if cwd is not None:
        places = _Places(str(cwd), home)
    else:
        places = _Places(_FAKE_CWD, home, also=_process_cwd())
    env = Env(cwd=places.cwd, home=places.home)
    # Bash drops every backslash-newline before it splits words, except inside
    # single quotes and quoted here-documents. Judging the script as written and
    # with every continuation joined covers both readings without modelling
    # which quotes a continuation sits in: a command runs only if both pass.
    readings = [command]
    if "\\\n" in command:
        readings.append(command.replace("\\\n", ""))
    try:
        for reading in readings:
            _Interpreter(places).check_script(reading, env)
    except _Refused as refusal:
        return str(refusal)
    except _TooDynamic as unknown:
        return _too_dynamic_message(command, str(unknown))
    except RecursionError:
        return _too_dynamic_message(command, "it nests too deeply to follow")
    return None


def _process_cwd() -> tuple[str, ...]:
    try:
        return (os.getcwd(),)
    except OSError:  # deleted under us
        return ()


def _current_user() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:  # pragma: no cover
        return "root"


def expand_word(word: str, *, cwd: str, home: str) -> list[str]:
    """The words the checker sees for one bash word (for tests against real bash).

    Globs are left unexpanded, as bash leaves a pattern that matches nothing;
    text only known at run time shows as NUL.
    """
    places = _Places(cwd, home)
    env = Env(cwd=places.cwd, home=places.home)
    return [v.text for v in _Expander(env, _Interpreter(places, quiet=True)).words(word)]
