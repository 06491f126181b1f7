"""Keep secrets out of the store (everything written passes through `scrub`).

A conversation record is shared with notebooks and kept for ever, so a secret
that reached it would leak twice. Two rules, applied to every value written:
a string under a key whose name looks like a secret (the same patterns that keep
secrets out of tool environments) is replaced, and any occurrence of the
current ``ANTHROPIC_API_KEY`` in any string is replaced. Numbers and booleans
under secret-looking keys stay: token *counts* (``input_tokens``) are not
secrets and the context meter needs them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from phoenix_nb.core.secrets import DEFAULT_SECRET_PATTERNS

REDACTED = "[REDACTED]"
_MIN_KEY_LEN = 8  # shorter "keys" would redact ordinary words


def is_secret_name(name: str, patterns: Iterable[str] = DEFAULT_SECRET_PATTERNS) -> bool:
    upper = name.upper().replace("-", "_")
    return any(p in upper for p in patterns)


def scrub(
    value: Any,
    *,
    patterns: tuple[str, ...] = DEFAULT_SECRET_PATTERNS,
    api_key: str | None = None,
) -> Any:
    """A copy of a JSON tree with secrets replaced by ``[REDACTED]``."""
    key = os.environ.get("ANTHROPIC_API_KEY") if api_key is None else api_key
    if not key or len(key) < _MIN_KEY_LEN:
        key = None
    return _scrub(value, patterns, key, False)


def _scrub(value: Any, patterns: tuple[str, ...], key: str | None, secret: bool) -> Any:
    if isinstance(value, str):
        if secret and value:
            return REDACTED
        return value.replace(key, REDACTED) if key and key in value else value
    if isinstance(value, dict):
        return {
            k: _scrub(
                v, patterns, key, secret or (isinstance(k, str) and is_secret_name(k, patterns))
            )
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_scrub(v, patterns, key, secret) for v in value]
    return value
