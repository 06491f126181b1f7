"""A model's real context window and output limit, from the Models API.

`core.models` hard-codes limits per model name; the API knows better
(`client.models.retrieve(id)` reports `max_input_tokens` and `max_tokens`).
With a key set, the figures are fetched once and kept next to the store
(`model_limits.json` under the store root), refreshed when older than a week,
so a kernel start costs no request and an offline kernel still knows them. An
unknown model, a network fault or no key all fall back to the user's
description (`c.Phoenix.models`) or the registry, then to the stated default for
models nobody describes: REQ-BED-022's smallest window on Anthropic's API,
`core.models.CONSERVATIVE` on any other server (`conservative=True`). A lookup
never fails a conversation.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from phoenix_nb.core.models import (
    CONSERVATIVE,
    NO_SPECS,
    ModelInfo,
    ModelSpec,
    model_info,
    with_api_limits,
)

CACHE_FILE = "model_limits.json"
MAX_AGE = 7 * 24 * 3600.0  # limits change with model releases, not by the hour


@runtime_checkable
class LimitsSource(Protocol):
    """Who can ask the Models API (AnthropicProvider)."""

    async def model_limits(self, model: str) -> tuple[int | None, int | None] | None:
        """(max_input_tokens, max_tokens), or None when the API cannot say."""
        ...


class ModelLimits:
    """Limits per model: cached API figures, else the registry."""

    def __init__(
        self,
        root: Path | None,
        source: LimitsSource | None,
        *,
        max_age: float = MAX_AGE,
        clock: Callable[[], float] = time.time,
        conservative: bool = False,
        scope: str = "",
        specs: Mapping[str, ModelSpec] = NO_SPECS,
    ) -> None:
        self.conservative = conservative
        self.specs = specs  # the user's descriptions (c.Phoenix.models): they win
        # Which server the figures are of: "" for Anthropic's API; otherwise the same
        # name on another server (a local "llama3") is another model, kept apart.
        self.scope = scope
        self.path = None if root is None else Path(root) / CACHE_FILE
        self.source = source
        self.max_age = max_age
        self.clock = clock
        self._asked: set[str] = set()  # asked this session without an answer: not again

    def _load(self) -> dict[str, Any]:
        if self.path is None:
            return {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _save(self, data: dict[str, Any]) -> None:
        if self.path is None:
            return
        tmp: str | None = None
        try:  # atomic: a reader in another kernel sees the old file or the new one
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".model_limits.")
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(data, out, indent=1, sort_keys=True)
            os.replace(tmp, self.path)
        except OSError:  # a read-only store: the figures are simply asked again next time
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)

    def _key(self, model: str) -> str:
        return f"{self.scope}|{model}" if self.scope else model

    def cached(self, model: str) -> ModelInfo:
        """What is known without asking: cached API figures (any age), else the registry."""
        entry = self._load().get(self._key(model))
        if isinstance(entry, dict):
            window, output = entry.get("max_input_tokens"), entry.get("max_tokens")
            return with_api_limits(
                model,
                window if isinstance(window, int) else None,
                output if isinstance(output, int) else None,
                self._unknown,
                self.specs,
            )
        return model_info(model, self._unknown, self.specs)

    @property
    def _unknown(self) -> ModelInfo | None:
        return CONSERVATIVE if self.conservative else None

    def _fresh(self, model: str) -> bool:
        entry = self._load().get(self._key(model))
        if not isinstance(entry, dict):
            return False
        fetched = entry.get("fetched_at")
        return isinstance(fetched, int | float) and self.clock() - fetched < self.max_age

    async def resolve(self, model: str, source: LimitsSource | None = None) -> ModelInfo:
        """The best limits: asks the Models API (`source`, else the one given at
        construction) when nothing fresh is cached."""
        source = source or self.source
        if source is None or self._fresh(model) or model in self._asked:
            return self.cached(model)
        answer = await source.model_limits(model)
        if answer is None:  # could not ask: try again in the next session, not this one
            self._asked.add(model)
            return self.cached(model)
        # An answer, "unknown to the API" (None, None) included, is kept for MAX_AGE.
        window, output = answer
        data = self._load()
        data[self._key(model)] = {
            "max_input_tokens": window,
            "max_tokens": output,
            "fetched_at": self.clock(),
        }
        self._save(data)
        return with_api_limits(model, window, output, self._unknown, self.specs)
