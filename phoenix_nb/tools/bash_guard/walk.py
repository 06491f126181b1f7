"""The tree walk: follows a parsed script in order, through shells, wrappers,
aliases, functions, loops, pipes, here-documents, scripts written earlier and
interpreters' shell calls, and hands each simple command to its rule."""

from __future__ import annotations

import posixpath
import re
import shlex

from tree_sitter import Node

from phoenix_nb.tools.bash_guard.places import REASONS, Places
from phoenix_nb.tools.bash_guard.rules import RULES
from phoenix_nb.tools.bash_guard.rules.delete import find_scope
from phoenix_nb.tools.bash_guard.values import (
    MAX_STEPS,
    MAX_WORDS,
    UNKNOWN,
    UNKNOWN_VAL,
    Env,
    Refused,
    TooDynamic,
    Val,
    first_line,
    join_words,
    literal_val,
)
from phoenix_nb.tools.bash_guard.words import (
    PARSER,
    Expander,
    atoms_to_val,
    echo_output,
    group_src,
    node_text,
    shell_split,
    single_command,
    word_groups,
)

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


class Walker:
    """Walks the tree in order, tracking what it can know, and refuses on the first problem."""

    def __init__(self, places: Places, *, quiet: bool = False) -> None:
        self.places = places
        self.quiet = quiet  # only computing values (a producer's output): judge nothing
        self.steps = 0  # bounded: loops, calls and nesting cannot make a check run long

    def _step(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise TooDynamic("it is too large to follow step by step (loops, calls, nesting)")

    def target(self, val: Val, env: Env) -> str | None:
        self.places.here = env.cwd
        return self.places.target(val)

    # -- entry points -------------------------------------------------------------------
    def check_script(self, script: str, env: Env) -> None:
        if self.quiet:
            return
        source = script.encode("utf-8", "surrogatepass")
        tree = PARSER.parse(source)
        self.node(tree.root_node, source, env)

    def dynamic_script(
        self, value: Val | None, what: str, env: Env, positional: list[Val] | None = None
    ) -> None:
        """Check text that will run as a script (bash -c, eval, a pipe into sh …)."""
        if value is None or value.unknown:
            if value is not None and value.deferred:
                return
            raise TooDynamic(f"{what} runs text that is only known when the command runs")
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
                c.type == "word" and re.fullmatch(r"[-+][a-zA-Z]*n[a-zA-Z]*", node_text(c, source))
                for c in node.children
            )
            for child in node.children:
                if child.type == "variable_assignment":
                    self.assign(child, source, env)
                    name = child.child_by_field_name("name")
                    if nameref and name is not None:
                        env.vars[node_text(name, source)] = None
                elif child.type == "variable_name":
                    env.vars[node_text(child, source)] = None
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
        name = node_text(name_node, source)
        if value_node is None:
            env.vars[name] = literal_val("")
            return
        if value_node.type == "array":
            env.vars[name] = None
            return
        expander = Expander(env, self)
        atoms = expander._tilde(expander.atoms(node_text(value_node, source)))
        env.vars[name] = atoms_to_val(atoms)

    def define(self, node: Node, source: bytes, env: Env) -> None:
        name_node = node.child_by_field_name("name")
        body = node.child_by_field_name("body")
        if name_node is None or body is None:
            return
        env.funcs[node_text(name_node, source)] = (body, source)
        # Judged once with unknown arguments (what it does on its own), and
        # again at every call with the arguments it gets.
        deferred = Val(UNKNOWN, unknown=True, deferred=True)
        self.node(body, source, env.child("a function", positional=[deferred] * 9))

    def for_loop(self, node: Node, source: bytes, env: Env) -> None:
        var_node = node.child_by_field_name("variable")
        body = node.child_by_field_name("body")
        listed: list[Val] = []
        saw_in = False
        expander = Expander(env, self)
        for child in node.children:
            if child.type == "in":
                saw_in = True
            elif saw_in and child.type not in (";", "do_group", "\n") and child != body:
                listed.extend(expander.words(node_text(child, source)))
        values = listed if saw_in else env.positional  # None: unknown
        if var_node is None or body is None:
            return
        name = node_text(var_node, source)
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
            previous = self._output(part, source, env, previous) or UNKNOWN_VAL

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
            self._chain(parts, source, env, out or UNKNOWN_VAL)

    def _file_feed(self, redirect: Node, source: bytes, env: Env) -> Val | None:
        """`< file`: a file this command wrote is known; any other file is not read."""
        target = redirect.child_by_field_name("destination") or redirect.children[-1]
        words = Expander(env, self).words(node_text(target, source))
        if len(words) == 1 and words[0].known:
            return env.files.get(self.path_key(words[0].text, env))
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
                words = Expander(env, self).words(node_text(target, source))
                if len(words) != 1 or words[0].unknown:
                    continue
                key = self.path_key(words[0].text, env)
                out = self._output(body, source, env, feed)
                before = env.files.get(key) if ">>" in ops or "&>>" in ops else literal_val("")
                if out is None or before is None:
                    env.files[key] = None
                else:
                    env.files[key] = literal_val(before.text + out.text)

    def _herestring(self, node: Node, source: bytes, env: Env) -> Val | None:
        word = next((c for c in node.children if c.type != "<<<"), None)
        if word is None:
            return None
        return join_words(Expander(env, self).words(node_text(word, source)), " ")

    def _heredoc(self, node: Node, source: bytes, env: Env) -> Val | None:
        start = next((c for c in node.children if c.type == "heredoc_start"), None)
        body = next((c for c in node.children if c.type == "heredoc_body"), None)
        if body is None:
            return literal_val("")
        text = node_text(body, source)
        delimiter = node_text(start, source) if start is not None else ""
        if any(q in delimiter for q in "'\"\\"):
            return literal_val(text)
        return atoms_to_val(Expander(env, self).atoms(text, quoted=True))

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
            out = echo_output(name, words[1:])
            return None if out is None else literal_val(out)
        if (name == "cat" and len(words) == 1) or name == "tee":
            return stdin
        if name == "find":
            return Val(UNKNOWN, unknown=True, found=find_scope(self, words[1:], env))
        return None

    # -- one simple command -----------------------------------------------------------
    def words_of(self, node: Node, source: bytes, env: Env, *, check: bool = True) -> list[Val]:
        """The command's words after expansion (substitutions inside are checked once)."""
        expander = Expander(env if check else env.child("output"), self)
        if not check:
            expander.checker = Walker(self.places, quiet=True)
        words: list[Val] = []
        for group in word_groups(node, source):
            child = group[0]
            if len(group) > 1:
                if any(c.type == "process_substitution" for c in group):
                    raise TooDynamic("a word glues a process substitution to other text")
                words.extend(expander.words(group_src(group, source)))
            elif child.type == "process_substitution":
                inner = node_text(child, source)[2:-1]
                if check:
                    self.check_script(inner, env.child("<(…)"))
                single = single_command(inner)
                out = (
                    self._output(single, inner.encode("utf-8", "surrogatepass"), env, None)
                    if single is not None
                    else None
                )
                words.append(Val(out.text if out else UNKNOWN, unknown=out is None or out.unknown,
                                 script=True))  # fmt: skip
            else:
                words.extend(expander.words(node_text(child, source)))
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
            group = Expander(env, self).words(words[-1].text + node_text(glued, source))
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
            self.run([*(literal_val(w) for w in shell_split(expansion)), *args], inner, stdin)
        if not plain and head.text in env.funcs:
            body, body_source = env.funcs[head.text]
            self.node(body, body_source, env.child(f"{head.text}()", positional=args), stdin)
            if name not in _DANGEROUS_NAMES:
                return  # a function of its own name: what it runs was judged
        written = env.files.get(self.path_key(head.text, env)) if "/" in head.text else None
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
                    inner.vars[key] = None if arg.unknown else literal_val(value)
            self.run(self._unwrap(name, args), inner, stdin, plain=True)
        elif name in _SHELLS:
            self.shell(name, args, env, stdin)
        elif name == "eval":
            self.dynamic_script(join_words(args, " "), "eval", env)
        elif _INTERPRETER.fullmatch(name):
            self.interpreter(name, args, env, stdin)
        elif name in ("source", "."):
            self._script_file(name, args[0] if args else None, args[1:], env, stdin)
        else:
            rule = RULES.get(name)
            if rule is not None:
                rule(self, args, env, stdin)

    def path_key(self, text: str, env: Env) -> str:
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
        elif script.known and self.path_key(script.text, env) in env.files:
            self.dynamic_script(env.files[self.path_key(script.text, env)], via, env, args)

    def unknown_name(self, words: list[Val], env: Env, stdin: Val | None) -> None:
        """A command name known only at run time: refuse if it could be a dangerous one."""
        for candidate in ("rm", "git", "find", "rsync", "bash", "eval"):
            try:
                self.run(
                    [literal_val(candidate), *words[1:]], env.child("a computed command"), stdin
                )
            except (Refused, TooDynamic) as exc:
                raise TooDynamic(
                    "its command name is only known when it runs, and as "
                    f"`{candidate}` it would be refused ({first_line(exc)})"
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
                raise TooDynamic(f"`{name}` gets options or a script only known when it runs")
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
                self.dynamic_script(literal_val(script), via, env)
        if _TREE_DELETE.search(text):
            homeish = _HOME_EXPR.search(text)
            for literal in [*literals, *(["~"] if homeish else [])]:
                if not literal or "\n" in literal:
                    continue
                why = self.target(literal_val(literal), env)
                if why in ("root", "home", "above-home", "cwd", "above-cwd", "git"):
                    self.refuse_delete(f"{name} … {literal}", why, env.child(via), "rm -r build/")

    # -- deleting ------------------------------------------------------------------------
    def refuse_delete(
        self, shown: str, why: str, env: Env, example: str, verb: str = "delete"
    ) -> None:
        where = f" (reached through {' → '.join(env.via)})" if env.via else ""
        if why == "unknown":
            raise TooDynamic(
                f"`{shown}` deletes recursively a path that is only known when it runs{where}"
            )
        raise Refused(
            f"Refused: `{shown}` would {verb} {REASONS[why]}{where}. "
            f"{verb.capitalize()} specific paths by name instead (e.g. {example}), "
            "and never .git, ~ or /."
        )


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
    for value in values[:MAX_WORDS]:
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
    if len(values) > MAX_WORDS:
        kept.append(None)
    return kept


def _env_split_string(args: list[Val], i: int) -> list[Val] | None:
    """env -S 'cmd args' / --split-string=…: the words it will run."""
    text = args[i].text
    if text in ("-S", "--split-string") and i + 1 < len(args):
        return [*(literal_val(w) for w in shell_split(args[i + 1].text)), *args[i + 2 :]]
    if text.startswith("-S") and len(text) > 2:
        return [*(literal_val(w) for w in shell_split(text[2:])), *args[i + 1 :]]
    if text.startswith("--split-string="):
        return [*(literal_val(w) for w in shell_split(text.split("=", 1)[1])), *args[i + 1 :]]
    return None
