"""The admin's policy file: parsed once, with the line of every bound, and the settings
it clamps (a setting beyond a bound is refused with one line naming the policy)."""

from __future__ import annotations

from pathlib import Path

import pytest

from phoenix_nb.core.secrets import PROVIDER_CREDENTIALS
from phoenix_nb.policy import PolicyError, PolicyRefusal, load_policy, parse_policy
from phoenix_nb.runtime.settings import Settings
from phoenix_nb.sandbox import DEFAULT_DENY_READ
from phoenix_nb.store.scrub import scrub

FULL = """\
# the team's policy
[gateway]
url = "http://127.0.0.1:8765/"

[models]
allowed = ["claude-sonnet-4-5*", "claude-haiku-4-5"]
default = "claude-sonnet-4-5"

[budgets]
turn = 1.0
conversation = 10.0
user_daily = 20.0

[modes]
allow_unrestricted = false

[sandbox]
deny_read = ["/srv/secrets"]

[mcp]
allow_project_files = false
servers = {}

[audit]
path = "/var/log/phoenix/audit.jsonl"
"""
PATH = "/etc/phoenix/policy.toml"
HUB_TOKEN = "hubtok-0123456789abcdef"


def test_the_documented_shape_parses_with_the_line_of_each_bound() -> None:
    p = parse_policy(FULL, PATH)
    assert p.gateway_url == "http://127.0.0.1:8765"
    assert p.models == ("claude-sonnet-4-5*", "claude-haiku-4-5")
    assert (p.budgets.turn, p.budgets.conversation, p.budgets.user_daily) == (1.0, 10.0, 20.0)
    assert p.allow_unrestricted is False and p.mcp_allow_project_files is False
    assert p.mcp_servers == {} and p.deny_read == ("/srv/secrets",)
    assert p.audit_path == "/var/log/phoenix/audit.jsonl"
    assert p.where("models.allowed") == f"the policy {PATH} line 6 ([models] allowed)"
    assert (
        p.where("modes.allow_unrestricted")
        == f"the policy {PATH} line 15 ([modes] allow_unrestricted)"
    )


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[models]\nallowed = 'x'\n", "line 2: models.allowed must be a list of strings"),
        ("[budgets]\nturn = -1\n", "line 2: budgets.turn must be a number of dollars"),
        ("[modes]\nallow_unrestricted = 'no'\n", "line 2: modes.allow_unrestricted must be true"),
        ("[model]\nallowed = []\n", "line 1: model is not a policy table"),
        ("[models]\nallow = []\n", "line 2: models.allow is unknown"),
        ("[models\n", "line 1: not valid TOML: expected ']'"),
        ("[budgets]\nturn = \n", "line 2: not valid TOML: invalid value"),
        ("models = 3\n", "line 1: models must be a table"),
    ],
)
def test_a_policy_phoenix_does_not_understand_is_an_error_naming_its_line(
    text: str, says: str
) -> None:
    with pytest.raises(PolicyError, match=says.replace("(", r"\(")):
        parse_policy(text, PATH)


def test_the_file_comes_from_phoenix_policy_and_a_named_missing_file_fails_closed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(FULL)
    policy = load_policy({"PHOENIX_POLICY": str(path)})
    assert policy is not None and policy.path == str(path)
    assert policy.summary()[0] == f"{path} (from $PHOENIX_POLICY, read when phoenix loaded)"
    with pytest.raises(PolicyError, match="does not exist"):
        load_policy({"PHOENIX_POLICY": str(tmp_path / "gone.toml")})


def test_settings_inside_the_bounds_point_at_the_gateway_with_the_hub_token() -> None:
    p = parse_policy(FULL, PATH)
    env = {"JUPYTERHUB_API_TOKEN": HUB_TOKEN}
    s = Settings(model="demo", max_turn_cost=5.0).with_policy(p, env)
    assert s.base_url == "http://127.0.0.1:8765" and s.provider == "anthropic"
    assert s.api_key == HUB_TOKEN
    assert s.model == "claude-sonnet-4-5", "the demo default becomes the policy's default"
    assert (s.max_turn_cost, s.max_conversation_cost) == (1.0, 10.0), "the tighter bound wins"
    assert s.deny_read == (*DEFAULT_DENY_READ, "/srv/secrets")
    assert s.request_headers("my-conv") == {"x-phoenix-conversation": "my-conv"}
    assert Settings(model="demo").request_headers("my-conv") == {}
    chat = parse_policy('[gateway]\nurl = "http://gw"\nupstream = "openai"\n', PATH)
    assert Settings(model="gpt-x").with_policy(chat, env).provider == "openai"


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        (dict(model="demo", base_url="http://evil.example/"), "line 3 ([gateway] url)"),
        (dict(model="demo", provider="openai"), "line 3 ([gateway] url)"),
        (dict(model="claude-opus-4-5"), "line 6 ([models] allowed): model 'claude-opus-4-5'"),
    ],
)
def test_settings_beyond_a_bound_are_refused_naming_the_policy_and_its_line(
    settings: dict, says: str
) -> None:
    p = parse_policy(FULL, PATH)
    with pytest.raises(
        PolicyRefusal,
        match=f"Refused by the policy {PATH} {says}".replace("(", r"\(")
        .replace(")", r"\)")
        .replace("[", r"\[")
        .replace("]", r"\]"),
    ):
        Settings(**settings).with_policy(p, {})


def test_the_hub_token_is_a_credential_redacted_from_what_is_written(monkeypatch) -> None:
    assert "JUPYTERHUB_API_TOKEN" in PROVIDER_CREDENTIALS
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", HUB_TOKEN)
    assert HUB_TOKEN not in str(scrub({"text": f"the token is {HUB_TOKEN}"}))


def test_without_a_gateway_providers_and_base_urls_are_bounded_by_their_lists() -> None:
    p = parse_policy(
        '[providers]\nallowed = ["anthropic"]\nbase_urls = ["https://litellm.internal"]\n', PATH
    )
    ok = Settings(model="m", base_url="https://litellm.internal").with_policy(p, {})
    assert ok.base_url == "https://litellm.internal" and ok.api_key is None
    with pytest.raises(PolicyRefusal, match=r"line 2 \(\[providers\] allowed\)"):
        Settings(model="m", provider="openai").with_policy(p, {})
    with pytest.raises(PolicyRefusal, match=r"line 3 \(\[providers\] base_urls\)"):
        Settings(model="m", base_url="https://elsewhere").with_policy(p, {})
