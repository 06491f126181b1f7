"""Undo in the notebook: `%phoenix checkpoints`, `%phoenix revert`, the Revert button.

A revert happens only while the agent waits (at rest or for an approval), so no
tool is writing while files are put back; afterwards the agent is told, by a
system message in its history (valid for the API: it lands between turns, never
between a tool_use and its result), which files were restored. The Revert
button appears after a turn whose tool calls changed files and undoes exactly
that turn (back to the checkpoint before its first write); when someone else
changed those files since, it shows them and offers "Revert anyway". It is a
control that stays in the notebook, so its output also says what to run
(`%phoenix revert N`) for where the button cannot act (controls.py).
"""

from __future__ import annotations

import asyncio
import html
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ipywidgets as w

from phoenix_nb.checkpoints.changes import RevertReport, changes_of
from phoenix_nb.checkpoints.recorder import Checkpoints, RevertRefused
from phoenix_nb.errors import PhoenixError
from phoenix_nb.notebook.controls import DetachedDisplay, control_bundle
from phoenix_nb.runtime.conversation import is_paused, is_rest
from phoenix_nb.runtime.manager import Conversation


async def revert(
    conv: Conversation,
    worktree: Checkpoints,
    *,
    target: int | None = None,
    to_approval: bool = False,
    force: bool = False,
) -> RevertReport:
    """Put the conversation's folder back to a checkpoint and tell the agent."""
    if not (is_rest(conv.state) or is_paused(conv.state)):
        raise PhoenixError(
            f"{conv.slug} is working ({conv.state.name}): cancel it or wait before reverting."
        )
    if not worktree.exists(conv.id):
        raise PhoenixError(
            f"{conv.slug} has no checkpoints: the agent never had write access here."
        )
    history = worktree.history(conv.id, conv.cwd)
    checkpoint = await asyncio.to_thread(history.resolve_target, target, to_approval=to_approval)
    report = await history.arevert(checkpoint.number, force=force)
    await conv.annotate(report.agent_message())
    conv.audit("revert", checkpoint=report.target)
    return report


def report_text(report: RevertReport) -> str:
    lines = [f"Reverted to checkpoint {report.target}."]
    lines += report.lines() or ["  nothing needed restoring"]
    if report.foreign:
        lines.append(f"  (forced over changes by someone else: {', '.join(report.foreign)})")
    lines.append(
        f"The state before the revert is checkpoint {report.pre_revert}: "
        f"`%phoenix revert {report.pre_revert}` brings it back."
    )
    return "\n".join(lines)


def checkpoints_text(conv: Conversation, worktree: Checkpoints) -> str:
    """The table `%phoenix checkpoints` prints."""
    if not worktree.exists(conv.id):
        return (
            f"{conv.slug} has no checkpoints: they are taken only while the agent can "
            "write (after Approve, or in an Unrestricted conversation)."
        )
    history = worktree.history(conv.id, conv.cwd)
    summaries = _call_summaries(conv.payload())
    rows = [f"Checkpoints of {conv.slug} ({conv.cwd}):", "    #  time (UTC)            what"]
    for c in history.checkpoints():
        what = c.label()
        if c.tool_use_id and c.tool_use_id in summaries:
            what = f"{c.kind} {c.tool}: {summaries[c.tool_use_id]}"
        if c.kind == "after":
            what += f"  — {c.files_changed} file{'s' if c.files_changed != 1 else ''} changed"
        rows.append(f"  {c.number:>3}  {c.created_at.replace('T', ' ').rstrip('Z'):<20}  {what}")
    for pruned in history.prune_log():
        rows.append(
            f"  pruned {len(pruned.removed)} checkpoint(s) on {pruned.when} ({pruned.reason})"
        )
    rows.append(
        "`%phoenix revert N` goes back to checkpoint N; `--to-approval` to the latest approval."
    )
    return "\n".join(rows)


def _call_summaries(record: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for cycle in record.get("cycles") or ():
        for step in cycle.get("steps") or ():
            for group in step.get("tool_groups") or ():
                for call in group.get("calls") or ():
                    if isinstance(call, Mapping) and isinstance(call.get("id"), str):
                        out[call["id"]] = str(call.get("summary") or "")
    return out


def turn_first_write(cycles: Sequence[Mapping[str, Any]]) -> tuple[int, int] | None:
    """(checkpoint before the turn's first write, files changed) from a turn's record."""
    befores: list[int] = []
    files: set[str] = set()
    for cycle in cycles:
        for step in cycle.get("steps") or ():
            for group in step.get("tool_groups") or ():
                for call in group.get("calls") or ():
                    result = call.get("result") if isinstance(call, Mapping) else None
                    changes = changes_of(result.get("display")) if result else None
                    if changes is not None and changes.count and not changes.error:
                        befores.append(changes.before)
                        files |= {f.path for f in changes.files}
    return (min(befores), len(files)) if befores else None


class RevertButton:
    """Revert (and, when refused, Revert anyway) for one turn that changed files."""

    def __init__(
        self,
        conv: Conversation,
        worktree: Checkpoints,
        target: int,
        files: int,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.conv = conv
        self.worktree = worktree
        self.target = target
        self.loop = loop
        self.button = w.Button(
            description="Revert",
            icon="undo",
            tooltip=f"Put back the {files} file(s) this turn changed (checkpoint {target})",
        )
        self.force_button = w.Button(description="Revert anyway", button_style="danger")
        self.force_button.layout.display = "none"
        self.status = w.HTML(
            f"<span data-phoenix-revert-offer='{target}'>This turn changed {files} "
            f"file{'s' if files != 1 else ''}.</span>"
        )
        self.button.on_click(lambda _b: self.loop.call_soon_threadsafe(self._launch, False))
        self.force_button.on_click(lambda _b: self.loop.call_soon_threadsafe(self._launch, True))
        self.widget = w.HBox([self.button, self.force_button, self.status])
        # The labextension keeps the keyboard in the notebook after a click on any
        # button inside this class (labextension/src/focus.ts), as for Approve.
        self.widget.add_class("jp-Phoenix-controls")
        self.hint = revert_hint(target, files)
        self.output = DetachedDisplay()
        self.on_hint: Callable[[str], None] | None = None  # a panel holding the button

    def show(self) -> None:
        """Display the button with its hint, as an output that outlives the kernel."""
        self.output.show(control_bundle(self.widget, self.hint))

    def _set_hint(self, hint: str) -> None:
        self.hint = hint
        self.output.update(control_bundle(self.widget, hint))
        if self.on_hint is not None:
            self.on_hint(hint)

    def _launch(self, force: bool) -> None:
        self.loop.create_task(self.click(force=force))

    async def click(self, *, force: bool = False) -> None:
        self.button.disabled = self.force_button.disabled = True
        try:
            report = await revert(self.conv, self.worktree, target=self.target, force=force)
        except RevertRefused as exc:
            self.status.value = (
                f"<span data-phoenix-revert='refused'>{html.escape(str(exc))}</span>"
            )
            self.button.disabled = False
            self.force_button.disabled = False
            self.force_button.layout.display = ""
            return
        except PhoenixError as exc:
            self.status.value = f"<span data-phoenix-revert='error'>{html.escape(str(exc))}</span>"
            self.button.disabled = False
            return
        self.force_button.layout.display = "none"
        self.status.value = (
            "<span data-phoenix-revert='done'><pre style='margin:0'>"
            f"{html.escape(report_text(report))}</pre></span>"
        )
        self._set_hint(
            f"Reverted to checkpoint {report.target}: `%phoenix revert {report.pre_revert}` "
            "brings back the state before the revert."
        )


def revert_hint(target: int, files: int) -> str:
    """What to run instead of the Revert button (a saved notebook, a restarted kernel)."""
    noun = "file" if files == 1 else "files"
    return f"This turn changed {files} {noun}: `%phoenix revert {target}` puts them back."
