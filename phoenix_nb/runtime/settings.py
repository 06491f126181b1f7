"""Settings of a phoenix_nb session, from explicit values or the environment.

The notebook layer fills these from traitlets config (`c.Phoenix.…`); power
users build them directly. Environment variables are read once, here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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

    def store_root(self) -> Path | None:
        if self.home is not None:
            return Path(self.home)
        env = os.environ.get("PHOENIX_HOME")
        return Path(env) if env else None
