"""`%config Phoenix.X = …` after `%load_ext` reaches the running session.

IPython's `%config` sets the trait on the registered `Phoenix` configurable; the
session must then rebuild its settings (through `Settings.from_config`, the one
place) and hand them to what the next turn reads. One row per trait: the value set,
and where the next request or tool call (or the next display) reads it from. A
trait added without a row fails `test_every_trait_has_a_row`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from phoenix_nb.llm.lazy import LazyProvider
from phoenix_nb.notebook.cell import TurnView, decorate, front_end_can_answer
from phoenix_nb.notebook.session import PhoenixConfig, Session
from phoenix_nb.runtime.manager import Conversation

Probe = Callable[[Session, Conversation], Any]

REASONING_RECORD = {
    "conversation": {"slug": "x", "state": {"name": "idle"}},
    "cycles": [
        {
            "index": 0,
            "steps": [{"kind": "ai", "item": {"type": "reasoning", "text": "THOUGHT-7"}}],
        }
    ],
}


def _provider(session: Session, conv: Conversation) -> Any:
    provider = conv.runtime.services.provider
    # the conversation's next request goes through the same client as its services name
    assert conv.runtime._llm.provider is provider
    if isinstance(provider, LazyProvider):  # built by the first request: build it as that would
        return asyncio.run(provider.provider())
    return provider


def _history_config(session: Session, conv: Conversation) -> Any:
    return session.phoenix.worktree.history(conv.id, conv.cwd).config


# trait: (value set by %config, probe of what the next turn uses, expected reading)
TABLE: dict[str, tuple[Any, Probe, Any]] = {
    "model": ("claude-other-1", lambda s, c: s.phoenix.create(cwd=c.cwd).model, None),
    "home": ("<tmp>/home2", lambda s, c: str(s.phoenix.store_root), None),
    "base_url": (
        "http://127.0.0.1:9/changed",
        lambda s, c: _provider(s, c).base_url.rstrip("/"),
        None,
    ),
    "helper_model": ("claude-helper-2", lambda s, c: c.runtime.services.helper_model, None),
    "wait_for_approval": ("always", lambda s, c: front_end_can_answer(None, s), True),
    "restrict_on_restart": (False, lambda s, c: s.config.restrict_on_restart, False),
    "retry_delay_scale": (0.25, lambda s, c: c.runtime.services.retry_delay_scale, None),
    "sub_agent_timeout": (12.0, lambda s, c: s.phoenix.spawner.limits.timeout, None),
    "max_parallel_sub_agents": (2, lambda s, c: s.phoenix.spawner.limits.max_parallel, None),
    "display_min_interval": (0.5, lambda s, c: TurnView(c, s).throttle.min_interval, None),
    "show_thinking": (
        False,
        lambda s, c: "THOUGHT-7" in str(decorate(dict(REASONING_RECORD), s)),
        False,
    ),
    "sandbox_memory": (1 << 29, lambda s, c: _policy(c).limits.memory, None),
    "sandbox_max_procs": (77, lambda s, c: _policy(c).limits.max_procs, None),
    "sandbox_tmp_bytes": (1 << 25, lambda s, c: _policy(c).limits.tmp_bytes, None),
    "sandbox_tmp_inodes": (999, lambda s, c: _policy(c).limits.tmp_inodes, None),
    "deny_read": (["~/.only-this"], lambda s, c: list(_policy(c).deny_read), None),
    "cache_ttl": ("5m", lambda s, c: _provider(s, c)._cache.ttl, None),
    "env_allow": (
        ["MYAPP_*"],
        lambda s, c: list(c.runtime.tool_context().commands.env_allow),
        None,
    ),
    "kernel_access": ("off", lambda s, c: c.runtime.tool_context().kernel_access, False),
    "checkpoints": (False, lambda s, c: s.phoenix.worktree.config.enabled, None),
    "checkpoint_max_file_size": (
        1234,
        lambda s, c: (_history_config(s, c).max_file_size, s.phoenix.worktree.config.max_file_size),
        (1234, 1234),
    ),
    "checkpoint_keep_days": (2.5, lambda s, c: _history_config(s, c).keep_days, None),
    "checkpoint_max_bytes": (4321, lambda s, c: _history_config(s, c).max_bytes, None),
    "stall_timeout": (7.0, lambda s, c: _provider(s, c)._stall_timeout, None),
    "sub_agent_timeout_max": (99.0, lambda s, c: s.phoenix.spawner.limits.timeout_max, None),
    "thinking": (
        {"type": "enabled", "budget_tokens": 1500},
        lambda s, c: dict(c.runtime.services.thinking or {}),
        None,
    ),
    "provider": ("openai", lambda s, c: type(_provider(s, c)).__name__, "OpenAIChatProvider"),
    "models": (
        {"claude-sonnet-4-5": {"context_window": 12_345}},
        lambda s, c: s.phoenix.limits.cached(c.model).context_window,
        12_345,
    ),
    "secret_patterns": (
        ["*_PRIVATE"],
        lambda s, c: list(c.runtime.tool_context().commands.secret_patterns),
        None,
    ),
    # the turn budget
    "max_turn_rounds": (7, lambda s, c: c.runtime.budget().max_rounds, None),
    # MCP servers: the hub (made at first use) lists the configured ones, nothing started.
    "mcp_servers": (
        {"x": {"command": "/bin/true"}},
        lambda s, c: [server.name for server in s.phoenix.mcp.servers()],
        ["x"],
    ),
    "mcp_defer_above": (3, lambda s, c: s.phoenix.settings.mcp_defer_above, None),
    "max_turn_cost": (2.5, lambda s, c: c.runtime.budget().max_turn_cost, None),
    "max_conversation_cost": (
        20.0,
        lambda s, c: c.runtime.budget().max_conversation_cost,
        None,
    ),
}


def _policy(conv: Conversation) -> Any:
    """The sandbox policy the conversation's tools are given."""
    return conv.runtime.tool_context().commands.policy


def test_every_trait_has_a_row() -> None:
    assert set(PhoenixConfig().trait_names(config=True)) == set(TABLE)


@pytest.fixture
def session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Session]:
    for name in ("ANTHROPIC_API_KEY", "PHOENIX_MODEL", "PHOENIX_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PHOENIX_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PHOENIX_MODEL", "claude-sonnet-4-5")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # never called
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    s = Session(PhoenixConfig(), cwd=tmp_path)
    try:
        yield s
    finally:
        phoenix = s._phoenix
        if phoenix is not None:
            asyncio.run(phoenix.aclose())


@pytest.mark.parametrize("trait", sorted(TABLE))
def test_config_after_load_reaches_the_next_turn(
    trait: str, session: Session, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    value, probe, expected = TABLE[trait]
    if trait == "home":
        value = str(tmp_path / "home2")
    conv = session.phoenix.create(cwd=tmp_path)  # the session runs before the change
    before = probe(session, conv)
    setattr(session.config, trait, value)  # what `%config Phoenix.<trait> = value` does
    if trait == "home":
        # another store: the old conversation is not in it, a new one is
        conv = session.phoenix.create(cwd=tmp_path)
    elif trait in ("provider", "base_url"):
        # a conversation keeps its server for life: the old one's is unchanged, a new
        # conversation starts on the new one (tests/notebook/test_kernel_server.py)
        assert probe(session, session.phoenix.get(conv.slug)) == before
        conv = session.phoenix.create(cwd=tmp_path)
    else:
        conv = session.phoenix.get(conv.slug)  # the same runtime, reconfigured
    after = probe(session, conv)
    want = value if expected is None else expected
    if trait == "base_url":
        want = str(value).rstrip("/")
    assert after == want, (trait, before, after)
    assert before != after, f"{trait}: the default already reads {after!r}; pick another value"
