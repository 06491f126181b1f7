"""The official `mcp` SDK's side: connect to one server, list its tools, call them.

Imported only by the hub's worker thread (`hub.py`), at the first use of a
configured server: any ``mcp.*`` import loads the SDK's server stack too
(~240 modules, ~0.5 s), which must never be paid at ``%load_ext`` nor on the
kernel's event loop.

A stdio server is not started by the SDK's ``stdio_client`` (a plain
subprocess with the user's rights) but by `CommandRunner.serve`: the sandbox
launcher's supervisor runs it, Restricted unless it has a grant, and this
module's `launcher_transport` speaks newline-delimited JSON-RPC over the pipes
the launcher handed back (the SDK accepts any ``(read, write)`` transport).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from phoenix_nb.sandbox import Process

__all__ = ["CallOutcome", "ListedTool", "call", "connect", "launcher_transport"]

STDERR_TAIL = 4096  # bytes of a server's stderr kept for the error line
_KILL_WAIT = 10.0


@dataclass(frozen=True)
class ListedTool:
    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class CallOutcome:
    """A tool call's result as phoenix keeps it: text for the model, images, error flag."""

    text: str
    is_error: bool
    images: tuple[tuple[str, str], ...] = ()  # (media type, base64)
    structured: bool = False  # structuredContent was present (shown as JSON text)


class StderrTail:
    """The last bytes a server wrote to stderr (its reason, when it fails)."""

    def __init__(self) -> None:
        self.data = b""

    def feed(self, chunk: bytes) -> None:
        self.data = (self.data + chunk)[-STDERR_TAIL:]

    def text(self) -> str:
        return self.data.decode("utf-8", "replace").strip()


async def _read_fd(fd: int) -> bytes:
    while True:
        try:
            return os.read(fd, 65536)
        except BlockingIOError:
            await anyio.wait_readable(fd)


async def _write_fd(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            await anyio.wait_writable(fd)


@contextlib.asynccontextmanager
async def launcher_transport(
    process: Process, tail: StderrTail, on_end: Callable[[], None]
) -> AsyncIterator[Any]:
    """The SDK's transport over a process the launcher started with `serve`.

    ``on_end`` is called when the server's stdout ends (it exited, or was killed
    by its budget): the SDK only fails the calls in flight, the hub must also
    know the server is gone so that the next use starts it again.

    On exit the server's stdin is closed (the spec's first shutdown step) and its
    whole tree is stopped through the supervisor, shielded from cancellation so
    a cancelled caller cannot leave the server running.
    """
    read_w, read_s = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_s, write_r = anyio.create_memory_object_stream[SessionMessage](0)

    async def reader() -> None:
        buffer = b""
        async with read_w:
            while chunk := await _read_fd(process.output_fd):
                lines = (buffer + chunk).split(b"\n")
                buffer = lines.pop()
                for line in lines:
                    if not line.strip():
                        continue
                    try:
                        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                        item: SessionMessage | Exception = SessionMessage(message)
                    except ValueError as exc:
                        item = exc
                    try:
                        await read_w.send(item)
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        return
        on_end()

    async def writer() -> None:
        async with write_r:
            async for message in write_r:
                body = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                try:
                    await _write_fd(process.stdin_fd, (body + "\n").encode())
                except OSError:  # the server closed its stdin (it exited)
                    return

    async def errors() -> None:
        while chunk := await _read_fd(process.stderr_fd):
            tail.feed(chunk)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            tg.start_soon(writer)
            tg.start_soon(errors)
            try:
                yield read_s, write_s
            finally:
                tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            for fd in (process.stdin_fd,):
                with contextlib.suppress(OSError):
                    os.close(fd)
            process.kill()
            with contextlib.suppress(Exception):
                with anyio.move_on_after(_KILL_WAIT):
                    await process.wait()
            for fd in (process.output_fd, process.stderr_fd):
                with contextlib.suppress(OSError):
                    os.close(fd)


@contextlib.asynccontextmanager
async def connect(
    transport: Any, *, read_timeout: float
) -> AsyncIterator[tuple[Client, str, list[ListedTool]]]:
    """An open client to a server, its instructions and its whole tool list.

    ``transport``: `launcher_transport(...)` for stdio, or ``(url, headers)`` for
    Streamable HTTP. Every request has ``read_timeout`` (the SDK's default is none:
    the hang other hosts are reported for).
    """
    http: httpx2.AsyncClient | None = None
    if isinstance(transport, tuple):
        url, headers = transport
        http = httpx2.AsyncClient(headers=dict(headers), timeout=read_timeout)
        transport = streamable_http_client(url, http_client=http)
    try:
        async with Client(transport, read_timeout_seconds=read_timeout) as client:
            listed: list[ListedTool] = []
            cursor: str | None = None
            while True:
                page = await client.list_tools(cursor=cursor)
                listed += [
                    ListedTool(t.name, t.description or "", dict(t.input_schema))
                    for t in page.tools
                ]
                cursor = page.next_cursor
                if not cursor:
                    break
            yield client, client.instructions or "", listed
    finally:
        if http is not None:
            with anyio.CancelScope(shield=True):
                await http.aclose()


async def call(client: Client, name: str, arguments: dict[str, Any], timeout: float) -> CallOutcome:
    """One tools/call. Cancelling the caller abandons the request, and the SDK sends
    ``notifications/cancelled`` for it; a timeout is raised as TimeoutError."""
    with anyio.fail_after(timeout):
        result = await client.call_tool(name, arguments, read_timeout_seconds=timeout)
    return outcome(result)


def outcome(result: types.CallToolResult) -> CallOutcome:
    """A CallToolResult as text (and images) for the model; resources are named, not fetched."""
    parts: list[str] = []
    images: list[tuple[str, str]] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent):
            images.append((block.mime_type, block.data))
            parts.append(f"[image {block.mime_type}]")
        elif isinstance(block, types.AudioContent):
            size = len(base64.b64decode(block.data, validate=False)) if block.data else 0
            parts.append(f"[audio {block.mime_type}, {size} bytes, not shown]")
        elif isinstance(block, types.EmbeddedResource):
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(text if isinstance(text, str) else f"[resource {resource.uri}]")
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[resource link {block.uri}]")
    # The spec has a server send structuredContent's text form as content too; that
    # text is what the model reads. Only a result with no other content shows it as JSON.
    structured = result.structured_content is not None
    if structured and not parts:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, indent=1))
    return CallOutcome(
        text="\n".join(parts) or "(no content)",
        is_error=bool(result.is_error),
        images=tuple(images),
        structured=structured,
    )
