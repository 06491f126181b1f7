"""The agent sees the kernel it lives in: inspect_variables, kernel_history, run_python,
propose_cell.

Every read of a user object and every line of scratchpad code runs in a
copy-on-write fork of the kernel (`kernel_fork.py`), never in the kernel
process: an object whose `__repr__` mutates state or sleeps changes nothing
and blocks nothing the user sees. run_python's fork is confined like a
Restricted bash command (read-only filesystem but a private TMPDIR, no
network, no signals to the kernel); summaries are confined too wherever the
sandbox exists. The kernel's state changes only through cells a human runs:
the agent proposes them (propose_cell), it never runs them.

Secrets: before any of these forks runs a line of its job, it overwrites in
its own memory every value it must not show (`fork_secrets`: provider keys,
the kernel's session key and connection info, withheld environment values,
secret-named variables and the literals the history assigned to such names;
`fork_memory.scrub_secrets` does the overwriting), and every shared mapping
it inherited is made private. On the way out the same values are redacted
from what the tools return, also reversed, base64, hex or percent-encoded
(`SecretValues.redact`), with string literals assigned to secret-looking
names. A secret-named variable is listed by name and type only, and
run_python does not see it. Code can still compute on objects that hold
secrets under other names (a client object with a token attribute); what
these tools read goes to the model provider (README).

Descriptions are static and the same in both modes (REQ-BED-017); with
`c.Phoenix.kernel_access = "off"` the tools stay declared and answer with an
error.
"""

from __future__ import annotations

import ast
import asyncio
import base64
import contextlib
import json
import os
import re
import signal
import sys
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from phoenix_nb.core.displays import (
    ErrorDisplay,
    HistoryDisplay,
    InspectDisplay,
    ProposalDisplay,
    RunPythonDisplay,
    ToolErrorKind,
)
from phoenix_nb.core.secrets import PROVIDER_CREDENTIALS, SecretValues
from phoenix_nb.core.values import ImageData, ToolResult
from phoenix_nb.tools.base import ToolContext
from phoenix_nb.tools.cell_edits import cell_marks
from phoenix_nb.tools.environment import command_environment, credential_files
from phoenix_nb.tools.environment import fork_secrets as env_fork_secrets
from phoenix_nb.tools.kernel_fork import ChildSink, Emit, ForkLimits, ForkOutcome, run_in_fork
from phoenix_nb.tools.kernel_port import KernelPort, Proposal
from phoenix_nb.tools.kernel_summarize import (
    OutOfTime,
    as_figure,
    cut,
    figure_png,
    format_listing,
    list_variables,
    looks_secret,
    summarize,
    summarize_exception,
    time_limit,
    type_name,
)
from phoenix_nb.tools.schema import invalid_input_result, validate

KERNEL_ACCESS_OFF = (
    'Kernel access is off in this notebook (c.Phoenix.kernel_access = "off"), so '
    "{name} cannot read or use the kernel. Work from files and bash instead, or ask the "
    'user to turn it on with `%config Phoenix.kernel_access = "on"`.'
)
NO_KERNEL = (
    "No Jupyter kernel is attached to this conversation, so {name} has nothing to read. "
    "It works when the conversation runs from a %%phoenix cell."
)
NO_SANDBOX = (
    "run_python needs the kernel sandbox (Landlock and seccomp), which is unavailable "
    "here: {reason} Without it the scratchpad could write files or reach the network, "
    "so it does not run. Use inspect_variables to read values."
)
REDACTED = "[REDACTED]"
MAX_OUTPUT = 20_000  # characters a tool returns to the model
MAX_IMAGES = 4
SUMMARY_SECONDS = 3.0  # per variable, in the fork
RUN_TIMEOUT = 30.0
RUN_TIMEOUT_MAX = 300.0


# --------------------------------------------------------------------------- shared


def _error(tool_use_id: str, text: str, kind: ToolErrorKind | None = None) -> ToolResult:
    display = ErrorDisplay(kind) if kind is not None else None
    return ToolResult(tool_use_id=tool_use_id, content=text, is_error=True, display=display)


def kernel_for(ctx: ToolContext, name: str, tool_use_id: str) -> KernelPort | ToolResult:
    """The kernel port, or the error result that explains why there is none."""
    if not ctx.kernel_access:
        return _error(
            tool_use_id, KERNEL_ACCESS_OFF.format(name=name), ToolErrorKind.KERNEL_ACCESS_OFF
        )
    if ctx.kernel is None:
        return _error(tool_use_id, NO_KERNEL.format(name=name), ToolErrorKind.NO_KERNEL)
    return ctx.kernel


def _environment(ctx: ToolContext) -> dict[str, str]:
    return command_environment(allow=ctx.env_allow, deny=ctx.secret_patterns).env


def secret_values(port: KernelPort, env: Mapping[str, str]) -> list[str]:
    """Values of secret-named str/bytes variables and of secret-named withheld env variables.

    Runs in the kernel, so it reads only exact `str`/`bytes` values (no user
    code can run: no attribute lookups, no isinstance hooks).
    """
    found: set[str] = set()
    namespace = port.user_namespace()
    for name in list(namespace.keys()):
        if type(name) is not str or not looks_secret(name):
            continue
        value = namespace.get(name)
        if type(value) is str:
            found.add(value)
        elif type(value) is bytes:
            found.add(value.decode("utf-8", "replace"))
    for name, value in os.environ.items():
        if env.get(name) != value and (looks_secret(name) or name in PROVIDER_CREDENTIALS):
            found.add(value)
    return sorted((s for s in found if len(s) >= 4), key=len, reverse=True)


def _history_literals(port: KernelPort) -> list[str]:
    """String literals the kernel's input history assigns to secret-looking names.

    A value reassigned or deleted since is gone from the namespace but not from
    `In`, `_i<n>` or the history manager, so it is found in the sources.
    """
    found: list[str] = []
    for entry in port.history(1 << 30):
        source = entry.source
        if "=" not in source and ":" not in source:
            continue
        for pattern in (_ASSIGNMENT, _DICT_ENTRY):
            for match in pattern.finditer(source):
                if not looks_secret(match.group("name")):
                    continue
                literal = match.group("value")
                with contextlib.suppress(ValueError, SyntaxError, MemoryError, RecursionError):
                    value = ast.literal_eval(literal)
                    if isinstance(value, bytes):
                        value = value.decode("utf-8", "replace")
                    if isinstance(value, str):
                        found.append(value)
                quote = match.group("q")
                found.append(literal[literal.index(quote) + len(quote) : -len(quote)])
    return found


def _credential_file_values() -> list[str]:
    """The secret fields of a service-account JSON named by GOOGLE_APPLICATION_CREDENTIALS.

    Read only when small (a key file is a few KB); a PEM key is taken line by
    line, so it is found in memory whether it was stored with real newlines
    or JSON's escaped ones.
    """
    found: list[str] = []
    for path in credential_files():
        with contextlib.suppress(OSError, ValueError):
            if os.path.getsize(path) > 64 << 10 or not os.path.isfile(path):
                continue
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                continue
            for key in ("private_key", "private_key_id", "client_secret", "refresh_token"):
                value = data.get(key)
                if isinstance(value, str):
                    found.append(value)
                    found += [line for line in value.splitlines() if "-----" not in line]
    return found


def fork_secrets(ctx: ToolContext, port: KernelPort) -> SecretValues:
    """Everything a fork of the kernel must not show, as of now (built in the kernel).

    The provider credentials and every withheld environment value that is or
    may be a credential (`environment.fork_secrets`), the fields of a Google
    service-account key file, the values of secret-named variables, the
    literals the input history assigned to secret-named variables, and the
    kernel's session key and connection info. Reads only exact str/bytes
    values and the history's text: no user code runs in the kernel.
    """
    withheld = command_environment(allow=ctx.env_allow, deny=ctx.secret_patterns).withheld
    values = env_fork_secrets(withheld)
    values += _credential_file_values()
    values += secret_values(port, {})
    values += _history_literals(port)
    return SecretValues.of(values) | port.connection_secrets()


_ASSIGNMENT = re.compile(
    r"(?m)^(?P<lead>[ \t]*(?P<name>[A-Za-z_][A-Za-z0-9_]*)[ \t]*(?::[^=\n]*)?=[ \t]*)"
    r"(?P<value>[rRbBuUfF]{0,2}(?P<q>'''|\"\"\"|'|\").*?(?P=q))"
)
_DICT_ENTRY = re.compile(
    r"(?P<lead>(?P<kq>['\"])(?P<name>[A-Za-z0-9_\-]+)(?P=kq)[ \t]*:[ \t]*)"
    r"(?P<value>[rRbBuU]{0,2}(?P<q>'|\").*?(?P=q))"
)


def redact(text: str, secrets: Sequence[str] | SecretValues) -> str:
    """Replace secret values (in every form `SecretValues.redact` knows), and string
    literals assigned to secret-looking names."""
    if not isinstance(secrets, SecretValues):
        secrets = SecretValues.of(secrets)
    text = secrets.redact(text)

    def literal(match: re.Match[str]) -> str:
        if looks_secret(match.group("name")):
            return f'{match.group("lead")}"{REDACTED}"'
        return match.group(0)

    text = _ASSIGNMENT.sub(literal, text)
    return _DICT_ENTRY.sub(literal, text)


def _images(records: Sequence[Mapping[str, Any]], label: str) -> tuple[ImageData, ...]:
    out: list[ImageData] = []
    for record in records:
        png = record.get("png")
        if isinstance(png, str) and png and len(out) < MAX_IMAGES:
            out.append(ImageData("image/png", png, str(record.get("name") or label)))
    return tuple(out)


def _fork_trouble(outcome: ForkOutcome, what: str) -> str:
    if outcome.timed_out:
        return (
            f"{what} did not finish in time; the forked process was killed "
            "(the kernel is unaffected)."
        )
    failure = outcome.failure()
    if failure:
        tail = outcome.stderr.strip()
        return f"{what} failed: {failure}. The kernel is unaffected." + (
            f"\n{cut(tail, 2000)}" if tail else ""
        )
    return ""


async def _fork(
    ctx: ToolContext,
    port: KernelPort,
    job: Any,
    *,
    timeout: float,
    confine: bool,
    secrets: SecretValues,
) -> ForkOutcome:
    return await run_in_fork(
        job,
        port=port,
        env=_environment(ctx),
        cwd=ctx.cwd,
        confine=confine,
        limits=ForkLimits(timeout=timeout),
        conversation_id=ctx.conversation_id,
        secrets=secrets,
        sandbox_policy=ctx.sandbox_policy,
    )


# -------------------------------------------------------------------- inspect_variables

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


class InspectVariablesTool:
    name = "inspect_variables"
    description = INSPECT_DESCRIPTION
    input_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "names": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "description": "Variables to summarise (up to 20); omit to list all.",
            },
        },
    }

    async def run(self, input: Mapping[str, Any], ctx: ToolContext, tool_use_id: str) -> ToolResult:
        problem = validate(input, self.input_schema)
        if problem is None and len(input.get("names") or ()) > 20:
            problem = "names must have at most 20 items"
        if problem:
            return invalid_input_result(tool_use_id, self.name, problem)
        port = kernel_for(ctx, self.name, tool_use_id)
        if isinstance(port, ToolResult):
            return port
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
        outcome = await _fork(
            ctx, port, job, timeout=timeout, confine=ctx.sandbox.available, secrets=secrets
        )
        texts = [redact(str(r.get("text", "")), secrets) for r in outcome.records]
        done = {r.get("name") for r in outcome.records}
        missing = [n for n in names if n not in done]
        trouble = _fork_trouble(outcome, "Summarising")
        if missing and (trouble or outcome.timed_out):
            texts.append("Not summarised (the fork ended first): " + ", ".join(missing))
        if trouble:
            texts.append(trouble)
        if not texts:
            return _error(tool_use_id, trouble or "inspect_variables returned nothing.")
        images = _images(outcome.records, "figure")
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


class KernelHistoryTool:
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

    async def run(self, input: Mapping[str, Any], ctx: ToolContext, tool_use_id: str) -> ToolResult:
        problem = validate(input, self.input_schema)
        if problem:
            return invalid_input_result(tool_use_id, self.name, problem)
        port = kernel_for(ctx, self.name, tool_use_id)
        if isinstance(port, ToolResult):
            return port
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
        outcome = await _fork(
            ctx, port, job, timeout=20.0, confine=ctx.sandbox.available, secrets=secrets
        )
        texts = [redact(str(r.get("text", "")), secrets) for r in outcome.records]
        trouble = _fork_trouble(outcome, "Reading the history")
        if trouble:
            texts.append(trouble)
        return ToolResult(
            tool_use_id=tool_use_id,
            content=cut("\n\n".join(texts), MAX_OUTPUT),
            is_error=not outcome.records,
            display=HistoryDisplay(last),
        )


# --------------------------------------------------------------------------- run_python

RUN_PYTHON_DESCRIPTION = (
    "A scratchpad on the live data: run Python in a disposable copy-on-write fork of the "
    "user's Jupyter kernel. The code sees every variable, import and object exactly as "
    "they are now, but nothing it does reaches the kernel (assignments, mutations and "
    "imports die with the fork), the filesystem (read-only except a private $TMPDIR) or "
    "the network. Returns stdout/stderr, the repr of a final expression, and matplotlib "
    "figures it creates as images. The fork has one thread and no GPU context (CUDA "
    "tensors cannot be used); default timeout 30 s. Variables whose names look like "
    "secrets are not visible. To change the kernel's state, use propose_cell."
)


class RunPythonTool:
    name = "run_python"
    description = RUN_PYTHON_DESCRIPTION
    input_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "code": {"type": "string", "minLength": 1, "description": "Python code to run."},
            "timeout": {
                "type": "number",
                "minimum": 0.1,
                "maximum": RUN_TIMEOUT_MAX,
                "description": "Seconds before the fork is killed (default 30, at most 300).",
            },
        },
        "required": ["code"],
    }

    async def run(self, input: Mapping[str, Any], ctx: ToolContext, tool_use_id: str) -> ToolResult:
        problem = validate(input, self.input_schema)
        if problem:
            return invalid_input_result(tool_use_id, self.name, problem)
        port = kernel_for(ctx, self.name, tool_use_id)
        if isinstance(port, ToolResult):
            return port
        if not ctx.sandbox.available:
            return _error(tool_use_id, NO_SANDBOX.format(reason=ctx.sandbox.reason))
        code = str(input["code"])
        try:
            compile_cell(code)
        except SyntaxError as exc:
            return _error(tool_use_id, f"SyntaxError: {exc.msg} (line {exc.lineno})")
        timeout = float(input.get("timeout") or RUN_TIMEOUT)

        def job(emit: Emit, sink: ChildSink) -> None:
            emit(execute(port, code, sink))

        secrets = fork_secrets(ctx, port)
        outcome = await _fork(ctx, port, job, timeout=timeout, confine=True, secrets=secrets)
        return _run_result(tool_use_id, outcome, timeout, secrets)


def compile_cell(code: str) -> tuple[Any, Any]:
    """(body, final expression or None), compiled like a cell: top-level await allowed."""
    tree = ast.parse(code, "<run_python>", "exec")
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body[-1].value)
        tree.body.pop()
    body = compile(tree, "<run_python>", "exec", flags=flags)
    final = compile(last, "<run_python>", "eval", flags=flags) if last is not None else None
    return body, final


def _run(code_obj: Any, namespace: dict[str, Any]) -> Any:
    result = eval(code_obj, namespace)
    if asyncio.iscoroutine(result):
        loop = asyncio.new_event_loop()
        try:
            result = loop.run_until_complete(result)
        finally:
            loop.close()
    return result


def execute(port: KernelPort, code: str, sink: ChildSink) -> dict[str, Any]:
    """Runs in the confined fork: the code against the kernel's namespace (a copy)."""
    live = port.user_namespace()
    namespace = live if isinstance(live, dict) else dict(live)
    hidden = [n for n in list(namespace) if isinstance(n, str) and looks_secret(n)]
    for name in hidden:
        del namespace[name]
    pyplot = sys.modules.get("matplotlib.pyplot")
    before = set(pyplot.get_fignums()) if pyplot is not None else set()
    record: dict[str, Any] = {}
    body, final = compile_cell(code)
    try:
        _run(body, namespace)
        value = _run(final, namespace) if final is not None else None
        if value is not None:
            figure = as_figure(value)
            record["result"] = (
                f"<{type_name(value)}: figure attached>" if figure is not None else _final(value)
            )
    except BaseException as exc:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        if isinstance(exc, NameError) and getattr(exc, "name", None) in hidden:
            text += f"({exc.name} is withheld from run_python: its name looks like a secret.)\n"
        if "cuda" in text.lower():
            text += (
                "(run_python runs in a fork of the kernel, which keeps one thread and no GPU "
                "context: CUDA cannot be used there. Move data to the CPU in a proposed cell.)\n"
            )
        record["error"] = _without_our_frames(text)
        value = None
    sys.stdout.flush()
    sys.stderr.flush()
    pngs: list[tuple[str, str]] = []
    figures = []
    if value is not None and as_figure(value) is not None:
        figures.append(as_figure(value))
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        figures += [pyplot.figure(n) for n in pyplot.get_fignums() if n not in before]
    for display in sink.displays:
        png = display.get("image/png")
        if isinstance(png, str):
            pngs.append(("display", png))
        elif "text/plain" in display:
            sink.write("stdout", f"{cut(str(display['text/plain']), 2000)}\n")
    for figure in dict.fromkeys(figures):
        if len(pngs) >= MAX_IMAGES:
            break
        data = figure_png(figure)
        if data:
            pngs.append(("figure", base64.b64encode(data).decode("ascii")))
    record["images"] = [png for _, png in pngs[:MAX_IMAGES]]
    record["more_images"] = max(0, len(pngs) - MAX_IMAGES)
    return record


def _final(value: Any) -> str:
    try:
        with time_limit(5.0):
            return cut(repr(value), 10_000)
    except OutOfTime:
        return f"<{type_name(value)}: repr took longer than 5 s>"
    except Exception as exc:
        return f"<{type_name(value)}: repr failed: {type(exc).__name__}: {exc}>"


def _without_our_frames(text: str) -> str:
    """Drop the traceback lines that point into this module (the model needs its own code)."""
    lines = text.splitlines(keepends=True)
    out = []
    skip = False
    for line in lines:
        if line.startswith('  File "') and __file__ in line:
            skip = True
            continue
        if skip and line.startswith("    "):
            continue
        skip = False
        out.append(line)
    return "".join(out)


def _run_result(
    tool_use_id: str, outcome: ForkOutcome, timeout: float, secrets: SecretValues
) -> ToolResult:
    record = outcome.records[-1] if outcome.records else {}
    parts = []
    if outcome.stdout:
        parts.append(f"stdout:\n{outcome.stdout.rstrip()}")
    if outcome.stderr:
        parts.append(f"stderr:\n{outcome.stderr.rstrip()}")
    if record.get("error"):
        parts.append(f"Error:\n{str(record['error']).rstrip()}")
    if "result" in record:
        parts.append(f"Result:\n{record['result']}")
    images = tuple(
        ImageData("image/png", png, f"figure {i + 1}")
        for i, png in enumerate(record.get("images") or ())
        if isinstance(png, str)
    )
    if images:
        parts.append(f"{len(images)} figure{'s' if len(images) != 1 else ''} attached.")
    if record.get("more_images"):
        parts.append(f"({record['more_images']} more figures not attached.)")
    is_error = bool(record.get("error"))
    if outcome.timed_out:
        is_error = True
        parts.append(
            f"Timed out after {timeout:g} s: the forked process and everything it started "
            "were killed. The kernel is unaffected."
        )
    elif not outcome.records:
        is_error = True
        failure = outcome.failure() or "the forked process ended without a result"
        parts.append(f"run_python failed: {failure}. The kernel is unaffected.")
        if outcome.signal == signal.SIGSEGV:
            parts.append(
                "(Large shared memory of the kernel without a file behind it — over 64 MB of "
                "shared_memory or an anonymous mmap — is not mapped in the fork; touching it "
                "ends the fork this way.)"
            )
    elif not parts:
        parts.append("(no output)")
    content = redact("\n\n".join(parts), secrets)
    return ToolResult(
        tool_use_id=tool_use_id,
        content=cut(content, MAX_OUTPUT),
        is_error=is_error,
        display=RunPythonDisplay(
            timed_out=outcome.timed_out,
            signal=outcome.signal,
            exit_code=outcome.exit_code,
            images=len(images),
            elapsed=round(outcome.elapsed, 3),
        ),
        images=images,
    )


# -------------------------------------------------------------------------- propose_cell

PROPOSE_DESCRIPTION = (
    "Propose a cell for the user to run. You never change the kernel's state yourself; "
    "when your turn ends, the code is inserted as a new cell below the %%phoenix cell, "
    "not run (the user reads it and decides), and the conversation record shows it. "
    "Several proposals in one turn are inserted in order. Use it for anything that "
    "should change the user's variables; try the code first with run_python."
)


class ProposeCellTool:
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

    async def run(self, input: Mapping[str, Any], ctx: ToolContext, tool_use_id: str) -> ToolResult:
        problem = validate(input, self.input_schema)
        if problem:
            return invalid_input_result(tool_use_id, self.name, problem)
        port = kernel_for(ctx, self.name, tool_use_id)
        if isinstance(port, ToolResult):
            return port
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
