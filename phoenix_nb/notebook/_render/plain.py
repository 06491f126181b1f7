"""The `text/plain` fallback: a compact transcript for terminals and `print`.

Every user and AI text appears in full (a transcript that drops words misleads);
tool calls take one line each plus a short head of their output, because a
terminal reader wants the story, not the logs. A single very large text shows its
head and tail around a note saying how to read it whole. Control characters in
content (terminal colour escapes, bidirectional overrides) are shown as codes, not
obeyed (`view.text`), so content cannot recolour or reorder the transcript.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from phoenix_nb.checkpoints.changes import changes_of
from phoenix_nb.notebook._render import cost as c
from phoenix_nb.notebook._render import view as v

MAX_OUTPUT_LINES = 8
MAX_OUTPUT_CHARS = 1_200
MAX_DIFF_LINES = 40  # a patch is what the reader came for: shown, not counted


def _indented(s: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in s.split("\n"))


def _cut(s: str) -> str:
    """A large text as its head, a note, and its tail."""
    head, omitted, tail = v.abbreviate(s)
    return f"{head}\n[{v.omitted_note(omitted)}]\n{tail}" if omitted else s


class _Plain:
    def __init__(self) -> None:
        self.out: list[str] = []
        self.state: Mapping[str, Any] = {}

    def line(self, s: str) -> None:
        self.out.append(s)

    def record(self, record: Mapping[str, Any]) -> None:
        conv = v.mapping(record, "conversation")
        state = v.mapping(conv, "state")
        head = ["phoenix", v.text(conv, "slug") or v.text(conv, "id"), v.text(conv, "model")]
        mode = v.mode_label(conv)
        if v.sandbox_unavailable(conv):
            mode += f" ({v.SANDBOX_UNAVAILABLE})"
        head += [mode, v.state_line(state, record)]
        for note in v.notes(record):  # what the record below is, before it
            self.line(note)
        self.line(" · ".join(h for h in head if h))
        if v.text(conv, "cwd"):
            self.line(f"in {v.shown_cwd(v.text(conv, 'cwd'))}")
        if v.serving(conv):
            self.line(v.serving(conv))
        meter = v.Meter(v.mapping(record, "context"))
        if meter.known:
            self.line(meter.line + (f" ⚠ {meter.advice}" if meter.advice else ""))
        spending = c.Spending(v.maybe_mapping(record, "usage"))
        if spending.known:
            self.line(spending.line)
        summary = v.text(record, "summary")
        if summary:
            self.line(f"{v.SUMMARY_TITLE.lower()}:")
            self.line(_indented(_cut(summary), "  "))
        self.state = state
        plan = v.fold_plan(record)
        note = v.folded_note(plan)
        if note:
            self.line(note)
        for i, cycle, where in plan:
            if where:
                self.line(v.folded_line(cycle, i, where))
                continue
            self.line(f"── {v.cycle_title(cycle, i).lower()} ──")
            for step in v.items(cycle, "steps"):
                self.step(step, summary)
            stop = v.maybe_mapping(cycle, "stop")
            if stop is not None:
                reason = v.text(stop, "reason")
                self.line(f"[{v.STOP_LABELS.get(reason, reason or 'stopped')}]")
        retry = v.maybe_mapping(record, "retry")
        if retry is not None:
            message = v.text(retry, "message")
            self.line(f"↻ {v.retry_line(retry)}" + (f" ({message})" if message else ""))
        pending = v.maybe_mapping(record, "pending_approval")
        if pending is not None and not v.has_pending_step(record):
            self.approval({"reason": v.text(pending, "reason"), "decision": "pending"})
        if v.text(state, "name") in ("error", "failed"):
            kind = v.text(state, "kind", "unknown")
            self.line(f"! {v.error_label(kind)}: {v.text(state, 'message')}")
            self.line(f"  {v.error_advice(kind)}")

    def approval(self, step: Mapping[str, Any]) -> None:
        """One block while the request waits, one line once answered."""
        if v.text(step, "decision") != "pending":
            self.line(v.approval_line(step))
            return
        self.line(f"⏸ {v.APPROVAL_TITLE}:")
        self.line("  " + v.APPROVE_MEANS)
        reason = v.reason_text(step)
        if reason:
            self.line(f"  {v.REASON_LABEL}")
            self.line(_indented(reason, "  | "))
        paused = v.flag(self.state, "paused")
        self.line("  " + (v.PAUSED_WORDS if paused else v.APPROVE_HOWTO))

    def step(self, step: Any, summary: str) -> None:
        kind = v.text(step, "kind")
        if kind == "user":
            who = v.USER_KIND_LABELS.get(v.text(step, "user_kind"), "You").lower()
            self.line(f"{who}: " + _indented(_cut(v.text(step, "text")), "  ").lstrip())
            for img in v.items(step, "images"):
                self.line(f"  [image {v.text(img, 'name') or '?'}]")
        elif kind == "ai":
            item = v.maybe_mapping(step, "item")
            if item is not None:
                label = "reasoning" if v.text(item, "type") == "reasoning" else "ai"
                self.line(f"{label}: " + _indented(_cut(v.text(item, "text")), "  ").lstrip())
                for n, url, title in c.citations(item):
                    self.line(f"  [{n}] {title}" + (f" <{url}>" if url and url != title else ""))
            for group in v.items(step, "tool_groups"):
                calls = v.visible_calls(group)
                if calls:
                    self.line(f"▸ {v.group_title(group)}")
                for call in calls:
                    self.call(call)
        elif kind == "system":
            self.line(f"* {_cut(v.text(step, 'text'))}")
        elif kind == "approval":
            self.approval(step)
        elif kind == "sub_agents":
            for agent in v.items(step, "agents"):
                outcome = v.text(agent, "outcome")
                label = v.OUTCOME_LABELS.get(outcome, outcome or "unknown")
                result = v.text(agent, "result")
                self.line(
                    f"  sub-agent {label}: {v.text(agent, 'task')}"
                    + (f" → {_cut(result)}" if result else "")
                )
        elif kind == "error":
            ekind = v.text(step, "error_kind")
            self.line(f"! {v.error_label(ekind)}: {v.text(step, 'text')}")
            retry = v.maybe_mapping(step, "retry")
            self.line("  " + (v.retry_line(retry, ekind) if retry else v.error_advice(ekind)))
        elif kind == "continuation":
            text = v.text(step, "summary")
            if text and text == summary:
                self.line("continuation summary: (above)")
            else:
                self.line("continuation summary:")
                self.line(_indented(_cut(text), "  "))
        else:
            self.line(f"? unrecognised step {kind!r}: {v.dumps(step)}")

    def changes(self, name: str, display: Mapping[str, Any]) -> None:
        """What an Unrestricted call changed (phoenix_nb.checkpoints), diffs clipped."""
        found = changes_of(display)
        if found is None:
            return
        self.line(f"    {found.summary(name)}:" if found.count else f"    {found.summary(name)}")
        for f in found.files:
            self.line(f"      {f.describe()}")
            if f.diff and name != "patch":  # a patch shows its diff below
                shown, omitted = v.clip_lines(f.diff.rstrip("\n"), MAX_DIFF_LINES, MAX_OUTPUT_CHARS)
                self.line(_indented(shown, "        "))
                if omitted:
                    self.line(f"        … {omitted} more line{'s' if omitted != 1 else ''}")
        if found.omitted:
            self.line(f"      … and {found.omitted} more")

    def call(self, call: Mapping[str, Any]) -> None:
        name = v.text(call, "name") or "tool"
        result = v.maybe_mapping(call, "result")
        display = v.mapping(result, "display")
        if name == "bash":
            command = v.bash_display(display).command or v.text(v.mapping(call, "input"), "command")
            status = v.bash_status(display, result)
            self.line(f"  $ {v.one_line(command, 200)}" + (f"  [{status}]" if status else ""))
        else:
            summary = v.call_summary(call)
            status = v.kernel_status(name, display)
            state = "  [running]" if result is None else (f"  [{status}]" if status else "")
            self.line(f"  {name} {summary}{state}".rstrip())
            code, explanation = v.kernel_code(call)
            warning = v.code_warning(call)
            if warning:
                self.line(f"    {warning}")
            if code:
                shown, omitted = v.clip_lines(code.rstrip("\n"), MAX_OUTPUT_LINES, MAX_OUTPUT_CHARS)
                first, *rest = shown.split("\n")
                self.line("\n".join([f"    >>> {first}", *(f"    ... {ln}" for ln in rest)]))
                if omitted:
                    self.line(f"    … {omitted} more line{'s' if omitted != 1 else ''}")
            if explanation:
                self.line(_indented(_cut(explanation), "    "))
        self.changes(name, display)
        if name == "patch" and not v.flag(result, "is_error"):
            diff = v.patch_display(display).diff
            if diff:
                shown, omitted = v.clip_lines(diff.rstrip("\n"), MAX_DIFF_LINES, MAX_OUTPUT_CHARS)
                self.line(_indented(shown, "    "))
                if omitted:
                    self.line(f"    … {omitted} more line{'s' if omitted != 1 else ''}")
                return
        if result is None or name == "think":
            return
        content = v.text(result, "content")
        if not content:
            return
        shown, omitted = v.clip_lines(content.rstrip("\n"), MAX_OUTPUT_LINES, MAX_OUTPUT_CHARS)
        self.line(_indented(shown, "    │ "))
        if omitted:
            self.line(f"    │ … {omitted} more line{'s' if omitted != 1 else ''}")


def render_plain(record: Mapping[str, Any]) -> str:
    """The record as a compact plain-text transcript."""
    r = _Plain()
    r.record(record)
    return "\n".join(r.out) + "\n"
