"""Optional request features a server may not take, and dropping them.

Anthropic's API takes prompt caching (`cache_control`), extended thinking and
images; servers that speak the same wire format (Ollama, llama.cpp, vLLM, a
LiteLLM proxy) take some, ignore some and reject some with a 400. A feature is
sent unless the user's model description (`c.Phoenix.models[...]["supports"]`)
says the model lacks it; when a server rejects one, the provider turns it off
for that model on that server, says so in one line, and sends the request again
without it, before any delta reached the user (the rejection comes with the
response headers). A feature a server ignores costs nothing and needs no line.

The rejection is recognised by the server's message naming the feature (the
field `cache_control`, `thinking`, or an image) and saying it is not taken
("Extra inputs are not permitted", "unknown field", "does not support" …). A
message that names the feature for another reason (Anthropic's "A maximum of 4
blocks with cache_control may be provided") is an ordinary error, not a missing
feature: it is shown and nothing is turned off.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from phoenix_nb.core.models import NO_SPECS, ModelSpec, supports
from phoenix_nb.core.values import ErrorKind, LlmFailure

FEATURES = ("caching", "thinking", "images")

# Words in a 400's message that name each feature (lower case).
_NAMES: dict[str, tuple[str, ...]] = {
    "caching": ("cache_control", "cache control", "prompt caching"),
    "thinking": ("thinking",),
    "images": ("image",),
}

NOTICE = {
    "caching": "This server rejected prompt caching (cache_control): phoenix sends this "
    "model's requests without it from now on, so each request pays for its whole prompt.",
    "thinking": "This server rejected extended thinking: phoenix sends this model's "
    "requests without it from now on.",
    "images": "This model rejected an image: phoenix sends a line of text in place of each "
    "image from now on (the model cannot see them).",
}

# A server other than Anthropic's that takes `cache_control` and never reports a cache
# write or read (a LiteLLM proxy in front of vLLM, some gateways) ignores it. Judged on
# prompts of at least IGNORED_MIN_INPUT tokens (the largest minimum cacheable prompt of
# Anthropic's models, so a Claude model behind a gateway is never misjudged), after
# IGNORED_AFTER such responses in a row.
IGNORED_MIN_INPUT = 4096
IGNORED_AFTER = 2
IGNORED_NOTICE = (
    "This server ignores prompt caching (cache_control is accepted, no cache write or "
    "read is ever reported): phoenix stops sending it to this model, and each request "
    "pays for its whole prompt."
)

# Words with which servers say they do not take a field or feature (lower case).
_REFUSALS = (
    "not permitted",
    "not supported",
    "unsupported",
    "not allowed",
    "does not support",
    "doesn't support",
    "unknown",
    "unrecognized",
    "unrecognised",
    "not recognized",
    "unexpected",
    "extra",
    "no such",
)

IMAGE_LEFT_OUT = "[an image was attached here; this model does not take images, so it was left out]"


def rejected_feature(failure: LlmFailure, sent: frozenset[str]) -> str | None:
    """The feature a request failure refuses, if it names one the request carried."""
    if failure.kind is not ErrorKind.INVALID_REQUEST:
        return None
    text = failure.message.lower()
    if not any(word in text for word in _REFUSALS):
        return None
    for feature in FEATURES:
        if feature in sent and any(word in text for word in _NAMES[feature]):
            return feature
    return None


class Capabilities:
    """What one provider sends each model: the user's description, minus rejections."""

    def __init__(self, specs: Mapping[str, ModelSpec] = NO_SPECS) -> None:
        self._off: dict[str, set[str]] = {}
        self.specs = specs  # the user's descriptions (c.Phoenix.models)

    def off(self, model: str) -> frozenset[str]:
        """Features not sent for `model`: described as missing, or rejected here."""
        lacks = set(supports(model, self.specs).lacks())
        return frozenset(lacks | self._off.get(model, set()))

    def turn_off(self, model: str, feature: str) -> None:
        self._off.setdefault(model, set()).add(feature)


def _has_image(value: Any) -> bool:
    if isinstance(value, Mapping):
        if value.get("type") == "image":
            return True
        return any(_has_image(v) for v in value.values() if isinstance(v, list | Mapping))
    if isinstance(value, list):
        return any(_has_image(v) for v in value)
    return False


def features_in(params: Mapping[str, Any]) -> frozenset[str]:
    """The optional features a Messages API request carries."""
    found = set()
    if "cache_control" in params or _has_marker(params.get("messages")):
        found.add("caching")
    if params.get("thinking") is not None:
        found.add("thinking")
    if _has_image(params.get("messages")):
        found.add("images")
    return frozenset(found)


def _has_marker(value: Any) -> bool:
    if isinstance(value, Mapping):
        return "cache_control" in value or any(
            _has_marker(v) for v in value.values() if isinstance(v, list | Mapping)
        )
    if isinstance(value, list):
        return any(_has_marker(v) for v in value)
    return False


def _strip(value: Any, caching: bool, images: bool) -> Any:
    """A copy of message content without cache markers and/or images (new containers
    only where something changes; the caller's stay untouched)."""
    if isinstance(value, list):
        return [_strip(v, caching, images) for v in value]
    if isinstance(value, Mapping):
        if images and value.get("type") == "image":
            return {"type": "text", "text": IMAGE_LEFT_OUT}
        return {
            k: _strip(v, caching, images)
            for k, v in value.items()
            if not (caching and k == "cache_control")
        }
    return value


def message_without(message: Mapping[str, Any], off: frozenset[str]) -> Mapping[str, Any]:
    """One API message with the cache markers and images of `off` removed (itself when
    neither is off); the same message gives an equal result every time."""
    caching, images = "caching" in off, "images" in off
    if not (caching or images):
        return message
    stripped: Mapping[str, Any] = _strip(message, caching, images)
    return stripped


def without(
    params: Mapping[str, Any], off: frozenset[str], *, messages: bool = True
) -> dict[str, Any]:
    """`params` with the features in `off` removed; `messages=False` leaves the messages
    as they are, for a caller that strips each one itself (`message_without`)."""
    out = dict(params)
    if not off:
        return out
    if "thinking" in off:
        out.pop("thinking", None)
    caching, images = "caching" in off, "images" in off
    if caching:
        out.pop("cache_control", None)
        if "system" in out and isinstance(out["system"], list):
            out["system"] = _strip(out["system"], True, False)
        if "tools" in out:
            out["tools"] = _strip(out["tools"], True, False)
    if messages and (caching or images):
        out["messages"] = _strip(out.get("messages") or [], caching, images)
    return out
