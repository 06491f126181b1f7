"""Keep secrets out of the store (everything written passes through `scrub`).

A conversation record is shared with notebooks and kept for ever, so a secret
that reached it would leak twice. Two rules, applied to every value written:
a string under a key whose name looks like a secret (the same patterns that keep
secrets out of tool environments) is replaced, and any occurrence of a
credential phoenix sends to a model provider (``ANTHROPIC_API_KEY``,
``OPENAI_API_KEY``, the AWS keys … — `core.secrets.PROVIDER_CREDENTIALS`, read
from the environment at the time of writing) is replaced, also when it is
written reversed, base64 (standard or URL-safe), hex or percent-encoded
(`SecretValues.redact`; the encoded forms are compiled once per key set).
Numbers and booleans under secret-looking keys stay: token *counts*
(``input_tokens``) are not secrets and the context meter needs them.

This is the last line, not the first: the kernel tools scrub secrets from
their forks and redact their results before anything reaches the store.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from phoenix_nb.core.secrets import (
    DEFAULT_SECRET_PATTERNS,
    PROVIDER_CREDENTIALS,
    REDACTED,
    SecretValues,
)

__all__ = ["REDACTED", "is_secret_name", "provider_secrets", "scrub"]

_MIN_KEY_LEN = 8  # shorter "keys" would redact ordinary words


def is_secret_name(name: str, patterns: Iterable[str] = DEFAULT_SECRET_PATTERNS) -> bool:
    upper = name.upper().replace("-", "_")
    return any(p in upper for p in patterns)


def provider_secrets(environ: Mapping[str, str] | None = None) -> SecretValues:
    """The provider credentials present in `environ` (default: the process's)."""
    environ = os.environ if environ is None else environ
    found = (environ.get(name) or "" for name in PROVIDER_CREDENTIALS)
    return SecretValues.of(v for v in found if len(v) >= _MIN_KEY_LEN)


def scrub(
    value: Any,
    *,
    patterns: tuple[str, ...] = DEFAULT_SECRET_PATTERNS,
    api_key: str | None = None,
    secrets: SecretValues | None = None,
) -> Any:
    """A copy of a JSON tree with secrets replaced by ``[REDACTED]``.

    `secrets`: values to redact besides the provider credentials in the
    environment; `api_key`: one more key (kept for callers that hold one).
    """
    found = provider_secrets()
    if api_key and len(api_key) >= _MIN_KEY_LEN:
        found = found | SecretValues.of([api_key])
    if secrets is not None:
        found = found | secrets
    return _scrub(value, patterns, found, False)


def _scrub(value: Any, patterns: tuple[str, ...], found: SecretValues, secret: bool) -> Any:
    if isinstance(value, str):
        if secret and value:
            return REDACTED
        return found.redact(value)
    if isinstance(value, dict):
        return {
            k: _scrub(
                v, patterns, found, secret or (isinstance(k, str) and is_secret_name(k, patterns))
            )
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_scrub(v, patterns, found, secret) for v in value]
    return value
