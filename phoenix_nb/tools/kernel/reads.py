"""inspect_variables and kernel_history: the agent reads the kernel it lives in.

Both read user objects only in a fork (`access.fork_job`): an object whose
`__repr__` mutates state or sleeps changes nothing and blocks nothing the user
sees. Summaries are confined wherever the sandbox exists. A secret-named
variable is listed by name and type only; what the history shows is redacted
(`access.redact`). Descriptions are static and the same in both modes
(REQ-BED-017); with `c.Phoenix.kernel_access = "off"` the tools stay declared
and answer with an error.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from phoenix_nb.core.displays import HistoryDisplay, InspectDisplay
from phoenix_nb.core.values import ToolResult
from phoenix_nb.tools.base import ToolContext
from phoenix_nb.tools.cell_edits import cell_marks
from phoenix_nb.tools.kernel.access import (
    MAX_OUTPUT,
    KernelTool,
    error_result,
    fork_job,
    fork_secrets,
    fork_trouble,
    images_of,
    redact,
)
from phoenix_nb.tools.kernel.fork import ChildSink, Emit
from phoenix_nb.tools.kernel.summarize import (
    OutOfTime,
    cut,
    format_listing,
    list_variables,
    looks_secret,
    summarize,
    summarize_exception,
    time_limit,
    type_name,
)
from phoenix_nb.tools.kernel_port import KernelPort

__all__ = [
    "HISTORY_DESCRIPTION",
    "INSPECT_DESCRIPTION",
    "SUMMARY_SECONDS",
    "InspectVariablesTool",
    "KernelHistoryTool",
]

SUMMARY_SECONDS = 3.0  # per variable, in the fork


INSPECT_DESCRIPTION = (
    "Look at the variables in the user's live Jupyter kernel without running a cell. "
    "Without `names`: every user variable (not IPython's own, modules or phoenix's) with "
    "type, shape or length, dtype and approximate memory, largest first. With `names`: a "
    "bounded summary of each — DataFrames (shape, columns with dtypes and null counts, "
    "head, describe), arrays (shape, dtype, min/max/mean, a sample), mappings, sequences, "
    "strings, other objects (type, repr, attributes); matplotlib figures come back as "
    "images. A name may be dotted (`model.config`). Summaries are computed in a disposable "
    "copy of the kernel, so nothing you read changes or blocks it. Variables whose names "
    "look like secrets (KEY, TOKEN, PASSWORD, …) are shown by name and type only."
)


def _lookup(namespace: Mapping[str, Any], path: str) -> Any:
    head, *rest = path.split(".")
    value = namespace[head]
    for attr in rest:
        value = getattr(value, attr)
    return value


class InspectVariablesTool(KernelTool):
    writes = False  # the checkpoint recorder skips it
    name = "inspect_variables"
    description = INSPECT_DESCRIPTION
    input_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "names": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "maxItems": 20,
                "description": "Variables to summarise (up to 20); omit to list all.",
            },
        },
    }

    async def use_kernel(
        self, port: KernelPort, input: Mapping[str, Any], ctx: ToolContext, tool_use_id: str
    ) -> ToolResult:
        names: list[str] = list(dict.fromkeys(input.get("names") or ()))
        per_name = max(1500, min(8000, MAX_OUTPUT // max(len(names), 1)))

        def job(emit: Emit, _sink: ChildSink) -> None:
            namespace = port.user_namespace()
            if not names:
                rows, total = list_variables(namespace, set(port.hidden_names()))
                emit({"text": format_listing(rows, total)})
                return
            for name in names:
                emit(_summary_record(namespace, name, per_name))

        timeout = min(60.0, 5.0 + SUMMARY_SECONDS * max(len(names), 3))
        secrets = fork_secrets(ctx, port)
        outcome = await fork_job(
            ctx, port, job, timeout=timeout, confine=ctx.commands.info.available, secrets=secrets
        )
        texts = [redact(str(r.get("text", "")), secrets) for r in outcome.records]
        done = {r.get("name") for r in outcome.records}
        missing = [n for n in names if n not in done]
        trouble = fork_trouble(outcome, "Summarising")
        if missing and (trouble or outcome.timed_out):
            texts.append("Not summarised (the fork ended first): " + ", ".join(missing))
        if trouble:
            texts.append(trouble)
        if not texts:
            return error_result(tool_use_id, trouble or "inspect_variables returned nothing.")
        images = images_of(outcome.records, "figure")
        return ToolResult(
            tool_use_id=tool_use_id,
            content=cut("\n\n".join(texts), MAX_OUTPUT),
            is_error=not outcome.records,
            display=InspectDisplay(tuple(names), len(images)),
            images=images,
        )


def _summary_record(namespace: Mapping[str, Any], name: str, budget: int) -> dict[str, Any]:
    """Runs in the fork: one variable's summary, within its time budget."""
    if any(looks_secret(part) for part in name.split(".")):
        head = name.split(".")[0]
        kind = type_name(namespace[head]) if head in namespace else "not defined"
        return {"name": name, "text": f"{name}: {kind} — value withheld (the name looks secret)"}
    try:
        with time_limit(SUMMARY_SECONDS):
            value = _lookup(namespace, name)
            text, png = summarize(name, value, budget)
    except KeyError:
        return {"name": name, "text": f"{name}: not defined in the kernel"}
    except OutOfTime:
        return {
            "name": name,
            "text": f"{name}: not summarised — reading it took longer than {SUMMARY_SECONDS:g} s "
            "(its __repr__ or a property blocks); the kernel was not affected.",
        }
    except Exception as exc:
        return {"name": name, "text": f"{name}: summary failed: {type(exc).__name__}: {exc}"}
    record: dict[str, Any] = {"name": name, "text": text}
    if png:
        record["png"] = base64.b64encode(png).decode("ascii")
    return record


# ----------------------------------------------------------------------- kernel_history

HISTORY_DESCRIPTION = (
    "What the user's Jupyter kernel actually ran, in execution order with execution "
    "counts (In [n]) — including cells since deleted or edited in the notebook — each "
    "with a bounded summary of its output, the notebook cell's id where the front end "
    "sends one (the name edit_cell takes), and a mark on runs whose cell has changed "
    "since (run again, or edited through an accepted proposal); and the last exception: "
    "type, message, and the traceback with each frame's local variables summarised. Use "
    "it to see how the data in the kernel was made, or to explain and fix the last error."
)


class KernelHistoryTool(KernelTool):
    writes = False  # the checkpoint recorder skips it
    name = "kernel_history"
    description = HISTORY_DESCRIPTION
    input_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "last": {
                "type": "integer",
                "minimum": 1,
                "maximum": 200,
                "description": "How many of the most recent cells (default 20).",
            },
        },
    }

    async def use_kernel(
        self, port: KernelPort, input: Mapping[str, Any], ctx: ToolContext, tool_use_id: str
    ) -> ToolResult:
        last = int(input.get("last") or 20)

        cells = port.cell_edits().cells()  # read here: the book's lock is not forked

        def job(emit: Emit, _sink: ChildSink) -> None:
            entries = port.history(last)
            per_cell = max(600, 14_000 // max(len(entries), 1))
            lines = [f"Cells the kernel ran (last {len(entries)}, oldest first):"]
            for entry in entries:
                marks = cell_marks(entry.cell_id, entry.execution_count, entry.source, cells)
                head = f"In [{entry.execution_count}]{marks}:"
                lines.append(f"{head}\n{cut(entry.source, per_cell)}")
                for output in entry.outputs:
                    lines.append(f"  [{output.kind}] {cut(output.text, per_cell // 2)}")
            if len(entries) == 0:
                lines = ["The kernel has run no cells yet."]
            emit({"text": cut("\n".join(lines), 14_000)})
            error = port.last_exception()
            if error is None:
                emit({"text": "No exception so far in this kernel."})
            else:
                emit({"text": summarize_exception(error)})

        secrets = fork_secrets(ctx, port)
        outcome = await fork_job(
            ctx, port, job, timeout=20.0, confine=ctx.commands.info.available, secrets=secrets
        )
        texts = [redact(str(r.get("text", "")), secrets) for r in outcome.records]
        trouble = fork_trouble(outcome, "Reading the history")
        if trouble:
            texts.append(trouble)
        return ToolResult(
            tool_use_id=tool_use_id,
            content=cut("\n\n".join(texts), MAX_OUTPUT),
            is_error=not outcome.records,
            display=HistoryDisplay(last),
        )
