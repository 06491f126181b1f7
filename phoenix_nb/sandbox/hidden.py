"""The paths a Restricted command must not read, expanded when it starts.

`hidden_paths` takes the policy as a parameter: the deny list is the
conversation's, never a module's. The launcher covers each existing path with
an unreadable placeholder in the command's mount namespace.

Expanded on every command's start (a secret created a moment ago is hidden
too), so it is on the path a command waits on: a bare name (".env*") is
matched against each directory from the working directory up to "/" with ONE
listing per directory and one compiled expression for all bare names, the
names filtered in C (``filter(match, names)``). ``glob`` listed each directory
once per pattern and matched name by name in Python: 0.6 ms per command in a
/tmp of 1,250 entries, more than the rest of a command's start on this side.
"""

from __future__ import annotations

import fnmatch
import functools
import glob
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path

from phoenix_nb.core.secrets import CREDENTIAL_FILE_VARIABLES
from phoenix_nb.sandbox.policy import SandboxPolicy

__all__ = ["credential_files", "describe_hidden", "hidden_paths"]


def credential_files(source: Mapping[str, str] | None = None) -> list[str]:
    """Existing files named by a credential-file variable (``GOOGLE_APPLICATION_CREDENTIALS`` …)."""
    source = os.environ if source is None else source
    found = []
    for name in CREDENTIAL_FILE_VARIABLES:
        value = source.get(name)
        if value and os.path.isabs(os.path.expanduser(value)):
            path = os.path.expanduser(value)
            if os.path.lexists(path):
                found.append(path)
    return found


def _connection_file() -> str | None:
    """This kernel's connection file, from its command line (``-f <path>``)."""
    try:
        argv = Path("/proc/self/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    for i, arg in enumerate(argv):
        text = arg.decode(errors="replace")
        if text in ("-f", "--f", "--existing") and i + 1 < len(argv):
            return argv[i + 1].decode(errors="replace")
        for prefix in ("-f=", "--f=", "--ConnectionFileMixin.connection_file=", "--existing="):
            if text.startswith(prefix):
                return text[len(prefix) :]
    return None


@functools.lru_cache(maxsize=16)
def _names_matcher(patterns: tuple[str, ...]) -> Callable[[str], object]:
    """One matcher for every wildcard bare name, as glob matches a name (case-sensitive,
    hidden names included)."""
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns)).match


def _bare_names(cwd: str, patterns: list[str]) -> list[str]:
    """Paths named by `patterns` (names without "/") in `cwd` and every directory above it.

    A name without wildcards is looked up, not listed (as glob does: it is found
    in a directory that may be searched but not listed)."""
    exact = [p for p in patterns if not glob.has_magic(p)]
    wild = tuple(p for p in patterns if glob.has_magic(p))
    match = _names_matcher(wild) if wild else None
    out: list[str] = []
    d = cwd
    while True:
        out.extend(
            path for path in (os.path.join(d, name) for name in exact) if os.path.lexists(path)
        )
        if match is not None:
            try:
                names = os.listdir(d)
            except OSError:
                names = []
            out.extend(os.path.join(d, name) for name in filter(match, names))
        parent = os.path.dirname(d)
        if parent == d:
            return out
        d = parent


def hidden_paths(cwd: str | os.PathLike[str], pol: SandboxPolicy) -> list[str]:
    """The existing paths a Restricted command in `cwd` must not read, expanded now."""
    home = os.path.expanduser("~")
    bare = [pattern for pattern in pol.deny_read if "/" not in pattern]
    out = _bare_names(os.path.abspath(cwd), bare) if bare else []
    for pattern in pol.deny_read:
        if "/" not in pattern:
            continue
        expanded = os.path.expanduser(pattern)
        if not os.path.isabs(expanded):
            expanded = os.path.join(home, expanded)
        out.extend(glob.glob(expanded, include_hidden=True))
    # Jupyter's secrets and the stores (the policy's), this kernel's connection file.
    conn = _connection_file()
    for pattern in pol.private:
        out.extend(glob.glob(pattern, include_hidden=True))
    private = (*pol.extra_hidden, *((os.path.abspath(conn),) if conn else ()))
    out.extend(p for p in private if os.path.lexists(p))
    out.extend(credential_files())  # GOOGLE_APPLICATION_CREDENTIALS and the like
    seen: set[str] = set()
    result = []
    for p in out:
        real = os.path.realpath(p)
        if real not in seen and os.path.lexists(real):
            seen.add(real)
            result.append(real)
    return result


def describe_hidden(pol: SandboxPolicy) -> str:
    """The deny list as the model and the user read it (tool description, status)."""
    return (
        ", ".join(pol.deny_read) + ", the Jupyter runtime dir, the phoenix store, "
        "IPython's history database wherever it is"
    )
