"""The policy's [mcp] section as the MCP hub takes it: the lines its refusals name, the
policy's servers parsed with their grants, and an entry phoenix cannot use failing closed."""

from __future__ import annotations

from phoenix_nb.mcp import McpBounds
from phoenix_nb.mcp.config import parse_servers
from phoenix_nb.policy import parse_policy

PATH = "/etc/phoenix/policy.toml"


def test_no_policy_bounds_nothing() -> None:
    bounds = McpBounds.from_policy(None)
    assert bounds.project_files and bounds.servers is None and bounds.summary() == []


def test_server_tables_name_their_first_line_and_keep_their_grants() -> None:
    text = (
        "[mcp]\n"
        "allow_project_files = false\n"
        "\n"
        "[mcp.servers.db]\n"
        'command = "team-db-mcp"\n'
        "network = true\n"
        "\n"
        "[mcp.servers.docs]\n"
        'url = "https://docs.example/mcp"\n'
    )
    bounds = McpBounds.from_policy(parse_policy(text, PATH))
    assert [s.name for s in bounds.servers or ()] == ["db", "docs"]
    db = (bounds.servers or ())[0]
    assert db.source == "policy" and db.network
    assert bounds.servers_where == f"the policy {PATH} line 4 ([mcp] servers)"
    assert bounds.project_files_where == f"the policy {PATH} line 2 ([mcp] allow_project_files)"
    [mine] = parse_servers({"mine": {"command": "x"}})
    assert bounds.server_refused(mine) == (
        f"MCP server mine (your config) is refused by the policy {PATH} line 4 ([mcp] servers):"
        " only the policy's servers may run (db, docs)"
    )


def test_a_policy_server_phoenix_cannot_use_lets_no_server_run() -> None:
    text = '[mcp]\nservers = { bad = { command = "x", url = "https://y" } }\n'
    bounds = McpBounds.from_policy(parse_policy(text, PATH))
    assert bounds.servers == ()
    assert bounds.problem.startswith(f"the policy {PATH} line 2 ([mcp] servers): ")
    assert "no MCP server may run" in bounds.problem
