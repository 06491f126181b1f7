"""How a kernel tool reaches the kernel, and what it must never let out.

`KernelTool` is what the six tools share: after the schema check, `kernel_for`
answers the port or the error that says why there is none (kernel access off,
no kernel attached), and the tool's work gets the port.

Every read of a user object and every line of scratchpad code runs in a
copy-on-write fork of the kernel (`fork.py`), never in the kernel process:
`fork_job` is the one way the tools start one.

Secrets: before any of these forks runs a line of its job, it overwrites in
its own memory every value it must not show (`fork_secrets`: provider keys,
the kernel's session key and connection info, withheld environment values,
secret-named variables and the literals the history assigned to such names;
`fork_memory.scrub_secrets` does the overwriting), and every shared mapping
it inherited is made private. On the way out the same values are redacted
from what the tools return, also reversed, base64, hex or percent-encoded
(`SecretValues.redact`), with string literals assigned to secret-looking
names (`redact`). What these tools read goes to the model provider (README).
"""

from __future__ import annotations

import ast
import configparser
import contextlib
import json
import os
import re
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from phoenix_nb.commands import credential_files
from phoenix_nb.core.displays import ErrorDisplay, ToolErrorKind
from phoenix_nb.core.secrets import PROVIDER_CREDENTIALS, SecretValues
from phoenix_nb.core.values import ImageData, ToolResult
from phoenix_nb.tools.base import SchemaTool, ToolContext
from phoenix_nb.tools.kernel.fork import ForkLimits, ForkOutcome, run_in_fork
from phoenix_nb.tools.kernel.summarize import cut, looks_secret
from phoenix_nb.tools.kernel_port import KernelPort

__all__ = [
    "KERNEL_ACCESS_OFF",
    "MAX_IMAGES",
    "MAX_OUTPUT",
    "NO_KERNEL",
    "REDACTED",
    "KernelTool",
    "error_result",
    "fork_environment",
    "fork_job",
    "fork_secrets",
    "fork_trouble",
    "images_of",
    "kernel_for",
    "redact",
    "secret_values",
]

KERNEL_ACCESS_OFF = (
    'Kernel access is off in this notebook (c.Phoenix.kernel_access = "off"), so '
    "{name} cannot read or use the kernel. Work from files and bash instead, or ask the "
    'user to turn it on with `%config Phoenix.kernel_access = "on"`.'
)
NO_KERNEL = (
    "No Jupyter kernel is attached to this conversation, so {name} has nothing to read. "
    "It works when the conversation runs from a %%phoenix cell."
)
REDACTED = "[REDACTED]"
MAX_OUTPUT = 20_000  # characters a tool returns to the model
MAX_IMAGES = 4


def error_result(tool_use_id: str, text: str, kind: ToolErrorKind | None = None) -> ToolResult:
    display = ErrorDisplay(kind) if kind is not None else None
    return ToolResult(tool_use_id=tool_use_id, content=text, is_error=True, display=display)


def kernel_for(ctx: ToolContext, name: str, tool_use_id: str) -> KernelPort | ToolResult:
    """The kernel port, or the error result that explains why there is none."""
    if not ctx.kernel_access:
        return error_result(
            tool_use_id, KERNEL_ACCESS_OFF.format(name=name), ToolErrorKind.KERNEL_ACCESS_OFF
        )
    if ctx.kernel is None:
        return error_result(tool_use_id, NO_KERNEL.format(name=name), ToolErrorKind.NO_KERNEL)
    return ctx.kernel


class KernelTool(SchemaTool):
    """A kernel tool: after the schema check, the kernel is checked once (access off,
    no kernel attached: an error that says so) and the tool's work gets the port.

    Their calls are in the record's "other" group with no summary line: the renderers
    give each its own status line (`notebook/_render/view.py`'s ``kernel_status``)."""

    group = "other"
    summary_field = ""

    async def execute(
        self, input: Mapping[str, Any], ctx: ToolContext, tool_use_id: str
    ) -> ToolResult:
        port = kernel_for(ctx, self.name, tool_use_id)
        if isinstance(port, ToolResult):
            return port
        return await self.use_kernel(port, input, ctx, tool_use_id)

    @abstractmethod
    async def use_kernel(
        self, port: KernelPort, input: Mapping[str, Any], ctx: ToolContext, tool_use_id: str
    ) -> ToolResult:
        """The tool's work, with the conversation's kernel."""


def fork_environment(ctx: ToolContext) -> dict[str, str]:
    return ctx.commands.environment().env


def secret_values(port: KernelPort, env: Mapping[str, str]) -> list[str]:
    """Values of secret-named str/bytes variables and of secret-named withheld env variables.

    Runs in the kernel, so it reads only exact `str`/`bytes` values (no user
    code can run: no attribute lookups, no isinstance hooks).
    """
    found: set[str] = set()
    namespace = port.user_namespace()
    for name in list(namespace.keys()):
        if type(name) is not str or not looks_secret(name):
            continue
        value = namespace.get(name)
        if type(value) is str:
            found.add(value)
        elif type(value) is bytes:
            found.add(value.decode("utf-8", "replace"))
    for name, value in os.environ.items():
        if env.get(name) != value and (looks_secret(name) or name in PROVIDER_CREDENTIALS):
            found.add(value)
    return sorted((s for s in found if len(s) >= 4), key=len, reverse=True)


def _history_literals(port: KernelPort) -> list[str]:
    """String literals the kernel's input history assigns to secret-looking names.

    A value reassigned or deleted since is gone from the namespace but not from
    `In`, `_i<n>` or the history manager, so it is found in the sources.
    """
    found: list[str] = []
    for entry in port.history(1 << 30):
        source = entry.source
        if "=" not in source and ":" not in source:
            continue
        for pattern in (_ASSIGNMENT, _DICT_ENTRY):
            for match in pattern.finditer(source):
                if not looks_secret(match.group("name")):
                    continue
                literal = match.group("value")
                with contextlib.suppress(ValueError, SyntaxError, MemoryError, RecursionError):
                    value = ast.literal_eval(literal)
                    if isinstance(value, bytes):
                        value = value.decode("utf-8", "replace")
                    if isinstance(value, str):
                        found.append(value)
                quote = match.group("q")
                found.append(literal[literal.index(quote) + len(quote) : -len(quote)])
    return found


# Where the SDKs a provider drives (botocore, google-auth, gcloud) read credentials
# when no variable names a file: each is read as JSON or INI, whichever it is.
_DEFAULT_CREDENTIAL_FILES = (
    "~/.aws/credentials",
    "~/.aws/config",
    "~/.config/gcloud/application_default_credentials.json",
)
_CREDENTIAL_CACHE_DIRS = (  # SSO tokens, assumed-role and SSO credentials (JSON)
    "~/.aws/sso/cache",
    "~/.aws/cli/cache",
    "~/.aws/boto/cache",
)
_MAX_CREDENTIAL_FILE = 64 << 10  # a credential file is a few KB
_MAX_CACHE_FILES = 64


def _credential_paths() -> list[str]:
    """The credential files to read: those the environment names (a directory such
    as ``CLOUDSDK_CONFIG``: its ADC file), the SDKs' default files and the newest
    files of their caches."""
    paths: list[str] = []
    for path in credential_files():
        if os.path.isdir(path):
            paths.append(os.path.join(path, "application_default_credentials.json"))
        else:
            paths.append(path)
    paths += [os.path.expanduser(p) for p in _DEFAULT_CREDENTIAL_FILES]
    for folder in _CREDENTIAL_CACHE_DIRS:
        with contextlib.suppress(OSError):
            entries = sorted(
                os.scandir(os.path.expanduser(folder)),
                key=lambda e: e.stat().st_mtime,
                reverse=True,
            )
            paths += [e.path for e in entries[:_MAX_CACHE_FILES] if e.name.endswith(".json")]
    return list(dict.fromkeys(paths))


def _secret_fields(data: Any, found: list[str], depth: int = 0) -> None:
    """Values under secret-looking keys of parsed JSON, at any depth (an SSO cache
    nests them under ``Credentials``)."""
    if depth > 6:
        return
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(value, str) and isinstance(key, str) and looks_secret(key):
                found.append(value)
            elif isinstance(value, dict | list):
                _secret_fields(value, found, depth + 1)
    elif isinstance(data, list):
        for item in data:
            _secret_fields(item, found, depth + 1)


def _file_values(text: str) -> list[str]:
    """The secret values of one credential file: JSON (service-account and authorized-
    user keys, SSO and CLI caches), INI (``~/.aws/credentials`` and ``config``: every
    profile's), or a bare token (a web-identity token file)."""
    found: list[str] = []
    try:
        _secret_fields(json.loads(text), found)
    except ValueError:
        parser = configparser.RawConfigParser(strict=False, interpolation=None)
        try:
            parser.read_string(text)
        except configparser.Error:
            parser = configparser.RawConfigParser()
        for section in parser.sections():
            for key, value in parser.items(section):
                if value and looks_secret(key):
                    found.append(value.strip().strip("\"'"))
        if not parser.sections() and text.strip() and "\n" not in text.strip():
            found.append(text.strip())
    out: list[str] = []
    for value in found:
        out.append(value)
        # a PEM key line by line: found in memory with real or JSON-escaped newlines
        if "\n" in value:
            out += [line for line in value.splitlines() if "-----" not in line and line]
    return out


def _credential_file_values() -> list[str]:
    """The secret fields of every credential file the provider SDKs read: the files
    the environment names (``GOOGLE_APPLICATION_CREDENTIALS``, ``AWS_SHARED_
    CREDENTIALS_FILE`` …), ``~/.aws/credentials`` and ``config`` (INI, every
    profile), the AWS SSO and CLI caches and gcloud's application-default file (JSON).

    The kernel's SDKs hold what they parsed from these files (botocore keeps the
    whole parsed INI, every profile's secret), so a fork scrubs all of them, not
    only the profile in use. Read only when small.
    """
    found: list[str] = []
    for path in _credential_paths():
        with contextlib.suppress(OSError, ValueError):
            if not os.path.isfile(path) or os.path.getsize(path) > _MAX_CREDENTIAL_FILE:
                continue
            found += _file_values(Path(path).read_text(encoding="utf-8", errors="replace"))
    return found


def fork_secrets(ctx: ToolContext, port: KernelPort) -> SecretValues:
    """Everything a fork of the kernel must not show, as of now (built in the kernel).

    What the conversation's runner knows (`CommandRunner.scrub_values`: the provider
    credentials and every withheld environment value that is or may be a credential,
    what the providers hold now: tokens their SDKs minted, credentials botocore
    resolved), the secret fields of every credential file the SDKs read, the
    values of secret-named variables, the literals the input history assigned
    to secret-named variables, and the
    kernel's session key and connection info. Reads only exact str/bytes
    values and the history's text: no user code runs in the kernel.
    """
    values = ctx.commands.scrub_values()
    values += _credential_file_values()
    values += secret_values(port, {})
    values += _history_literals(port)
    return SecretValues.of(values) | port.connection_secrets()


_ASSIGNMENT = re.compile(
    r"(?m)^(?P<lead>[ \t]*(?P<name>[A-Za-z_][A-Za-z0-9_]*)[ \t]*(?::[^=\n]*)?=[ \t]*)"
    r"(?P<value>[rRbBuUfF]{0,2}(?P<q>'''|\"\"\"|'|\").*?(?P=q))"
)
_DICT_ENTRY = re.compile(
    r"(?P<lead>(?P<kq>['\"])(?P<name>[A-Za-z0-9_\-]+)(?P=kq)[ \t]*:[ \t]*)"
    r"(?P<value>[rRbBuU]{0,2}(?P<q>'|\").*?(?P=q))"
)


def redact(text: str, secrets: Sequence[str] | SecretValues) -> str:
    """Replace secret values (in every form `SecretValues.redact` knows), and string
    literals assigned to secret-looking names."""
    if not isinstance(secrets, SecretValues):
        secrets = SecretValues.of(secrets)
    text = secrets.redact(text)

    def literal(match: re.Match[str]) -> str:
        if looks_secret(match.group("name")):
            return f'{match.group("lead")}"{REDACTED}"'
        return match.group(0)

    text = _ASSIGNMENT.sub(literal, text)
    return _DICT_ENTRY.sub(literal, text)


def images_of(records: Sequence[Mapping[str, Any]], label: str) -> tuple[ImageData, ...]:
    out: list[ImageData] = []
    for record in records:
        png = record.get("png")
        if isinstance(png, str) and png and len(out) < MAX_IMAGES:
            out.append(ImageData("image/png", png, str(record.get("name") or label)))
    return tuple(out)


def fork_trouble(outcome: ForkOutcome, what: str) -> str:
    if outcome.timed_out:
        return (
            f"{what} did not finish in time; the forked process was killed "
            "(the kernel is unaffected)."
        )
    failure = outcome.failure()
    if failure:
        tail = outcome.stderr.strip()
        return f"{what} failed: {failure}. The kernel is unaffected." + (
            f"\n{cut(tail, 2000)}" if tail else ""
        )
    return ""


async def fork_job(
    ctx: ToolContext,
    port: KernelPort,
    job: Any,
    *,
    timeout: float,
    confine: bool,
    secrets: SecretValues,
) -> ForkOutcome:
    return await run_in_fork(
        job,
        port=port,
        env=fork_environment(ctx),
        cwd=ctx.cwd,
        confine=ctx.commands if confine else None,
        limits=ForkLimits(timeout=timeout),
        secrets=secrets,
    )
