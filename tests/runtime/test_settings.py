"""One Settings object, built in one place from traitlets, the environment and arguments.

Every runtime setting must be settable from the notebook (`c.Phoenix.<name>` /
`%config Phoenix.<name>`), except those NOT_FROM_CONFIG names with a reason: a
setting without a trait, or a trait the builder ignores, would be dropped in
silence — as four were before this test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from phoenix_nb.notebook.session import PhoenixConfig
from phoenix_nb.runtime.settings import Settings

# Traits of the notebook's own (display, approval, what a restart keeps), not runtime settings.
NOTEBOOK_ONLY = {
    "wait_for_approval",
    "display_min_interval",
    "show_thinking",
    "restrict_on_restart",
}


def test_every_setting_has_a_trait_and_every_trait_is_used() -> None:
    settings = Settings.config_names()
    traits = set(PhoenixConfig().trait_names(config=True))
    assert settings - traits == set(), "settings the notebook cannot set"
    assert traits - settings - NOTEBOOK_ONLY == set(), "traits that reach nothing"


def _values(config: PhoenixConfig) -> dict[str, object]:
    return {n: getattr(config, n) for n in config.trait_names(config=True)}


def test_config_values_reach_the_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    config = PhoenixConfig(
        home=str(tmp_path),
        model="claude-x",
        stall_timeout=7.5,
        sub_agent_timeout_max=99.0,
        thinking={"type": "enabled", "budget_tokens": 2000},
        secret_patterns=["MY_SECRET"],
        env_allow=["MYAPP_*"],
        cache_ttl="off",
        deny_read=[],
    )
    s = Settings.from_config(_values(config))
    assert s.home == tmp_path and s.model == "claude-x"
    assert s.stall_timeout == 7.5 and s.sub_agents.timeout_max == 99.0
    assert s.thinking == {"type": "enabled", "budget_tokens": 2000}
    assert s.secret_patterns == ("MY_SECRET",) and s.env_allow == ("MYAPP_*",)
    assert s.cache_ttl is None and s.deny_read == ()
    assert s.api_key is None  # never from config


def test_unset_config_keeps_defaults_and_reads_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    s = Settings.from_config(_values(PhoenixConfig()))
    assert s.base_url == "http://127.0.0.1:9"
    assert s.home is None and s.helper_model is None and s.thinking is None
    assert s.secret_patterns is None  # the tools' defaults
    assert s.stall_timeout == Settings().stall_timeout
