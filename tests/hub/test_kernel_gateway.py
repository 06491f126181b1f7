"""A real kernel on a hub, without the Hub: the admin's policy names the gateway, the
kernel holds only its user's Hub token, and what the policy bounds is refused.

(The real JupyterHub, its Unix users and HubAuth are tests/hub/test_real_hub.py.)"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from phoenix_nb.core.values import Usage
from phoenix_nb.hub import AuditLog, Gateway
from phoenix_nb.policy import parse_policy
from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from phoenix_nb.testing.hub import GatewayServer, TokenTable
from tests.notebook.kernel_harness import Execution, Kernel, loaded_kernel

ADMIN_KEY = "sk-ant-admin-kernel-0123456789"
HUB_TOKEN = "hubtoken-of-phx-a-0123456789"
MODEL = "claude-sonnet-4-5"


def _policy(url: str, secret: str) -> str:
    return f"""\
[gateway]
url = "{url}"

[models]
allowed = ["claude-sonnet-4-5*"]
default = "claude-sonnet-4-5"

[budgets]
user_daily = 20.0

[modes]
allow_unrestricted = false

[sandbox]
deny_read = ["{secret}"]
"""


@pytest.fixture(scope="module")
def hub(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Kernel, GatewayServer, FakeAnthropic]]:
    root = tmp_path_factory.mktemp("hubkernel")
    usage = Usage(input_tokens=1000, output_tokens=100)
    with FakeAnthropic(
        api_key=ADMIN_KEY, default=Turn([text("answered via the gateway")], usage=usage)
    ) as upstream:
        gateway = Gateway(
            upstream=upstream.base_url,
            upstream_key=ADMIN_KEY,
            policy=None,
            auth=TokenTable({HUB_TOKEN: "phx-a"}),
            audit=AuditLog(root / "audit.jsonl"),
        )
        with GatewayServer(gateway) as server:
            policy_file = root / "policy.toml"
            secret = root / "srv-secrets" / "team.key"
            secret.parent.mkdir()
            secret.write_text("TEAM-SECRET-CONTENT")
            policy_file.write_text(_policy(server.url, str(secret)))
            gateway.policy = parse_policy(policy_file.read_text(), str(policy_file))
            env = {
                "PHOENIX_POLICY": str(policy_file),
                "JUPYTERHUB_API_TOKEN": HUB_TOKEN,
                "ANTHROPIC_API_KEY": "",
                "ANTHROPIC_BASE_URL": "",
                "PHOENIX_MODEL": "",
            }
            with loaded_kernel(root, "", extra_env=env) as kernel:
                yield kernel, server, upstream


def _said(execution: Execution) -> str:
    return json.dumps([o["content"] for o in execution.outputs], default=str)


def test_a_turn_goes_through_the_gateway_as_the_tokens_user(hub) -> None:
    kernel, server, upstream = hub
    execution = kernel.run("%%phoenix --name first\nhello", timeout=120)
    assert "answered via the gateway" in _said(execution), execution.summary()
    assert upstream.requests, "the upstream got the request, with the admin's key (it checks)"
    sent = {k.lower() for k in upstream.requests[-1].headers}
    assert "x-phoenix-conversation" not in sent, "the gateway's own header stops at the gateway"
    kernel.wait_until(
        lambda: any(x["path"] == "/v1/messages" for x in server.gateway.audit.lines()),
        30,
        "the request's audit line",
    )
    lines = [x for x in server.gateway.audit.lines() if x["path"] == "/v1/messages"]
    assert [(x["user"], x["conversation"], x["model"], x["status"]) for x in lines] == [
        ("phx-a", "first", MODEL, "ok")
    ]


@pytest.mark.parametrize(
    ("cell", "says"),
    [
        ("%config Phoenix.base_url = 'http://127.0.0.1:9/elsewhere'", "line 2 ([gateway] url)"),
        ("%%phoenix --new --model claude-opus-4-5\nhi", "line 5 ([models] allowed)"),
        ("%%phoenix --new --mode unrestricted\nhi", "line 12 ([modes] allow_unrestricted)"),
    ],
)
def test_what_the_policy_bounds_is_refused_naming_the_policy(hub, cell: str, says: str) -> None:
    kernel, _server, upstream = hub
    before = len(upstream.requests)
    execution = kernel.run(cell, timeout=60)
    assert f"Refused by the policy {kernel.root / 'policy.toml'} {says}" in _said(execution), _said(
        execution
    )
    assert len(upstream.requests) == before
    trait = "__import__('phoenix_nb.notebook.session', fromlist=['_']).get_session().config"
    assert kernel.eval(f"{trait}.base_url") == "", "the refused value did not stay"
    # the refused %config did not stay: the next turn still goes through the gateway
    again = kernel.run("%%phoenix --name first\nagain", timeout=120)
    assert "answered via the gateway" in _said(again)


def test_status_shows_the_policy_and_the_spend_today(hub) -> None:
    kernel, _server, _upstream = hub
    kernel.run("%%phoenix --name first\nhello", timeout=120)
    said = kernel.run("%phoenix status", timeout=60).text()
    assert f"policy        {kernel.root / 'policy.toml'}" in said
    assert "unrestricted forbidden" in said
    assert "today         $0.0" in said and "of $20 today" in said, said


def test_the_hub_token_reaches_no_command_even_when_allowed(hub) -> None:
    """The agent runs `env` with the user's env_allow admitting JUPYTERHUB_*: what the
    upstream receives as the tool's result has the command's output and no token."""
    kernel, _server, upstream = hub
    kernel.ok("%config Phoenix.env_allow = ['JUPYTERHUB_*', 'JPY_*']")
    upstream.script(
        Turn([tool_use("bash", {"command": "env; echo ENV-LISTED"}, id="toolu_env")]),
        Turn([text("listed")]),
    )
    kernel.run("%%phoenix --name first\nlist the environment", timeout=120)
    sent = json.dumps(upstream.requests[-1].body)
    assert "ENV-LISTED" in sent
    assert HUB_TOKEN not in sent


def test_approving_write_access_is_refused_where_the_policy_forbids_it(hub) -> None:
    kernel, server, upstream = hub
    upstream.script(Turn([tool_use("request_mode_upgrade", {"reason": "I need to write x"})]))
    asked = kernel.run("%%phoenix --name asks\nplease write x", allow_stdin=False, timeout=120)
    assert "awaiting_mode_approval" in _said(asked)
    said = _said(kernel.run("%phoenix approve", allow_stdin=False, timeout=60))
    policy = kernel.root / "policy.toml"
    assert f"Refused by the policy {policy} line 12 ([modes] allow_unrestricted)" in said, said
    status = kernel.run("%phoenix status asks", timeout=60).text()
    assert "restricted" in status and "unrestricted  (" not in status

    def reported() -> bool:  # the kernel reports in the background: wait for the line
        lines = server.gateway.audit.lines()
        return any(
            x.get("event") == "policy_refusal" and x["conversation"] == "asks" for x in lines
        )

    kernel.wait_until(reported, 30, "the refusal in the audit trail")
    [line] = [
        x
        for x in server.gateway.audit.lines()
        if x.get("event") == "policy_refusal" and x["conversation"] == "asks"
    ]
    assert line["user"] == "phx-a" and "allow_unrestricted" in line["reason"]


def test_the_policys_hidden_paths_are_hidden_from_restricted_commands(hub) -> None:
    kernel, _server, upstream = hub
    secret = kernel.root / "srv-secrets" / "team.key"
    upstream.script(
        Turn([tool_use("bash", {"command": f"cat {secret}; echo CAT-DONE"}, id="toolu_sec")]),
        Turn([text("read")]),
    )
    kernel.run("%%phoenix --name first\nread the team key", timeout=120)
    sent = json.dumps(upstream.requests[-1].body["messages"][-1])
    assert "CAT-DONE" in sent and "Permission denied" in sent, sent
    assert "TEAM-SECRET-CONTENT" not in sent
    status = kernel.run("%phoenix status", timeout=60).text()
    assert f"hidden also {secret}" in status
