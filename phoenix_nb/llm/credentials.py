"""The credentials an SDK client holds now: what a fork of the kernel must scrub.

The environment names only what the kernel was given. What it holds after a
few requests is more: google-auth's access token (``ya29.…``) and refresh
token, botocore's resolved AWS credentials from wherever its chain found them
(environment, the shared credentials file, an SSO cache, instance metadata),
a key or token passed to the client in code or in ``%config``, and the
authorization headers the client sends. Each provider answers
``live_credentials()`` (part of the provider port, `runtime.ports.LlmProvider`)
with these functions, and the kernel tools add the values to the scrub set of
every fork (`tools.kernel.access.fork_secrets`).

Only what is already in memory is read: nothing here refreshes a token, asks
instance metadata or imports an SDK (a provider whose client is not built yet
holds nothing). Attributes are read with ``getattr`` and never called, since
the SDKs' properties may refresh; a value that is not a string of at least 8
characters is left out (scrubbing a short value would damage the fork's own
strings).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["client_credentials", "header_secrets"]

_MIN_LEN = 8
# Attributes of SDK clients and credential objects that hold a secret value.
_SECRET_ATTRIBUTES = (
    "api_key",
    "auth_token",
    "access_token",
    "aws_secret_key",
    "aws_session_token",
    "token",
    "_token",
    "refresh_token",
    "_refresh_token",
    "client_secret",
    "_client_secret",
    "id_token",
    "_id_token",
    "secret_key",
    "_secret_key",
    "_access_token",
)
# Attributes that lead to another credential object (impersonation, a token cache,
# botocore's resolved or refreshable credentials).
_NESTED_ATTRIBUTES = (
    "credentials",
    "_credentials",
    "_source_credentials",
    "_target_credentials",
    "_token_cache",
    "_frozen_credentials",
    "_cached",
    "_value",
)
_SECRET_HEADER_WORDS = ("auth", "key", "token", "secret", "cookie", "signature", "session")


def _strings(value: Any) -> list[str]:
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str) and len(value) >= _MIN_LEN:
        return [value]
    get = getattr(value, "get_secret_value", None)  # pydantic SecretStr
    if callable(get) and not isinstance(value, type):
        try:
            return _strings(get())
        except Exception:
            return []
    return []


def header_secrets(headers: Mapping[str, Any] | None) -> list[str]:
    """Values of the headers that carry a credential (Authorization, x-api-key,
    a gateway's token header, cookies), and the token after a ``Bearer``/``Basic``
    scheme word."""
    found: list[str] = []
    if not isinstance(headers, Mapping):
        return found
    for name, value in list(headers.items()):
        if not isinstance(name, str) or not any(w in name.lower() for w in _SECRET_HEADER_WORDS):
            continue
        for text in _strings(value):
            found.append(text)
            scheme, _, rest = text.partition(" ")
            if rest and scheme.isalpha():
                found += _strings(rest.strip())
    return found


def _walk(obj: Any, found: list[str], seen: set[int], depth: int) -> None:
    """Secret attributes of `obj` and of the credential objects it leads to."""
    if obj is None or depth > 4 or id(obj) in seen or isinstance(obj, str | bytes | int):
        return
    seen.add(id(obj))
    try:
        attributes = vars(obj)
    except TypeError:  # __slots__ or a C object: its public attributes only
        attributes = {a: getattr(obj, a, None) for a in _SECRET_ATTRIBUTES if a[0] != "_"}
    for name in _SECRET_ATTRIBUTES:
        if name in attributes:
            found += _strings(attributes[name])
    for name in _NESTED_ATTRIBUTES:
        nested = attributes.get(name)
        if nested is not None and not isinstance(nested, str | bytes):
            _walk(nested, found, seen, depth + 1)
    found += header_secrets(attributes.get("_custom_headers"))


def _aws_session_credentials(client: Any) -> list[str]:
    """botocore's resolved credentials for an ``AnthropicBedrock`` client: the SDK signs
    with a boto3 session it keeps per set of client options (``_get_session`` is
    cached), whose botocore session holds the credentials its chain resolved. The
    session is looked up, never made to resolve: no file is read, no endpoint asked."""
    if "boto3" not in sys.modules or not hasattr(client, "aws_region"):
        return []
    auth = sys.modules.get("anthropic.lib.aws._auth")
    get_session = getattr(auth, "_get_session", None)
    if get_session is None:
        return []
    try:
        session = get_session(
            profile=getattr(client, "aws_profile", None),
            region=getattr(client, "aws_region", None),
            aws_access_key=getattr(client, "aws_access_key", None),
            aws_secret_key=getattr(client, "aws_secret_key", None),
            aws_session_token=getattr(client, "aws_session_token", None),
        )
    except Exception:
        return []
    core = getattr(session, "_session", None)
    held = vars(core).get("_credentials") if core is not None else None
    found: list[str] = []
    _walk(held, found, set(), 0)
    return found


def client_credentials(client: Any, extra: Iterable[Any] = ()) -> tuple[str, ...]:
    """Every credential an SDK client (anthropic's, Bedrock's, Vertex's, openai's)
    holds now, and `extra` values its provider keeps itself; longest first."""
    found: list[str] = []
    for value in extra:
        found += _strings(value)
    if client is not None:
        _walk(client, found, set(), 0)
        with contextlib.suppress(Exception):  # a property computed from state we do not know
            found += header_secrets(getattr(client, "auth_headers", None))
        found += _aws_session_credentials(client)
    return tuple(sorted(set(found), key=len, reverse=True))
