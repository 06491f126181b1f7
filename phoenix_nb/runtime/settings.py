"""Settings of a phoenix_nb session, from explicit values, traitlets or the environment.

Power users build `Settings` directly; the notebook builds them with
`Settings.from_config` from its traitlets (`c.Phoenix.…`), the one place where
config values become settings, so none is dropped on the way (a test holds
every field to a trait). A `%config Phoenix.X` in a running notebook comes back
through here too: the session rebuilds the settings and `Phoenix.reconfigure`
hands them to what the next turn reads. Environment variables are read here and
nowhere else in the runtime.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from phoenix_nb.core.states import DEFAULT_MAX_TURN_ROUNDS

DEMO_MODEL = "demo"
DEFAULT_MODEL = "claude-sonnet-5-5"


def default_model() -> str:
    """The real model when a key is set, else the offline scripted demo."""
    if os.environ.get("PHOENIX_MODEL"):
        return os.environ["PHOENIX_MODEL"]
    return DEFAULT_MODEL if os.environ.get("ANTHROPIC_API_KEY") else DEMO_MODEL


@dataclass
class Settings:
    home: Path | None = None  # store root; None: $PHOENIX_HOME or <jupyter data dir>/phoenix
    model: str = field(default_factory=default_model)
    api_key: str | None = None  # None: ANTHROPIC_API_KEY
    base_url: str | None = None  # None: ANTHROPIC_BASE_URL
    helper_model: str | None = None  # keyword_search ranking; None: no ranking call
    thinking: Mapping[str, Any] | None = None
    retry_delay_scale: float = 1.0  # tests shrink real backoff delays
    stall_timeout: float = 60.0
    # Prompt-cache lifetime: "1h" (default: people read and think between cells for
    # longer than 5 minutes), "5m", or None for no caching (README "Cost and caching").
    cache_ttl: str | None = "1h"
    sub_agent_timeout: float = 600.0  # default per child, seconds
    sub_agent_timeout_max: float = 3600.0
    max_parallel_sub_agents: int = 4
    secret_patterns: tuple[str, ...] | None = None  # None: tools' defaults
    # Restricted-mode budgets (tools/sandbox.py SandboxLimits; README "Security model"):
    # memory and processes are shared by one conversation's commands and background jobs.
    sandbox_memory: int = 4 << 30  # bytes, whole tree incl. TMPDIR/shm/memfd pages
    sandbox_max_procs: int = 1024
    sandbox_tmp_bytes: int = 1 << 30  # TMPDIR and /dev/shm, each a capped tmpfs
    sandbox_tmp_inodes: int = 65536
    deny_read: tuple[str, ...] | None = None  # None: tools.sandbox.DEFAULT_DENY_READ
    env_allow: tuple[str, ...] = ()  # variables (names or patterns) commands may see
    kernel_access: str = "on"  # "off": the kernel tools stay declared and answer with an error
    # Checkpoints of the working tree while the agent can write (phoenix_nb.checkpoints):
    checkpoints: bool = True
    checkpoint_max_file_size: int = 20 * 1024 * 1024  # larger files: hash only, not restorable
    checkpoint_keep_days: float = 30.0  # older checkpoints may be pruned …
    checkpoint_max_bytes: int = 2 * 1024 * 1024 * 1024  # … and the oldest while a store is larger
    # The turn budget (core/states.py TurnBudget): model responses for one user message
    # (None or 0: no limit), and dollars one turn / the whole conversation may spend
    # (None: no limit; they apply to models with a known price only).
    max_turn_rounds: int | None = DEFAULT_MAX_TURN_ROUNDS
    max_turn_cost: float | None = None
    max_conversation_cost: float | None = None

    @classmethod
    def from_config(cls, values: Mapping[str, Any]) -> Settings:
        """Settings from config values (`c.Phoenix.<field>`); absent names keep defaults.

        Config speaks in traitlets' types, so: an empty string means "not set"
        (the environment or the default decides), lists become tuples, an empty
        list or mapping means the default, and `cache_ttl = "off"` turns caching
        off. Names that are not settings are the caller's own (display options)
        and are ignored here; `api_key` is never read from config (see
        NOT_FROM_CONFIG).
        """
        kwargs: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in values or f.name in NOT_FROM_CONFIG:
                continue
            value = values[f.name]
            if isinstance(value, str) and value == "" and f.name != "cache_ttl":
                continue  # unset: the environment or the default decides
            if isinstance(value, list | tuple):
                if not value and f.name in _EMPTY_IS_DEFAULT:
                    continue
                value = tuple(str(v) for v in value)
            elif isinstance(value, Mapping):
                value = dict(value) or None
            if f.name == "home":
                value = Path(str(value)).expanduser()
            elif f.name == "cache_ttl" and value in ("off", ""):
                value = None
            kwargs[f.name] = value
        if "base_url" not in kwargs and os.environ.get("ANTHROPIC_BASE_URL"):
            # read here, not left to the SDK: it also decides whether "demo" is served locally
            kwargs["base_url"] = os.environ["ANTHROPIC_BASE_URL"]
        return cls(**kwargs)

    def store_root(self) -> Path | None:
        if self.home is not None:
            return Path(self.home)
        env = os.environ.get("PHOENIX_HOME")
        return Path(env) if env else None


# Settings a notebook cannot set, and why (a test holds every other field to a trait).
NOT_FROM_CONFIG = {
    "api_key": "read from ANTHROPIC_API_KEY only: a key in a config file or a notebook "
    "would travel with it",
}
# Tuple settings whose empty value in config means "the default", not "nothing".
_EMPTY_IS_DEFAULT = frozenset({"secret_patterns"})
