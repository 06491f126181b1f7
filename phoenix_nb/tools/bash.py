"""The bash tool: run a command in the conversation's directory, safely.

Every command goes through the sandbox launcher (``phoenix_nb.sandbox``): in
Restricted mode it runs under Landlock + seccomp + rlimits; in both modes it
runs under a subreaper supervisor, so a timeout or a cancel kills the whole
tree, ``setsid``'d descendants included (REQ-BED-005). Safety checks
(``bash_guard``) refuse a few catastrophic commands first, in both modes and
without a sandbox too (REQ-BASH-007/009).

Output is stdout and stderr combined, read as it comes into a bounded buffer:
the first ``HEAD_BYTES`` and last ``TAIL_BYTES`` are kept and the cut is
stated, so a command printing gigabytes costs the kernel 32 KiB. A non-zero
exit is not a tool error (the model should read the output and the "exit
code N" line); timeouts, refusals and bad input are.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from phoenix_nb.commands import BackgroundJob
from phoenix_nb.core.displays import BashDisplay
from phoenix_nb.core.tool_fields import BASH_COMMAND
from phoenix_nb.core.values import Mode, ToolResult
from phoenix_nb.sandbox import (
    KERNEL_REQUIREMENT,
    ExitReport,
    Process,
    RunSpec,
    SandboxError,
    SandboxLimits,
    read_some,
    remove_tree,
    run_dir,
)
from phoenix_nb.tools import bash_guard
from phoenix_nb.tools.base import SchemaTool, ToolContext

HEAD_BYTES = 16 * 1024
TAIL_BYTES = 16 * 1024
DEFAULT_TIMEOUT = 120.0
MAX_TIMEOUT = 3600.0
BASH = shutil.which("bash") or "/bin/bash"
_KILL_WAIT = 5.0  # bound on waiting for the supervisor's report after a kill

DESCRIPTION = f"""Run a shell command with `bash -c` and return its combined stdout and stderr.

- Runs in the conversation's working directory every time; a `cd` does not persist.
- stdin is /dev/null: interactive commands fail, pass input through files or flags.
- Default timeout {DEFAULT_TIMEOUT:.0f} s; `timeout` (seconds, at most {MAX_TIMEOUT:.0f})
  sets another. On timeout the whole process tree is killed.
- Output keeps the first and last {HEAD_BYTES // 1024} KiB; the middle is cut and
  the cut is stated. Prefer commands with bounded output (head, tail, grep -m).
- `background: true` starts a long-running command (a server, a watcher) and returns
  at once with its log file and how to read and stop it.
- The environment is an allowlist (PATH, HOME, locale, virtualenv/toolchain
  variables and what the user allows); values that carry credentials are withheld.
- A guard rail refuses, in both modes, commands that would delete or overwrite the
  home directory, /, the working directory or .git (recursive rm, find -delete,
  rsync --delete, however spelled), `git add -A/--all/.`/`git stage`, and
  `git push --force/--mirror/--delete/:ref/+ref`; commands too dynamic to judge
  (eval of computed text, piping text into a shell) are refused too: write them plainly.
- In Restricted mode the command runs in a kernel sandbox (namespaces, Landlock,
  seccomp): the filesystem is read-only except a private temporary directory ($TMPDIR,
  size-capped, deleted afterwards); no network (only the command's own loopback:
  servers it starts itself work); other processes are invisible; chmod, chown, touch of
  existing files, setsid and signals to other processes fail; memory, processes, CPU
  time and file size are limited (the result says which limit was hit). Credential
  paths are hidden (reading them fails with Permission denied); `%phoenix status`
  shows the user this conversation's list.
  A blocked operation fails with the kernel's error (Read-only file system / Permission
  denied / Operation not permitted): do not try to work around it; if the task needs
  writes, ask for write access with request_mode_upgrade."""

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "minLength": 1, "description": "The bash command."},
        "timeout": {
            "type": "number",
            "minimum": 1,
            "maximum": MAX_TIMEOUT,
            "description": f"Seconds before the command is killed (default {DEFAULT_TIMEOUT:.0f}).",
        },
        "background": {
            "type": "boolean",
            "description": "Start detached, log to a file, return at once.",
        },
    },
    "required": ["command"],
}


class OutputBuffer:
    """Head and tail of a byte stream in bounded memory, with the cut counted."""

    def __init__(self, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> None:
        self._head_limit = head
        self._tail_limit = tail
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data:
            self._tail += data
            if len(self._tail) > self._tail_limit:
                del self._tail[: len(self._tail) - self._tail_limit]

    @property
    def omitted(self) -> int:
        return self.total - len(self._head) - len(self._tail)

    def text(self) -> str:
        head = self._head.decode("utf-8", "replace")
        if not self.omitted:
            return head + self._tail.decode("utf-8", "replace")
        tail = self._tail.decode("utf-8", "replace")
        return f"{head}\n… {self.omitted:,} bytes omitted …\n{tail}"


_KILL_RE = re.compile(r"^\s*kill\s+(?:-(?:9|KILL|TERM|15|s\s+\w+)\s+)?(?:--\s+)?-?(\d+)\s*$")


def _error(tool_use_id: str, command: str, text: str) -> ToolResult:
    return ToolResult(tool_use_id, text, is_error=True, display=BashDisplay(command, None))


class BashTool(SchemaTool):
    """`bash {command, timeout?, background?}` (REQ-BASH-007/008/009, REQ-BED-005)."""

    name = "bash"
    description = DESCRIPTION
    input_schema: Mapping[str, Any] = INPUT_SCHEMA
    group = "bash"
    summary_field = BASH_COMMAND

    def __init__(self, limits: SandboxLimits | None = None) -> None:
        self._limits = limits  # None: the conversation's (ToolContext.commands.policy)

    def limits(self, ctx: ToolContext) -> SandboxLimits:
        return self._limits or ctx.commands.policy.limits

    async def execute(
        self, input: Mapping[str, Any], ctx: ToolContext, tool_use_id: str
    ) -> ToolResult:
        command: str = input["command"]
        timeout = float(input.get("timeout", DEFAULT_TIMEOUT))
        background = bool(input.get("background", False))
        refusal = bash_guard.check_command(command, cwd=ctx.cwd)
        if refusal:
            return _error(tool_use_id, command, refusal)
        restricted = ctx.mode == Mode.RESTRICTED
        sandbox = ctx.commands.info
        if restricted and not sandbox.available:
            return _error(
                tool_use_id,
                command,
                f"Restricted mode is unavailable here: {sandbox.reason or KERNEL_REQUIREMENT}",
            )
        stopped = await self._stop_job(command, ctx)
        if stopped is not None:
            return ToolResult(tool_use_id, stopped, display=BashDisplay(command, 0))
        if not ctx.cwd.is_dir():
            return _error(tool_use_id, command, f"Working directory {ctx.cwd} does not exist.")
        if background:
            return await self._background(command, ctx, tool_use_id, restricted)
        return await self._foreground(command, ctx, tool_use_id, restricted, timeout)

    def _spec(
        self,
        command: str,
        ctx: ToolContext,
        restricted: bool,
        cpu: float,
        linger: bool = False,
    ) -> RunSpec:
        # A Restricted command's TMPDIR is made (a private tmpfs) and set by
        # its supervisor; Unrestricted commands keep the user's.
        return ctx.commands.spec(
            (BASH, "-c", command),
            ctx.cwd,
            ctx.commands.environment().env,
            restricted=restricted,
            limits=self.limits(ctx),
            cpu_seconds=int(cpu) + 5,
            linger=linger,
        )

    async def _foreground(
        self, command: str, ctx: ToolContext, tool_use_id: str, restricted: bool, timeout: float
    ) -> ToolResult:
        proc: Process | None = None
        buffer = OutputBuffer()
        timed_out = False
        try:
            try:
                proc = await ctx.commands.start(self._spec(command, ctx, restricted, timeout))
            except (SandboxError, OSError) as exc:
                return _error(tool_use_id, command, f"Could not start the command: {exc}")
            loop = asyncio.get_running_loop()

            async def pump(p: Process) -> None:
                while chunk := await read_some(loop, p.output_fd):
                    buffer.feed(chunk)

            reader = asyncio.ensure_future(pump(proc))
            waiter = asyncio.ensure_future(proc.wait())
            try:
                await asyncio.wait_for(asyncio.shield(waiter), timeout)
            except TimeoutError:
                timed_out = True
                await proc.stop()
            except BaseException:
                # Cancelled (REQ-BED-005): kill the tree and return only once
                # the supervisor says every process is gone.
                reader.cancel()
                await proc.stop()
                raise
            # Everything in the tree is gone once the supervisor reported, so
            # the pipe reaches EOF promptly.
            result = await asyncio.wait_for(asyncio.shield(waiter), _KILL_WAIT)
            await asyncio.wait_for(reader, _KILL_WAIT)
        finally:
            if proc is not None:
                with contextlib.suppress(OSError):
                    os.close(proc.output_fd)
        return self._result(tool_use_id, command, buffer, result, timed_out, timeout, ctx)

    def _result(
        self,
        tool_use_id: str,
        command: str,
        buffer: OutputBuffer,
        result: ExitReport,
        timed_out: bool,
        timeout: float,
        ctx: ToolContext,
    ) -> ToolResult:
        text = buffer.text()
        code = result.exit
        sig = result.signal
        lines = [text.rstrip("\n")] if text.strip() else ["(no output)"]
        if timed_out:
            lines.append(
                f"[timed out after {timeout:g} s: the command and all its processes were killed]"
            )
        elif sig:
            lines.append(f"[killed by signal {sig} ({_signal_name(sig)})]")
        elif code:
            lines.append(f"[exit code {code}]")
        lines.extend(self._limit_lines(result.limits, self.limits(ctx)))
        display = BashDisplay(
            command,
            code if not sig else 128 + int(sig),
            timed_out=timed_out,
            output_truncated=buffer.omitted > 0,
        )
        # A set-up step refused the command (it never ran): the tool failed, not the command.
        failed = timed_out or bool(result.refused)
        return ToolResult(tool_use_id, "\n".join(lines), is_error=failed, display=display)

    def _limit_lines(self, hit: Sequence[str], lim: SandboxLimits) -> list[str]:
        """Say which whole-tree limit the command ran into, and how to change it."""
        texts = {
            "memory": f"memory: this conversation's commands may use {_size(lim.memory)} "
            "together; the kernel killed a process to stay under it (c.Phoenix.sandbox_memory)",
            "pids": f"processes: at most {lim.max_procs} at once for this conversation; "
            "further forks failed (c.Phoenix.sandbox_max_procs)",
            "tmp_bytes": f"TMPDIR size: {_size(lim.tmp_bytes)} is full "
            "(c.Phoenix.sandbox_tmp_bytes)",
            "tmp_inodes": f"TMPDIR files: {lim.tmp_inodes} files and directories at most "
            "(c.Phoenix.sandbox_tmp_inodes)",
        }
        return [f"[limit hit: {texts[name]}]" for name in hit if name in texts]

    async def _background(
        self, command: str, ctx: ToolContext, tool_use_id: str, restricted: bool
    ) -> ToolResult:
        # The job's output reaches the log through its supervisor, never
        # directly: the job holds no fd of the log and cannot rewrite it. The
        # folder is in this kernel's run dir, removed by the next kernel's
        # launcher if this kernel dies without ending the conversation.
        directory = Path(tempfile.mkdtemp(prefix="bg-", dir=run_dir()))
        log_path = directory / "output.log"
        log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        try:
            proc = await ctx.commands.start(
                self._spec(command, ctx, restricted, MAX_TIMEOUT, linger=True),
                output_fd=log_fd,
            )
        except (SandboxError, OSError) as exc:
            remove_tree(str(directory))
            return _error(tool_use_id, command, f"Could not start the command: {exc}")
        finally:
            os.close(log_fd)
        job = BackgroundJob(ctx.conversation_id, proc, log_path, directory, command, restricted)
        ctx.commands.jobs.add(job)
        job.watcher = asyncio.ensure_future(proc.wait())
        text = (
            f"Started in the background: process group {proc.pgid}.\n"
            f"Output goes to {log_path}\n"
            f"Read it with: tail -n 50 {log_path}\n"
            f"Stop it with: kill -- -{proc.pgid}\n"
            "It is stopped when the conversation ends."
        )
        display = BashDisplay(command, None, background=True, pgid=proc.pgid, log=str(log_path))
        return ToolResult(tool_use_id, text, display=display)

    async def _stop_job(self, command: str, ctx: ToolContext) -> str | None:
        """`kill -- -<pgid>` of this conversation's job is done by the tool.

        In Restricted mode signals are scoped to the sandbox that sends them,
        so a later command cannot signal an earlier background job; the tool
        stops it through its supervisor instead, in both modes alike.
        """
        match = _KILL_RE.match(command)
        if not match:
            return None
        target = int(match.group(1))
        job = await ctx.commands.jobs.stop(ctx.conversation_id, target)
        if job is None:
            return None
        return (
            f"Stopped background job {target} and all its processes. "
            f"Its log stays at {job.log_path} until the conversation ends."
        )


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return "unknown"


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n:,} bytes"
