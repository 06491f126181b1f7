"""The environment a command gets: a known-safe allowlist, never the kernel's whole one.

Why an allowlist: a denylist of name patterns (``TOKEN``, ``SECRET`` …) let
``OPENAI_KEY``, ``GH_PAT``, ``JWT``, ``DB_PASS``, ``COOKIE`` and credentials
inside values (``DATABASE_URL=postgres://u:pw@db``) through, and any secret a
command can read goes to the model provider. So a command (bash in both
modes, ripgrep for keyword_search) gets only:

* the names in ``SAFE_NAMES`` / ``SAFE_PATTERNS`` — the locale, the terminal,
  where things are (``PATH``, ``HOME``, ``TMPDIR``), the active
  virtualenv/conda/pyenv and toolchain locations — none of which carries a
  credential in ordinary use;
* plus what the user adds with ``c.Phoenix.env_allow`` (exact names, or
  ``fnmatch`` patterns such as ``MYAPP_*``). A pattern never admits a name that
  looks like a secret (``MYAPP_TOKEN``); an exact name is the user's decision.

Even an allowed name is withheld when its *value* embeds a credential: a URL
with user information (``scheme://user:pw@host``, ``https://key@sentry.io/1``),
``user:pw@host`` without a scheme, a URL whose query carries ``token=`` /
``password=`` / a signature, or the current ``ANTHROPIC_API_KEY``. Values of
built-in and pattern-admitted names are also checked for well-known token
shapes (``sk-…``, ``ghp_…``, ``AKIA…``, JWTs, PEM private keys).

The credentials phoenix sends to a model provider (``ANTHROPIC_API_KEY``,
``OPENAI_API_KEY``, the AWS keys, … — ``core.secrets.PROVIDER_CREDENTIALS``) are
never passed, whatever the user allows, and no value that contains one is.
Files that hold a credential and are named by a variable
(``GOOGLE_APPLICATION_CREDENTIALS``, ``AWS_SHARED_CREDENTIALS_FILE`` …) are
hidden from Restricted work with the other credential paths
(`credential_files`). What was withheld is reported by name count only
(``%phoenix status``), never by value.

`fork_secrets` picks, among the withheld values, those a fork of the kernel
must scrub from its memory (``tools/kernel/fork.py``): every value that is or looks
like a credential; not a short, numeric or path-only value (``/usr/share``,
``1``, ``true``) — those are withheld from commands as everything unknown is,
but they are no secret, and overwriting every copy of a path or a word in
memory would break the fork's own imports and lookups.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from phoenix_nb.core.secrets import PROVIDER_CREDENTIALS
from phoenix_nb.sandbox import credential_files

__all__ = [
    "ALWAYS_WITHHELD",
    "SAFE_NAMES",
    "SAFE_PATTERNS",
    "CommandEnvironment",
    "command_environment",
    "credential_files",
    "fork_secrets",
    "value_embeds_credential",
    "withheld_summary",
]

# Names that say where things are and how to talk to a terminal. Chosen so
# that none of them holds a credential in ordinary use; a value that does
# anyway is still caught by the value checks below.
SAFE_NAMES: frozenset[str] = frozenset(
    {
        # the shell and the user
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "PWD",
        "OLDPWD",
        "TMPDIR",
        "TMP",
        "TEMP",
        "TZ",
        "HOSTNAME",
        "SHLVL",
        # locale and terminal
        "LANG",
        "LANGUAGE",
        "TERM",
        "COLORTERM",
        "COLUMNS",
        "LINES",
        "NO_COLOR",
        "FORCE_COLOR",
        "CLICOLOR",
        "CLICOLOR_FORCE",
        "LS_COLORS",
        "PAGER",
        "EDITOR",
        "VISUAL",
        "LESS",
        "CI",
        "DEBIAN_FRONTEND",
        "TERM_PROGRAM",
        "MANPATH",
        # XDG base directories
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_CACHE_HOME",
        "XDG_STATE_HOME",
        "XDG_RUNTIME_DIR",
        "XDG_DATA_DIRS",
        "XDG_CONFIG_DIRS",
        # Python: virtualenv, conda, pyenv, interpreter switches
        "VIRTUAL_ENV",
        "VIRTUAL_ENV_PROMPT",
        "CONDA_PREFIX",
        "CONDA_DEFAULT_ENV",
        "CONDA_EXE",
        "CONDA_PYTHON_EXE",
        "CONDA_SHLVL",
        "CONDA_ENVS_PATH",
        "CONDA_PKGS_DIRS",
        "MAMBA_ROOT_PREFIX",
        "MAMBA_EXE",
        "PYENV_ROOT",
        "PYENV_VERSION",
        "PYENV_SHELL",
        "PYENV_DIR",
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONIOENCODING",
        "PYTHONUTF8",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONUNBUFFERED",
        "PYTHONNOUSERSITE",
        "PYTHONWARNINGS",
        "PYTHONPYCACHEPREFIX",
        "PIPX_HOME",
        "PIPX_BIN_DIR",
        "POETRY_HOME",
        "UV_CACHE_DIR",
        "UV_PYTHON",
        "PIP_CACHE_DIR",
        "PIP_INDEX_URL",  # URLs: a token in them is caught by the value checks
        "PIP_EXTRA_INDEX_URL",
        "PIP_REQUIRE_VIRTUALENV",
        "PIP_DISABLE_PIP_VERSION_CHECK",
        "UV_INDEX_URL",
        "UV_EXTRA_INDEX_URL",
        "HF_HOME",
        "TORCH_HOME",
        "MPLBACKEND",
        "MPLCONFIGDIR",
        # toolchains
        "GOPATH",
        "GOROOT",
        "GOBIN",
        "GOCACHE",
        "GOMODCACHE",
        "GOFLAGS",
        "GO111MODULE",
        "GOPROXY",
        "GOPRIVATE",
        "GONOSUMDB",
        "CARGO_HOME",
        "CARGO_TARGET_DIR",
        "RUSTUP_HOME",
        "RUSTUP_TOOLCHAIN",
        "RUSTFLAGS",
        "JAVA_HOME",
        "JDK_HOME",
        "JRE_HOME",
        "MAVEN_HOME",
        "M2_HOME",
        "GRADLE_HOME",
        "GRADLE_USER_HOME",
        "NODE_PATH",
        "NODE_ENV",
        "NPM_CONFIG_REGISTRY",
        "npm_config_registry",
        "NVM_DIR",
        "NVM_BIN",
        "NVM_INC",
        "VOLTA_HOME",
        "BUN_INSTALL",
        "DENO_DIR",
        "GEM_HOME",
        "GEM_PATH",
        "RBENV_ROOT",
        "CC",
        "CXX",
        "FC",
        "CFLAGS",
        "CXXFLAGS",
        "CPPFLAGS",
        "LDFLAGS",
        "MAKEFLAGS",
        "LD_LIBRARY_PATH",
        "LIBRARY_PATH",
        "CPATH",
        "C_INCLUDE_PATH",
        "CPLUS_INCLUDE_PATH",
        "PKG_CONFIG_PATH",
        "CMAKE_PREFIX_PATH",
        "CUDA_HOME",
        "CUDA_PATH",
        "CUDA_VISIBLE_DEVICES",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "NUMEXPR_MAX_THREADS",
        # certificates (paths) and proxies (values checked for credentials)
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "no_proxy",
        # commit identity (not credentials)
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "GIT_EDITOR",
        "GIT_PAGER",
    }
)
# Families of the same kind; a name among them that looks like a secret
# (CARGO_REGISTRY_TOKEN, CONDA_…_PASSWORD) is still withheld.
SAFE_PATTERNS: tuple[str, ...] = (
    "LC_*",
    "XDG_*",
    "CONDA_*",
    "MAMBA_*",
    "PYENV_*",
    "VIRTUAL_ENV*",
    "PIPX_*",
    "NVM_*",
    "RUSTUP_*",
    "CARGO_*",
)

# Never passed, whatever the user allows: the keys phoenix itself talks with.
# (The variables naming a credential file are withheld like any unknown name,
# and their files hidden in Restricted mode; a user may pass one exactly.)
ALWAYS_WITHHELD: frozenset[str] = frozenset(PROVIDER_CREDENTIALS)

# Name words that mark a secret; a user's pattern never admits such a name.
_SECRET_WORDS = frozenset(
    {
        "KEY",
        "KEYS",
        "TOKEN",
        "TOKENS",
        "SECRET",
        "SECRETS",
        "PASS",
        "PASSWD",
        "PASSWORD",
        "PASSPHRASE",
        "PWD",
        "PW",
        "PAT",
        "JWT",
        "BEARER",
        "COOKIE",
        "COOKIES",
        "SESSION",
        "SK",
        "AUTH",
        "CRED",
        "CREDS",
        "CREDENTIAL",
        "CREDENTIALS",
        "PRIVATE",
        "SIGNING",
        "DSN",
        "SALT",
        "OTP",
        "PIN",
        "CERT",
    }
)
_SECRET_FRAGMENTS = (
    "APIKEY",
    "ACCESSKEY",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "TOKEN",
    "CREDENTIAL",
    "PRIVATEKEY",
    "AUTH",
)

# A URL with user information: scheme://anything-but-slash@…  (Sentry DSNs too).
_URL_USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^/\s@?#]*@")
# user:password@host without a scheme (MySQL/Go DSNs, proxy settings).
_BARE_USERINFO = re.compile(r"(?:^|[\s,;=])[^\s/:@,;=]+:[^\s/@,;]+@[\w.\-\[\]]+")
# A query string carrying a credential.
_QUERY_SECRET = re.compile(
    r"[?&;](?:access_token|token|auth|api[_-]?key|key|password|passwd|pwd|secret|"
    r"client_secret|sig|signature|x-amz-signature|x-amz-credential|x-goog-signature|sas)=",
    re.IGNORECASE,
)
# Well-known token shapes, checked for names the user did not name exactly.
_TOKEN_SHAPES = re.compile(
    r"sk-ant-|\bsk-[A-Za-z0-9_\-]{20,}|\bgh[pousr]_[A-Za-z0-9]{20,}|github_pat_|"
    r"\bxox[abpre]-|\bAKIA[0-9A-Z]{16}\b|\bASIA[0-9A-Z]{16}\b|glpat-|\bnpm_[A-Za-z0-9]{36}|"
    r"\bAIza[0-9A-Za-z_\-]{35}|-----BEGIN [A-Z ]*PRIVATE KEY-----|"
    r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"
)
_MIN_KEY_LEN = 8


def value_embeds_credential(
    value: str, *, api_key: str | None = None, keys: Iterable[str] = ()
) -> bool:
    """Whether a value carries a credential inside it (URL user info, query secret, our keys)."""
    for key in (api_key or "", *keys):
        if len(key) >= _MIN_KEY_LEN and key in value:
            return True
    return bool(
        _URL_USERINFO.search(value) or _BARE_USERINFO.search(value) or _QUERY_SECRET.search(value)
    )


def _name_looks_secret(name: str) -> bool:
    upper = name.upper()
    words = [w for w in re.split(r"[^A-Z0-9]+", upper) if w]
    if any(w in _SECRET_WORDS for w in words):
        return True
    squashed = "".join(words)
    return any(fragment in squashed for fragment in _SECRET_FRAGMENTS)


@dataclass(frozen=True)
class CommandEnvironment:
    """The environment for one command, and which names were kept out (never values)."""

    env: dict[str, str]
    withheld: tuple[str, ...]


def _admitted(name: str, exact: frozenset[str], patterns: tuple[str, ...]) -> str | None:
    """How a name gets in: "exact" (user named it), "safe", "pattern", or None."""
    if name in ALWAYS_WITHHELD:
        return None
    if name in exact:
        return "exact"
    if name in SAFE_NAMES:
        return "safe"
    if _name_looks_secret(name):
        return None  # a pattern never admits a secret-looking name
    if any(fnmatch.fnmatchcase(name, p) for p in SAFE_PATTERNS):
        return "safe"
    if any(fnmatch.fnmatchcase(name, p) for p in patterns):
        return "pattern"
    return None


def command_environment(
    *,
    allow: Iterable[str] = (),
    deny: Iterable[str] = (),
    extra: Mapping[str, str] | None = None,
    source: Mapping[str, str] | None = None,
) -> CommandEnvironment:
    """The environment a command gets from `source` (default ``os.environ``).

    `allow`: the user's additions (exact names or fnmatch patterns).
    `deny`: case-insensitive name substrings that keep out a name a user's
    pattern admitted (the older ``secret_patterns`` setting); an exact name
    the user allowed and the built-in safe names are not affected.
    `extra`: set by phoenix itself (e.g. the private TMPDIR), passed as given.
    """
    source = os.environ if source is None else source
    found = _filtered(
        tuple(source.items()),
        tuple(allow),
        tuple(d.lower() for d in deny if d),
        _provider_keys(source),
    )
    env = dict(found.env)
    if extra:
        env.update(extra)
    return CommandEnvironment(env, found.withheld)


@functools.lru_cache(maxsize=16)
def _filtered(
    items: tuple[tuple[str, str], ...],
    allowed: tuple[str, ...],
    denied: tuple[str, ...],
    keys: tuple[str, ...],
) -> CommandEnvironment:
    """The filtering itself, remembered for the same environment and settings: every
    command starts with it (~0.2 ms of name and value patterns), and the kernel's
    environment rarely changes between two commands. The key is the whole
    environment, so any change is filtered afresh."""
    exact = frozenset(a for a in allowed if not any(c in a for c in "*?["))
    patterns = tuple(a for a in allowed if a not in exact)
    env: dict[str, str] = {}
    withheld: list[str] = []
    for name, value in items:
        how = _admitted(name, exact, patterns)
        if how == "pattern" and any(d in name.lower() for d in denied):
            how = None
        if how is not None and value_embeds_credential(value, keys=keys):
            how = None
        if how is not None and how != "exact" and _TOKEN_SHAPES.search(value):
            how = None
        if how is None:
            withheld.append(name)
        else:
            env[name] = value
    return CommandEnvironment(env, tuple(sorted(withheld)))


def _provider_keys(source: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(
        v
        for name in PROVIDER_CREDENTIALS
        for v in (source.get(name), os.environ.get(name))
        if v and len(v) >= _MIN_KEY_LEN
    )


_PLAIN_VALUE = re.compile(r"[0-9.:,+\-]*|true|false|yes|no|on|off", re.IGNORECASE)


def _is_plain(value: str) -> bool:
    """Short, numeric, boolean, one plain word (``production``) or only absolute paths:
    configuration, not a credential (and a word or path starred everywhere in a
    fork's memory would change the interpreter's own strings)."""
    if len(value) < _MIN_KEY_LEN or _PLAIN_VALUE.fullmatch(value) or value.isalpha():
        return True
    parts = [p for p in value.split(os.pathsep) if p]
    return bool(parts) and all(p.startswith("/") and " " not in p for p in parts)


def fork_secrets(withheld: Iterable[str], source: Mapping[str, str] | None = None) -> list[str]:
    """The values of withheld variables a fork of the kernel scrubs from its memory.

    Provider credentials and any value under a secret-looking name, embedding
    a credential or shaped like a token always; any other withheld value
    unless it is plainly configuration (`_is_plain`).
    """
    source = os.environ if source is None else source
    keys = _provider_keys(source)
    out = []
    for name in withheld:
        value = source.get(name)
        if not value or len(value) < _MIN_KEY_LEN:
            continue
        credential = (
            name in ALWAYS_WITHHELD
            or _name_looks_secret(name)
            or value_embeds_credential(value, keys=keys)
            or _TOKEN_SHAPES.search(value) is not None
        )
        if credential or not _is_plain(value):
            out.append(value)
    return out


def withheld_summary(allow: Iterable[str] = (), deny: Iterable[str] = ()) -> str:
    """One line for ``%phoenix status``: how many variables commands do not get."""
    count = len(command_environment(allow=allow, deny=deny).withheld)
    noun = "variable" if count == 1 else "variables"
    return (
        f"{count} environment {noun} withheld from commands "
        "(not shown; add names with c.Phoenix.env_allow)"
    )
