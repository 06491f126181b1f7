"""The entry points: `check_command` (the verdict for the model) and `expand_word`
(one word as the guard reads it, for tests that compare with real bash)."""

from __future__ import annotations

import os
import pwd

from phoenix_nb.tools.bash_guard.places import Places, home_of
from phoenix_nb.tools.bash_guard.values import FAKE_CWD, Env, Refused, TooDynamic
from phoenix_nb.tools.bash_guard.walk import Walker
from phoenix_nb.tools.bash_guard.words import Expander


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
    home = os.environ.get("HOME") or home_of(_current_user()) or "/root"
    if cwd is not None:
        places = Places(str(cwd), home)
    else:
        places = Places(FAKE_CWD, home, also=_process_cwd())
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
            Walker(places).check_script(reading, env)
    except Refused as refusal:
        return str(refusal)
    except TooDynamic as unknown:
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
    places = Places(cwd, home)
    env = Env(cwd=places.cwd, home=places.home)
    return [v.text for v in Expander(env, Walker(places, quiet=True)).words(word)]
