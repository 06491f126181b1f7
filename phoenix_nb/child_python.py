"""A job in a fresh Python process, so the kernel's event loop never waits for it.

A worker thread is not enough for big pure-Python work (a 1M-line diff, the
whole record of a long conversation): it holds the GIL for long stretches,
and the collections its allocations set off run on whichever thread is
current, so the loop stalls all the same. A child interpreter shares nothing.

Why not `concurrent.futures.ProcessPoolExecutor`: with the fork start method it
copies the kernel's whole heap and threads, with spawn it re-imports the
notebook's `__main__`, and a pool keeps idle processes (and their memory) in
the user's kernel. These jobs are rare and big: one short-lived `python -I`
per job, started with nothing but the request on its stdin, is what they need.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys

__all__ = ["answer_of_child"]


async def answer_of_child(entry: str, request: bytes) -> bytes | None:
    """What `entry` ("package.module.function") writes to stdout given `request` on stdin.

    The function runs in a new isolated interpreter (`python -I`); it reads its
    request from `sys.stdin.buffer` and writes its answer to `sys.stdout.buffer`.
    None when no child could start, it failed, or it answered nothing: the
    caller then does the work itself (in a thread). A cancel kills the child and
    waits for it, so nothing is left running.
    """
    module, _, function = entry.rpartition(".")
    try:
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",
            "-c",
            f"import {module}; {module}.{function}()",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
    except OSError:
        return None
    try:
        out, _ = await child.communicate(request)
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            child.kill()
        await asyncio.shield(child.wait())
        raise
    if child.returncode != 0 or not out:
        return None
    return out
