"""Reading a conversation record tolerantly, and the wording all three fallbacks share.

The record (docs/record-format.md) reaches us from the current producer, from
older notebooks, or edited by hand: a missing field, a wrong type or an unknown
kind must never stop the cell from showing the rest of the conversation. So the
renderers read it only through these accessors, which coerce instead of raising,
and keep one wording for labels and advice so HTML, Markdown and plain text say
the same thing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from phoenix_nb.core.tool_fields import THINK_THOUGHTS

RECORD_FORMAT = "phoenix.conversation/1"

_EMPTY: Mapping[str, Any] = {}


def text(m: Any, key: str, default: str = "") -> str:
    """A string field; None and absent give `default`, other types their JSON/str form."""
    if not isinstance(m, Mapping):
        return default
    value = m.get(key)
    if value is None:
        return default
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return str(value)
    return dumps(value)


def mapping(m: Any, key: str) -> Mapping[str, Any]:
    """A nested object, or an empty one when absent or not an object."""
    if not isinstance(m, Mapping):
        return _EMPTY
    value = m.get(key)
    return value if isinstance(value, Mapping) else _EMPTY


def maybe_mapping(m: Any, key: str) -> Mapping[str, Any] | None:
    """A nested object that may legitimately be null (a running result, no retry)."""
    if not isinstance(m, Mapping):
        return None
    value = m.get(key)
    return value if isinstance(value, Mapping) else None


def items(m: Any, key: str) -> list[Any]:
    """A list field; strings and objects are not lists, so they give an empty list."""
    if not isinstance(m, Mapping):
        return []
    value = m.get(key)
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return list(value)
    return []


def number(m: Any, key: str) -> float | None:
    """A numeric field, or None (booleans are not numbers here)."""
    if not isinstance(m, Mapping):
        return None
    value = m.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def flag(m: Any, key: str) -> bool:
    """A boolean field; only a real `true` counts."""
    return isinstance(m, Mapping) and m.get(key) is True


def dumps(value: Any) -> str:
    """JSON for showing unknown or structured data; never raises."""
    try:
        return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return repr(value)


def one_line(s: str, limit: int = 80) -> str:
    """First non-empty line, shortened: summaries must fit a collapsed row."""
    line = next((ln.strip() for ln in s.splitlines() if ln.strip()), "")
    if len(line) > limit:
        return line[: limit - 1] + "…"
    if line != s.strip():
        return line + " …"
    return line


def clip_lines(s: str, max_lines: int, max_chars: int) -> tuple[str, int]:
    """The head of a long output and how many lines were left out.

    Works in one pass over at most `max_lines` lines, so a huge output costs no
    more than its shown part.
    """
    if len(s) <= max_chars and s.count("\n") < max_lines:
        return s, 0
    head = s[:max_chars]
    lines = head.split("\n", max_lines)
    if len(lines) > max_lines:
        lines = lines[:max_lines]
    shown = "\n".join(lines)
    total = s.count("\n") + (0 if s.endswith("\n") else 1)
    omitted = max(total - len(lines), 0)
    if omitted == 0 and len(shown) < len(s):
        omitted = 1  # one overlong line was cut
    return shown, omitted


def fmt_int(n: float | None) -> str:
    return "?" if n is None else f"{round(n):,}"


def fmt_seconds(d: float | None) -> str:
    if d is None:
        return "?"
    return f"{d:g}"


# --- wording -----------------------------------------------------------------

MODE_LABELS = {"restricted": "Restricted", "unrestricted": "Unrestricted"}
MODE_HINTS = {
    "restricted": "read-only, kernel-sandboxed",
    "unrestricted": "full write access",
}
SANDBOX_UNAVAILABLE = "sandbox unavailable"

ERROR_LABELS = {
    "auth": "authentication failed",
    "rate_limit": "rate limited",
    "network": "network error",
    "server_error": "server error",
    "invalid_request": "invalid request",
    "context_exhausted": "context window full",
    "unknown": "unexpected error",
}

# What the reader can do about each error kind (REQ-BED-006: actionable messages).
ERROR_ADVICE = {
    "auth": "Check the API key (ANTHROPIC_API_KEY) and run the cell again.",
    "rate_limit": "Wait a minute, then send another message to continue.",
    "network": "Check the network connection, then send another message to continue.",
    "server_error": "The API failed on its side; send another message to try again.",
    "invalid_request": (
        "The API rejected the request; send another message, "
        "or start a new conversation if it keeps failing."
    ),
    "context_exhausted": ("Start a new conversation; the continuation summary can seed it."),
    "unknown": "Send another message to try again; the kernel log has details.",
}

STOP_LABELS = {
    "completed": "completed",
    "interrupted": "interrupted",
    "error": "stopped by an error",
}

USER_KIND_LABELS = {"direct": "You", "steer": "You (steering)", "followUp": "You (follow-up)"}

OUTCOME_LABELS = {
    "success": "succeeded",
    "failure": "failed",
    "timeout": "timed out",
    "pending": "running",
}

DECISION_LABELS = {"approved": "approved", "denied": "denied", "pending": "waiting for an answer"}

APPROVE_HOWTO = (
    "Answer with the Approve / Deny buttons, or in a headless run with "
    "`%phoenix approve` or `%phoenix deny`."
)
CONTINUE_HOWTO = "Run `%phoenix continue` to summarise and carry on in a fresh context."


def mode_label(conv: Mapping[str, Any]) -> str:
    mode = text(conv, "mode")
    return MODE_LABELS.get(mode, mode or "unknown mode")


def mode_hint(conv: Mapping[str, Any]) -> str:
    return MODE_HINTS.get(text(conv, "mode"), "")


def sandbox_unavailable(conv: Mapping[str, Any]) -> bool:
    """Only an explicit `false` means unavailable; a missing field says nothing."""
    return isinstance(conv, Mapping) and conv.get("sandbox_available") is False


def error_label(kind: str) -> str:
    return ERROR_LABELS.get(kind, kind.replace("_", " ") if kind else "error")


def error_advice(kind: str) -> str:
    return ERROR_ADVICE.get(kind, ERROR_ADVICE["unknown"])


def retry_line(retry: Mapping[str, Any], kind: str = "") -> str:
    """'retrying 2/3 in 4 s: rate limited' (REQ-BED-006: retry status shown)."""
    kind = kind or text(retry, "kind")
    attempt = number(retry, "attempt")
    most = number(retry, "max")
    return (
        f"retrying {fmt_int(attempt)}/{fmt_int(most)} in "
        f"{fmt_seconds(number(retry, 'delay'))} s: {error_label(kind)}"
    )


def state_line(state: Mapping[str, Any]) -> str:
    """The phase as words, e.g. 'awaiting mode approval (busy)'."""
    name = text(state, "name", "unknown")
    words = name.replace("_", " ")
    return words + (" (busy)" if flag(state, "busy") else "")


class Meter:
    """The context meter's numbers, computed once for all renderers (REQ-BED-023)."""

    def __init__(self, context: Mapping[str, Any]) -> None:
        self.used = number(context, "used")
        self.window = number(context, "window")
        fraction = number(context, "fraction")
        if fraction is None and self.used is not None and self.window:
            fraction = self.used / self.window
        self.fraction = max(0.0, min(fraction, 1.0)) if fraction is not None else None
        self.warning = flag(context, "warning") or (
            self.fraction is not None and self.fraction >= 0.8
        )
        self.limit_reached = flag(context, "limit_reached") or (
            self.fraction is not None and self.fraction >= 0.9
        )
        self.known = self.used is not None or self.window is not None

    @property
    def percent(self) -> str:
        return "?" if self.fraction is None else f"{self.fraction * 100:.0f}%"

    @property
    def line(self) -> str:
        return f"context {fmt_int(self.used)} / {fmt_int(self.window)} tokens ({self.percent})"

    @property
    def advice(self) -> str:
        if self.limit_reached:
            return "Context limit reached. " + CONTINUE_HOWTO
        if self.warning:
            return "Context is filling up. " + CONTINUE_HOWTO
        return ""


def call_summary(call: Mapping[str, Any]) -> str:
    """One line for a tool call: the record's summary, else the telling input field."""
    summary = text(call, "summary")
    if not summary:
        inp = mapping(call, "input")
        for key in ("command", "path", "query", "reason", THINK_THOUGHTS):
            summary = text(inp, key)
            if summary:
                break
    return one_line(summary)


def group_title(group: Mapping[str, Any]) -> str:
    """'bash · 3 calls' (names of the calls, or the group name when they are mixed)."""
    calls = [c for c in items(group, "calls") if isinstance(c, Mapping)]
    names = {text(c, "name") for c in calls}
    name = names.pop() if len(names) == 1 else text(group, "group", "tools")
    n = len(calls)
    return f"{name or 'tools'} · {n} call{'' if n == 1 else 's'}"


def bash_status(display: Mapping[str, Any], result: Mapping[str, Any] | None) -> str:
    """'exit 1', 'timed out', 'output truncated' — what a reader checks first."""
    if result is None:
        return "running"
    parts: list[str] = []
    if flag(display, "timed_out"):
        parts.append("timed out")
    code = display.get("exit_code") if isinstance(display, Mapping) else None
    if isinstance(code, int) and not isinstance(code, bool):
        parts.append(f"exit {code}")
    if flag(display, "output_truncated"):
        parts.append("output truncated")
    if not parts and flag(result, "is_error"):
        parts.append("error")
    return ", ".join(parts)


def diff_kind(line: str) -> str:
    """Which colour a unified-diff line takes: add, del, hunk, meta or ctx."""
    if line.startswith(("+++", "---")):
        return "meta"
    if line.startswith("+"):
        return "add"
    if line.startswith("-"):
        return "del"
    if line.startswith("@@"):
        return "hunk"
    return "ctx"
