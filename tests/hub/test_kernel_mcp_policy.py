"""The admin policy's `[mcp]` section through a real kernel, and MCP approvals and
denials in the gateway's audit trail.

What the policy bounds is checked from outside: which servers' processes exist
(/proc), which tools the fake Messages API was offered, which requests wait. The
audit lines are the ones the in-process gateway RECEIVED and wrote, under the
user its token names.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from phoenix_nb.hub import AuditLog, Gateway
from phoenix_nb.policy import parse_policy
from phoenix_nb.sandbox import detect_sandbox
from phoenix_nb.testing import FakeAnthropic, Turn, text
from phoenix_nb.testing.hub import GatewayServer, TokenTable
from tests.notebook.kernel_harness import Kernel, loaded_kernel
from tests.notebook.test_kernel_mcp import HOSTILE, mcp_requests, offered, processes_with

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(
        not detect_sandbox().available, reason="stdio MCP servers run in the sandbox"
    ),
]

ADMIN_KEY = "sk-ant-admin-mcp-0123456789"
HUB_TOKEN = "hubtoken-of-phx-m-0123456789"


def _hostile(token: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(HOSTILE), token]}


@pytest.fixture
def tokens() -> dict[str, str]:
    return {k: f"phoenix-mcp-{k}-{uuid.uuid4().hex}" for k in ("team", "mine", "shadow", "proj")}


@pytest.fixture
def bounded(tmp_path: Path, tokens: dict[str, str]) -> Iterator[tuple[Kernel, FakeAnthropic, Path]]:
    """A kernel under a policy with project files off and one server of its own."""
    policy = tmp_path / "policy.toml"
    team = _hostile(tokens["team"])
    policy.write_text(
        "[budgets]\n"
        "turn = 5.0\n"
        "\n"
        "[mcp]\n"
        "allow_project_files = false\n"
        f"servers = {{ team = {{ command = {json.dumps(team['command'])}, "
        f"args = {json.dumps(team['args'])} }} }}\n"
    )
    with (
        FakeAnthropic() as fake,
        loaded_kernel(tmp_path, fake.base_url, extra_env={"PHOENIX_POLICY": str(policy)}) as k,
    ):
        yield k, fake, policy


def test_the_policy_bounds_which_servers_run_and_turns_project_files_off(
    bounded: tuple[Kernel, FakeAnthropic, Path], tokens: dict[str, str]
) -> None:
    kern, fake, policy = bounded
    servers = {"mine": _hostile(tokens["mine"]), "team": _hostile(tokens["shadow"])}
    kern.ok(f"%config Phoenix.mcp_servers = {servers!r}")
    project_file = kern.project / ".mcp.json"
    project_file.write_text(json.dumps({"mcpServers": {"proj": _hostile(tokens["proj"])}}))
    fake.script(Turn([text("hi")]))
    # A front end that can answer: the cell would wait for a pending server; none is.
    cell = kern.run("%%phoenix --new\nHello.", timeout=120)
    assert cell.status == "ok", cell.error()
    said = cell.text()
    refused_mine = (
        f"MCP server mine (your config) is refused by the policy {policy} line 6 ([mcp] servers)"
    )
    assert refused_mine in said, said
    assert f"MCP server team runs as the policy {policy} line 6 ([mcp] servers)" in said
    refused_file = (
        f"{project_file} is not offered for approval: refused by the policy {policy} "
        "line 5 ([mcp] allow_project_files)"
    )
    assert refused_file in said, said
    assert "Approve proj" not in json.dumps([o["content"] for o in cell.outputs])
    assert mcp_requests(kern) == []

    assert processes_with(tokens["team"]), "the policy's server runs as the policy says"
    for token in ("mine", "shadow", "proj"):
        assert processes_with(tokens[token]) == [], token
    names = offered(fake)
    assert "mcp__team__connect" in names
    assert not [n for n in names if n.startswith(("mcp__mine__", "mcp__proj__"))], names

    listed = kern.run("%phoenix mcp", timeout=60).text()
    assert refused_mine in listed and refused_file in listed
    assert "team  [the admin's policy]  ready" in listed, listed
    status = kern.run("%phoenix status", timeout=60).text()
    assert (
        f"mcp policy    .mcp.json files not offered (refused by the policy {policy} line 5 "
        "([mcp] allow_project_files))" in status
    ), status
    assert f"only the policy's servers may run: team (the policy {policy} line 6" in status
    kern.ok("%config Phoenix.mcp_servers = {}")


@pytest.fixture
def audited(tmp_path: Path) -> Iterator[tuple[Kernel, GatewayServer]]:
    """A kernel whose policy names an in-process gateway (project files allowed)."""
    with FakeAnthropic(api_key=ADMIN_KEY, default=Turn([text("via the gateway")])) as upstream:
        gateway = Gateway(
            upstream=upstream.base_url,
            upstream_key=ADMIN_KEY,
            policy=None,
            auth=TokenTable({HUB_TOKEN: "phx-m"}),
            audit=AuditLog(tmp_path / "audit.jsonl"),
        )
        with GatewayServer(gateway) as server:
            policy = tmp_path / "policy.toml"
            policy.write_text(f'[gateway]\nurl = "{server.url}"\n')
            gateway.policy = parse_policy(policy.read_text(), str(policy))
            env = {
                "PHOENIX_POLICY": str(policy),
                "JUPYTERHUB_API_TOKEN": HUB_TOKEN,
                "ANTHROPIC_API_KEY": "",
                "ANTHROPIC_BASE_URL": "",
                "PHOENIX_MODEL": "",
            }
            with loaded_kernel(tmp_path, "", extra_env=env) as kernel:
                yield kernel, server


def test_mcp_approvals_and_denials_reach_the_gateways_audit_trail(
    audited: tuple[Kernel, GatewayServer], tokens: dict[str, str]
) -> None:
    kern, server = audited
    project_file = kern.project / ".mcp.json"
    spec = {"mcpServers": {"proj": _hostile(tokens["proj"]), "nope": _hostile(tokens["mine"])}}
    project_file.write_text(json.dumps(spec))
    kern.run("%phoenix mcp", timeout=60)
    [nope] = [r for r in mcp_requests(kern) if r["detail"]["server"] == "nope"]
    approved = kern.run("%phoenix mcp approve proj", timeout=60).text()
    assert "Approved MCP server proj" in approved, approved
    denied = kern.run(f"%phoenix deny {nope['id']}", timeout=60).text()
    assert "Denied MCP server nope" in denied, denied

    def events() -> list[dict[str, Any]]:
        return [x for x in server.gateway.audit.lines() if x.get("event") == "mcp_approval"]

    kern.wait_until(lambda: len(events()) >= 2, 30, "both decisions in the audit trail")
    by_server = {x["mcp_server"]: x for x in events()}
    assert set(by_server) == {"proj", "nope"}
    proj, no = by_server["proj"], by_server["nope"]
    assert (proj["user"], proj["decision"], proj["source"]) == ("phx-m", "approved", "project")
    assert (no["user"], no["decision"]) == ("phx-m", "denied")
    assert proj["project_file"] == str(project_file)
    assert tokens["proj"] in proj["runs"] and str(HOSTILE) in proj["runs"]
    assert tokens["mine"] in no["runs"]
    assert proj["conversation"] == "" and len(proj["digest"]) == 64
    kern.wait_until(lambda: processes_with(tokens["proj"]) != [], 30, "the approved server")
    assert processes_with(tokens["mine"]) == []
