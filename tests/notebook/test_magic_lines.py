"""What `%phoenix list` and `%phoenix help` print, and how a mistyped subcommand is told,
in a real kernel against the fake Messages API."""

from __future__ import annotations

import re

from phoenix_nb.notebook.options import CELL_HELP, HELP_WIDTH, SUBCOMMAND_HELP
from phoenix_nb.testing import FakeAnthropic, Turn, text
from tests.notebook.kernel_harness import Kernel


def test_list_says_a_conversation_continued_on_demand_goes_on_elsewhere(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    fake.script(Turn([text("Hello.")]), Turn([text("SUMMARY: we said hello.")]))
    kern.ok("%%phoenix --name early-bird\nhello", timeout=60)
    continued = kern.ok("%phoenix continue", timeout=60).text("stdout")
    [successor] = re.findall(r"Started (\S+), seeded", continued)
    kern.ok("%%phoenix --name a-much-longer-conversation-name-here --new\nhi", timeout=60)
    rows = [line for line in kern.ok("%phoenix list").text("stdout").splitlines() if line]
    [row] = [line for line in rows if line[2:].startswith("early-bird ")]
    assert f"continued in {successor}" in row, row
    assert "context full" not in row and "%phoenix continue" not in row, row
    assert "read-only" in row
    assert not any("its context is full" in line for line in rows), rows
    # Columns line up: every row's folder starts at the same place, whatever the cells.
    starts = {line.index(str(kern.project)) for line in rows}
    assert len(starts) == 1, rows


def test_help_fits_a_notebook_column_without_splitting_an_example(kern: Kernel) -> None:
    for source in ("%phoenix help", "%%phoenix --help"):
        out = kern.ok(source).text("stdout")
        lines = out.splitlines()
        assert max(len(line) for line in lines) <= HELP_WIDTH, max(lines, key=len)
        for entry in (*CELL_HELP, *SUBCOMMAND_HELP):
            assert any(line.strip().endswith(f"e.g. {entry.example}") for line in lines), entry


def test_a_mistyped_subcommand_is_told_with_one_prefix(kern: Kernel) -> None:
    cell = kern.ok("%phoenix lsit")
    said = cell.text("stderr").strip()
    assert said.startswith("phoenix: unknown subcommand 'lsit'"), said
    assert "did you mean list?" in said and "%phoenix:" not in said, said
