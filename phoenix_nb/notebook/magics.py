"""`%phoenix SUBCOMMAND` and the extension's registration with IPython.

Subcommands that wait on the agent (approve, deny, cancel, continue …) must
await on the kernel's loop, which a magic cannot do; so, like `%%phoenix`
cells, unindented `%phoenix …` lines are rewritten by the input transformer
into `await run_line(…)`. The registered line magic handles the rest (e.g.
`get_ipython().run_line_magic("phoenix", "list")`) and schedules waiting
subcommands on the loop.

Every subcommand has one entry in `HANDLERS`: a function that runs at once
(`now`), one awaited on the loop (`awaiting`), or both. `history` and `export`
have both: awaited, they make the whole conversation's record in a child process
(`whole_record.py`) so a long conversation never stalls the kernel's loop (a Cancel
or Approve click is served meanwhile); from `run_line_magic`, which cannot await,
they make it in place.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from IPython.core.magic import Magics, line_magic, magics_class
from IPython.display import display

from phoenix_nb.commands import withheld_summary
from phoenix_nb.core.prices import format_usd
from phoenix_nb.core.states import ContextExhausted
from phoenix_nb.core.transition import stopped_jobs_text
from phoenix_nb.notebook._render.cost import Spending
from phoenix_nb.notebook._render.view import state_words
from phoenix_nb.notebook.cell import THUMBNAILS, TurnView, front_end_can_answer, say
from phoenix_nb.notebook.edits_listing import pending_edits_text
from phoenix_nb.notebook.encoded_display import display_encoded
from phoenix_nb.notebook.options import (
    HELP_TEXT,
    SUBCOMMANDS,
    OptionsError,
    Subcommand,
    parse_subcommand,
)
from phoenix_nb.notebook.session import Session, get_session
from phoenix_nb.notebook.undo import checkpoints_text, report_text, revert
from phoenix_nb.notebook.whole_record import (
    ExportJob,
    HistoryJob,
    bundle_of,
    history_bundle,
    run_away,
    write_export,
)
from phoenix_nb.runtime.conversation import is_paused
from phoenix_nb.runtime.manager import Conversation, PhoenixError
from phoenix_nb.runtime.snapshot import RecordSnapshot, StoredRecord
from phoenix_nb.sandbox import describe_hidden
from phoenix_nb.store import StoreError

EXPORT_FOLDER = "phoenix-exports"  # a default export's folder, beside the notebook
_BACKGROUND: set[asyncio.Task[None]] = set()  # scheduled subcommands, kept until done


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
    handler = HANDLERS[command.name]
    if handler.announce:
        await session.settle_resumed()  # restrict_on_restart, before the note says the mode
        _announce(session)
    if handler.awaiting is not None:
        await handler.awaiting(command, session, shell)
    elif handler.now is not None:
        handler.now(command, session)


def _dispatch_now(command: Subcommand, session: Session) -> None:
    """A subcommand run at once (from `run_line_magic`, which cannot await)."""
    handler = HANDLERS[command.name]
    assert handler.now is not None, f"{command.name} must be awaited"
    if handler.announce:
        _announce(session)
    handler.now(command, session)


def _announce(session: Session) -> None:
    _announce_store(session)
    _announce_resumed(session)


def _help(command: Subcommand, session: Session) -> None:
    print(HELP_TEXT)


def _show_status(command: Subcommand, session: Session) -> None:
    if command.slug is None and session.current is None:
        print("No conversation yet in this notebook: run a %%phoenix cell to start one.")
        print(_reattach_line(session, None))
        return
    conv = session.current_conversation(command.slug)
    print(_status(conv, session))


def _list(command: Subcommand, session: Session) -> None:
    rows = session.phoenix.list()
    if not rows:
        print("No conversations yet: run a %%phoenix cell.")
    for line in list_lines(rows, session.current):
        print(line)


def _new(command: Subcommand, session: Session) -> None:
    conv = session.phoenix.create(cwd=session.cwd)
    session.current = conv.slug
    print(f"New conversation {conv.slug} ({conv.mode.value}) in {conv.cwd}.")


def _use(command: Subcommand, session: Session) -> None:
    assert command.slug is not None
    conv = session.phoenix.get(command.slug)
    session.current = conv.slug
    print(f"Using {conv.slug} ({_state_words(conv)}, {conv.mode.value}).")


def _checkpoints(command: Subcommand, session: Session) -> None:
    conv = session.current_conversation()
    print(checkpoints_text(conv, session.phoenix.worktree))


def _edits(command: Subcommand, session: Session) -> None:
    print(pending_edits_text(session.kernel))


def _chat(command: Subcommand, session: Session) -> None:
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


def _history_job(conv: Conversation, session: Session) -> HistoryJob:
    return HistoryJob(
        conv.record_snapshot(), session.config.show_thinking, session.shown(conv.slug)
    )


def _history_now(command: Subcommand, session: Session) -> None:
    conv = session.current_conversation(command.slug)
    bundle, last = history_bundle(_history_job(conv, session), THUMBNAILS)
    display(bundle, raw=True)
    session.mark_shown(conv.slug, {"cycles": [last]} if last else {})


def _stored(command: Subcommand, session: Session) -> StoredRecord:
    """The conversation named (or the notebook's) as the store holds it: a child process
    reads its messages, so a long conversation not yet read by this kernel (after a
    restart) is never read into it just to be shown or exported."""
    return session.phoenix.stored_record(session.conversation_name(command.slug))


async def _history(command: Subcommand, session: Session, shell: Any) -> None:
    source = _stored(command, session)
    slug = source.header.slug
    answer = await run_away(HistoryJob(source, session.config.show_thinking, session.shown(slug)))
    content = answer.get("content")
    if not (isinstance(content, bytes) and display_encoded(shell, content)):
        display(bundle_of(answer), raw=True)
    last = answer["last"]
    session.mark_shown(slug, {"cycles": [last]} if last else {})


def _export_job(
    source: RecordSnapshot | StoredRecord, command: Subcommand, session: Session
) -> ExportJob:
    """A relative path is relative to the kernel's folder. Without `--output` the file
    goes to `phoenix-exports/` there, a folder holding a `.gitignore` of `*`: an export
    is a copy of the record, so it never shows up as an untracked file beside the
    notebook (git ignores the folder in whatever repository it lands)."""
    if command.output:
        target = Path(command.output).expanduser()
    else:
        target = Path(EXPORT_FOLDER) / f"{source.header.slug}.{command.format}"
        folder = Path.cwd() / EXPORT_FOLDER
        folder.mkdir(exist_ok=True)
        ignore = folder / ".gitignore"
        if not ignore.exists():
            ignore.write_text("# phoenix exports: copies of records, not sources\n*\n")
    if not target.is_absolute():
        target = Path.cwd() / target
    return ExportJob(source, session.config.show_thinking, command.format, str(target))


def _exported(job: ExportJob, size: int) -> None:
    slug = job.snapshot.header.slug
    print(f"Exported {slug} ({job.format}, {size:,} bytes) to {job.target}")


def _export_now(command: Subcommand, session: Session) -> None:
    conv = session.current_conversation(command.slug)
    job = _export_job(conv.record_snapshot(), command, session)
    _exported(job, write_export(job, THUMBNAILS))


async def _export(command: Subcommand, session: Session, shell: Any) -> None:
    job = _export_job(_stored(command, session), command, session)
    _exported(job, int((await run_away(job))["size"]))


async def _repair(command: Subcommand, session: Session, shell: Any) -> None:
    slug = command.slug or session.current
    if slug is None:
        raise PhoenixError("%phoenix repair: which conversation? `%phoenix repair SLUG`")
    print(_repaired_line(await session.phoenix.repair(slug), session))


async def _answer(command: Subcommand, session: Session, shell: Any) -> None:
    """`approve` or `deny`: the paused turn goes on, shown from the approval on. With a
    request's id (`%phoenix approve mcp-…`), that request of `Phoenix.pending` is
    answered, whatever its kind (an MCP server awaiting approval, a mode upgrade)."""
    name = command.name
    if command.extra:
        await _answer_request(command.extra[0], name, session)
        return
    conv = session.current_conversation()
    if not is_paused(conv.state):
        print(
            f"Nothing to {name}: {conv.slug} is not waiting for an answer "
            f"({conv.mode.value}, {_state_words(conv)})."
        )
        return
    # The mode approval the paused turn waits on (a cell edit of the conversation may
    # wait too, and is answered on its cell).
    waiting = [r for r in session.phoenix.pending.list(conversation=conv.slug) if name in r.answers]
    if conv.slug in session.watching and waiting:
        # The cell that asked still shows the turn (its view went on detached): answer
        # the request by id and let the turn go on there, not in this cell.
        await session.phoenix.pending.answer(waiting[0].id, name)
        verb = "Approved" if name == "approve" else "Denied"
        print(f"{verb}: {conv.slug} goes on in the cell that asked.")
        return
    action = conv.approve if name == "approve" else conv.deny
    view = TurnView(
        conv,
        session,
        can_answer=front_end_can_answer(shell, session),
        from_approval=True,
    )
    await view.run(action)


async def _answer_request(request_id: str, answer: str, session: Session) -> None:
    request = await session.phoenix.pending.answer(request_id, answer)
    verb = "Approved" if answer == "approve" else "Denied"
    server = request.detail.get("server")
    if server is not None:
        then = "it starts now, in the sandbox" if answer == "approve" else "it does not run"
        print(f"{verb} MCP server {server} ({request.id}): {then}.")
    else:
        where = f" of {request.conversation}" if request.conversation else ""
        print(f"{verb} {request.kind.replace('_', ' ')} {request.id}{where}.")


async def _restrict(command: Subcommand, session: Session, shell: Any) -> None:
    conv = session.current_conversation()
    stopped = await conv.restrict()
    print(f"{conv.slug} is now Restricted (read-only, no network).")
    if stopped:
        print(stopped_jobs_text(stopped))


async def _cancel(command: Subcommand, session: Session, shell: Any) -> None:
    conv = session.current_conversation()
    waiting = [
        r for r in session.phoenix.pending.list(conversation=conv.slug) if "cancel" in r.answers
    ]
    if waiting:  # its source may do more than stop the turn
        await session.phoenix.pending.answer(waiting[0].id, "cancel")
    else:
        await conv.cancel()
    print(f"Cancelled; {conv.slug} is {_state_words(conv)}.")


async def _revert(command: Subcommand, session: Session, shell: Any) -> None:
    conv = session.current_conversation()
    report = await revert(
        conv,
        session.phoenix.worktree,
        target=command.target,
        to_approval=command.to_approval,
        force=command.force,
    )
    print(report_text(report))


async def _continue(command: Subcommand, session: Session, shell: Any) -> None:
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


Now = Callable[[Subcommand, Session], None]
Awaiting = Callable[[Subcommand, Session, Any], Awaitable[None]]


async def _mcp(command: Subcommand, session: Session, shell: Any) -> None:
    """`%phoenix mcp`: list the servers here, or approve / deny / restart one.

    Approving starts nothing by itself; the server starts (in the sandbox) at the
    next cell, and its tools join the conversations that start after it is ready."""
    from phoenix_nb.notebook.mcp_lines import server_lines

    hub = session.phoenix.mcp
    cwd = Path(session.cwd)
    action, *names = command.extra or ("list",)
    loop = asyncio.get_running_loop()
    if action == "list":
        servers = hub.servers(cwd)
        for line in server_lines(hub, servers):
            print(line)
        return
    targets = hub.servers(cwd) if command.force else [hub.find(names[0], cwd)]
    for server in targets:
        if action == "approve":
            hub.approve(server)
            print(f"Approved MCP server {server.name}: {server.config.describe()}")
        elif action == "deny" and server.config.source == "config":
            print(
                f"MCP server {server.name} is in your own config: remove it from "
                "c.Phoenix.mcp_servers to stop using it."
            )
        elif action == "deny" and server.config.source == "policy":
            print(
                f"MCP server {server.name} is set by the admin's policy "
                f"({hub.bounds.servers_where})."
            )
        elif action == "deny":
            await loop.run_in_executor(None, hub.deny, server)
            print(f"Denied MCP server {server.name}: it does not run.")
        else:
            await loop.run_in_executor(None, hub.restart, server)
            print(f"Restarting MCP server {server.name}.")
    for line in await hub.prepare(cwd):
        print(line)


@dataclass(frozen=True)
class Handler:
    """How one subcommand runs. `awaiting` (when given) is what `run_line` awaits on the
    kernel's loop; `now` (when given) runs at once, and is what `run_line_magic`, which
    cannot await, calls; a subcommand with only `awaiting` is scheduled on the loop
    from there. `announce`: the store's and the resumed conversation's notes first."""

    now: Now | None = None
    awaiting: Awaiting | None = None
    announce: bool = True


HANDLERS: Mapping[str, Handler] = {
    "help": Handler(now=_help, announce=False),
    "status": Handler(now=_show_status),
    "list": Handler(now=_list),
    "new": Handler(now=_new),
    "use": Handler(now=_use),
    "history": Handler(now=_history_now, awaiting=_history),
    "export": Handler(now=_export_now, awaiting=_export),
    "checkpoints": Handler(now=_checkpoints),
    "edits": Handler(now=_edits),
    "chat": Handler(now=_chat),
    "repair": Handler(awaiting=_repair),
    "approve": Handler(awaiting=_answer),
    "deny": Handler(awaiting=_answer),
    "restrict": Handler(awaiting=_restrict),
    "cancel": Handler(awaiting=_cancel),
    "revert": Handler(awaiting=_revert),
    "continue": Handler(awaiting=_continue),
    "mcp": Handler(awaiting=_mcp),
}
assert set(HANDLERS) == set(SUBCOMMANDS), "every parsed subcommand has exactly one handler"


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


def _damage_line(conv: Conversation, session: Session) -> list[str]:
    found = session.phoenix.store.damage(conv.id)
    if found is None:
        return []
    return [
        f"damaged       {found.summary} — run `%phoenix repair {conv.slug}` to go on with "
        "what is intact (the damaged file is kept beside it)"
    ]


def _state_words(conv: Conversation) -> str:
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


def _reattach_line(session: Session, conv: Conversation | None) -> str:
    notebook = session.notebook
    if notebook is not None:
        return f"notebook      {notebook} (a restarted kernel continues this conversation)"
    slug = conv.slug if conv is not None else "SLUG"
    return (
        "notebook      unknown to this kernel (JPY_SESSION_NAME is not set): after a restart, "
        f"run `%phoenix use {slug}` to continue this conversation"
    )


def new_summary(conv: Conversation) -> str:
    phase = conv.state.phase
    return phase.summary if isinstance(phase, ContextExhausted) else ""


def _serving(conv: Conversation, session: Session) -> str:
    """'anthropic at http://… · lacks caching · window: conservative default …': the
    conversation's own server (kept for its life), and the current one if it differs."""
    phoenix = session.phoenix
    server = phoenix.server_of(conv.runtime.record)
    parts = [server.describe()]
    lacks = phoenix.lacks(conv.model, server)
    parts.append("lacks " + ", ".join(lacks) if lacks else "no feature known missing")
    current = phoenix.settings.server
    if server != current:
        unusable = phoenix.unusable(server)
        parts.append(
            (
                "this conversation stays on its own server"
                if unusable is None
                else f"its server cannot be used here now ({unusable})"
            )
            + f"; new ones start on {current.describe()} (c.Phoenix.provider / base_url): "
            "`%phoenix continue` carries it to a new conversation there"
        )
    info = conv.runtime.context.model_info
    assert info is not None  # filled in from the model's name when the context is made
    source = info.source
    if source == "default":
        parts.append("context window: a conservative default (set c.Phoenix.models)")
    elif source == "configured":
        parts.append("limits from c.Phoenix.models")
    return " · ".join(parts)


def _status(conv: Conversation, session: Session) -> str:
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
        *_mcp_status(session),
        _reattach_line(session, conv),
        *_policy_lines(session),
    ]
    if sandbox.available:
        from phoenix_nb.sandbox import guarantees, namespaces_words

        lines.append(f"namespaces    {namespaces_words()}")
        lines.append("sandbox       Restricted mode here (what holds, and by which mechanism):")
        lines += [
            f"  {'holds' if g.holds else 'LOST '}  {g.name}: {g.mechanism}" for g in guarantees()
        ]
    return "\n".join(lines)


def _policy_lines(session: Session) -> list[str]:
    """The admin's policy in force and where it came from; the user's spend today at the
    hub's gateway (asked now: a few ms on a hub, at most a few seconds if it is down)."""
    policy = session.policy
    if policy is None:
        return []
    first, *rest = policy.summary()
    lines = [f"policy        {first}", *(f"              {line}" for line in rest)]
    gateway = session.phoenix.gateway
    if gateway is not None:
        lines.append(f"today         {gateway.spend_today()}")
    return lines


def _mcp_status(session: Session) -> list[str]:
    """`%phoenix status`'s count of MCP servers by state (none made: no line)."""
    policy = session.phoenix.settings.policy
    bounds: list[str] = []
    if policy is not None and (
        not policy.mcp_allow_project_files or policy.mcp_servers is not None
    ):
        from phoenix_nb.mcp import McpBounds  # the package only, not the SDK

        bounds = [f"mcp policy    {line}" for line in McpBounds.from_policy(policy).summary()]
    counts = session.phoenix.mcp_counts()
    if counts is None:
        return bounds
    said = ", ".join(f"{n} {state}" for state, n in sorted(counts.items())) or "none"
    return [f"mcp servers   {said}  (`%phoenix mcp` lists them)", *bounds]


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
        if HANDLERS[command.name].now is None:
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
