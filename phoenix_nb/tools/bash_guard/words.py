"""Bash words: the lexer, quote and escape removal, ANSI-C strings, brace, tilde,
parameter and command-substitution expansion, word splitting, and the grammar's
nodes regrouped into the words bash reads (tree-sitter splits a few)."""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

from phoenix_nb.tools.bash_guard.places import home_of
from phoenix_nb.tools.bash_guard.values import (
    GLOB_CHARS,
    MAX_WORDS,
    UNKNOWN,
    UNKNOWN_VAL,
    Atom,
    Env,
    TooMany,
    Val,
    join_unknown,
    literal_val,
)

if TYPE_CHECKING:
    from phoenix_nb.tools.bash_guard.judge import Judge


PARSER = Parser(Language(tree_sitter_bash.language()))


def ansi_c(body: str) -> str:
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


class Expander:
    """Expands one word's source text into atoms, then into words."""

    def __init__(self, env: Env, checker: Judge) -> None:
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
            return env.positional[index - 1] if index <= len(env.positional) else literal_val("")
        if name in ("@", "*"):
            if env.positional is None:
                return None
            return (
                literal_val(" ".join(v.text for v in env.positional))
                if all(v.known for v in env.positional)
                else join_unknown(env.positional)
            )
        if name == "#":
            return None if env.positional is None else literal_val(str(len(env.positional)))
        if name in env.vars:
            return env.vars[name]
        if name == "HOME":
            return literal_val(env.home)
        if name == "PWD":
            return literal_val(env.cwd)
        return None

    def _param_atoms(self, name: str, quoted: bool) -> list[Atom]:
        """$name; "$@" is one word per positional parameter even when quoted."""
        positional = self.env.positional
        if name != "@" or positional is None:
            return _value_atoms(self._var(name), quoted)
        atoms: list[Atom] = []
        for index, value in enumerate(positional):
            if index:
                atoms.append(Atom("", brk=True))  # a word boundary bash keeps
            atoms.append(Atom("", quoted=True))
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
            return alternative if is_set else literal_val("")
        if value is None:
            return None
        if re.match(r"(%%?|##?)", rest):
            # Trimming a suffix or prefix (${HOME%/}): the result is still
            # rooted where the value is, so keep the value when it is a path.
            pattern = rest.lstrip("%#")
            if value.known and rest[0] == "%" and value.text.endswith(pattern.rstrip("*")):
                trimmed = value.text[: len(value.text) - len(pattern.rstrip("*"))]
                return literal_val(trimmed or value.text) if pattern else value
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
            return literal_val(self.env.cwd)
        if name in ("echo", "printf"):
            out = echo_output(name, words[1:])
            return None if out is None else literal_val(out.rstrip("\n"))
        if name == "mktemp":
            return Val(UNKNOWN, unknown=True, temp=True)
        if name == "basename" and len(words) > 1 and words[1].known:
            return literal_val(posixpath.basename(words[1].text.rstrip("/")))
        return None

    # -- the lexer ------------------------------------------------------------------
    def atoms(self, src: str, *, quoted: bool = False) -> list[Atom]:
        out: list[Atom] = []
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
                        out.append(Atom("\\", quoted=True))
                        out.append(Atom(nxt, quoted=True))
                    else:
                        out.append(Atom(nxt, quoted=True))
                i += 2
                continue
            if ch == "'" and not quoted:
                end = src.find("'", i + 1)
                end = n if end < 0 else end
                out.append(Atom("", quoted=True))  # "" is still a word
                out.extend(Atom(c, quoted=True) for c in src[i + 1 : end])
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
                out.append(Atom("", quoted=True))
                out.extend(self.atoms(src[i + 1 : j], quoted=True))
                i = j + 1
                continue
            if ch == "$" and i + 1 < n:
                nxt = src[i + 1]
                if nxt == "'" and not quoted:
                    end = i + 2
                    while end < n and src[end] != "'":
                        end += 2 if src[end] == "\\" else 1
                    out.append(Atom("", quoted=True))
                    out.extend(Atom(c, quoted=True) for c in ansi_c(src[i + 2 : end]))
                    i = end + 1
                    continue
                if nxt == '"' and not quoted:
                    i += 1  # $"…" is a translated "…"
                    continue
                if src.startswith("$((", i):
                    end = _matching(src, i + 1, "(", ")")
                    out.append(Atom(UNKNOWN, quoted=quoted, split=not quoted, unknown=True))
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
            out.append(Atom(ch, quoted=quoted))
            i += 1
        return out

    def _expand_text(self, src: str, *, quoted: bool) -> Val:
        return atoms_to_val(self.atoms(src, quoted=quoted))

    def words(self, src: str) -> list[Val]:
        """Every word bash makes of one source word (braces, tilde, splitting)."""
        results: list[Val] = []
        ifs = self.env.vars.get("IFS", literal_val(" \t\n"))
        separators = " \t\n" if ifs is None or ifs.unknown else ifs.text
        atoms_of_word = self.atoms(src)  # substitutions inside are checked here
        try:
            expanded = _brace_expand(atoms_of_word)
        except TooMany:
            return [UNKNOWN_VAL]  # {1..100000}: judged as a word only known at run time
        for atoms in expanded:
            atoms = self._tilde(atoms)
            if (ifs is None or ifs.unknown) and any(a.split and not a.brk for a in atoms):
                atoms = [Atom(UNKNOWN, unknown=True)]  # IFS only known at run time
            for piece in _split(atoms, separators):
                results.append(atoms_to_val(piece))
                if len(results) > MAX_WORDS:
                    return [UNKNOWN_VAL]
        return results

    def _tilde(self, atoms: list[Atom]) -> list[Atom]:
        if not atoms or atoms[0].char != "~" or atoms[0].quoted or atoms[0].split:
            return atoms
        end = 1
        while end < len(atoms) and atoms[end].char != "/" and not atoms[end].quoted:
            end += 1
        if end < len(atoms) and atoms[end].char != "/":
            return atoms  # a quoted character in the user name: no expansion
        user = "".join(a.char for a in atoms[1:end])
        if not user:
            assigned = self.env.vars.get("HOME", literal_val(self.env.home))
            if assigned is None or assigned.unknown:
                return [Atom(UNKNOWN, unknown=True), *atoms[end:]]
            home = assigned.text
        elif user == "+":
            home = self.env.cwd
        elif user == "-":
            return [Atom(UNKNOWN, unknown=True), *atoms[end:]]
        else:
            found = home_of(user)
            if found is None:
                return atoms
            home = found
        return [Atom(c, quoted=True) for c in home] + atoms[end:]


def _value_atoms(value: Val | None, quoted: bool) -> list[Atom]:
    if value is None:
        return [Atom(UNKNOWN, quoted=quoted, split=not quoted, unknown=True)]
    if value.unknown and not value.text.strip(UNKNOWN):
        return [
            Atom(
                UNKNOWN,
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
            Atom(
                ch,
                quoted=quoted,
                split=not quoted,
                unknown=ch == UNKNOWN,
                deferred=value.deferred,
                temp=value.temp,
                found=value.found,
            )
        )
    return atoms


def atoms_to_val(atoms: list[Atom]) -> Val:
    text = "".join(a.char for a in atoms)
    globs: set[int] = set()
    offset = 0
    for atom in atoms:  # offsets in text: empty placeholders take no room
        if atom.char in GLOB_CHARS and not atom.quoted and not atom.unknown:
            globs.add(offset)
        offset += len(atom.char)
    unknown = any(a.unknown for a in atoms)
    deferred = unknown and all(a.deferred for a in atoms if a.unknown)
    found = next((a.found for a in atoms if a.found is not None), None)
    temp = any(a.temp for a in atoms)
    return Val(text, frozenset(globs), unknown, deferred, temp, found)


def _split(atoms: list[Atom], separators: str = " \t\n") -> list[list[Atom]]:
    """Word splitting on $IFS: only characters from unquoted expansions split."""
    words: list[list[Atom]] = []
    current: list[Atom] = []
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


def _brace_expand(atoms: list[Atom]) -> list[list[Atom]]:
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
                out: list[list[Atom]] = []
                for option in options:
                    for expanded in _brace_expand(head + option + tail):
                        out.append(expanded)
                        if len(out) > MAX_WORDS:
                            raise TooMany("a brace expands to too many words to check")
                return out
    return [atoms]


def _brace_options(inner: list[Atom]) -> list[list[Atom]] | None:
    parts: list[list[Atom]] = [[]]
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
        return [[Atom(chr(c))] for c in range(lo, hi + step, step)][:MAX_WORDS]
    lo, hi = int(seq.group(1)), int(seq.group(2))
    step = abs(int(seq.group(3) or 1)) or 1
    step = step if hi >= lo else -step
    values = range(lo, hi + (1 if step > 0 else -1), step)
    if len(values) > MAX_WORDS:
        raise TooMany("a brace sequence expands to too many words to check")
    return [[Atom(c) for c in str(v)] for v in values]


def echo_output(name: str, args: Sequence[Val]) -> str | None:
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
        return (ansi_c(text) if escapes else text) + newline
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
                out.append(ansi_c(piece))
            elif piece == "%%":
                out.append("%")
            else:
                arg = pending.pop(0) if pending else ""
                out.append(ansi_c(arg) if piece.endswith("b") else arg)
                consumed = True
        if not pending or not consumed:
            return "".join(out)


def _simple_words(script: str, env: Env, checker: Judge) -> list[Val] | None:
    """The words of a script that is one simple command, else None."""
    tree = PARSER.parse(script.encode("utf-8", "surrogatepass"))
    commands = [c for c in tree.root_node.children if c.type not in ("comment", ";", "\n")]
    if len(commands) != 1 or commands[0].type != "command":
        return None
    source = script.encode("utf-8", "surrogatepass")
    expander = Expander(env, checker)
    words: list[Val] = []
    for group in word_groups(commands[0], source):
        words.extend(expander.words(group_src(group, source)))
    return words


def node_text(node: Node, source: bytes) -> str:
    return source[node.start_byte : node.end_byte].decode("utf-8", "surrogatepass")


# Bytes between two nodes that bash reads as nothing at all: line continuations.
_NOTHING_BETWEEN = re.compile(rb"(?:\\\n)*")


def word_groups(command: Node, source: bytes) -> list[list[Node]]:
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


def group_src(group: Sequence[Node], source: bytes) -> str:
    """One bash word's source text (continuations kept: the expander drops them)."""
    return source[group[0].start_byte : group[-1].end_byte].decode("utf-8", "surrogatepass")


def expand_literal_tilde(value: Val, env: Env) -> Val:
    """xargs items are not tilde-expanded by bash, but a literal ~ there is as alarming."""
    if value.text == "~" or value.text.startswith("~/"):
        return literal_val(env.home + value.text[1:])
    return value


def shell_split(text: str) -> list[str]:
    try:
        return shlex.split(text, posix=True)
    except ValueError:
        return text.split()


def single_command(script: str) -> Node | None:
    tree = PARSER.parse(script.encode("utf-8", "surrogatepass"))
    commands = [c for c in tree.root_node.children if c.type == "command"]
    return commands[0] if len(commands) == 1 else None
