"""Names that look like secrets, stated once for every layer that keeps secrets home.

The tools keep variables with such names out of a command's environment; the
store replaces strings under such keys before anything is written. Both read
this list, so a pattern added here protects both (the store must not import
the tools to learn it).
"""

from __future__ import annotations

# Case-insensitive substrings of a name (environment variable or JSON key).
DEFAULT_SECRET_PATTERNS: tuple[str, ...] = (
    "API_KEY",
    "APIKEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "PRIVATE_KEY",
    "AUTH",
)
