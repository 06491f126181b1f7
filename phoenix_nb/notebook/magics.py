"""`%phoenix SUBCOMMAND` and the extension's registration with IPython.

Subcommands that wait on the agent (approve, deny, cancel, continue …) must
await on the kernel's loop, which a magic cannot do; so, like `%%phoenix`
cells, unindented `%phoenix …` lines are rewritten by the input transformer
into `await run_line(…)`. The registered line magic handles the rest (e.g.
`get_ipython().run_line_magic("phoenix", "list")`) and schedules waiting
subcommands on the loop.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from IPython.core.magic import Magics, line_magic, magics_class
from IPython.display import display

from phoenix_nb.core.prices import format_usd
from phoenix_nb.core.states import ContextExhausted
from phoenix_nb.core.transition import stopped_jobs_text
from phoenix_nb.notebook._render.cost import Spending
from phoenix_nb.notebook._render.view import folded_line, state_words
from phoenix_nb.notebook.cell import TurnView, decorate, front_end_can_answer, say
from phoenix_nb.notebook.edits_listing import pending_edits_text
from phoenix_nb.notebook.export import export_html, export_json, export_markdown
from phoenix_nb.notebook.options import HELP_TEXT, OptionsError, Subcommand, parse_subcommand
from phoenix_nb.notebook.render import render_bundle
from phoenix_nb.notebook.session import Session, get_session
from phoenix_nb.notebook.undo import checkpoints_text, report_text, revert
from phoenix_nb.runtime.conversation import is_paused
from phoenix_nb.runtime.manager import PhoenixError
from phoenix_nb.sandbox import describe_hidden
from phoenix_nb.store import StoreError
from phoenix_nb.tools.environment import withheld_summary

_LINE = re.compile(r"^%phoenix(?:[ \t]+(?P<args>[^\n]*))?[ \t]*$")
LINE_ENTRY = "__import__('phoenix_nb.notebook.magics', fromlist=['run_line']).run_line"
AWAITING = frozenset({"approve", "deny", "cancel", "restrict", "continue", "revert", "repair"})
_BACKGROUND: set[asyncio.Task[None]] = set()  # scheduled subcommands, kept until done


def transform_phoenix_lines(lines: list[str]) -> list[str]:
    """Rewrite unindented `%phoenix …` lines into awaited calls."""
    out = []
    for line in lines:
        match = _LINE.match(line.rstrip("\r\n"))
        if match is None:
            out.append(line)
        else:
            out.append(f"await {LINE_ENTRY}({(match.group('args') or '')!r})\n")
    return out


async def run_line(line: str) -> None:
    """Run one `%phoenix` subcommand; user mistakes print one line."""
    from IPython import get_ipython

    shell = get_ipython()
    session = get_session(shell)
    try:
        command = parse_subcommand(line)
        await _dispatch(command, session, shell)
    except (OptionsError, PhoenixError, StoreError) as exc:
        say(str(exc))


async def _dispatch(command: Subcommand, session: Session, shell: Any) -> None:
    if command.name in AWAITING:
        await _dispatch_awaiting(command, session, shell)
    else:
        _dispatch_now(command, session)


def _dispatch_now(command: Subcommand, session: Session) -> None:
    """Subcommands that only read or create: they run at once, even from `run_line_magic`."""
    name = command.name
    phoenix = session.phoenix
    if name == "help":
        print(HELP_TEXT)
        return
    _announce_store(session)
    _announce_resumed(session)
    if name == "status":
        if command.slug is None and session.current is None:
            print("No conversation yet in this notebook: run a %%phoenix cell to start one.")
            print(_reattach_line(session, None))
            return
        conv = session.current_conversation(command.slug)
        print(_status(conv, session))
    elif name == "list":
        rows = phoenix.list()
        if not rows:
            print("No conversations yet: run a %%phoenix cell.")
        for line in list_lines(rows, session.current):
            print(line)
    elif name == "new":
        conv = phoenix.create(cwd=session.cwd)
        session.current = conv.slug
        print(f"New conversation {conv.slug} ({conv.mode.value}) in {conv.cwd}.")
    elif name == "use":
        assert command.slug is not None
        conv = phoenix.get(command.slug)
        session.current = conv.slug
        print(f"Using {conv.slug} ({_state_words(conv)}, {conv.mode.value}).")
    elif name == "history":
        conv = session.current_conversation(command.slug)
        _show_history(conv, session)
    elif name == "export":
        conv = session.current_conversation(command.slug)
        _export(conv, command, session)
    elif name == "checkpoints":
        conv = session.current_conversation()
        print(checkpoints_text(conv, session.phoenix.worktree))
    elif name == "edits":
        print(pending_edits_text(session.kernel))
    elif name == "chat":
        from phoenix_nb.notebook.chat import ChatPanel

        panel = ChatPanel(session, asyncio.get_event_loop())
        panel.show()


def list_lines(rows: list[dict[str, Any]], current: str | None) -> list[str]:
    """`%phoenix list`: one row per conversation, each column as wide as its widest cell.

    A summarised conversation is read-only for good (as `status` says: no mode word).
    One that already goes on in a conversation seeded from it says which; only one whose
    context filled up with no successor gets the advice, on a line of its own so the
    table stays narrow.
    """
    successor = {str(r["seeded_from"]): str(r["slug"]) for r in rows if r.get("seeded_from")}
    table: list[tuple[str, str, str, str]] = []
    stuck: list[str] = []
    for row in rows:
        slug = str(row["slug"])
        if row["state"] == "context_exhausted":
            after = successor.get(str(row["id"]))
            state, mode = (f"continued in {after}" if after else "context full"), "read-only"
            if after is None:
                stuck.append(slug)
        else:
            state, mode = state_words(str(row["state"])), str(row["mode"])
        damaged = f"  damaged: {row['damaged']}" if row.get("damaged") else ""
        table.append((slug, state, mode, f"{row['cwd']}{damaged}"))
    widths = [max((len(r[i]) for r in table), default=0) for i in range(3)]
    lines = [
        f"{'*' if slug == current else ' '} {slug:<{widths[0]}}  {state:<{widths[1]}}  "
        f"{mode:<{widths[2]}}  {where}"
        for slug, state, mode, where in table
    ]
    for slug in stuck:
        lines.append(
            f"{slug}: its context is full — `%phoenix use {slug}`, then `%phoenix continue`, "
            "goes on in a new conversation seeded with its summary."
        )
    return lines


def _announce_store(session: Session) -> None:
    """Each command first says why the store cannot be written (read-only, missing), and
    once that its index was rebuilt; one line each, never a traceback."""
    phoenix = session.phoenix
    problem = phoenix.store_problem
    if problem:
        print(problem)
    note = phoenix.store.take_rebuild_note()
    if note:
        print(f"phoenix: {note}.")


def _announce_resumed(session: Session) -> None:
    """The first output after a restart says which conversation the notebook continues."""
    _ = session.current  # reads the notebook's stored conversation, if any
    note = session.take_resumed_note()
    if note:
        print(f"phoenix: {note}.")


def _show_history(conv: Any, session: Session) -> None:
    """The conversation without repeating what the notebook already shows: cycles shown
    above fold to one line each, the rest is shown whole."""
    full = conv.payload()
    record = decorate(full, session, conv.history())
    shown = session.shown(conv.slug)
    cycles = record.get("cycles", [])
    if shown is not None:
        last, steps = shown
        out = []
        for i, cycle in enumerate(cycles):
            if i < last or (i == last and len(cycle.get("steps", [])) <= steps):
                line = folded_line(cycle, i)
                out.append({"index": cycle.get("index", i), "folded": True, "line": line})
            elif i == last:
                out.append({**cycle, "steps": cycle.get("steps", [])[steps:], "continued": True})
            else:
                out.append(cycle)
        record["cycles"] = out
        if all(c.get("folded") for c in out):
            record["notes"] = [
                "Nothing new since the records above, shown here one line per request. "
                "`%phoenix export --format html` writes the whole conversation to a file."
            ]
    display(render_bundle(record), raw=True)
    session.mark_shown(conv.slug, full)


_WRITERS = {"md": export_markdown, "json": export_json, "html": export_html}


def _export(conv: Any, command: Subcommand, session: Session) -> None:
    """Write the record to a file; a relative path is relative to the kernel's folder."""
    target = Path(command.output or f"{conv.slug}.{command.format}").expanduser()
    if not target.is_absolute():
        target = Path.cwd() / target
    text = _WRITERS[command.format](decorate(conv.payload(), session, conv.history()))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise OptionsError(f"cannot write {target}: {exc.strerror or exc}") from None
    print(f"Exported {conv.slug} ({command.format}, {len(text.encode()):,} bytes) to {target}")


async def _dispatch_awaiting(command: Subcommand, session: Session, shell: Any) -> None:
    """Subcommands that wait on the agent, on the kernel's loop."""
    name = command.name
    _announce_store(session)
    _announce_resumed(session)
    if name == "repair":
        slug = command.slug or session.current
        if slug is None:
            raise PhoenixError("%phoenix repair: which conversation? `%phoenix repair SLUG`")
        print(_repaired_line(await session.phoenix.repair(slug), session))
    elif name in ("approve", "deny"):
        conv = session.current_conversation()
        if not is_paused(conv.state):
            print(
                f"Nothing to {name}: {conv.slug} is not waiting for an answer "
                f"({conv.mode.value}, {_state_words(conv)})."
            )
            return
        action = conv.approve if name == "approve" else conv.deny
        view = TurnView(
            conv,
            session,
            can_answer=front_end_can_answer(shell, session),
            from_approval=True,
        )
        await view.run(action)
    elif name == "restrict":
        conv = session.current_conversation()
        stopped = await conv.restrict()
        print(f"{conv.slug} is now Restricted (read-only, no network).")
        if stopped:
            print(stopped_jobs_text(stopped))
    elif name == "cancel":
        conv = session.current_conversation()
        await conv.cancel()
        print(f"Cancelled; {conv.slug} is {_state_words(conv)}.")
    elif name == "revert":
        conv = session.current_conversation()
        report = await revert(
            conv,
            session.phoenix.worktree,
            target=command.target,
            to_approval=command.to_approval,
            force=command.force,
        )
        print(report_text(report))
    elif name == "continue":
        conv = session.current_conversation()
        exhausted = isinstance(conv.state.phase, ContextExhausted)
        new = await conv.continue_in_new()
        session.current = new.slug
        summary = new_summary(conv)
        why = "its context is full" if exhausted else "at your request"
        print(
            f"Started {new.slug}, seeded with a summary of {conv.slug} ({why}); "
            f"your next %%phoenix cell talks to {new.slug}.\n\n{summary}"
        )


def _repaired_line(done: Any, session: Session) -> str:
    if done.damage is None:
        return f"{done.slug} is not damaged: nothing to repair."
    name = f"{done.damage.conversation_id}.jsonl.damaged"
    kept = done.damage.original or session.phoenix.store.root / "conversations" / name
    extra = f", dropped {done.dropped} result(s) of lost calls" if done.dropped else ""
    extra += f", answered {done.answered} open call(s)" if done.answered else ""
    return (
        f"Repaired {done.slug}: it goes on with its {done.kept} intact message(s){extra}; "
        f"lost: {done.damage.summary}; the damaged file is kept as {kept}."
    )


def _damage_line(conv: Any, session: Session) -> list[str]:
    found = session.phoenix.store.damage(conv.id)
    if found is None:
        return []
    return [
        f"damaged       {found.summary} — run `%phoenix repair {conv.slug}` to go on with "
        "what is intact (the damaged file is kept beside it)"
    ]


def _state_words(conv: Any) -> str:
    return state_words(conv.state.name)


def _budget_line(session: Session, usage: Any) -> str:
    """The turn budget (c.Phoenix.max_turn_rounds, max_turn_cost, max_conversation_cost)."""
    s = session.phoenix.settings
    rounds = s.max_turn_rounds
    parts = [f"{rounds} model responses a turn" if rounds else "no limit on responses a turn"]
    costs = [(s.max_turn_cost, "a turn"), (s.max_conversation_cost, "for the conversation")]
    priced = isinstance(usage, dict) and bool(usage.get("priced"))
    for limit, what in costs:
        if limit is not None:
            off = "" if priced else " (off: no known price)"
            parts.append(f"{format_usd(limit)} {what}{off}")
    if all(limit is None for limit, _ in costs):
        parts.append("no dollar limit")
    return " · ".join(parts) + "  (`%config Phoenix.max_turn_rounds = …` and the like)"


def _reattach_line(session: Session, conv: Any) -> str:
    notebook = session.notebook
    if notebook is not None:
        return f"notebook      {notebook} (a restarted kernel continues this conversation)"
    slug = conv.slug if conv is not None else "SLUG"
    return (
        "notebook      unknown to this kernel (JPY_SESSION_NAME is not set): after a restart, "
        f"run `%phoenix use {slug}` to continue this conversation"
    )


def new_summary(conv: Any) -> str:
    phase = conv.state.phase
    return phase.summary if isinstance(phase, ContextExhausted) else ""


def _serving(conv: Any, session: Session) -> str:
    """'anthropic at http://… · lacks caching · window: conservative default …'."""
    s = session.phoenix.settings
    parts = [s.provider + (f" at {s.base_url}" if s.base_url else "")]
    lacks = session.phoenix.lacks(conv.model)
    parts.append("lacks " + ", ".join(lacks) if lacks else "no feature known missing")
    source = conv.runtime.context.model_info.source
    if source == "default":
        parts.append("context window: a conservative default (set c.Phoenix.models)")
    elif source == "configured":
        parts.append("limits from c.Phoenix.models")
    return " · ".join(parts)


def _status(conv: Any, session: Session) -> str:
    usage = conv.usage()
    sandbox = session.phoenix.sandbox
    if isinstance(conv.state.phase, ContextExhausted):
        # Read-only for good (REQ-BED-021, seed 001): its mode no longer says what it can do.
        mode = (
            "read-only: its context is full, so it can run nothing more; run "
            "`%phoenix continue` to go on in a new conversation seeded with its summary"
        )
    else:
        mode = conv.mode.value + (
            "" if sandbox.available else "  (sandbox unavailable: " + sandbox.reason + ")"
        )
    lines = [
        f"conversation  {conv.slug}  ({conv.id})",
        f"state         {_state_words(conv)}",
        *_damage_line(conv, session),
        f"mode          {mode}",
        f"model         {conv.model}",
        f"provider      {_serving(conv, session)}",
        f"cwd           {conv.cwd}",
        f"environment   {withheld_summary(session.phoenix.settings.env_allow)}",
        f"hidden        {describe_hidden(session.phoenix.sandbox_policy)} (Restricted mode)",
        f"context       {usage['used']:,} / {usage['window']:,} tokens "
        f"({100 * usage['fraction']:.0f}%)" + ("  — near the limit" if usage["warning"] else ""),
        f"cost          {Spending(conv.spending()).line or 'nothing spent yet'}",
        f"budget        {_budget_line(session, conv.spending())}",
        _reattach_line(session, conv),
    ]
    if sandbox.available:
        from phoenix_nb.sandbox import guarantees

        lines.append("sandbox       Restricted mode here (what holds, and by which mechanism):")
        lines += [
            f"  {'holds' if g.holds else 'LOST '}  {g.name}: {g.mechanism}" for g in guarantees()
        ]
    return "\n".join(lines)


@magics_class
class PhoenixMagics(Magics):
    @line_magic("phoenix")  # type: ignore[arg-type]  # IPython types the method as Never
    def phoenix(self, line: str) -> None:
        """%phoenix help|status|list|new|use|approve|deny|restrict|cancel|continue|history|…"""
        try:
            command = parse_subcommand(line)
        except OptionsError as exc:
            say(str(exc))
            return
        session = get_session(self.shell)
        if command.name in AWAITING:
            # A magic cannot await: the transformer rewrites `%phoenix` lines so this path
            # is only taken from `run_line_magic` or indented lines.
            task = asyncio.get_event_loop().create_task(run_line(line))
            _BACKGROUND.add(task)
            task.add_done_callback(_BACKGROUND.discard)
            print(f"phoenix: {command.name} scheduled.")
            return
        try:
            _dispatch_now(command, session)
        except (OptionsError, PhoenixError, StoreError) as exc:
            say(str(exc))
