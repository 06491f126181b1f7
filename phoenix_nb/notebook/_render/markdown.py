"""The `text/markdown` fallback: the conversation as a document that reads on its own.

It is what GitHub-style viewers and `%phoenix export --format md` show, so it
must carry the whole conversation while keeping tool output short enough to
skim (≤ 40 lines each, with a note); a single very large block (a message, a
diff, a sub-agent's result) shows its head and tail with a note saying how to
read it whole (`%phoenix export`), whose document mode shows everything.
Content goes into code spans and fences sized from the content itself, so a
command or output containing backticks cannot close them early. AI text is
Markdown, but hostile: it is parsed and written back by `markdown_html`
(`markdown_to_markdown`) with no raw HTML and no image left in it, so neither a
notebook viewer nor GitHub (whose image proxy fetches every image) loads
anything from it. Other texts shown outside code have every Markdown- and
HTML-significant character escaped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from phoenix_nb.checkpoints.changes import changes_of
from phoenix_nb.core.tool_fields import THINK_THOUGHTS
from phoenix_nb.notebook._render import cost as c
from phoenix_nb.notebook._render import view as v
from phoenix_nb.notebook._render.markdown_html import escape_text, markdown_to_markdown

MAX_OUTPUT_LINES = 40
MAX_OUTPUT_CHARS = 6_000

_BACKTICKS = re.compile(r"`+")


def fence_for(content: str) -> str:
    """A backtick fence longer than any backtick run in `content` (at least 3)."""
    longest = max((len(m) for m in _BACKTICKS.findall(content)), default=0)
    return "`" * max(3, longest + 1)


def code_span(content: str) -> str:
    """Inline code that survives backticks inside (CommonMark's variable-length spans)."""
    content = content.replace("\n", " ")
    if not content:
        return "` `"
    longest = max((len(m) for m in _BACKTICKS.findall(content)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if content.startswith("`") or content.endswith("`") else ""
    return f"{ticks}{pad}{content}{pad}{ticks}"


# A line beginning like a block marker ("- ", "+ ", "=", "1. ", "2) ") has it escaped too
# ("#" and ">" are escaped everywhere by `escape_text`).
_LINE_START = re.compile(r"^(\s*(?:\d+)?)([-+=]|(?<=\d)[.)])", re.MULTILINE)


def plain(s: str) -> str:
    """Content shown as text outside code: every Markdown and HTML special escaped
    (`markdown_html.escape_text`), block markers at line starts too, lines kept."""
    return _LINE_START.sub(r"\1\\\2", escape_text(s)).replace("\n", "  \n")


def inline_md(s: str) -> str:
    """phoenix's own line with content in it ("ran `CMD`", a note naming a slug): the
    backticked parts as code spans, the rest escaped, so content in either stays text."""
    parts = s.split("`")
    return "".join(code_span(p) if i % 2 else plain(p) for i, p in enumerate(parts) if p)


def _indent(block: str, prefix: str) -> str:
    return "\n".join(prefix + line if line else prefix.rstrip() for line in block.split("\n"))


class _Md:
    def __init__(self) -> None:
        self.full = False  # an export shows every block whole
        self.out: list[str] = []
        self.w = self.out.append
        self.state: Mapping[str, Any] = {}
        # An exported document shows images' thumbnails; the notebook's Markdown fallback
        # names them only (its HTML fallback and the record already carry them once each).
        self.document = False

    def para(self, s: str) -> None:
        self.w(s)
        self.w("\n\n")

    def cut(self, s: str) -> tuple[str, str]:
        """(head, note + tail) of a large block; (s, "") when it is shown whole."""
        head, omitted, tail = (s, 0, "") if self.full else v.abbreviate(s)
        if not omitted:
            return s, ""
        return head, f"_{v.omitted_note(omitted)}_\n\n{tail}"

    def content(self, s: str) -> str:
        """Model Markdown, inert, its head and tail when large."""
        head, rest = self.cut(s)
        if not rest:
            return markdown_to_markdown(head)
        note, _, tail = rest.partition("\n\n")
        return f"{markdown_to_markdown(head)}\n\n{note}\n\n{markdown_to_markdown(tail)}"

    def text_block(self, s: str) -> str:
        """Content shown as text (escaped), its head and tail when large."""
        head, rest = self.cut(s)
        if not rest:
            return plain(head)
        note, _, tail = rest.partition("\n\n")
        return f"{plain(head)}\n\n{note}\n\n{plain(tail)}"

    def fenced_cut(self, content: str, lang: str = "", indent: str = "") -> None:
        """A fenced block of content, its head and tail when large."""
        head, omitted, tail = (content, 0, "") if self.full else v.abbreviate(content)
        self.fenced(head, lang, indent)
        if omitted:
            self.w(f"{indent}_{v.omitted_note(omitted)}_\n")
            self.fenced(tail, lang, indent)

    def fenced(self, content: str, lang: str = "", indent: str = "") -> None:
        fence = fence_for(content)
        body = content[:-1] if content.endswith("\n") else content
        self.w(f"{indent}{fence}{lang}\n")
        if body:
            self.w(_indent(body, indent))
            self.w("\n")
        self.w(f"{indent}{fence}\n")

    # --- record level --------------------------------------------------------

    def notes(self, record: Mapping[str, Any]) -> None:
        for note in v.notes(record):
            self.para(f"_{inline_md(note)}_")

    def record(self, record: Mapping[str, Any], *, document: bool) -> None:
        self.document = document
        self.full = document
        conv = v.mapping(record, "conversation")
        state = v.mapping(conv, "state")
        slug = v.text(conv, "slug") or v.text(conv, "id") or "conversation"
        mode = v.mode_label(conv)
        if v.sandbox_unavailable(conv):
            mode += f" ({v.SANDBOX_UNAVAILABLE})"
        if document:
            self.para(f"# phoenix conversation {code_span(slug)}")
            self.w(f"- **Model:** {code_span(v.text(conv, 'model') or 'unknown')}\n")
            if v.serving(conv):
                self.w(f"- **Served:** {plain(v.serving(conv))}\n")
            cwd = v.shown_cwd(v.text(conv, "cwd")) or "unknown"
            self.w(f"- **Working directory:** {code_span(cwd)}\n")
            self.w(f"- **Mode:** {plain(mode)}\n")
            self.w(f"- **State:** {plain(v.state_line(state, record))}\n\n")
            self.notes(record)
        else:
            self.notes(record)  # what the record below is, before it
            line = f"**phoenix** · {code_span(slug)}"
            if v.text(conv, "model"):
                line += f" · {code_span(v.text(conv, 'model'))}"
            line += f" · **{plain(mode)}** · {plain(v.state_line(state, record))}"
            if v.text(conv, "cwd"):
                line += f" · in {code_span(v.shown_cwd(v.text(conv, 'cwd')))}"
            if v.serving(conv):
                line += f" · {plain(v.serving(conv))}"
            self.para(line)
        meter = v.Meter(v.mapping(record, "context"))
        if meter.known:
            line = plain(meter.line[0].upper() + meter.line[1:])
            if meter.advice:
                line = f"**{line}: ⚠ {meter.advice}**"
            self.para(line)
        spending = c.Spending(v.maybe_mapping(record, "usage"))
        if spending.known:
            self.para(plain(spending.line[0].upper() + spending.line[1:]))
        summary = v.text(record, "summary")
        if summary:
            self.para(f"**{v.SUMMARY_TITLE}:**")
            self.para(_indent(self.content(summary), "> "))
        heading = "##" if document else "###"
        self.state = state
        plan = v.fold_plan(record, document=self.full)
        note = v.folded_note(plan)
        if note:
            self.para(f"_{inline_md(note)}_")
        for i, cycle, where in plan:
            if where:
                self.para(f"_{plain(v.folded_line(cycle, i, where))}_")
                continue
            self.para(f"{heading} {v.cycle_title(cycle, i)}")
            for step in v.items(cycle, "steps"):
                self.step(step, summary)
            stop = v.maybe_mapping(cycle, "stop")
            if stop is not None:
                reason = v.text(stop, "reason")
                self.para(f"_■ {plain(v.STOP_LABELS.get(reason, reason or 'stopped'))}_")
        retry = v.maybe_mapping(record, "retry")
        if retry is not None:
            message = v.text(retry, "message")
            self.para(
                f"**↻ {plain(v.retry_line(retry))}**" + (f" — {plain(message)}" if message else "")
            )
        pending = v.maybe_mapping(record, "pending_approval")
        if pending is not None and not v.has_pending_step(record):
            self.approval({"reason": v.text(pending, "reason"), "decision": "pending"})
        if v.text(state, "name") in ("error", "failed"):
            self.error(v.text(state, "message"), v.text(state, "kind", "unknown"), None)

    def step(self, step: Any, summary: str) -> None:
        kind = v.text(step, "kind")
        if kind == "user":
            who = v.USER_KIND_LABELS.get(v.text(step, "user_kind"), "You")
            text = v.text(step, "text")
            lines = [f"**{who}:**", *self.content(text).split("\n")]
            for img in v.items(step, "images"):
                media = v.text(img, "media_type")
                lines.append(
                    f"📎 {plain(v.text(img, 'name') or 'image')}"
                    + (f" ({plain(media)})" if media else "")
                )
                thumb = v.thumbnail(img) if self.document else ""
                if thumb:  # a validated base64 PNG data URI: nothing in it can end the link
                    lines.append(f"![{plain(v.text(img, 'name') or 'image')}]({thumb})")
            self.para(_indent("\n".join(lines), "> "))
        elif kind == "ai":
            item = v.maybe_mapping(step, "item")
            if item is not None:
                text = v.text(item, "text")
                if v.text(item, "type") == "reasoning":
                    self.para(_indent("_Reasoning:_\n\n" + self.content(text), "> "))
                else:
                    self.para(self.content(text))
                    notes = [
                        f"[{n}] "
                        + (
                            f"[{plain(title)}](<{url}>)"
                            + ("" if title == url else f" ({code_span(url)})")
                            if url
                            else plain(title)
                        )
                        for n, url, title in c.citations(item)
                    ]
                    if notes:
                        self.para("  \n".join(notes))
            for group in v.items(step, "tool_groups"):
                self.tool_group(group)
        elif kind == "system":
            self.para(f"**{self.text_block(v.text(step, 'text'))}**")
        elif kind == "approval":
            self.approval(step)
        elif kind == "sub_agents":
            agents = v.items(step, "agents")
            self.w(f"**Sub-agents ({len(agents)}):**\n\n")
            for agent in agents:
                outcome = v.text(agent, "outcome")
                label = v.OUTCOME_LABELS.get(outcome, outcome or "unknown")
                self.w(f"- **{plain(label)}**: {plain(v.text(agent, 'task'))}")
                result = v.text(agent, "result")
                if result:
                    self.w(f" — {self.text_block(result)}")
                self.w("\n")
            self.w("\n")
        elif kind == "error":
            self.error(
                v.text(step, "text"), v.text(step, "error_kind"), v.maybe_mapping(step, "retry")
            )
        elif kind == "continuation":
            text = v.text(step, "summary")
            if text and text == summary:
                self.para("**Continuation summary** (shown at the top).")
            else:
                self.para("**Continuation summary:**")
                self.para(_indent(self.content(text), "> "))
        else:
            self.para(f"**Unrecognised step {code_span(kind or '?')}:**")
            self.fenced(v.dumps(step), "json")
            self.w("\n")

    def approval(self, step: Mapping[str, Any]) -> None:
        """One block while the request waits (reason as Markdown), one line once answered."""
        if v.text(step, "decision") != "pending":
            self.para(f"**{plain(v.approval_line(step))}**")
            return
        self.para(f"**⏸ {v.APPROVAL_TITLE}:**")
        self.para(v.APPROVE_MEANS)
        reason = v.reason_text(step)
        if reason:
            self.para(f"_{v.REASON_LABEL}_")
            self.para(_indent(plain(reason), "> "))
        if v.flag(self.state, "paused"):
            self.para(f"_{v.PAUSED_WORDS}_")
        else:
            self.para(f"_{v.DECISION_LABELS['pending']}_ — {v.APPROVE_HOWTO}")

    def error(self, message: str, kind: str, retry: Mapping[str, Any] | None) -> None:
        line = f"**⚠ Error — {plain(v.error_label(kind))}"
        if kind:
            line += f" ({plain(kind)})"
        line += ":**"
        if message:
            line += f" {self.text_block(message)}"
        if retry is not None:
            line += f"  \n**↻ {plain(v.retry_line(retry, kind))}**"
        else:
            line += f"  \n{v.error_advice(kind)}"
        self.para(line)

    def tool_group(self, group: Any) -> None:
        calls = v.visible_calls(group)
        if not calls:
            return
        self.w(f"**{inline_md(v.group_title(group))}**\n\n")
        for call in calls:
            self.call(call)
        self.w("\n")

    def call(self, call: Mapping[str, Any]) -> None:
        name = v.text(call, "name") or "tool"
        inp = v.mapping(call, "input")
        result = v.maybe_mapping(call, "result")
        display = v.mapping(result, "display")
        ind = "  "
        if name == "bash":
            command = v.bash_display(display).command or v.text(inp, "command")
            status = v.bash_status(display, result)
            if "\n" in command or len(command) > v.BLOCK_HEAD:
                self.w(f"- **bash**{' — ' + status if status else ''}\n")
                self.fenced_cut(command, "sh", ind)
            else:
                self.w(f"- **bash** {code_span(command)}{' — ' + status if status else ''}\n")
            self.output(result, ind)
        elif name == "patch":
            patched = v.patch_display(display)
            path, diff = patched.path or v.text(inp, "path"), patched.diff
            self.w(f"- **patch** {code_span(path)}{' — running' if result is None else ''}\n")
            if diff:
                self.fenced_cut(diff, "diff", ind)
            if not diff or v.flag(result, "is_error"):
                self.output(result, ind)
        else:
            summary = v.call_summary(call)
            self.w(f"- **{plain(name)}**" + (f" {code_span(summary)}" if summary else ""))
            status = v.kernel_status(name, display)
            if result is None:
                self.w(" — running")
            elif status:
                self.w(f" — {plain(status)}")
            self.w("\n")
            code, explanation = v.kernel_code(call)
            warning = v.code_warning(call)
            if warning:
                self.w(f"{ind}{self.text_block(warning)}\n\n")
            if code:
                self.fenced_cut(code, "python", ind)
            if explanation:
                self.w(_indent(self.text_block(explanation), ind + "> ") + "\n")
            files = v.search_files(display)
            if name == "think":
                thought = v.text(inp, THINK_THOUGHTS)
                if thought and thought.strip() != summary.strip():
                    self.w(_indent(self.text_block(thought), ind + "> ") + "\n")
            elif files:
                for f in files:
                    self.w(f"{ind}- {code_span(f)}\n")
            else:
                self.output(result, ind)
        self.changes(name, display, ind)

    def changes(self, name: str, display: Mapping[str, Any], ind: str) -> None:
        """What an Unrestricted call changed (phoenix_nb.checkpoints), with each diff."""
        found = changes_of(display)
        if found is None:
            return
        self.w(f"{ind}- _{plain(found.summary(name))}_\n")
        for f in found.files:
            self.w(f"{ind}  - {code_span(f.describe())}\n")
            if f.diff and name != "patch":  # a patch shows its diff above
                self.fenced_cut(f.diff, "diff", ind + "    ")
        if found.omitted:
            self.w(f"{ind}  - … and {found.omitted} more\n")

    def output(self, result: Mapping[str, Any] | None, ind: str) -> None:
        if result is None:
            return
        content = v.text(result, "content")
        if not content:
            return
        if self.full:
            shown, omitted = content, 0
        else:
            shown, omitted = v.clip_lines(content, MAX_OUTPUT_LINES, MAX_OUTPUT_CHARS)
        if v.flag(result, "is_error"):
            self.w(f"{ind}error:\n")
        self.fenced(shown, "", ind)
        if omitted:
            self.w(
                f"{ind}_… {omitted} more line{'s' if omitted != 1 else ''} not shown; "
                f"{v.MORE_HOWTO}_\n"
            )


def render_markdown(record: Mapping[str, Any], *, document: bool = False) -> str:
    """The record as Markdown; `document` adds a title and a metadata list (for export)."""
    r = _Md()
    r.record(record, document=document)
    return "".join(r.out).rstrip("\n") + "\n"
