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
import math
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from phoenix_nb.core.displays import (
    BashDisplay,
    CellEditDisplay,
    HistoryDisplay,
    InspectDisplay,
    PatchDisplay,
    ProposalDisplay,
    RunPythonDisplay,
)
from phoenix_nb.core.marks import mark, marked_lines, source_warning
from phoenix_nb.core.states import CONTINUATION_THRESHOLD, WARNING_THRESHOLD
from phoenix_nb.core.tool_fields import THINK_THOUGHTS
from phoenix_nb.core.transition import CANCELLED_RESULT, SKIPPED_RESULT

RECORD_FORMAT = "phoenix.conversation/1"

_EMPTY: Mapping[str, Any] = {}

# Characters that change how *other* text looks rather than showing themselves, or are
# drawn as nothing (`core.marks.HIDING`: controls, bidirectional overrides and isolates,
# zero-width characters): shown as their codes. Tab, newline and carriage return stay:
# they are how output is laid out (code is split into lines first: `shown_code`).


# Terminal control sequences (colours, cursor moves) are common in tool output and say
# nothing a reader of the record needs: they are dropped whole rather than shown as codes.
_CSI = re.compile("\x1b\\[[0-?]*[ -/]*[@-~]")


def inert(s: str) -> str:
    """`s` with terminal control sequences dropped and every other control character
    shown as its code (`<U+001B>`) instead of obeyed."""
    if "\x1b" in s:
        s = _CSI.sub("", s)
    return mark(s)


def shown_code(code: str) -> str:
    """Code as a reader must see it: split where Python splits it (a carriage return or a
    line separator is a new line, not an invisible one) and every hiding character shown
    as its code; terminal sequences are shown, not dropped (`core.marks`)."""
    return "\n".join(marked_lines(code))


def text(m: Any, key: str, default: str = "") -> str:
    """A string field; None and absent give `default`, other types their JSON/str form.
    Control characters are shown, not obeyed (`inert`): every string a renderer shows
    comes through here."""
    if not isinstance(m, Mapping):
        return default
    value = m.get(key)
    if value is None:
        return default
    if isinstance(value, str):
        return inert(value)
    if isinstance(value, bool | int | float):
        return str(value)
    return inert(dumps(value))


_HOME_PREFIX = re.compile(r"^/(?:home|Users)/[^/]+(?=/|$)|^/root(?=/|$)")


def shown_cwd(cwd: str) -> str:
    """The working folder as a shared record shows it: relative to a home as `~/…`.

    The absolute path names the user (`/home/alice/…`) and says nothing a reader of a
    shared notebook needs; `~/projects/shop` keeps what orients them (which project)
    and drops who ran it. Any home counts (`/home/<x>`, `/Users/<x>`, `/root`, and this
    process's own home), because the record may be rendered again on another machine.
    Folders outside every home (`/srv/data/shop`) are shared places and stay whole.
    """
    if not cwd:
        return cwd
    home = os.path.expanduser("~").rstrip("/")
    if home and home != "/" and (cwd == home or cwd.startswith(home + "/")):
        return "~" + cwd[len(home) :]
    return _HOME_PREFIX.sub("~", cwd, count=1)


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
    """A finite numeric field, or None (booleans are not numbers here; inf/NaN, which
    Python's JSON reader accepts, would make `int()` raise or print "nan")."""
    if not isinstance(m, Mapping):
        return None
    value = m.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        result = float(value)
    except OverflowError:  # an int too large for a float
        return None
    return result if math.isfinite(result) else None


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


# The fallbacks are for reading; the record's JSON carries every block whole, once. So
# one large block (a message, a tool output, a file's diff) is shown in a fallback as a
# bounded head and tail around a note, and the notebook grows by about one copy of it,
# not four. An export (`document`) renders everything whole: it is where the note sends
# the reader.
BLOCK_HEAD = 6_000
BLOCK_TAIL = 1_500
MORE_HOWTO = "`%phoenix export --format md` (or `html`) writes the whole conversation"


def abbreviate(s: str, head: int = BLOCK_HEAD, tail: int = BLOCK_TAIL) -> tuple[str, int, str]:
    """(head, characters left out, tail) of `s`; (s, 0, "") when it is short enough.
    Cuts at line ends where one is near, so a head does not end mid-word."""
    if len(s) <= head + tail + 200:
        return s, 0, ""
    cut = s.rfind("\n", head - 400, head)
    first = s[: cut + 1] if cut > 0 else s[:head]
    start = s.find("\n", len(s) - tail, len(s) - tail + 400)
    last = s[start + 1 :] if start > 0 else s[len(s) - tail :]
    return first, len(s) - len(first) - len(last), last


def omitted_note(n: int) -> str:
    """What the reader is told where a block was cut, and how to read it whole."""
    return f"… {n:,} characters not shown here; {MORE_HOWTO}."


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
    "auth": "Set the credentials the message names, then run the cell again.",
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

DECISION_LABELS = {
    "approved": "approved",
    "denied": "denied",
    "pending": "waiting for your approval",
}
APPROVAL_TITLE = "The agent asks for write access (Unrestricted mode)"

APPROVE_HOWTO = (
    "Answer with the Approve / Deny buttons, or in a headless run with "
    "`%phoenix approve` or `%phoenix deny`."
)
CONTINUE_HOWTO = "Run `%phoenix continue` to summarise and carry on in a fresh context."
SUMMARY_TITLE = "Continuation summary"


# The approval request's reason is the model's text: it is shown as a quotation under a
# label saying whose words they are, as plain text (no Markdown: no headings, links or
# emphasis to pose with), and bounded, so it cannot speak for phoenix or bury the line
# that says what approving does.
REASON_LABEL = "The agent's reason, in its own words:"
REASON_MAX_CHARS = 600
REASON_MAX_LINES = 12
APPROVE_MEANS = (
    "Approving switches this conversation to Unrestricted mode: the agent may then change "
    "files in its folder and run commands without the sandbox. Deny keeps it read-only."
)


def reason_text(step: Mapping[str, Any]) -> str:
    """The request's reason, bounded (head kept, the rest counted)."""
    reason = text(step, "reason").strip()
    shown, omitted = clip_lines(reason, REASON_MAX_LINES, REASON_MAX_CHARS)
    if omitted or len(shown) < len(reason):
        shown = shown.rstrip() + f" … ({len(reason) - len(shown):,} more characters)"
    return shown


def approval_line(step: Mapping[str, Any]) -> str:
    """The one line an answered request leaves: '✓ write access approved: the agent asked
    “…”' (the reason quoted and shortened, never read as phoenix's words)."""
    decision = text(step, "decision")
    mark = {"approved": "✓", "denied": "✗"}.get(decision, "?")
    label = DECISION_LABELS.get(decision, decision or "unknown")
    reason = one_line(text(step, "reason"), 100)
    return f"{mark} write access {label}" + (f": the agent asked “{reason}”" if reason else "")


def has_pending_step(record: Mapping[str, Any]) -> bool:
    """Does a cycle already show the pending request? (then no second banner)"""
    return any(
        text(step, "kind") == "approval" and text(step, "decision") == "pending"
        for cycle in items(record, "cycles")
        for step in items(cycle, "steps")
    )


def notes(record: Mapping[str, Any]) -> list[str]:
    return [n for n in items(record, "notes") if isinstance(n, str) and n]


def cycle_number(cycle: Any, i: int) -> int:
    index = number(cycle, "index")
    return int(index) + 1 if index is not None else i + 1


def cycle_title(cycle: Any, i: int) -> str:
    n = cycle_number(cycle, i)
    return f"Request {n} (continued)" if flag(cycle, "continued") else f"Request {n}"


# A long conversation's fallbacks (a first `%phoenix history`, a record of many requests)
# fold like the cell does: the newest requests whole, up to about this much of the
# record's JSON, the earlier ones one line each. The record itself keeps every request
# whole (the labextension draws it), and an export shows them all.
WHOLE_CYCLES_BUDGET = 300_000
FOLDED_HERE = "in the record; `%phoenix export` writes it whole"


def fold_plan(record: Mapping[str, Any], *, document: bool = False) -> list[tuple[int, Any, str]]:
    """(index, cycle, '' to show whole or the words for where it is) for each cycle.

    Walks back from the newest request adding up the size of each (its JSON), so the
    cost is that of the requests shown, not of the whole history."""
    cycles = items(record, "cycles")
    fold_before = 0
    if not document:
        spent = 0
        for i in range(len(cycles) - 1, -1, -1):
            if flag(cycles[i], "folded"):
                continue
            spent += len(json.dumps(cycles[i], default=str))
            if spent > WHOLE_CYCLES_BUDGET and i < len(cycles) - 1:
                fold_before = i + 1
                break
    return [
        (
            i,
            cycle,
            "shown above" if flag(cycle, "folded") else (FOLDED_HERE if i < fold_before else ""),
        )
        for i, cycle in enumerate(cycles)
    ]


def folded_note(plan: list[tuple[int, Any, str]]) -> str:
    """Said above the requests when the budget folded some ('' when it folded none)."""
    folded = sum(1 for _, _, where in plan if where == FOLDED_HERE)
    if not folded:
        return ""
    return (
        f"The first {folded:,} request{'s are' if folded != 1 else ' is'} shown one line each "
        "here; the record holds every request whole, and `%phoenix export --format html` "
        "writes them all to a file."
    )


def folded_line(cycle: Any, i: int, where: str = "shown above") -> str:
    """One line for a request the notebook already shows in full above (or, `where`
    says, elsewhere)."""
    given = text(cycle, "line")
    if given:
        return given
    asked = next((text(s, "text") for s in items(cycle, "steps") if text(s, "kind") == "user"), "")
    calls = sum(
        len(visible_calls(g))
        for s in items(cycle, "steps")
        for g in items(s, "tool_groups")
        if isinstance(g, Mapping)
    )
    stop = maybe_mapping(cycle, "stop")
    reason = text(stop, "reason") if stop is not None else ""
    parts = [f"Request {cycle_number(cycle, i)}"]
    if asked:
        parts.append(f"“{one_line(asked, 60)}”")
    if calls:
        parts.append(f"{calls} tool call{'' if calls == 1 else 's'}")
    if reason:
        parts.append(STOP_LABELS.get(reason, reason))
    return " · ".join(parts) + f" ({where})"


def mode_label(conv: Mapping[str, Any]) -> str:
    mode = text(conv, "mode")
    return MODE_LABELS.get(mode, mode or "unknown mode")


def mode_hint(conv: Mapping[str, Any]) -> str:
    return MODE_HINTS.get(text(conv, "mode"), "")


def sandbox_unavailable(conv: Mapping[str, Any]) -> bool:
    """Only an explicit `false` means unavailable; a missing field says nothing."""
    return isinstance(conv, Mapping) and conv.get("sandbox_available") is False


def serving(conv: Mapping[str, Any]) -> str:
    """'via bedrock · without caching, thinking': who serves the model when it is not
    Anthropic's API, and the optional features it goes without ("" when neither: a
    Claude conversation's record reads as before). The labextension says the same."""
    if not isinstance(conv, Mapping):
        return ""
    parts = []
    provider = text(conv, "provider")
    if provider and provider != "anthropic":
        parts.append(f"via {provider}")
    lacks = [str(x) for x in conv.get("lacks") or () if isinstance(x, str)]
    if lacks:
        parts.append("without " + ", ".join(lacks))
    return " · ".join(parts)


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


STATE_WORDS = {
    "idle": "idle",
    "awaiting_llm": "thinking",
    "llm_requesting": "thinking",
    "tool_executing": "running a tool",
    "cancelling": "stopping",
    "awaiting_sub_agents": "waiting for sub-agents",
    "awaiting_mode_approval": "waiting for your approval",
    "awaiting_continuation": "summarising the conversation",
    "context_exhausted": "context full — run `%phoenix continue`",
    "error": "stopped by an error",
    "completed": "finished",
    "failed": "failed",
}
PAUSED_WORDS = "paused — run `%phoenix approve` or `%phoenix deny`"


def state_words(name: str, *, tool: str = "", paused: bool = False) -> str:
    """What the agent is doing, in words a person uses ('running bash', 'thinking')."""
    if name == "awaiting_mode_approval" and paused:
        return PAUSED_WORDS
    if name == "tool_executing" and tool:
        return f"running {tool}"
    return STATE_WORDS.get(name, name.replace("_", " ") or "unknown")


def running_tool(record: Mapping[str, Any] | None) -> str:
    """Name of the last call still without a result, for 'running bash'."""
    name = ""
    for cycle in items(record, "cycles"):
        for step in items(cycle, "steps"):
            for group in items(step, "tool_groups"):
                for call in items(group, "calls"):
                    if isinstance(call, Mapping) and maybe_mapping(call, "result") is None:
                        name = text(call, "name")
    return name


def state_line(state: Mapping[str, Any], record: Mapping[str, Any] | None = None) -> str:
    """The phase in words, e.g. 'waiting for your approval' or 'running bash'."""
    name = text(state, "name", "unknown")
    if name == "llm_requesting" and flag(state, "waiting"):
        return "waiting to retry"
    tool = running_tool(record) if name == "tool_executing" else ""
    return state_words(name, tool=tool, paused=flag(state, "paused"))


# --- what a group of tool calls did ------------------------------------------

HIDDEN_TOOLS = frozenset({"request_mode_upgrade"})  # the approval step tells it


def visible_calls(group: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The group's calls worth a row (an upgrade request is shown as the approval)."""
    return [
        c
        for c in items(group, "calls")
        if isinstance(c, Mapping) and text(c, "name") not in HIDDEN_TOOLS
    ]


def _quoted(values: list[str], most: int = 2) -> str:
    shown = ", ".join(f"'{one_line(x, 40)}'" for x in values[:most])
    more = len(values) - most
    return shown + (f" and {more} more" if more > 0 else "")


# The line a patch display's diff carries where the tool left lines out (tools/patch.py
# `_bounded_diff`; docs/record-format.md): the counts of the whole change.
_CUT_DIFF = re.compile(
    r"^@@ \d+ lines of this diff not shown; the whole change is \+(\d+) -(\d+) @@$", re.M
)


def diff_counts(diff: str) -> tuple[int, int]:
    """(lines added, lines removed) by a unified diff, in C-speed passes over the text
    (a diff may hold many thousands of lines); a cut diff says its whole change."""
    cut = _CUT_DIFF.search(diff)
    if cut is not None:
        return int(cut.group(1)), int(cut.group(2))
    text = "\n" + diff
    added = text.count("\n+") - text.count("\n+++")
    removed = text.count("\n-") - text.count("\n---")
    return added, removed


def _tool_phrase(name: str, calls: list[Mapping[str, Any]]) -> str:
    n = len(calls)
    inputs = [mapping(c, "input") for c in calls]
    displays = [mapping(maybe_mapping(c, "result"), "display") for c in calls]
    if name == "keyword_search":
        terms: list[str] = []
        for inp in inputs:
            for t in items(inp, "search_terms") or [text(inp, "query")]:
                if isinstance(t, str) and t and t not in terms:
                    terms.append(t)
        return f"searched for {_quoted(terms)}" if terms else "searched"
    if name == "bash":
        if n == 1:
            command = bash_display(displays[0]).command or text(inputs[0], "command")
            if not command:
                return "ran a command"
            return f"ran `{one_line(command, 60).removesuffix(' …')}`"
        return f"ran {n} commands"
    if name == "patch":
        paths: list[str] = []
        added = removed = 0
        for inp, disp in zip(inputs, displays, strict=True):
            patched = patch_display(disp)
            path = patched.path or text(inp, "path")
            if path and path not in paths:
                paths.append(path)
            a, d = diff_counts(patched.diff)
            added, removed = added + a, removed + d
        where = paths[0] if len(paths) == 1 else f"{len(paths)} files"
        return f"edited {where} +{added} −{removed}"
    if name == "think":
        return "thought it over"
    if name == "run_python":
        return "ran Python" if n == 1 else f"ran Python {n} times"
    if name == "inspect_variables":
        return "looked at variables"
    if name == "kernel_history":
        return "read the kernel's history"
    if name == "propose_cell":
        return "proposed a cell" if n == 1 else f"proposed {n} cells"
    if name == "edit_cell":
        return "proposed an edit to a cell" if n == 1 else f"proposed {n} cell edits"
    if name == "insert_cell":
        return "proposed a new cell" if n == 1 else f"proposed {n} new cells"
    if name == "spawn_agents":
        return "started sub-agents"
    if name == "request_mode_upgrade":
        return "asked for write access"
    return f"used {name or 'a tool'}" + (f" {n} times" if n > 1 else "")


def group_title(group: Mapping[str, Any]) -> str:
    """What the group did, e.g. "searched for 'bulk discount'", 'ran 2 commands',
    'edited shop/pricing.py +1 −1' (calls of one tool together, in order)."""
    by_name: dict[str, list[Mapping[str, Any]]] = {}
    for call in visible_calls(group):
        by_name.setdefault(text(call, "name"), []).append(call)
    phrases = [_tool_phrase(name, calls) for name, calls in by_name.items()]
    return ", ".join(phrases) if phrases else "no calls"


def group_open(group: Mapping[str, Any]) -> bool:
    """Write groups (diffs) are open from the start: the reader should see the change."""
    return text(group, "group") == "write" or any(
        text(c, "name") == "patch" for c in visible_calls(group)
    )


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
            self.fraction is not None and self.fraction >= WARNING_THRESHOLD
        )
        self.limit_reached = flag(context, "limit_reached") or (
            self.fraction is not None and self.fraction >= CONTINUATION_THRESHOLD
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


def bash_display(display: Any) -> BashDisplay:
    """A bash call's display as the tool made it (`core.displays`); a field of the wrong
    type reads as absent. tests/notebook/test_typed_payloads.py holds these keys to the
    producer's."""
    code = display.get("exit_code") if isinstance(display, Mapping) else None
    return BashDisplay(
        command=text(display, "command"),
        exit_code=code if isinstance(code, int) and not isinstance(code, bool) else None,
        timed_out=flag(display, "timed_out"),
        output_truncated=flag(display, "output_truncated"),
        background=flag(display, "background"),
    )


def search_files(display: Any) -> list[str]:
    """The files a keyword_search display lists (`SearchDisplay.files`), each as text."""
    return [f if isinstance(f, str) else dumps(f) for f in items(display, "files")]


def patch_display(display: Any) -> PatchDisplay:
    """A patch call's display, read like `bash_display`."""
    return PatchDisplay(path=text(display, "path"), diff=text(display, "diff"))


def _figures(n: int) -> str:
    return f"{n} figure{'s' if n != 1 else ''}"


def kernel_status(name: str, display: Any) -> str:
    """What a kernel tool's display tells at a glance, '' for other tools or no display:
    run_python 'exit 1 · 2 figures · 0.4 s', inspect_variables 'df, arr · 1 figure',
    kernel_history 'last 20 cells' (read through the `core.displays` types)."""
    if not isinstance(display, Mapping) or not display:
        return ""
    parts: list[str] = []
    if name == "run_python":
        ran = RunPythonDisplay.read(display)
        if ran.timed_out:
            parts.append("timed out")
        elif ran.signal is not None:
            parts.append(f"killed by signal {ran.signal}")
        elif ran.exit_code:
            parts.append(f"exit {ran.exit_code}")
        if ran.images:
            parts.append(_figures(ran.images))
        if ran.elapsed >= 0.05:
            parts.append(f"{ran.elapsed:.1f} s")
    elif name == "inspect_variables":
        seen = InspectDisplay.read(display)
        parts.append(", ".join(seen.names) if seen.names else "all variables")
        if seen.images:
            parts.append(_figures(seen.images))
    elif name == "kernel_history":
        last = HistoryDisplay.read(display).last
        if last:
            parts.append(f"last {last} cell{'s' if last != 1 else ''}")
    elif name in ("edit_cell", "insert_cell"):
        edit = CellEditDisplay.read(display)
        run = f" (In [{edit.execution_count}])" if edit.execution_count is not None else ""
        where = "" if edit.position == "replace" else f"{edit.position} "
        if edit.cell_id:
            parts.append(f"{edit.edit_id} · {where}cell {edit.cell_id}{run}")
    return " · ".join(parts)


def with_call_status(group: Mapping[str, Any]) -> list[Any]:
    """The group's calls, each kernel call given its `status` words (`kernel_status`), so
    the labextension shows what the fallbacks say without reading the display itself."""
    out: list[Any] = []
    for call in items(group, "calls"):
        if isinstance(call, Mapping):
            display = mapping(maybe_mapping(call, "result"), "display")
            status = kernel_status(text(call, "name"), display)
            if status:
                call = {**call, "status": status}
        out.append(call)
    return out


def code_warning(call: Mapping[str, Any]) -> str:
    """The one line above a call's code when it holds characters a reader would not see
    (`core.marks.source_warning`), or ""."""
    return source_warning(_raw_code(call)[0])


def kernel_code(call: Mapping[str, Any]) -> tuple[str, str]:
    """(code, explanation) of a run_python, propose_cell, edit_cell or insert_cell call,
    ('', '') for others, the code as a reader must see it (`shown_code`)."""
    code, explanation = _raw_code(call)
    return shown_code(code), explanation


def _raw_code(call: Mapping[str, Any]) -> tuple[str, str]:
    """(code, explanation) as recorded: a proposal as its display has it
    (`ProposalDisplay`, `CellEditDisplay`), else from the input; the code unmarked."""
    name, inp = text(call, "name"), mapping(call, "input")
    if name == "propose_cell":
        proposal = ProposalDisplay.read(mapping(maybe_mapping(call, "result"), "display"))
        code = proposal.proposed_cell or _raw(inp, "code")
        return code, proposal.explanation or text(inp, "explanation")
    if name in ("edit_cell", "insert_cell"):
        edit = CellEditDisplay.read(mapping(maybe_mapping(call, "result"), "display"))
        code = edit.new_source or _raw(inp, "new_source") or _raw(inp, "source")
        return code, edit.explanation or text(inp, "explanation")
    if name == "run_python":
        return _raw(inp, "code"), ""
    return "", ""


def _raw(m: Mapping[str, Any], key: str) -> str:
    value = m.get(key)
    return value if isinstance(value, str) else ""


CANCELLED_WORDS = "cancelled"


def cancelled(result: Mapping[str, Any] | None) -> bool:
    """Was this call stopped by the user (or skipped because of it), rather than failing?"""
    return flag(result, "is_error") and text(result, "content") in (
        CANCELLED_RESULT,
        SKIPPED_RESULT,
    )


def group_badge(calls: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    """('running' | 'failed' | 'cancelled' | '', words) for a group's summary line: a
    cancelled call is not a failure, and its badge must not read like a test count."""
    results = [maybe_mapping(c, "result") for c in calls]
    if any(r is None for r in results):
        return "running", "running…"
    failed = sum(1 for r in results if flag(r, "is_error") and not cancelled(r))
    if failed:
        return "failed", f"{failed} failed"
    if any(cancelled(r) for r in results):
        return "cancelled", CANCELLED_WORDS
    return "", ""


def bash_status(display: Mapping[str, Any], result: Mapping[str, Any] | None) -> str:
    """'exit 1', 'timed out', 'output truncated' — what a reader checks first."""
    if result is None:
        return "running"
    shown = bash_display(display)
    parts: list[str] = []
    if shown.timed_out:
        parts.append("timed out")
    if shown.exit_code is not None:
        parts.append(f"exit {shown.exit_code}")
    if shown.output_truncated:
        parts.append("output truncated")
    if not parts and cancelled(result):
        parts.append(CANCELLED_WORDS)
    elif not parts and flag(result, "is_error"):
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


_THUMBNAIL = re.compile(r"data:image/png;base64,[A-Za-z0-9+/]{1,200000}={0,2}")


def thumbnail(image: Any) -> str:
    """An image's thumbnail, only when it is a bounded base64 PNG data URI (else '')."""
    value = text(image, "thumbnail")
    return value if _THUMBNAIL.fullmatch(value) else ""
