"""The `text/html` fallback: the conversation for nbconvert, VS Code and GitHub.

These places show our HTML but not our JupyterLab extension, and some of them
(GitHub) sanitize it. So the output is self-contained (one scoped `<style>`, no
external resource), has no JavaScript at all (folding is `<details>`), escapes
every string of the record, and carries the colours of diffs and badges also as
inline translucent backgrounds, which survive a stripped `<style>` and read on
light and dark themes alike. Parts are appended to one list and joined once, so
the cost is linear in the record (the lead re-renders while streaming).

Content is hostile (README "Security model"): the model's Markdown goes through
`markdown_html` (no raw HTML, no image, every link showing its target), every
other content string is escaped text, and no `style` or `class` comes from
content; only phoenix's own parts carry colours, and content headings are capped
at the size of body text plus a little, so nothing in a message can pass for the
record's state line or a control. The approval request's reason is a labelled,
bounded quotation in plain text. A single large block is abbreviated to a head
and a tail (`view.abbreviate`); an export (`document=True`) shows everything.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from phoenix_nb.checkpoints.changes import changes_of
from phoenix_nb.core.tool_fields import THINK_THOUGHTS
from phoenix_nb.notebook._render import cost as c
from phoenix_nb.notebook._render import view as v
from phoenix_nb.notebook._render.markdown_html import markdown_to_html

# Outputs longer than this are cut in the HTML; the record keeps them whole.
MAX_OUTPUT_LINES = 400
MAX_OUTPUT_CHARS = 40_000

_ADD_BG = "rgba(46,160,67,.22)"
_DEL_BG = "rgba(248,81,73,.22)"
_HUNK_BG = "rgba(56,139,253,.20)"
_WARN_BG = "rgba(210,153,34,.20)"
_DIFF_STYLE = {
    "add": f"background:{_ADD_BG}",
    "del": f"background:{_DEL_BG}",
    "hunk": f"background:{_HUNK_BG}",
    "meta": "font-weight:bold",
    "ctx": "",
}

_KNOWN_STATES = frozenset(
    {
        "idle",
        "awaiting_llm",
        "llm_requesting",
        "tool_executing",
        "cancelling",
        "awaiting_sub_agents",
        "awaiting_mode_approval",
        "awaiting_continuation",
        "context_exhausted",
        "error",
        "completed",
        "failed",
    }
)

CSS = """
.phx-record{color-scheme:light dark;font-family:system-ui,-apple-system,"Segoe UI",sans-serif;
font-size:13px;line-height:1.45;border:1px solid rgba(127,127,127,.35);border-radius:6px;
padding:8px 10px;margin:4px 0;max-width:100%;overflow-wrap:anywhere}
.phx-record code,.phx-record pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;
font-size:12px}
.phx-record pre{white-space:pre-wrap;margin:4px 0;padding:6px 8px;border-radius:4px;
background:rgba(127,127,127,.10);max-height:32em;overflow:auto}
.phx-record code{background:rgba(127,127,127,.12);padding:0 3px;border-radius:3px}
.phx-record pre code{background:none;padding:0}
.phx-head{display:flex;flex-wrap:wrap;gap:6px;align-items:center}
.phx-title{font-weight:600}
.phx-cwd,.phx-muted{opacity:.75;font-size:12px}
.phx-badge{display:inline-block;padding:0 6px;border-radius:9px;font-size:11px;font-weight:600;
border:1px solid rgba(127,127,127,.45)}
.phx-meter{margin:6px 0;font-size:12px}
.phx-bar{height:6px;border-radius:3px;background:rgba(127,127,127,.2);overflow:hidden;
max-width:320px;margin:2px 0}
.phx-fill{height:100%;background:rgba(56,139,253,.75)}
.phx-warn .phx-fill{background:rgba(210,153,34,.9)}
.phx-limit .phx-fill{background:rgba(248,81,73,.9)}
.phx-warn .phx-advice{font-weight:600}
.phx-cycle{border-top:1px solid rgba(127,127,127,.3);margin-top:8px;padding-top:4px}
.phx-cycle-head{font-size:11px;text-transform:uppercase;letter-spacing:.05em;opacity:.7}
.phx-step{margin:6px 0}
.phx-who,.phx-label{font-weight:600;font-size:12px}
.phx-user{border-left:3px solid rgba(56,139,253,.7);padding-left:8px}
.phx-prewrap{white-space:pre-wrap}
.phx-md p{margin:4px 0}
.phx-system{font-style:italic;opacity:.85}
.phx-reasoning>summary{opacity:.8;font-style:italic;cursor:pointer}
.phx-reasoning .phx-md{opacity:.85}
.phx-tools{border:1px solid rgba(127,127,127,.3);border-radius:4px;margin:4px 0;padding:0 6px}
.phx-tools>summary{cursor:pointer;white-space:nowrap;overflow:hidden;text-overflow:ellipsis;
padding:2px 0}
.phx-gname{font-weight:600}
.phx-call{margin:4px 0 8px}
.phx-status{font-size:11px;opacity:.9}
.phx-bad{color:inherit;background:rgba(248,81,73,.22);padding:0 4px;border-radius:3px}
.phx-running{background:rgba(56,139,253,.2);padding:0 4px;border-radius:3px}
.phx-card{border:1px solid rgba(127,127,127,.4);border-radius:5px;padding:6px 8px;margin:6px 0}
.phx-error{border-color:rgba(248,81,73,.7);background:rgba(248,81,73,.08)}
.phx-retrying{border-color:rgba(210,153,34,.8);background:rgba(210,153,34,.10)}
.phx-approval{border-color:rgba(210,153,34,.8)}
.phx-dec-approved{border-color:rgba(46,160,67,.7)}
.phx-dec-denied{border-color:rgba(248,81,73,.6)}
.phx-pending{border-width:2px;background:rgba(210,153,34,.10)}
.phx-summary{border:2px solid rgba(56,139,253,.7);background:rgba(56,139,253,.08)}
.phx-stop{font-size:11px;opacity:.75;margin-top:4px}
.phx-subagents ul,.phx-images,.phx-files{margin:2px 0;padding-left:18px}
.phx-d{display:inline}
.phx-thumb{max-width:96px;max-height:96px;border:1px solid rgba(127,127,127,.35);border-radius:3px}
.phx-approval-line{font-weight:600}
.phx-note{margin-top:6px}
.phx-lead{margin:0 0 6px}
.phx-folded{font-size:12px;margin:2px 0;padding-top:2px}
.phx-md h1,.phx-md h2,.phx-md h3,.phx-md h4,.phx-md h5,.phx-md h6{font-size:1.08em;
margin:6px 0 2px;font-weight:600;color:inherit;background:none}
.phx-md a,.phx-cites a{color:inherit;text-decoration:underline;background:none;padding:0;
border:0;font:inherit}
.phx-href{opacity:.75;font-size:12px;overflow-wrap:anywhere}
.phx-imglink{opacity:.85}
.phx-reason{margin:4px 0;padding:2px 8px;border-left:3px solid rgba(127,127,127,.6);
white-space:pre-wrap;font-style:italic}
.phx-means{font-weight:600}
.phx-cut{font-style:italic;opacity:.75;font-size:12px;margin:4px 0}
"""


def _e(s: str) -> str:
    return escape(s, quote=True)


def _badge(label: str, bg: str, title: str = "") -> str:
    title_attr = f' title="{_e(title)}"' if title else ""
    return f'<span class="phx-badge" style="background:{bg}"{title_attr}>{_e(label)}</span>'


class _Html:
    """One rendering pass; `out` is the list of parts joined once at the end."""

    def __init__(self, document: bool = False) -> None:
        self.out: list[str] = []
        self.w = self.out.append
        self.state: Mapping[str, Any] = {}
        self.document = document

    # --- content blocks, abbreviated unless this is an export -------------------

    def cut_note(self, omitted: int) -> None:
        self.w(f'<div class="phx-cut">{self.inline_md(v.omitted_note(omitted))}</div>')

    def md(self, source: str, cls: str = "phx-md", tag: str = "div") -> None:
        """Model Markdown as inert HTML (markdown_html), head and tail if it is large."""
        head, omitted, tail = (source, 0, "") if self.document else v.abbreviate(source)
        self.w(f'<{tag} class="{cls}">{markdown_to_html(head)}')
        if omitted:
            self.cut_note(omitted)
            self.w(markdown_to_html(tail))
        self.w(f"</{tag}>")

    def block(self, source: str, cls: str, tag: str = "div") -> None:
        """Content shown as escaped text, head and tail if it is large."""
        head, omitted, tail = (source, 0, "") if self.document else v.abbreviate(source)
        self.w(f'<{tag} class="{cls}">{_e(head)}</{tag}>')
        if omitted:
            self.cut_note(omitted)
            self.w(f'<{tag} class="{cls}">{_e(tail)}</{tag}>')

    # --- record level --------------------------------------------------------

    def record(self, record: Mapping[str, Any]) -> None:
        conv = v.mapping(record, "conversation")
        state = v.mapping(conv, "state")
        name = v.text(state, "name")
        state_cls = name if name in _KNOWN_STATES else "unknown"
        self.w(f'<div class="phx-record phx-state-{state_cls}"><style>{CSS}</style>')
        # Notes ("continuing SLUG", "nothing new since …") say what the record below is:
        # they come first, before the header.
        for note in v.notes(record):
            self.w(f'<div class="phx-note phx-lead phx-muted">{self.inline_md(note)}</div>')
        self.header(record, conv, state)
        self.meter(v.Meter(v.mapping(record, "context")))
        self.spending(c.Spending(v.maybe_mapping(record, "usage")))
        summary = v.text(record, "summary")
        if summary:
            self.w('<div class="phx-card phx-summary"><div class="phx-label">')
            self.w(f"{v.SUMMARY_TITLE}</div>")
            self.md(summary)
            self.w("</div>")
        self.state = state
        plan = v.fold_plan(record, document=self.document)
        note = v.folded_note(plan)
        if note:
            self.w(f'<div class="phx-note phx-muted">{self.inline_md(note)}</div>')
        for i, cycle, where in plan:
            self.cycle(cycle, i, summary, where)
        retry = v.maybe_mapping(record, "retry")
        if retry is not None:
            self.w('<div class="phx-card phx-retrying"><span class="phx-label">')
            self.w(f"{_e(v.retry_line(retry))}</span>")
            message = v.text(retry, "message")
            if message:
                self.w(f' <span class="phx-muted">{_e(message)}</span>')
            self.w("</div>")
        pending = v.maybe_mapping(record, "pending_approval")
        if pending is not None and not v.has_pending_step(record):
            self.approval({"reason": v.text(pending, "reason"), "decision": "pending"}, state)
        if name in ("error", "failed"):
            kind = v.text(state, "kind", "unknown")
            self.error_card(v.text(state, "message"), kind, None)
        self.w("</div>")

    def header(
        self, record: Mapping[str, Any], conv: Mapping[str, Any], state: Mapping[str, Any]
    ) -> None:
        self.w('<div class="phx-head"><span class="phx-title">phoenix</span>')
        slug = v.text(conv, "slug") or v.text(conv, "id")
        if slug:
            self.w(f' <code class="phx-slug">{_e(slug)}</code>')
        model = v.text(conv, "model")
        if model:
            self.w(f' <span class="phx-model phx-muted">{_e(model)}</span>')
        mode = v.text(conv, "mode")
        bg = _ADD_BG if mode == "restricted" else _WARN_BG
        mode_cls = mode if mode in v.MODE_LABELS else "unknown"
        self.w(f' <span class="phx-mode phx-mode-{mode_cls}">')
        self.w(_badge(v.mode_label(conv), bg, v.mode_hint(conv)))
        self.w("</span>")
        if v.sandbox_unavailable(conv):
            self.w(
                " "
                + _badge(
                    v.SANDBOX_UNAVAILABLE,
                    _DEL_BG,
                    "Landlock is not available here: only Unrestricted mode exists.",
                ).replace('class="phx-badge"', 'class="phx-badge phx-nosandbox"')
            )
        words = self.inline_md(v.state_line(state, record))
        self.w(f' <span class="phx-state phx-muted">{words}</span>')
        fmt = v.text(record, "format")
        if fmt and fmt != v.RECORD_FORMAT:
            self.w(f' <span class="phx-muted">(record format {_e(fmt)}: shown best-effort)</span>')
        self.w("</div>")
        cwd = v.text(conv, "cwd")
        if cwd:
            self.w(f'<div class="phx-cwd">in <code>{_e(v.shown_cwd(cwd))}</code></div>')
        served = v.serving(conv)
        if served:
            self.w(f'<div class="phx-cwd">{_e(served)}</div>')

    def meter(self, m: v.Meter) -> None:
        if not m.known:
            return
        cls = (
            "phx-meter"
            + (" phx-warn" if m.warning else "")
            + (" phx-limit" if m.limit_reached else "")
        )
        width = 0.0 if m.fraction is None else m.fraction * 100
        fill = _DEL_BG if m.limit_reached else (_WARN_BG if m.warning else _HUNK_BG)
        self.w(f'<div class="{cls}"><div class="phx-bar">')
        self.w(f'<div class="phx-fill" style="width:{width:.1f}%;background:{fill}"></div></div>')
        self.w(f"<span>{_e(m.line)}</span>")
        if m.advice:
            self.w(f' <span class="phx-advice">{self.inline_md(m.advice)}</span>')
        self.w("</div>")

    def spending(self, s: c.Spending) -> None:
        if s.known:
            self.w(f'<div class="phx-meter phx-cost" data-phoenix-cost>{_e(s.line)}</div>')

    def footnotes(self, item: Mapping[str, Any]) -> None:
        """Citations as numbered footnote links under the text they back."""
        cites = c.citations(item)
        if not cites:
            return
        self.w('<ol class="phx-cites" data-phoenix-citations>')
        for n, url, title in cites:
            label = _e(title)
            link = (
                f'<a href="{_e(url)}" rel="nofollow noopener noreferrer">{label}</a>'
                + ("" if title == url else f' <span class="phx-href">({_e(url)})</span>')
                if url
                else label
            )
            self.w(f'<li value="{n}">{link}</li>')
        self.w("</ol>")

    @staticmethod
    def inline_md(s: str) -> str:
        """Our own advice strings: escape, then turn `code` spans into <code>."""
        parts = _e(s).split("`")
        return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))

    # --- cycles and steps ----------------------------------------------------

    def cycle(self, cycle: Any, i: int, summary: str, where: str = "") -> None:
        if where:
            line = v.folded_line(cycle, i, where)
            self.w(f'<div class="phx-cycle phx-folded phx-muted">{_e(line)}</div>')
            return
        self.w('<section class="phx-cycle">')
        self.w(f'<div class="phx-cycle-head">{_e(v.cycle_title(cycle, i))}</div>')
        for step in v.items(cycle, "steps"):
            self.step(step, summary)
        stop = v.maybe_mapping(cycle, "stop")
        if stop is not None:
            reason = v.text(stop, "reason")
            label = v.STOP_LABELS.get(reason, reason or "stopped")
            self.w(f'<div class="phx-stop">■ {_e(label)}</div>')
        self.w("</section>")

    def step(self, step: Any, summary: str) -> None:
        kind = v.text(step, "kind")
        if kind == "user":
            self.user(step)
        elif kind == "ai":
            self.ai(step)
        elif kind == "system":
            self.block(v.text(step, "text"), "phx-step phx-system phx-prewrap")
        elif kind == "approval":
            self.approval(step, self.state)
        elif kind == "sub_agents":
            self.sub_agents(step)
        elif kind == "error":
            self.error_card(
                v.text(step, "text"), v.text(step, "error_kind"), v.maybe_mapping(step, "retry")
            )
        elif kind == "continuation":
            text = v.text(step, "summary")
            self.w('<div class="phx-card phx-continuation"><div class="phx-label">')
            if text and text == summary:
                self.w("Continuation summary (shown above)</div></div>")
            else:
                self.w("Continuation summary</div>")
                self.md(text)
                self.w("</div>")
        else:
            self.w('<div class="phx-step phx-unknown"><div class="phx-label">')
            self.w(f"Unrecognised step {_e(kind)}</div><pre>{_e(v.dumps(step))}</pre></div>")

    def user(self, step: Mapping[str, Any]) -> None:
        who = v.USER_KIND_LABELS.get(v.text(step, "user_kind"), "You")
        self.w(f'<div class="phx-step phx-user"><div class="phx-who">{_e(who)}</div>')
        self.block(v.text(step, "text"), "phx-prewrap")
        images = v.items(step, "images")
        if images:
            self.w('<ul class="phx-images">')
            for img in images:
                name = v.text(img, "name") or "image"
                media = v.text(img, "media_type")
                self.w(f"<li>📎 {_e(name)}")
                thumb = v.thumbnail(img)
                if thumb:
                    self.w(f'<br><img class="phx-thumb" src="{thumb}" alt="{_e(name)}">')
                if media:
                    self.w(f' <span class="phx-muted">({_e(media)})</span>')
                self.w("</li>")
            self.w("</ul>")
        self.w("</div>")

    def ai(self, step: Mapping[str, Any]) -> None:
        self.w('<div class="phx-step phx-ai">')
        item = v.maybe_mapping(step, "item")
        if item is not None:
            body = v.text(item, "text")
            if v.text(item, "type") == "reasoning":
                self.w('<details class="phx-reasoning"><summary>Reasoning</summary>')
                self.md(body)
                self.w("</details>")
            else:
                self.md(body)
                self.footnotes(item)
        for group in v.items(step, "tool_groups"):
            self.tool_group(group)
        self.w("</div>")

    def tool_group(self, group: Any) -> None:
        calls = v.visible_calls(group)
        if not calls:
            return
        gname = v.text(group, "group", "other")
        gcls = gname if gname in ("read", "write", "bash", "other") else "other"
        opened = " open" if v.group_open(group) else ""
        self.w(f'<details class="phx-tools phx-group-{gcls}"{opened}><summary>')
        self.w(f'<span class="phx-gname">{self.inline_md(v.group_title(group))}</span>')
        badge, words = v.group_badge(calls)
        cls = {"running": "phx-running", "failed": "phx-bad"}.get(badge, "phx-muted")
        if badge:
            self.w(f' <span class="{cls} phx-badge-{badge}">{_e(words)}</span>')
        self.w("</summary>")
        for call in calls:
            self.call(call)
        self.w("</details>")

    def call(self, call: Mapping[str, Any]) -> None:
        name = v.text(call, "name")
        inp = v.mapping(call, "input")
        result = v.maybe_mapping(call, "result")
        display = v.mapping(result, "display")
        self.w('<div class="phx-call">')
        if name == "bash":
            command = v.bash_display(display).command or v.text(inp, "command")
            status = v.bash_status(display, result)
            self.block(f"$ {command}", "phx-cmd", "pre")
            if status:
                bad = result is None or v.flag(result, "is_error") or status != "exit 0"
                cls = "phx-running" if result is None else ("phx-bad" if bad else "phx-muted")
                self.w(f'<span class="phx-status {cls}">{_e(status)}</span>')
            self.output(result, show_empty=False)
        elif name == "patch":
            patched = v.patch_display(display)
            path = patched.path or v.text(inp, "path")
            self.w(f'<div class="phx-call-head">patch <code>{_e(path)}</code></div>')
            diff = patched.diff
            if diff:
                self.diff(diff)
            if not diff or v.flag(result, "is_error") or result is None:
                self.output(result, show_empty=False)
        elif name == "think":
            self.block(v.text(inp, THINK_THOUGHTS), "phx-prewrap phx-muted")
        else:
            head = f'<div class="phx-call-head"><span class="phx-gname">{_e(name or "tool")}</span>'
            self.w(head)
            summary = v.call_summary(call)
            if summary:
                self.w(f" <code>{_e(summary)}</code>")
            self.w("</div>")
            status = v.kernel_status(name, display)
            if status:
                self.w(f'<span class="phx-status phx-muted">{_e(status)}</span>')
            code, explanation = v.kernel_code(call)
            warning = v.code_warning(call)
            if warning:
                self.block(warning, "phx-warning")
            if code:
                self.block(code, "phx-cmd", "pre")
            if explanation:
                self.block(explanation, "phx-prewrap phx-muted")
            if inp:
                self.w('<details class="phx-input"><summary>input</summary>')
                self.block(v.inert(v.dumps(dict(inp))), "phx-input-json", "pre")
                self.w("</details>")
            files = v.search_files(display)
            if files:
                self.w('<ul class="phx-files">')
                for f in files:
                    self.w(f"<li><code>{_e(f)}</code></li>")
                self.w("</ul>")
            else:
                self.output(result, show_empty=False)
        self.changes(name, display)
        self.w("</div>")

    def changes(self, name: str, display: Mapping[str, Any]) -> None:
        """What an Unrestricted call changed (phoenix_nb.checkpoints), diffs folded under it."""
        found = changes_of(display)
        if found is None:
            return
        self.w(
            f'<details class="phx-changes" data-phoenix-changes="{found.count}">'
            f'<summary>{_e(found.summary(name or "tool"))}</summary><ul class="phx-files">'
        )
        for f in found.files:
            self.w(f'<li data-phoenix-change="{_e(f.kind)}"><code>{_e(f.describe())}</code>')
            if f.diff and name != "patch":  # a patch shows its diff above
                self.diff(f.diff)
            self.w("</li>")
        if found.omitted:
            self.w(f"<li>… and {found.omitted} more</li>")
        self.w("</ul></details>")

    def output(self, result: Mapping[str, Any] | None, *, show_empty: bool) -> None:
        if result is None:
            self.w('<div class="phx-running phx-status">running…</div>')
            return
        content = v.text(result, "content")
        if not content and not show_empty:
            return
        cls = "phx-out phx-out-error" if v.flag(result, "is_error") else "phx-out"
        if self.document:
            self.w(f'<pre class="{cls}">{_e(content)}</pre>')
            return
        shown, omitted = v.clip_lines(content, MAX_OUTPUT_LINES, MAX_OUTPUT_CHARS)
        self.w(f'<pre class="{cls}">{_e(shown)}</pre>')
        if omitted:
            self.w(
                f'<div class="phx-muted">… {omitted} more line{"s" if omitted != 1 else ""} '
                f"not shown here (the record keeps the whole output; "
                f"{self.inline_md(v.MORE_HOWTO)}).</div>"
            )

    def diff(self, diff: str) -> None:
        head, omitted, tail = (diff, 0, "") if self.document else v.abbreviate(diff)
        self.diff_lines(head)
        if omitted:
            self.cut_note(omitted)
            self.diff_lines(tail)

    def diff_lines(self, diff: str) -> None:
        self.w('<pre class="phx-diff">')
        lines = diff.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        for line in lines:
            kind = v.diff_kind(line)
            style = _DIFF_STYLE[kind]
            style_attr = f' style="{style}"' if style else ""
            self.w(f'<span class="phx-d phx-d-{kind}"{style_attr}>{_e(line)}</span>\n')
        self.w("</pre>")

    def approval(self, step: Mapping[str, Any], state: Mapping[str, Any] | None = None) -> None:
        """One block while the request waits (reason as Markdown), one line once answered."""
        decision = v.text(step, "decision")
        dcls = decision if decision in v.DECISION_LABELS else "unknown"
        if decision != "pending":
            self.w(f'<div class="phx-step phx-approval-line phx-dec-{dcls}">')
            self.w(f"{_e(v.approval_line(step))}</div>")
            return
        self.w('<div class="phx-card phx-approval phx-pending">')
        self.w(f'<div class="phx-label">{_e(v.APPROVAL_TITLE)}</div>')
        self.w(f'<div class="phx-means">{_e(v.APPROVE_MEANS)}</div>')
        reason = v.reason_text(step)
        if reason:
            self.w(f'<div class="phx-muted">{_e(v.REASON_LABEL)}</div>')
            self.w(f'<blockquote class="phx-reason">{_e(reason)}</blockquote>')
        paused = v.flag(state, "paused")
        words = v.PAUSED_WORDS if paused else v.DECISION_LABELS["pending"]
        self.w(f'<div class="phx-decision">{self.inline_md(words)}</div>')
        if not paused:
            self.w(f'<div class="phx-muted">{self.inline_md(v.APPROVE_HOWTO)}</div>')
        self.w("</div>")

    def sub_agents(self, step: Mapping[str, Any]) -> None:
        agents = v.items(step, "agents")
        self.w('<div class="phx-step phx-subagents">')
        self.w(f'<div class="phx-label">Sub-agents · {len(agents)}</div><ul>')
        for agent in agents:
            outcome = v.text(agent, "outcome")
            label = v.OUTCOME_LABELS.get(outcome, outcome or "unknown")
            bg = {"success": _ADD_BG, "pending": _HUNK_BG}.get(outcome, _DEL_BG)
            self.w(f"<li>{_badge(label, bg)} {_e(v.text(agent, 'task'))}")
            result = v.text(agent, "result")
            if result:
                self.block(result, "phx-prewrap")
            cid = v.text(agent, "conversation_id")
            if cid:
                self.w(f'<div class="phx-muted">conversation <code>{_e(cid)}</code></div>')
            self.w("</li>")
        self.w("</ul></div>")

    def error_card(self, message: str, kind: str, retry: Mapping[str, Any] | None) -> None:
        cls = "phx-card phx-error" + (" phx-retrying" if retry is not None else "")
        self.w(f'<div class="{cls}"><div class="phx-label">⚠ {_e(v.error_label(kind))}')
        if kind:
            self.w(f' <code class="phx-kind">{_e(kind)}</code>')
        self.w("</div>")
        if message:
            self.block(message, "phx-prewrap")
        if retry is not None:
            self.w(f'<div class="phx-retry">{_e(v.retry_line(retry, kind))}</div>')
        else:
            self.w(f'<div class="phx-advice">{self.inline_md(v.error_advice(kind))}</div>')
        self.w("</div>")


def render_html(record: Mapping[str, Any], *, document: bool = False) -> str:
    """The record as self-contained, script-free HTML (see the module docstring);
    `document` (an export) shows every block whole."""
    r = _Html(document)
    r.record(record)
    return "".join(r.out)
