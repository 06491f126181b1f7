"""Exports: a standalone Markdown document and stable, pretty JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from phoenix_nb.notebook.export import export_json, export_markdown
from phoenix_nb.notebook.render import render_markdown

FIXTURE = Path(__file__).parent / "fixtures" / "record_full.json"


@pytest.fixture
def record() -> dict[str, Any]:
    return json.loads(FIXTURE.read_text())


def test_markdown_document_has_title_and_metadata(record: dict[str, Any]) -> None:
    doc = export_markdown(record)
    lines = doc.splitlines()
    assert lines[0] == "# phoenix conversation `brave-otter`"
    assert "- **Model:** `claude-sonnet-4-5`" in lines
    assert "- **Working directory:** `~/project`" in lines
    assert "- **Mode:** Unrestricted" in lines
    assert [ln for ln in lines if ln.startswith("## ")] == [f"## Request {n}" for n in range(1, 5)]
    # The body is the same conversation the cell's Markdown fallback shows, up to the
    # first block the fallback cuts; the export shows that block whole.
    body = render_markdown(record)
    first_part = body.split("### Request 1", 1)[1].split("test_case_38 PASSED", 1)[0]
    assert first_part.replace("### ", "## ") in doc
    assert "more lines not shown" in body and "more lines not shown" not in doc
    assert "1 failed, 60 passed in 0.42s" in doc


def test_markdown_document_for_a_restricted_unsandboxed_conversation(
    record: dict[str, Any],
) -> None:
    record["conversation"].update(mode="restricted", sandbox_available=False)
    assert "- **Mode:** Restricted (sandbox unavailable)" in export_markdown(record).splitlines()


def test_json_round_trips_pretty_and_sorted(record: dict[str, Any]) -> None:
    text = export_json(record)
    assert json.loads(text) == record
    assert text.endswith("}\n") and "\n  " in text
    keys = list(json.loads(text))
    assert keys == sorted(keys)
    assert text.index('"context"') < text.index('"conversation"') < text.index('"cycles"')


def test_json_is_stable_whatever_the_insertion_order(record: dict[str, Any]) -> None:
    shuffled = {k: record[k] for k in reversed(list(record))}
    shuffled["conversation"] = dict(reversed(list(record["conversation"].items())))
    assert export_json(shuffled) == export_json(record)
    assert export_json(MappingProxyType(record)) == export_json(record)


def test_json_keeps_non_ascii_readable(record: dict[str, Any]) -> None:
    record["cycles"][0]["steps"][0]["text"] = "naïve “quotes” — ok"
    assert "naïve “quotes” — ok" in export_json(record)


@pytest.mark.parametrize(
    ("bad", "error", "match"),
    [
        (object(), TypeError, "holds a object, which is not JSON"),
        ({1, 2}, TypeError, "sets have no stable order"),
        (math.nan, ValueError, "Out of range float"),
    ],
)
def test_json_rejects_non_json_data_clearly(
    record: dict[str, Any], bad: Any, error: type[Exception], match: str
) -> None:
    record["cycles"][0]["steps"][0]["extra"] = bad
    before = json.dumps(record, default=str)
    with pytest.raises(error, match=match):
        export_json(record)
    assert json.dumps(record, default=str) == before  # the record is untouched


def test_exports_reject_non_mappings() -> None:
    for fn in (export_json, export_markdown):
        with pytest.raises(TypeError, match="must be a mapping"):
            fn(["not", "a", "record"])  # type: ignore[arg-type]
