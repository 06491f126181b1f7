"""The whole conversation's record for `%phoenix history` and `export`, made off the loop.

A conversation of thousands of messages takes a second or more to project, decorate
and render, and allocates enough that full garbage collections set off meanwhile
hold the kernel's event loop for hundreds of milliseconds, in whichever thread the
work runs. So the work runs in a child process: it gets a pickled job on stdin and
answers with JSON on stdout, and the kernel only pickles the job and reads the answer.
The job names the conversation in the store (a `StoredRecord`) and the child reads
its messages: even reading them into the kernel, for a long conversation it has not
read yet, stalled the loop that way (`%phoenix history` after a restart). A job may
also carry the messages themselves (a `RecordSnapshot`), as `run_line_magic` gives
them. The child writes an export's file
itself. If the child cannot run, the work runs in a worker thread instead; a cancel
kills the child. `history_bundle` and `write_export` are also what `run_line_magic`
(which cannot await) calls in place.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import pickle
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from phoenix_nb.child_python import answer_of_child
from phoenix_nb.errors import PhoenixError
from phoenix_nb.notebook._render.view import folded_line
from phoenix_nb.notebook.decorate import decorate_record
from phoenix_nb.notebook.export import export_html, export_json, export_markdown
from phoenix_nb.notebook.render import render_bundle
from phoenix_nb.notebook.thumbnails import ThumbnailCache
from phoenix_nb.runtime.snapshot import RecordSnapshot, StoredRecord

__all__ = [
    "ExportFailed",
    "ExportJob",
    "HistoryJob",
    "bundle_of",
    "history_bundle",
    "run_away",
    "write_export",
]

WRITERS = {"md": export_markdown, "json": export_json, "html": export_html}


class ExportFailed(PhoenixError):
    """The export's file could not be written; the message says where and why."""


@dataclass(frozen=True)
class HistoryJob:
    """`%phoenix history`: the record, folding what the notebook shows (`shown`)."""

    snapshot: RecordSnapshot | StoredRecord
    show_thinking: bool
    shown: tuple[int, int] | None  # (last cycle, its steps) the notebook already shows


@dataclass(frozen=True)
class ExportJob:
    """`%phoenix export`: the whole record written to `target` in `format`."""

    snapshot: RecordSnapshot | StoredRecord
    show_thinking: bool
    format: str
    target: str


def history_bundle(
    job: HistoryJob, thumbnails: ThumbnailCache
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the bundle to display, the last cycle of the whole record, which the notebook
    then shows). Cycles shown above fold to one line each, the rest is shown whole
    (and the fallbacks fold the earliest of those when there are many, like the cell)."""
    snapshot = job.snapshot.snapshot()
    full = snapshot.build()
    full_cycles = full.get("cycles", [])
    last = full_cycles[-1] if full_cycles else {}
    record = decorate_record(
        full, show_thinking=job.show_thinking, history=snapshot.history, thumbnails=thumbnails
    )
    if job.shown is not None:
        shown, steps = job.shown
        out = []
        for i, cycle in enumerate(record.get("cycles", [])):
            if i < shown or (i == shown and len(cycle.get("steps", [])) <= steps):
                line = folded_line(cycle, i)
                out.append({"index": cycle.get("index", i), "folded": True, "line": line})
            elif i == shown:
                out.append({**cycle, "steps": cycle.get("steps", [])[steps:], "continued": True})
            else:
                out.append(cycle)
        record["cycles"] = out
        if all(c.get("folded") for c in out):
            record["notes"] = [
                "Nothing new since the records above, shown here one line per request. "
                "`%phoenix export --format html` writes the whole conversation to a file."
            ]
    return render_bundle(record), last


def write_export(job: ExportJob, thumbnails: ThumbnailCache) -> int:
    """Render the whole record and write it; returns the bytes written."""
    snapshot = job.snapshot.snapshot()
    record = decorate_record(
        snapshot.build(),
        show_thinking=job.show_thinking,
        history=snapshot.history,
        thumbnails=thumbnails,
    )
    data = WRITERS[job.format](record).encode("utf-8")
    target = Path(job.target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    except OSError as exc:
        raise ExportFailed(f"cannot write {target}: {exc.strerror or exc}") from None
    return len(data)


def _answer(job: HistoryJob | ExportJob, thumbnails: ThumbnailCache) -> dict[str, Any]:
    try:
        if isinstance(job, HistoryJob):
            bundle, last = history_bundle(job, thumbnails)
            return {"bundle": bundle, "last": last}
        return {"size": write_export(job, thumbnails)}
    except ExportFailed as error:
        return {"error": str(error)}


async def run_away(job: HistoryJob | ExportJob) -> dict[str, Any]:
    """The job's answer, made in a child process (in a worker thread if none can run):
    for history {"last"} and either {"content"}, the display message's content as the
    child encoded it (`encoded_display`), or {"bundle"}; {"size"} for an export; raises
    ExportFailed.

    A long conversation's bundle is megabytes of JSON: decoding it in the kernel and
    encoding it again to display it held the loop ~0.1 s, so the child's encoding is
    passed on as it is and only the small rest of the answer is decoded."""
    request = pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL)
    answer: dict[str, Any] | None = None
    out = await answer_of_child("phoenix_nb.notebook.whole_record._serve", request)
    if out is not None:
        head, _, content = out.partition(b"\n")
        with contextlib.suppress(ValueError):
            answer = json.loads(head)
        if isinstance(answer, dict) and content:
            answer["content"] = content
    if not isinstance(answer, dict):
        answer = await asyncio.to_thread(_answer, job, ThumbnailCache())
    if "error" in answer:
        raise ExportFailed(str(answer["error"]))
    return answer


def bundle_of(answer: dict[str, Any]) -> dict[str, Any]:
    """The bundle of a history's answer, decoded if the child encoded it."""
    if "bundle" in answer:
        return dict(answer["bundle"])
    return dict(json.loads(answer["content"])["data"])


def _encoded(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, default=str).encode()


def _serve() -> None:
    """The child's side of `run_away`: one line of JSON, then for history the display
    message's content, encoded (JSON never holds a raw newline)."""
    job = pickle.loads(sys.stdin.buffer.read())
    answer = _answer(job, ThumbnailCache())
    bundle = answer.pop("bundle", None)
    out = sys.stdout.buffer
    out.write(_encoded(answer) + b"\n")
    if bundle is not None:
        out.write(_encoded({"data": bundle, "metadata": {}, "transient": {}}))
    out.flush()
