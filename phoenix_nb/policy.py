"""The admin's policy: a TOML file the user cannot write, read once when phoenix loads.

On a JupyterHub the admin owns the provider key and the bill, but every setting
a kernel reads (`/etc/ipython`, the user's profile, `%config`) is the user's to
override (measured: the user's profile wins per trait, `%config` wins over
both). The one lever that beats them is a file the spawner names in the
environment: `PHOENIX_POLICY` (default `/etc/phoenix/policy.toml`). It bounds
what the settings may say; a setting beyond a bound is refused with one line
naming the policy file and the line of the bound (`PolicyRefusal`).

What this is: a guard rail against mistakes. The user's code runs in the same
process, as the same uid, and can patch anything here; what must hold (the key,
the budgets, the audit) is enforced by the gateway (`phoenix_nb.hub`), outside
the kernel. The gateway reads the same file for its budgets and audit sink.

The file is parsed into a `Policy` value once (`load_policy`); the runtime takes
it as a value (`Settings.policy`), never from module state. Line numbers come
from a scan of the file's own text (tomllib keeps none), which covers the shapes
the README documents: `[table]` headers and `key = value` lines.
"""

from __future__ import annotations

import fnmatch
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from phoenix_nb.errors import PhoenixError

__all__ = [
    "DEFAULT_POLICY_PATH",
    "HUB_TOKEN_VARIABLES",
    "POLICY_VARIABLE",
    "UPSTREAM_KINDS",
    "Budgets",
    "Policy",
    "PolicyError",
    "PolicyRefusal",
    "load_policy",
    "parse_policy",
]

POLICY_VARIABLE = "PHOENIX_POLICY"
DEFAULT_POLICY_PATH = "/etc/phoenix/policy.toml"
# The user's Hub token, which a kernel sends to the gateway as its credential
# (JPY_API_TOKEN is the older spelling single-user servers still set).
HUB_TOKEN_VARIABLES = ("JUPYTERHUB_API_TOKEN", "JPY_API_TOKEN")
UPSTREAM_KINDS = ("anthropic", "openai", "bedrock", "vertex")  # the gateway's wire formats


class PolicyError(PhoenixError):
    """The policy file cannot be read or says something phoenix does not understand."""


class PolicyRefusal(PhoenixError):
    """A setting or option beyond a bound of the admin's policy (the message names both)."""


@dataclass(frozen=True)
class Budgets:
    """Dollars (and tokens) a user may spend, enforced by the gateway; None: no bound.

    `turn` and `conversation` also bound the kernel's own turn budget
    (`Settings.max_turn_cost`, `max_conversation_cost`), so the user sees them."""

    turn: float | None = None
    conversation: float | None = None
    user_daily: float | None = None
    user_daily_tokens: int | None = None


@dataclass(frozen=True)
class Policy:
    """One policy file, parsed. `lines` maps "table.key" to its line in the file."""

    path: str
    gateway_url: str | None = None
    upstream: str = "anthropic"  # the wire format the gateway's upstream speaks
    providers: tuple[str, ...] | None = None  # None: any
    base_urls: tuple[str, ...] | None = None  # None: any (a gateway pins its own)
    models: tuple[str, ...] | None = None  # glob patterns; None: any
    default_model: str | None = None
    budgets: Budgets = field(default_factory=Budgets)
    allow_unrestricted: bool = True
    deny_read: tuple[str, ...] = ()
    mcp_allow_project_files: bool = True
    mcp_servers: Mapping[str, Any] | None = None  # None: no bound (c.Phoenix.mcp_servers)
    audit_path: str | None = None
    lines: Mapping[str, int] = field(default_factory=dict)
    source: str = ""  # how it was found: "$PHOENIX_POLICY" or "the default path"

    def where(self, key: str) -> str:
        """'the policy /etc/phoenix/policy.toml line 4 ([models] allowed)'."""
        table, _, name = key.partition(".")
        line = self.lines.get(key)
        at = f" line {line}" if line else ""
        return f"the policy {self.path}{at} ([{table}] {name})"

    def refuse(self, key: str, what: str) -> PolicyRefusal:
        return PolicyRefusal(f"Refused by {self.where(key)}: {what}")

    def model_allowed(self, model: str) -> bool:
        return self.models is None or any(fnmatch.fnmatchcase(model, p) for p in self.models)

    def check_model(self, model: str) -> None:
        """Raise PolicyRefusal unless `model` matches `[models] allowed`."""
        if not self.model_allowed(model):
            allowed = ", ".join(self.models or ())
            raise self.refuse("models.allowed", f"model {model!r} is not allowed ({allowed}).")

    def check_mode(self, mode: str) -> None:
        """Raise PolicyRefusal for Unrestricted mode where `[modes]` forbids it."""
        if mode == "unrestricted" and not self.allow_unrestricted:
            raise self.refuse(
                "modes.allow_unrestricted",
                "Unrestricted mode may not be approved here; the conversation stays Restricted.",
            )

    def check_provider(self, provider: str, base_url: str | None) -> None:
        """Raise PolicyRefusal for a provider or base URL the policy does not allow.
        With a gateway, every request goes to it: no other base URL is allowed."""
        if self.gateway_url is not None:
            if base_url is not None and base_url.rstrip("/") != self.gateway_url.rstrip("/"):
                raise self.refuse(
                    "gateway.url",
                    f"every request goes to the gateway {self.gateway_url}, not {base_url!r}.",
                )
            if provider != self.gateway_provider:
                raise self.refuse(
                    "gateway.url",
                    f"the gateway speaks {self.gateway_provider!r}; provider {provider!r} "
                    "is not allowed.",
                )
            return
        if self.providers is not None and provider not in self.providers:
            raise self.refuse(
                "providers.allowed",
                f"provider {provider!r} is not allowed ({', '.join(self.providers)}).",
            )
        if self.base_urls is not None and (base_url or "") not in self.base_urls:
            raise self.refuse("providers.base_urls", f"base URL {base_url!r} is not allowed.")

    @property
    def gateway_provider(self) -> str:
        """The provider a kernel uses to talk to the gateway (its upstream's wire format)."""
        return self.upstream

    def summary(self) -> list[str]:
        """What `%phoenix status` shows: where the policy came from and what it bounds."""
        b = self.budgets
        budgets = ", ".join(
            f"{name} ${value:g}"
            for name, value in (
                ("turn", b.turn),
                ("conversation", b.conversation),
                ("today", b.user_daily),
            )
            if value is not None
        )
        found = f"from {self.source}, " if self.source else ""
        lines = [f"{self.path} ({found}read when phoenix loaded)"]
        if self.gateway_url:
            lines.append(f"gateway {self.gateway_url} (your Hub token is the credential)")
        if self.models is not None:
            lines.append("models " + ", ".join(self.models))
        if budgets:
            lines.append("budgets " + budgets)
        lines.append(
            "unrestricted " + ("may be approved" if self.allow_unrestricted else "forbidden")
        )
        if self.deny_read:
            lines.append("hidden also " + ", ".join(self.deny_read))
        return lines


def _toml_error(path: str, message: str) -> str:
    """tomllib's "Invalid value (at line 3, column 5)" as "The policy P line 3: not valid
    TOML: invalid value (column 5)", the line first like every other policy error
    (Python 3.11's TOMLDecodeError keeps the position only in its message)."""
    m = re.fullmatch(r"(.*) \(at line (\d+), column (\d+)\)", message)
    if m is None:
        return f"The policy {path}: not valid TOML: {message}"
    what, line, column = m.groups()
    what = what[:1].lower() + what[1:]
    return f"The policy {path} line {line}: not valid TOML: {what} (column {column})"


def _line_numbers(text: str) -> dict[str, int]:
    """ "table.key" -> 1-based line, for `[table]` headers and `key = …` lines (a key
    before any header is a top-level key: "table" itself, which must be a table)."""
    lines: dict[str, int] = {}
    table = ""
    header = re.compile(r"^\s*\[\s*([A-Za-z0-9_.\-]+)\s*\]\s*(#.*)?$")
    assignment = re.compile(r"^\s*([A-Za-z0-9_\-]+)\s*=")
    for number, line in enumerate(text.splitlines(), start=1):
        if m := header.match(line):
            table = m.group(1)
            lines.setdefault(table, number)
        elif m := assignment.match(line):
            lines.setdefault(f"{table}.{m.group(1)}" if table else m.group(1), number)
    return lines


_KNOWN: dict[str, frozenset[str]] = {
    "gateway": frozenset({"url", "upstream"}),
    "providers": frozenset({"allowed", "base_urls"}),
    "models": frozenset({"allowed", "default"}),
    "budgets": frozenset({"turn", "conversation", "user_daily", "user_daily_tokens"}),
    "modes": frozenset({"allow_unrestricted"}),
    "sandbox": frozenset({"deny_read"}),
    "mcp": frozenset({"allow_project_files", "servers"}),
    "audit": frozenset({"path"}),
}


class _Reader:
    """Typed reads of the parsed tables; a wrong type is a PolicyError naming its line."""

    def __init__(self, path: str, data: Mapping[str, Any], lines: Mapping[str, int]) -> None:
        self.path, self.data, self.lines = path, data, lines

    def error(self, key: str, what: str) -> PolicyError:
        line = self.lines.get(key) or self.lines.get(key.partition(".")[0])
        at = f" line {line}" if line else ""
        return PolicyError(f"The policy {self.path}{at}: {key} {what}")

    def get(self, key: str) -> Any:
        table, _, name = key.partition(".")
        return (self.data.get(table) or {}).get(name)

    def text(self, key: str) -> str | None:
        value = self.get(key)
        if value is not None and not isinstance(value, str):
            raise self.error(key, "must be a string")
        return value

    def texts(self, key: str) -> tuple[str, ...] | None:
        value = self.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(key, "must be a list of strings")
        return tuple(value)

    def number(self, key: str) -> float | None:
        value = self.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise self.error(key, "must be a number of dollars, 0 or more")
        return float(value)

    def flag(self, key: str, default: bool) -> bool:
        value = self.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.error(key, "must be true or false")
        return value


def parse_policy(text: str, path: str) -> Policy:
    """The policy `text` (read from `path`, named in messages) as a value; raises
    PolicyError for bad TOML, unknown tables or keys, and wrong types."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(_toml_error(path, str(exc))) from None
    lines = _line_numbers(text)
    r = _Reader(path, data, lines)
    for table, values in data.items():
        if table not in _KNOWN:
            raise r.error(table, f"is not a policy table (known: {', '.join(sorted(_KNOWN))})")
        if not isinstance(values, Mapping):
            raise r.error(table, "must be a table")
        for key in values:
            if key not in _KNOWN[table]:
                raise r.error(
                    f"{table}.{key}", f"is unknown (known: {', '.join(sorted(_KNOWN[table]))})"
                )
    upstream = r.text("gateway.upstream") or "anthropic"
    if upstream not in UPSTREAM_KINDS:
        raise r.error("gateway.upstream", f"must be one of {', '.join(UPSTREAM_KINDS)}")
    tokens = r.get("budgets.user_daily_tokens")
    if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int)):
        raise r.error("budgets.user_daily_tokens", "must be a whole number of tokens")
    servers = r.get("mcp.servers")
    if servers is not None and not isinstance(servers, Mapping):
        raise r.error("mcp.servers", "must be a table of servers")
    gateway = r.text("gateway.url")
    return Policy(
        path=path,
        gateway_url=gateway.rstrip("/") if gateway else None,
        upstream=upstream,
        providers=r.texts("providers.allowed"),
        base_urls=r.texts("providers.base_urls"),
        models=r.texts("models.allowed"),
        default_model=r.text("models.default"),
        budgets=Budgets(
            turn=r.number("budgets.turn"),
            conversation=r.number("budgets.conversation"),
            user_daily=r.number("budgets.user_daily"),
            user_daily_tokens=tokens,
        ),
        allow_unrestricted=r.flag("modes.allow_unrestricted", True),
        deny_read=r.texts("sandbox.deny_read") or (),
        mcp_allow_project_files=r.flag("mcp.allow_project_files", True),
        mcp_servers=dict(servers) if servers is not None else None,
        audit_path=r.text("audit.path"),
        lines=lines,
    )


def load_policy(environ: Mapping[str, str] | None = None) -> Policy | None:
    """The policy `PHOENIX_POLICY` names (default /etc/phoenix/policy.toml), or None.

    A missing file at the default path means no policy (a laptop); a path the
    admin named explicitly that cannot be read is a PolicyError: failing closed,
    since the admin meant a policy to hold."""
    environ = os.environ if environ is None else environ
    named = environ.get(POLICY_VARIABLE) or ""
    path = Path(named or DEFAULT_POLICY_PATH)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        if named:
            raise PolicyError(f"The policy {path} ({POLICY_VARIABLE}) does not exist.") from None
        return None
    except OSError as exc:
        raise PolicyError(f"The policy {path} cannot be read: {exc.strerror}.") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise PolicyError(f"The policy {path} line {line}: not UTF-8 text.") from None
    policy = parse_policy(text, str(path))
    return replace(policy, source=f"${POLICY_VARIABLE}" if named else "the default path")
