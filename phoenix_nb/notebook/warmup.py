"""The imports `%load_ext` starts on a thread, and awaiting them without holding the loop.

`%load_ext` must be quick, so the runtime and the SDK (1-7 s) are imported on a
daemon thread while the notebook goes on. The first phoenix cell usually arrives
while that import is under way. It must not import those modules itself on the
kernel's loop: a module another thread is importing is locked until that import
ends, so the loop would block on the lock (Cancel, Approve and every widget click
with it), and until then it would share the GIL with the import, which doubles
any synchronous stretch. So the cell awaits `ready(name)` — a future the warm-up
thread resolves through `call_soon_threadsafe` — and only then imports, which is
by then a lookup in `sys.modules`.

Some first-use costs hide behind imports done lazily on the first request (the
HTTP library's asyncio backend, the SDK's trace-context propagators); those
modules are in the list too, so the first request finds them loaded.

Importing the SDK creates some 160,000 objects, so the cyclic garbage collector runs
full (oldest-generation) collections in the middle of it: each walks every object in
the process with the GIL held, 60-140 ms on the machine this was measured on, and the
loop thread waits that long whatever it is doing. So the collector is paused while the
warm-up imports (`runtime.long_lived.reading`, one pause shared with a history read
on the loop), and what the imports made — modules, classes,
functions that live as long as the process — is then frozen (`gc.freeze`): moved out
of the generations the collector walks, so no later full collection walks it either.
The price: objects alive at that moment (a fresh kernel's few) are never collected as
cyclic garbage; they are reclaimed by reference counting like any other.

Warming is best effort: a module that fails to import is skipped (its first real
use raises the error where it can be reported), and waiting never raises.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import threading
from collections.abc import Iterable

__all__ = ["PROVIDER_MODULES", "WARM_MODULES", "WarmUp"]

# In the order a first `%%phoenix` turn needs them; `%phoenix` lines need the first only.
WARM_MODULES = (
    "phoenix_nb.notebook.magics",
    "phoenix_nb.runtime.manager",
    "phoenix_nb.tools.registry",
    "phoenix_nb.llm.provider",
    "anthropic",
    "httpx2",
    # Imported by the first request, not by `import anthropic`:
    "anyio._backends._asyncio",
    "opentelemetry.propagate",
)

# What the first turn of each other provider imports (`llm.providers.make_provider`): warmed
# after the above when `c.Phoenix.provider` names it at `%load_ext`. A provider chosen
# later by `%config` is imported by its first turn, on a worker thread all the same.
PROVIDER_MODULES = {
    "openai": ("phoenix_nb.llm.openai_chat",),
    "bedrock": ("boto3", "anthropic.lib.bedrock"),
    "vertex": ("google.auth", "anthropic.lib.vertex"),
}


class WarmUp:
    """Imports `modules` in order on one daemon thread; `ready(name)` awaits one of them.

    Before `start()`, and once the thread is done, every `ready` returns at once:
    a cell run without `%load_ext` (a test calling the entry point) imports in place.
    """

    def __init__(self, modules: Iterable[str] = WARM_MODULES) -> None:
        self.modules = tuple(modules)
        self._lock = threading.Lock()
        self._done: set[str] = set()
        self._running = False
        self._waiters: list[tuple[str | None, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def add(self, modules: Iterable[str]) -> None:
        """Also import `modules`, after the others; only before `start()`."""
        with self._lock:
            if not (self._running or self._done):
                self.modules += tuple(m for m in modules if m not in self.modules)

    def start(self) -> None:
        """Start the thread (once; a second `%load_ext` finds it started)."""
        with self._lock:
            if self._running or self._done:
                return
            self._running = True
        threading.Thread(target=self._run, name="phoenix-warm-imports", daemon=True).start()

    def is_ready(self, name: str | None = None) -> bool:
        """Whether `name` (None: every module) needs no more waiting."""
        with self._lock:
            return self._is_ready(name)

    def _is_ready(self, name: str | None) -> bool:
        if not self._running:
            return True
        return name in self._done if name is not None else False

    async def ready(self, name: str | None = None) -> None:
        """Return once `name` (None: every module) is imported or its import has failed."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._is_ready(name):
                return
            future: asyncio.Future[None] = loop.create_future()
            self._waiters.append((name, loop, future))
        await future

    def _run(self) -> None:
        # Imported here, on the warm-up's thread: `%load_ext` imports no runtime module.
        from phoenix_nb.runtime import long_lived

        try:
            with long_lived.reading(keep_all=True):  # shares the pause with history reads
                for name in self.modules:
                    with contextlib.suppress(Exception):  # best effort: the first use reports it
                        importlib.import_module(name)
                    self._mark(name)
        finally:
            self._mark(None)

    def _mark(self, name: str | None) -> None:
        """`name` is done (None: all are, the thread ends); wake whoever waited for it."""
        with self._lock:
            if name is None:
                self._running = False
                self._done.update(self.modules)
            else:
                self._done.add(name)
            due = [w for w in self._waiters if self._is_ready(w[0])]
            self._waiters = [w for w in self._waiters if not self._is_ready(w[0])]
        for _, loop, future in due:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                loop.call_soon_threadsafe(_resolve, future)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():  # a cancelled wait (kernel interrupt) is left as it is
        future.set_result(None)
