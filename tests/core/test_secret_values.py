"""SecretValues: what redaction catches, checked by decoding independently of the redactor.

For each spelling (as is, reversed, base64 standard and URL-safe at every
alignment inside a longer text, hex in both cases, percent-encoded) the secret
is embedded in surrounding text, redacted, and the result is searched by
decoding it back (every base64 run at every offset, both alphabets): the
secret must not come back. Ordinary text and numbers that merely contain a
port's digits stay as they are.
"""

from __future__ import annotations

import base64
import re
import urllib.parse

import pytest

from phoenix_nb.core.secrets import REDACTED, SecretValues

SECRET = "sk-ant-api03-Zx9/+q_w8Lm"
PORT = 54321


def spellings(secret: str) -> dict[str, str]:
    data = secret.encode()
    out = {
        "verbatim": secret,
        "reversed": secret[::-1],
        "hex": data.hex(),
        "HEX": data.hex().upper(),
        "percent": urllib.parse.quote(secret, safe=""),
        "percent-plus": urllib.parse.quote_plus(secret, safe=""),
    }
    for lead in range(3):
        wrapped = b"x" * lead + data + b" and more"
        out[f"base64+{lead}"] = base64.b64encode(wrapped).decode()
        out[f"base64url+{lead}"] = base64.urlsafe_b64encode(wrapped).decode()
    return out


def leaks(secret: str, text: str) -> bool:
    data = secret.encode()
    if any(form in text for form in list(spellings(secret).values())[:6]):
        return True
    for run in re.findall(r"[A-Za-z0-9+/_\-]{8,}={0,2}", text):
        for altchars in (None, b"-_"):
            for skip in range(4):
                chunk = run[skip:]
                chunk = chunk[: len(chunk) - len(chunk) % 4]
                try:
                    if data[2:-2] in base64.b64decode(chunk, altchars=altchars, validate=True):
                        return True
                except ValueError:
                    continue
    return False


@pytest.mark.parametrize("how", sorted(spellings(SECRET)))
def test_every_spelling_is_redacted(how: str) -> None:
    text = f"before {spellings(SECRET)[how]} after"
    assert leaks(SECRET, text)  # the check itself finds the unredacted spelling
    redacted = SecretValues.of([SECRET]).redact(text)
    assert REDACTED in redacted
    assert not leaks(SECRET, redacted), redacted


def test_ports_are_redacted_only_as_whole_numbers() -> None:
    values = SecretValues.of([], [PORT])
    assert values.redact(f"port {PORT}, tcp://127.0.0.1:{PORT}") == (
        f"port {REDACTED}, tcp://127.0.0.1:{REDACTED}"
    )
    assert values.redact("154321 and 543210 stay") == "154321 and 543210 stay"


def test_ordinary_text_is_untouched_and_short_values_are_not_encoded() -> None:
    values = SecretValues.of(["abcd", SECRET])
    assert values.redact("dcba is fine, abcd is not") == f"dcba is fine, {REDACTED} is not"
    assert values.redact("nothing secret here") == "nothing secret here"
    assert not SecretValues.of(["abc"])  # shorter than 4: not a value to redact


def test_memory_forms_cover_every_str_kind_with_same_length_fillers() -> None:
    forms = dict(SecretValues.of([SECRET, "pässwörd-ümlaut-✓"]).memory_forms())
    for value in (SECRET, "pässwörd-ümlaut-✓"):
        for encoding in ("utf-8", "utf-16-le", "utf-32-le"):
            needle = value.encode(encoding)
            assert needle in forms
            filler = forms[needle]
            assert len(filler) == len(needle)
            assert set(filler.decode(encoding)) == {"*"}
    assert "pässwörd".encode("latin-1") not in forms  # ✓ is not Latin-1: no such str exists
    assert SecretValues.of(["short"]).memory_forms() == ()  # too short to overwrite safely
