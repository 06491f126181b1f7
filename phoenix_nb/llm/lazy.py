"""A provider built on first use, on a worker thread.

Building the provider for `c.Phoenix.provider = "openai"`, "bedrock" or "vertex"
imports its SDK (openai ~0.3 s even with anthropic loaded; boto3/botocore and
google-auth more) and builds its client with a TLS context: seconds of the kernel's
event loop if done where a conversation is made. A conversation is made (or looked
up) also by commands that never call the model (`%phoenix status`, `list`,
`history`), so the manager hands out this stand-in instead: it builds the real
provider (`providers.make_provider`) with `asyncio.to_thread` when a request first
needs it, one build shared by concurrent first uses, while the loop stays free for
Cancel, Approve and the display.

A provider that cannot be built (its extra is missing, its SDK refused the
configuration) is a non-retryable failure of the request, whose message says what
to install or set: the turn's record shows it. The build is tried again at the next
request, so a fixed environment or configuration needs no new conversation.

A conversation keeps the server it started on (DESIGN decision 22), also after the
settings moved on to another one. When that server can no longer be used here (its
SDK is gone, its kind unknown to this version, the policy refuses it, its credentials
are refused), the generic reason would send the user hunting in settings that no
longer name it: `explain` turns the reason into the one line that names the
conversation's server and how to go on, and `unusable` remembers it, so that
`%phoenix continue` knows to ask the summary elsewhere.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from phoenix_nb.core.values import ErrorKind, LlmFailure
from phoenix_nb.llm.errors import LlmCallError
from phoenix_nb.llm.providers import ProviderUnavailable
from phoenix_nb.llm.stream import LlmOutcome, ModelResponse, StreamUpdate

if TYPE_CHECKING:
    from phoenix_nb.llm.provider import LlmRequest

__all__ = ["LazyProvider", "Rerouted", "UnlessUnusable"]


class LazyProvider:
    """The LlmProvider port, delegating to the provider `build` returns, built off the
    loop on first use. `build` runs on a worker thread and raises ProviderUnavailable
    when the provider cannot be made."""

    def __init__(
        self,
        build: Callable[[], Any],
        *,
        name: str,
        explain: Callable[[str], str] | None = None,
    ) -> None:
        self.name = name
        self._build = build
        # Frames why a request could not be made at all (the build failed, or the
        # server refused the credentials); None: the reason as it is.
        self._explain = explain
        self.unusable: str | None = None  # the last such reason, until a request succeeds
        self._built: Any = None
        self._building: asyncio.Future[Any] | None = None
        self._closed = False

    @property
    def built(self) -> Any:
        """The real provider, or None before the first request built it (what it has
        learned of a model, e.g. `lacks`, is asked of it only once it exists)."""
        return self._built

    async def provider(self) -> Any:
        """The real provider, built now if needed: concurrent first callers share one
        build; a failed build raises ProviderUnavailable to each of them and is tried
        again by the next caller."""
        if self._built is not None:
            return self._built
        if self._building is None:
            self._building = asyncio.ensure_future(self._make())
            # every waiter may be gone (cancelled) when it fails: its error is still seen
            self._building.add_done_callback(_retrieve)
        building = self._building
        try:
            # shield: one cancelled caller does not cancel the build the others wait on
            return await asyncio.shield(building)
        finally:
            if building.done() and self._building is building:
                self._building = None

    async def _make(self) -> Any:
        try:
            built = await asyncio.to_thread(self._build)
        except ProviderUnavailable:
            raise
        except Exception as exc:  # an SDK failing in a way make_provider did not foresee
            raise ProviderUnavailable(f"{self.name}: {exc}") from None
        if self._closed:  # closed while building: release what was just made
            await built.aclose()
        self._built = built
        return built

    def stream(self, request: LlmRequest) -> AsyncIterator[StreamUpdate]:
        """The real provider's stream; a provider that cannot be built is one
        non-retryable LlmOutcome failure saying why."""
        return self._stream(request)

    async def _stream(self, request: LlmRequest) -> AsyncIterator[StreamUpdate]:
        try:
            real = await self.provider()
        except ProviderUnavailable as exc:
            yield LlmOutcome(failure=self._unavailable(exc))
            return
        async for update in real.stream(request):
            if isinstance(update, LlmOutcome):
                update = self._judged(update)
            yield update

    def _judged(self, outcome: LlmOutcome) -> LlmOutcome:
        """A refused credential is this server's unusability (framed, remembered);
        any answer at all clears what was remembered."""
        failure = outcome.failure
        if failure is None:
            self.unusable = None
            return outcome
        if failure.kind is not ErrorKind.AUTH or self._explain is None:
            return outcome
        self.unusable = failure.message
        framed = replace(failure, message=self._explain(failure.message))
        return replace(outcome, failure=framed)

    def _unavailable(self, exc: ProviderUnavailable) -> LlmFailure:
        self.unusable = str(exc)
        message = str(exc) if self._explain is None else self._explain(str(exc))
        return LlmFailure(ErrorKind.UNKNOWN, message, False)

    async def complete(self, request: LlmRequest) -> ModelResponse:
        """The real provider's whole response; LlmCallError when it cannot be built."""
        response: ModelResponse = await (await self._real_or_call_error()).complete(request)
        return response

    async def complete_text(self, request: LlmRequest) -> str:
        """The real provider's text answer; LlmCallError when it cannot be built."""
        text: str = await (await self._real_or_call_error()).complete_text(request)
        return text

    async def model_limits(self, model: str) -> tuple[int | None, int | None] | None:
        """The real provider's figures for `model`; None (the API cannot say) when it
        cannot be built or asks no API."""
        try:
            real = await self.provider()
        except ProviderUnavailable:
            return None
        ask = getattr(real, "model_limits", None)
        if ask is None:
            return None
        limits: tuple[int | None, int | None] | None = await ask(model)
        return limits

    def live_credentials(self) -> tuple[str, ...]:
        """The real provider's live credentials; none before it is built."""
        if self._built is None:
            return ()
        held: tuple[str, ...] = self._built.live_credentials()
        return held

    async def aclose(self) -> None:
        """Release the real provider's connections, if it was built (one being built
        now is released when its build ends)."""
        self._closed = True
        if self._built is not None:
            await self._built.aclose()

    async def _real_or_call_error(self) -> Any:
        try:
            return await self.provider()
        except ProviderUnavailable as exc:
            raise LlmCallError(self._unavailable(exc)) from exc

    def __repr__(self) -> str:
        return f"LazyProvider({self.name}, built={self._built!r})"


class Rerouted:
    """The LlmProvider port of `inner`, asking `model` whichever model a request names.

    A conversation whose own server cannot be used here any more is summarised (to go
    on in a new conversation) by the server new conversations start on, which knows
    its own model names, not the old server's. `inner` belongs to the Phoenix that
    lent it: closing this leaves it open."""

    def __init__(self, inner: Any, model: str) -> None:
        self.name = inner.name
        self._inner = inner
        self._model = model

    def stream(self, request: LlmRequest) -> AsyncIterator[StreamUpdate]:
        return cast(
            "AsyncIterator[StreamUpdate]", self._inner.stream(replace(request, model=self._model))
        )

    async def complete_text(self, request: LlmRequest) -> str:
        text: str = await self._inner.complete_text(replace(request, model=self._model))
        return text

    def live_credentials(self) -> tuple[str, ...]:
        held: tuple[str, ...] = self._inner.live_credentials()
        return held

    async def aclose(self) -> None:
        return None


class UnlessUnusable:
    """The LlmProvider port of `own` (a LazyProvider), unless a request finds it cannot
    be used here (it cannot be built, or its server refuses the credentials: `unusable`
    is set): that request is then `other`'s. What summarises a conversation leaving a
    server that may be gone, found only by trying (a restarted kernel has not tried)."""

    def __init__(self, own: LazyProvider, other: Any) -> None:
        self.name = own.name
        self._own = own
        self._other = other

    def stream(self, request: LlmRequest) -> AsyncIterator[StreamUpdate]:
        return self._stream(request)

    async def _stream(self, request: LlmRequest) -> AsyncIterator[StreamUpdate]:
        async for update in self._own.stream(request):
            failed = isinstance(update, LlmOutcome) and update.failure is not None
            if failed and self._own.unusable is not None:
                async for other in self._other.stream(request):
                    yield other
                return
            yield update

    async def complete_text(self, request: LlmRequest) -> str:
        try:
            return await self._own.complete_text(request)
        except LlmCallError:
            if self._own.unusable is None:
                raise
        text: str = await self._other.complete_text(request)
        return text

    def live_credentials(self) -> tuple[str, ...]:
        return (*self._own.live_credentials(), *self._other.live_credentials())

    async def aclose(self) -> None:
        return None  # both belong to the Phoenix that lent them


def _retrieve(build: asyncio.Future[Any]) -> None:
    if not build.cancelled():
        build.exception()
