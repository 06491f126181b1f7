"""edit_cell / insert_cell against a `DictKernel` (a real KernelPort over plain data), and
the `EditBook`'s rules: one decision per edit, each outcome heard once, with the cell's
latest known text as the base of the next edit."""

from __future__ import annotations

from pathlib import Path

import pytest

from phoenix_nb.commands import CommandRunner
from phoenix_nb.core.displays import CellEditDisplay, read_stored, stored_display
from phoenix_nb.core.values import Mode
from phoenix_nb.sandbox import SandboxInfo
from phoenix_nb.tools.base import ToolContext
from phoenix_nb.tools.cell_edits import EditBook, EditOutcome
from phoenix_nb.tools.kernel import EditCellTool, InsertCellTool, outcome_note
from phoenix_nb.tools.kernel_port import DictKernel, HistoryEntry
from phoenix_nb.tools.registry import tools_for

SOURCE = "total = 10\nratio = total / 0\n"
NEW = "total = 10\nratio = total / 1\n"


def ctx_for(kernel: DictKernel | None, **kw: object) -> ToolContext:
    return ToolContext(
        cwd=Path.cwd(),
        mode=Mode.RESTRICTED,
        commands=CommandRunner(group="conv-1", info=SandboxInfo(available=False)),
        conversation_id="conv-1",
        kernel=kernel,
        **kw,
    )


@pytest.fixture
def kernel() -> DictKernel:
    return DictKernel(
        entries=[
            HistoryEntry(1, "import math", (), "cell-a"),
            HistoryEntry(2, SOURCE, (), "cell-b"),
            HistoryEntry(3, "print(1)", (), None),  # a front end that sends no id
        ]
    )


async def test_an_edit_is_a_pending_proposal_against_the_last_run(kernel: DictKernel) -> None:
    args = {"cell_id": "cell-b", "new_source": NEW, "explanation": "Divide by one."}
    result = await EditCellTool().run(args, ctx_for(kernel), "t1")
    assert not result.is_error, result.content
    assert "-ratio = total / 0" in result.content and "+ratio = total / 1" in result.content
    (edit,) = kernel.cell_edits().pending("conv-1")
    assert (edit.cell_id, edit.base, edit.new_source, edit.execution_count) == (
        "cell-b",
        SOURCE,
        NEW,
        2,
    )
    display = result.display
    assert isinstance(display, CellEditDisplay) and display.edit_id == edit.id
    assert " total = 10" in display.cell_diff  # every line as context: the whole new cell
    # Stored and read back as the same type, not as a patch (which also has a diff).
    assert read_stored(stored_display(display))[0] == display


async def test_bad_names_and_no_change_are_clear_errors(kernel: DictKernel) -> None:
    tool = EditCellTool()
    unknown = await tool.run(
        {"cell_id": "nope", "new_source": "x", "explanation": "x"}, ctx_for(kernel), "t"
    )
    assert unknown.is_error and "kernel_history" in unknown.content
    same = await tool.run(
        {"cell_id": "cell-b", "new_source": SOURCE, "explanation": "x"}, ctx_for(kernel), "t"
    )
    assert same.is_error and "nothing to propose" in same.content
    missing = await tool.run({"cell_id": "cell-b"}, ctx_for(kernel), "t")
    assert missing.is_error and "new_source" in missing.content
    off = await tool.run(
        {"cell_id": "cell-b", "new_source": NEW, "explanation": "x"},
        ctx_for(kernel, kernel_access=False),
        "t",
    )
    assert off.is_error and "Kernel access is off" in off.content
    assert kernel.cell_edits().pending() == []


async def test_in_n_names_a_cell_without_an_id(kernel: DictKernel) -> None:
    args = {"cell_id": "In[3]", "new_source": "print(2)", "explanation": "Two."}
    result = await EditCellTool().run(args, ctx_for(kernel), "t")
    assert not result.is_error, result.content
    assert kernel.cell_edits().pending()[0].cell_id == "In[3]"
    named = await EditCellTool().run(
        {"cell_id": "In [2]", "new_source": NEW, "explanation": "x"}, ctx_for(kernel), "t"
    )
    assert kernel.cell_edits().pending()[-1].cell_id == "cell-b", named.content


async def test_insert_and_outcomes_heard_once(kernel: DictKernel) -> None:
    ctx = ctx_for(kernel)
    await EditCellTool().run(
        {"cell_id": "cell-b", "new_source": NEW, "explanation": "x"}, ctx, "t1"
    )
    inserted = await InsertCellTool().run(
        {"cell_id": "cell-a", "position": "above", "source": "import os", "explanation": "y"},
        ctx,
        "t2",
    )
    assert not inserted.is_error, inserted.content
    book = kernel.cell_edits()
    edit, insert = book.pending("conv-1")
    assert insert.where() == "a new cell above cell cell-a (In [1])"

    first = outcome_note(kernel, "conv-1")
    assert first.count("still pending") == 2
    assert outcome_note(kernel, "conv-1") == ""  # heard once
    assert book.resolve(edit.id, EditOutcome.ACCEPTED)
    assert not book.resolve(edit.id, EditOutcome.REJECTED)  # one decision per edit
    assert book.resolve(insert.id, EditOutcome.ACCEPTED, new_cell_id="cell-new")
    second = outcome_note(kernel, "conv-1")
    assert f"{edit.id} (cell cell-b (In [2])): accepted" in second
    assert "inserted as cell cell-new" in second
    assert outcome_note(kernel, "conv-2") == ""
    # The accepted text is what the next edit of that cell is against.
    seen = book.cell("cell-b")
    assert seen is not None and (seen.source, seen.accepted) == (NEW, edit.id)
    assert book.cell("cell-new") is not None


def test_the_book_ignores_unknown_and_pending_decisions() -> None:
    book = EditBook()
    assert not book.resolve("edit-unknown", EditOutcome.ACCEPTED)
    assert book.take_report("conv") == ""


def test_only_the_conversation_the_user_talks_to_edits_cells() -> None:
    parent = [t.name for t in tools_for(is_sub_agent=False)]
    child = [t.name for t in tools_for(is_sub_agent=True)]
    assert {"edit_cell", "insert_cell"} <= set(parent)
    assert not {"edit_cell", "insert_cell"} & set(child)


def test_the_prompt_steers_to_edit_cell_and_away_from_the_open_ipynb() -> None:
    from phoenix_nb.runtime.prompts import system_prompt

    prompt = system_prompt(cwd="/work", is_sub_agent=False)
    assert "edit_cell" in prompt and "insert_cell" in prompt
    assert "never patch or write it" in prompt and ".ipynb" in prompt
