"""run_python: a scratchpad on the live data, in a disposable fork of the kernel.

The fork is confined like a Restricted bash command (read-only filesystem but
a private TMPDIR, no network, no signals to the kernel), so nothing the code
does reaches the kernel's state: the kernel changes only through cells a
human runs (`proposals.py`). Without the kernel sandbox it does not run at
all. A secret-named variable is not visible to the code, and what comes back
is redacted (`access.redact`). Code can still compute on objects that hold
secrets under other names (a client object with a token attribute).
"""

from __future__ import annotations

import ast
import asyncio
import base64
import signal
import sys
import traceback
from collections.abc import Mapping
from typing import Any

from phoenix_nb.core.displays import RunPythonDisplay
from phoenix_nb.core.secrets import SecretValues
from phoenix_nb.core.values import ImageData, ToolResult
from phoenix_nb.tools.base import ToolContext
from phoenix_nb.tools.kernel.access import (
    MAX_IMAGES,
    MAX_OUTPUT,
    KernelTool,
    error_result,
    fork_job,
    fork_secrets,
    redact,
)
from phoenix_nb.tools.kernel.fork import ChildSink, Emit, ForkOutcome
from phoenix_nb.tools.kernel.summarize import (
    OutOfTime,
    as_figure,
    cut,
    figure_png,
    looks_secret,
    time_limit,
    type_name,
)
from phoenix_nb.tools.kernel_port import KernelPort

__all__ = [
    "NO_SANDBOX",
    "RUN_PYTHON_DESCRIPTION",
    "RUN_TIMEOUT",
    "RUN_TIMEOUT_MAX",
    "RunPythonTool",
    "compile_cell",
    "execute",
]

NO_SANDBOX = (
    "run_python needs the kernel sandbox (Landlock and seccomp), which is unavailable "
    "here: {reason} Without it the scratchpad could write files or reach the network, "
    "so it does not run. Use inspect_variables to read values."
)
RUN_TIMEOUT = 30.0
RUN_TIMEOUT_MAX = 300.0


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


class RunPythonTool(KernelTool):
    writes = False  # the checkpoint recorder skips it
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

    async def use_kernel(
        self, port: KernelPort, input: Mapping[str, Any], ctx: ToolContext, tool_use_id: str
    ) -> ToolResult:
        if not ctx.commands.info.available:
            return error_result(tool_use_id, NO_SANDBOX.format(reason=ctx.commands.info.reason))
        code = str(input["code"])
        try:
            compile_cell(code)
        except SyntaxError as exc:
            return error_result(tool_use_id, f"SyntaxError: {exc.msg} (line {exc.lineno})")
        timeout = float(input.get("timeout") or RUN_TIMEOUT)

        def job(emit: Emit, sink: ChildSink) -> None:
            emit(execute(port, code, sink))

        secrets = fork_secrets(ctx, port)
        outcome = await fork_job(ctx, port, job, timeout=timeout, confine=True, secrets=secrets)
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
