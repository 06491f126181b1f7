"""git: adding everything, history-rewriting pushes, and aliases and config
that would hide either (`git -c alias.*`, `git config alias.*`, GIT_CONFIG_*)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from phoenix_nb.tools.bash_guard.options import prefix_of
from phoenix_nb.tools.bash_guard.places import is_pure_wildcard
from phoenix_nb.tools.bash_guard.values import UNKNOWN, Env, Refused, TooDynamic, Val, literal_val
from phoenix_nb.tools.bash_guard.words import shell_split

if TYPE_CHECKING:
    from phoenix_nb.tools.bash_guard.judge import Judge


# -- git ------------------------------------------------------------------------------
def git(walker: Judge, args: list[Val], env: Env, stdin: Val | None) -> None:
    valued = {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path",
              "--super-prefix", "--config-env", "--list-cmds"}  # fmt: skip
    aliases = dict(env.git_aliases)
    config: dict[str, str | None] = {}
    for var, held in env.vars.items():  # GIT_CONFIG_KEY_n=alias.p GIT_CONFIG_VALUE_n=…
        number = re.fullmatch(r"GIT_CONFIG_KEY_(\d+)", var)
        if number is None:
            continue
        if held is None or held.unknown:
            raise TooDynamic("git gets configuration only known when it runs")
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
        raise TooDynamic("its git subcommand is only known when it runs")
    name = sub.text
    if name in aliases and name not in _GIT_BUILTINS:
        expansion = aliases[name]
        if expansion is None:
            raise TooDynamic(f"git alias `{name}` is only known when it runs")
        inner = env.child(f"git alias {name}")
        inner.git_aliases = {k: v for k, v in aliases.items() if k != name}
        if expansion.startswith("!"):
            script = expansion[1:]
            walker.check_script(script, inner.child("git alias", positional=list(rest)))
            return
        split = [literal_val(w) for w in shell_split(expansion)]
        git(walker, [*args[:i], *split, *rest], inner, stdin)
        return
    if name in ("add", "stage"):
        _git_add(walker, name, rest, env)
    elif name == "push":
        _git_push(walker, rest, config, env)
    elif name == "config":
        _git_config(walker, rest, env)


def _git_config(walker: Judge, rest: list[Val], env: Env) -> None:
    plain = [a for a in rest if not a.text.startswith("-")]
    if len(plain) >= 2 and plain[0].text.lower().startswith("alias."):
        key = plain[0].text[6:]
        env.git_aliases[key] = None if plain[1].unknown else plain[1].text


def _git_add(walker: Judge, name: str, rest: list[Val], env: Env) -> None:
    options_done = False
    for arg in rest:
        text = arg.text
        everything = False
        if not options_done and text == "--":
            options_done = True
            continue
        if not options_done and text.startswith("--"):
            everything = prefix_of(text, "all") or (
                len(text) >= 7 and prefix_of(text, "no-ignore-removal")
            )
        elif not options_done and text.startswith("-") and len(text) > 1:
            everything = "A" in text[1:]
        else:
            everything = _pathspec_everything(walker, arg, env)
        if everything:
            where = f" (reached through {' → '.join(env.via)})" if env.via else ""
            shown = arg.shown(walker.places.home, walker.places.cwd)
            raise Refused(
                f"Refused: `git {name} {shown}` stages everything, "
                f"including files that must not be committed{where}. "
                "Stage files by name: git add path/to/file"
            )


def _pathspec_everything(walker: Judge, arg: Val, env: Env) -> bool:
    text = arg.text
    if arg.unknown:
        return not arg.deferred and arg.found is None and text.strip(UNKNOWN + "/") == ""
    magic = re.match(r"^:(\([^)]*\)|[/!^]*)", text)
    if magic and magic.group():
        # :/ (top), :(top), :!x / :^x (everything but x), :(glob)** …
        rest = text[magic.end() :]
        return rest in ("", ".", "*", "/") or is_pure_wildcard(rest) or "!" in magic.group()
    directory, _, last = text.rstrip("/").rpartition("/")
    walker.places.here = env.cwd
    if is_pure_wildcard(last) or last == "**":
        # git matches the pattern itself: * stages everything under the directory
        where = walker.places.judge(walker.places.absolute(directory or "."))
        return where in ("cwd", "above-cwd", "root", "home", "above-home")
    why = walker.places.judge(walker.places.absolute(text))
    return why in ("cwd", "above-cwd", "root", "home", "above-home")


def _git_push(walker: Judge, rest: list[Val], config: dict[str, str | None], env: Env) -> None:
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
            elif prefix_of(text, "force", "mirror", "delete", "prune"):
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
            raise TooDynamic("git push gets a refspec only known when it runs")
        if ref.text == ":":
            continue  # push matching branches
        if ref.text.startswith(("+", ":")) or (":" in ref.text and ref.text.split(":")[0] == ""):
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
        raise Refused(
            f"Refused: `git push {shown}` rewrites the remote's history (overwriting or "
            f"deleting what is there) and can destroy other people's work{where}. Use "
            "git push --force-with-lease if a rewrite is really intended, or push normally."
        )


_GIT_BUILTINS = frozenset(
    {"add", "stage", "push", "commit", "status", "log", "diff", "config", "fetch", "pull"}
)
