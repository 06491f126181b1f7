"""Let a kernel interrupt reach a cell that awaits on an idle event loop.

ipykernel (7.4) turns SIGINT during an awaited cell into a cancellation, but
its handler is a Python-level handler: CPython runs it only when the main
thread next executes bytecode. Linux may deliver the signal to any of the
kernel's threads, and a loop waiting on a subprocess sits in `epoll_wait`
without being woken, so the interrupt waited until the tool ended on its own —
a minute, or never (measured: no effect within 8 s). With a wakeup fd the C
signal handler writes a byte that the loop is watching, the loop wakes, and
ipykernel's handler runs at once. asyncio sets such an fd only for its own
`add_signal_handler`, which would replace ipykernel's handler; this keeps it.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def wake_loop_on_signals(loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """While inside, any signal delivered to the process wakes `loop` (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)
    try:
        previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    except ValueError:  # not the main thread of the main interpreter
        reader.close()
        writer.close()
        yield
        return
    if previous != -1:  # someone already wakes a loop on signals: leave theirs in place
        signal.set_wakeup_fd(previous)
        reader.close()
        writer.close()
        yield
        return

    def drain() -> None:
        try:
            while reader.recv(512):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    loop.add_reader(reader.fileno(), drain)
    try:
        yield
    finally:
        signal.set_wakeup_fd(-1)
        loop.remove_reader(reader.fileno())
        reader.close()
        writer.close()
