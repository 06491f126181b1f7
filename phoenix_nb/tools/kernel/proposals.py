"""propose_cell, edit_cell and insert_cell: the agent proposes cells, never runs them.

The kernel's state changes only through cells a human runs. propose_cell hands
a new cell to the front end (inserted below the %%phoenix cell when the turn
ends, not run). edit_cell and insert_cell change the user's own cells, and a
call changes nothing either: it puts a `CellEdit` in the kernel's `EditBook`. In
JupyterLab and Notebook 7 the labextension shows it on the cell as a diff with
Accept / Reject (Accept replaces the source in the live notebook, undoably,
and never runs it); elsewhere it stays pending, shown in the record and by
`%phoenix edits`. No file is written, so nothing rewrites an `.ipynb` behind
an open editor. The human's decision reaches the agent with the next message.

Cells are named by the ids `kernel_history` reports (the front end's cell ids).
A front end that sends no ids (nbclient, papermill) leaves cells unnamed; there
`In[n]` names a cell by its execution count, and the proposal can only be read.

What the edit is against (`CellEdit.base`) is the cell as the kernel last saw
it: its last run, or an edit the human accepted since. The front end compares
that with the cell's live text and shows a conflict rather than overwrite an
edit the user made since. The diff the agent gets back passes through the same
secret redaction as kernel_history (it holds the user's source).

Descriptions are static and the same in both modes (REQ-BED-017): a proposal
writes nothing, so it needs no write access.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any

from phoenix_nb.core.displays import CellEditDisplay, ProposalDisplay
from phoenix_nb.core.values import ToolResult
from phoenix_nb.tools.base import ToolContext
from phoenix_nb.tools.cell_edits import CellEdit, CellSeen, EditPosition, cell_diff, new_edit_id
from phoenix_nb.tools.kernel.access import KernelTool, redact, secret_values
from phoenix_nb.tools.kernel_port import KernelPort, Proposal

__all__ = [
    "EDIT_DESCRIPTION",
    "INSERT_DESCRIPTION",
    "PROPOSE_DESCRIPTION",
    "EditCellTool",
    "InsertCellTool",
    "ProposeCellTool",
    "outcome_note",
]

EDIT_DESCRIPTION = (
    "Propose a new source for one of the user's notebook cells — the way to fix a cell "
    "that failed or change code the user wrote. Name the cell by the id kernel_history "
    "shows for it (or as In[n], its execution count, where the front end sends no ids) "
    "and give the cell's complete new source, not a fragment. Nothing changes until the "
    "user accepts: the notebook shows your change as a diff on the cell with your "
    "explanation; Accept replaces the cell's text (undoable) and does not run it. If the "
    "user edited the cell since the kernel last ran it, they see both changes and decide. "
    "The outcome (accepted, rejected, still pending, cell gone) comes with the user's next "
    "message. Never patch an .ipynb file that is open in a notebook editor; use this."
)
INSERT_DESCRIPTION = (
    "Propose a new cell above or below one of the user's notebook cells (named by the id "
    "kernel_history shows, or In[n]). Nothing changes until the user accepts; the new cell "
    "is inserted, not run. The outcome comes with the user's next message. For a cell "
    "right below your own conversation cell, propose_cell is simpler."
)
_BY_COUNT = re.compile(r"^\s*In\s*\[\s*(\d+)\s*\]\s*$")
_HISTORY_REACH = 500  # cells searched for an In[n] name


def _unknown(cell_id: str) -> str:
    return (
        f"No cell named {cell_id!r} is known to the kernel. Cells are named by the ids "
        "kernel_history shows next to each execution count (the kernel learns a cell's id "
        "when the notebook runs it), or as In[n]. Call kernel_history to see them."
    )


def outcome_note(port: KernelPort, conversation_id: str) -> str:
    """What the user decided about the conversation's edits since it last heard ("" for
    nothing), redacted like kernel_history: a merged cell is the user's own text. Every
    secret-looking environment value counts as withheld here (the stricter choice)."""
    note = port.cell_edits().take_report(conversation_id)
    return redact(note, secret_values(port, {})) if note else ""


def _refuse(tool_use_id: str, text: str) -> ToolResult:
    return ToolResult(tool_use_id=tool_use_id, content=text, is_error=True)


def find_cell(port: KernelPort, cell_id: str) -> tuple[str, CellSeen] | None:
    """(the cell's id, what the kernel last saw of it), by id or by `In[n]`."""
    book = port.cell_edits()
    seen = book.cell(cell_id)
    if seen is not None:
        return cell_id, seen
    match = _BY_COUNT.match(cell_id)
    if match is None:
        return None
    count = int(match.group(1))
    for entry in port.history(_HISTORY_REACH):
        if entry.execution_count == count:
            if entry.cell_id is not None:
                named = book.cell(entry.cell_id)
                if named is not None:
                    return entry.cell_id, named
            return f"In[{count}]", CellSeen(entry.source, count)
    return None


def _propose(
    ctx: ToolContext,
    port: KernelPort,
    tool_use_id: str,
    edit: CellEdit,
    verb: str,
) -> ToolResult:
    port.cell_edits().propose(edit)
    env = ctx.commands.environment().env
    secrets = secret_values(port, env)
    shown = redact(cell_diff(edit.base, edit.new_source), secrets)
    brief = redact(_short_diff(edit.base, edit.new_source), secrets)
    content = (
        f"Proposed {verb} {edit.id}: {edit.where()}. Nothing changes until the user accepts "
        "it in the notebook, and it is not run even then; the outcome comes with the user's "
        "next message."
    )
    if edit.position is EditPosition.REPLACE and brief:
        content += f"\n\nThe change against the cell as the kernel last saw it:\n{brief}"
    return ToolResult(
        tool_use_id=tool_use_id,
        content=content,
        display=CellEditDisplay(
            edit_id=edit.id,
            cell_id=edit.cell_id,
            position=edit.position.value,
            execution_count=edit.execution_count,
            new_source=edit.new_source,
            explanation=edit.explanation,
            cell_diff=shown,
        ),
    )


def _short_diff(old: str, new: str) -> str:
    lines = difflib.unified_diff(old.splitlines(), new.splitlines(), "now", "proposed", lineterm="")
    return "\n".join(lines)


class EditCellTool(KernelTool):
    name = "edit_cell"
    description = EDIT_DESCRIPTION
    input_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "cell_id": {
                "type": "string",
                "minLength": 1,
                "description": "The cell's id from kernel_history (or In[n]).",
            },
            "new_source": {
                "type": "string",
                "description": "The cell's complete new source.",
            },
            "explanation": {
                "type": "string",
                "minLength": 1,
                "description": "One or two sentences for the user: what changes and why.",
            },
        },
        "required": ["cell_id", "new_source", "explanation"],
    }

    async def use_kernel(
        self, port: KernelPort, input: Mapping[str, Any], ctx: ToolContext, tool_use_id: str
    ) -> ToolResult:
        found = find_cell(port, str(input["cell_id"]))
        if found is None:
            return _refuse(tool_use_id, _unknown(str(input["cell_id"])))
        cell_id, seen = found
        new_source = str(input["new_source"])
        if new_source == seen.source:
            same = "new_source is the cell's source as it is: there is nothing to propose."
            return _refuse(tool_use_id, same)
        edit = CellEdit(
            id=new_edit_id(),
            conversation_id=ctx.conversation_id,
            cell_id=cell_id,
            position=EditPosition.REPLACE,
            new_source=new_source,
            explanation=str(input["explanation"]),
            base=seen.source,
            execution_count=seen.execution_count,
        )
        return _propose(ctx, port, tool_use_id, edit, "edit")


class InsertCellTool(KernelTool):
    name = "insert_cell"
    description = INSERT_DESCRIPTION
    input_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "cell_id": {
                "type": "string",
                "minLength": 1,
                "description": "The id of the cell to insert next to (from kernel_history).",
            },
            "position": {"type": "string", "enum": ["above", "below"]},
            "source": {"type": "string", "minLength": 1, "description": "The new cell's code."},
            "explanation": {
                "type": "string",
                "minLength": 1,
                "description": "One or two sentences for the user: what it does and why.",
            },
        },
        "required": ["cell_id", "position", "source", "explanation"],
    }

    async def use_kernel(
        self, port: KernelPort, input: Mapping[str, Any], ctx: ToolContext, tool_use_id: str
    ) -> ToolResult:
        found = find_cell(port, str(input["cell_id"]))
        if found is None:
            return _refuse(tool_use_id, _unknown(str(input["cell_id"])))
        cell_id, seen = found
        edit = CellEdit(
            id=new_edit_id(),
            conversation_id=ctx.conversation_id,
            cell_id=cell_id,
            position=EditPosition(str(input["position"])),
            new_source=str(input["source"]),
            explanation=str(input["explanation"]),
            base="",
            execution_count=seen.execution_count,
        )
        return _propose(ctx, port, tool_use_id, edit, "new cell")


PROPOSE_DESCRIPTION = (
    "Propose a cell for the user to run. You never change the kernel's state yourself; "
    "when your turn ends, the code is inserted as a new cell below the %%phoenix cell, "
    "not run (the user reads it and decides), and the conversation record shows it. "
    "Several proposals in one turn are inserted in order. Use it for anything that "
    "should change the user's variables; try the code first with run_python."
)


class ProposeCellTool(KernelTool):
    writes = False  # the checkpoint recorder skips it
    name = "propose_cell"
    description = PROPOSE_DESCRIPTION
    input_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "code": {"type": "string", "minLength": 1, "description": "The cell's code."},
            "explanation": {
                "type": "string",
                "description": "One or two sentences for the user: what it does and why.",
            },
        },
        "required": ["code", "explanation"],
    }

    async def use_kernel(
        self, port: KernelPort, input: Mapping[str, Any], ctx: ToolContext, tool_use_id: str
    ) -> ToolResult:
        code, explanation = str(input["code"]), str(input["explanation"])
        port.propose_cell(Proposal(ctx.conversation_id, code, explanation))
        return ToolResult(
            tool_use_id=tool_use_id,
            content=(
                "Proposed. When your turn ends this code is inserted as a new cell below the "
                "%%phoenix cell, not run; the user decides whether to run it."
            ),
            display=ProposalDisplay(code, explanation),
        )
