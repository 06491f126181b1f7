"""Names that look like secrets, stated once for every layer that keeps secrets home.

The tools keep variables with such names out of a command's environment; the
store replaces strings under such keys before anything is written. Both read
this list, so a pattern added here protects both (the store must not import
the tools to learn it).

`SecretValues` is the other half: the values themselves (provider keys, the
kernel's session key, withheld environment values, secret-named variables),
as one small value every layer can take — the kernel tools scrub them from a
fork's memory and redact them from results, the store redacts them before
writing — with the encoded spellings a leak would use (reversed, base64, hex,
percent-encoding) precomputed once per set.
"""

from __future__ import annotations

import base64
import functools
import re
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "CREDENTIAL_FILE_VARIABLES",
    "DEFAULT_SECRET_PATTERNS",
    "PROVIDER_CREDENTIALS",
    "REDACTED",
    "SecretValues",
    "encoded_forms",
]

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


# Environment variables that hold the credentials phoenix (or the SDK clients it
# drives) sends to a model provider. Never passed to a command, scrubbed from
# every fork of the kernel and redacted from what phoenix writes.
PROVIDER_CREDENTIALS: tuple[str, ...] = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "OPENAI_API_KEY",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_BEARER_TOKEN_BEDROCK",
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
    "OPENROUTER_API_KEY",
    # On a JupyterHub the user's Hub token is the kernel's credential for the
    # phoenix gateway (phoenix_nb.policy): it identifies the user to the Hub.
    "JUPYTERHUB_API_TOKEN",
    "JPY_API_TOKEN",
)
# Environment variables naming a file whose *contents* are a credential; the
# file is hidden from Restricted work like ~/.aws.
CREDENTIAL_FILE_VARIABLES: tuple[str, ...] = (
    "GOOGLE_APPLICATION_CREDENTIALS",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "CLOUDSDK_CONFIG",
)

REDACTED = "[REDACTED]"
MIN_REDACT = 4  # a shorter value would redact ordinary words
MIN_ENCODED = 8  # the reversed and encoded forms of shorter values collide with text


def _base64_cores(data: bytes) -> list[str]:
    """The base64 text `data` becomes inside any longer input, for each of its 3 alignments.

    Character i of base64 covers input bits [6i, 6i+6); with `k` bytes before the
    secret, the characters wholly inside the secret's bits are fixed by the
    secret alone, whatever surrounds it. Those are what is searched for.
    """
    cores = []
    bits = 8 * len(data)
    for k in range(3):
        encoded = base64.b64encode(bytes(k) + data).decode("ascii")
        first = -(-8 * k // 6)
        last = (8 * k + bits) // 6  # exclusive
        core = encoded[first:last]
        if len(core) >= MIN_ENCODED - 2:
            cores.append(core)
    return cores


def encoded_forms(value: str) -> tuple[str, ...]:
    """The spellings of `value` redaction catches: as is, reversed, base64 (standard and
    URL-safe, any alignment), hex (both cases) and percent-encoded."""
    forms = [value]
    if len(value) >= MIN_ENCODED:
        data = value.encode("utf-8", "surrogatepass")
        forms.append(value[::-1])
        forms.append(data.hex())
        forms.append(data.hex().upper())
        forms.append(urllib.parse.quote(value, safe=""))
        forms.append(urllib.parse.quote_plus(value, safe=""))
        for core in _base64_cores(data):
            forms.append(core)
            forms.append(core.replace("+", "-").replace("/", "_"))
    return tuple(dict.fromkeys(forms))


@functools.lru_cache(maxsize=16)
def _pattern(values: tuple[str, ...], numbers: tuple[int, ...]) -> re.Pattern[str] | None:
    forms = {form for value in values for form in encoded_forms(value)}
    alternatives = [re.escape(f) for f in sorted(forms, key=len, reverse=True)]
    alternatives += [rf"(?<![0-9]){n}(?![0-9])" for n in sorted(set(numbers), reverse=True)]
    return re.compile("|".join(alternatives)) if alternatives else None


@dataclass(frozen=True)
class SecretValues:
    """Values that must never be shown, and how they are kept out of text.

    `values`: strings (keys, passwords, the kernel's session key, paths that
    lead to a credential). `numbers`: integers shown only as whole numbers
    (the kernel's ports), redacted where they stand alone. Built per use from
    what the kernel, the environment and the settings hold now; the encoded
    forms are compiled once per distinct set (cached), so redacting costs one
    regular-expression pass per text.
    """

    values: tuple[str, ...] = ()
    numbers: tuple[int, ...] = ()

    @classmethod
    def of(cls, values: Iterable[str], numbers: Iterable[int] = ()) -> SecretValues:
        kept = sorted({v for v in values if len(v) >= MIN_REDACT}, key=lambda v: (-len(v), v))
        return cls(tuple(kept), tuple(sorted({n for n in numbers if n > 0})))

    def __or__(self, other: SecretValues) -> SecretValues:
        return SecretValues.of((*self.values, *other.values), (*self.numbers, *other.numbers))

    def __bool__(self) -> bool:
        return bool(self.values or self.numbers)

    def redact(self, text: str) -> str:
        """`text` with every value, in every form `encoded_forms` names, replaced."""
        pattern = _pattern(self.values, self.numbers)
        if pattern is None or not text:
            return text
        return pattern.sub(REDACTED, text)

    def memory_forms(self, minimum: int = MIN_ENCODED) -> tuple[tuple[bytes, bytes], ...]:
        """(needle, same-length filler) pairs for overwriting the values in raw memory.

        A str lives in memory as UTF-8 (C strings, bytes, ASCII str objects),
        Latin-1, UCS-2 or UCS-4 (CPython's str kinds: an ASCII value inside a
        text that also holds an emoji is stored four bytes per character);
        each spelling gets a filler of asterisks in the same encoding, so a
        str object that held the value stays a valid (starred) str.
        """
        out: dict[bytes, bytes] = {}
        for value in self.values:
            if len(value) < minimum:
                continue
            encodings = ["utf-8", "utf-16-le", "utf-32-le"]
            if not value.isascii():
                encodings.append("latin-1")
            for encoding in encodings:
                try:
                    needle = value.encode(encoding)
                except UnicodeEncodeError:
                    continue
                unit = "*".encode(encoding)
                out.setdefault(needle, unit * (len(needle) // len(unit)))
        return tuple(sorted(out.items(), key=lambda kv: -len(kv[0])))
