"""A team's phoenix on a real JupyterHub (issue 40): three Unix users, LocalProcessSpawner,
the Hub's proxy, and the phoenix gateway as a managed service in front of a fake
upstream that checks the admin's key. Each user's server is driven through the Hub's
REST API and a kernel websocket, with `%%phoenix` turns.

Needs root (it makes the users and the Hub spawns as them): skipped with that reason
elsewhere, never under CI. The venv the users run is made once (/var/tmp, ~2 min),
and phoenix_nb is copied into it fresh each run (tests/hub/real_hub.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession, ClientTimeout, CookieJar

from phoenix_nb.core.values import Usage
from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.nonroot.tier import delegate_cgroup, remove_cgroup

from .real_hub import (
    USERS,
    Hub,
    UserKernel,
    environ_of,
    is_root,
    make_users,
    processes_of,
    shared_venv,
    start_hub,
)

if not is_root():
    if os.environ.get("PHOENIX_TEST_TIER", "").startswith("user"):
        # the ordinary-user tiers (tests/nonroot/tier.py) run beside the root tier, which runs this
        pytest.skip(
            "the real-hub tier makes Unix users: the root tier runs it", allow_module_level=True
        )
    if os.environ.get("CI"):
        raise RuntimeError("the real-hub tier runs as root under CI (it makes Unix users)")
    pytest.skip("the real-hub tier needs root: it makes three Unix users", allow_module_level=True)

ADMIN_KEY = "sk-ant-admin-hubtier-" + "7f3a9c1e5b2d4f6a8c0e"
# A user's ordinary request costs $0.0045; B's "spend-big" ones $1.05 (Sonnet 4.5).
SMALL = Usage(input_tokens=1000, output_tokens=100)
BIG = Usage(input_tokens=10_000, output_tokens=68_000)
POLICY = """\
[gateway]
url = "{gateway}"

[models]
allowed = ["claude-sonnet-4-5*"]
default = "claude-sonnet-4-5"

[budgets]
user_daily = 1.5

[modes]
allow_unrestricted = {unrestricted}

[audit]
path = "{audit}"
"""


class Team:
    """The Hub, its users' kernels, the upstream, on one event loop for the module."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.runner = asyncio.Runner()
        self.upstream = FakeAnthropic(
            api_key=ADMIN_KEY, default=Turn([text("hello from upstream")], usage=SMALL)
        )
        self.upstream.reply_to("spend-big", Turn([text("a big answer")], usage=BIG))
        self.hub: Hub | None = None
        self.http: ClientSession | None = None
        self.kernels: dict[str, UserKernel] = {}
        self.venv = Path()
        self.users = make_users()
        self.audit = folder / "audit.jsonl"
        # each user's server in a cgroup delegated to them (as SystemdSpawner's
        # Delegate=yes does), so their kernels make their commands' cgroups in it. Not
        # named phoenix-…: kernels of other runs on this host sweep empty phoenix-*
        # groups they take for a dead kernel's (older versions, any uid's)
        self.cgroups = {
            user: delegate_cgroup(entry, f"hub-tier-{user}-{os.getpid()}")
            for user, entry in self.users.items()
        }

    def run(self, coro: Any) -> Any:
        return self.runner.run(coro)

    async def start(self) -> None:
        from .real_hub import free_port

        venv = self.venv = await asyncio.to_thread(shared_venv)
        gateway_port = free_port()
        gateway = f"http://127.0.0.1:{gateway_port}"
        policies = {}
        for user in USERS:
            path = self.folder / f"policy-{user}.toml"
            path.write_text(
                POLICY.format(
                    gateway=gateway,
                    audit=self.audit,
                    unrestricted="false" if user == "phx-b" else "true",
                )
            )
            path.chmod(0o644)  # readable, never writable, by the users
            policies[user] = str(path)
        self.policies = policies
        self.hub = await start_hub(
            venv,
            self.folder,
            policies=policies,
            gateway_port=gateway_port,
            gateway_env={
                "PHOENIX_POLICY": policies["phx-a"],
                "ANTHROPIC_API_KEY": ADMIN_KEY,
                "ANTHROPIC_BASE_URL": self.upstream.base_url,
            },
            # issue 34 landed: Restricted commands work as an ordinary user; no override
            user_env={},
            cgroups={
                user: [str(d / "cgroup.procs") for d in dirs] for user, dirs in self.cgroups.items()
            },
        )
        self.http = ClientSession(timeout=ClientTimeout(total=300))
        for user in USERS:
            kernel = UserKernel(self.hub, user, self.http)
            await kernel.start_server()
            await kernel.open_notebook(f"{user}.ipynb")
            await kernel.ok("%load_ext phoenix_nb")
            self.kernels[user] = kernel

    async def stop(self) -> None:
        for kernel in self.kernels.values():
            if kernel.ws is not None:
                await kernel.ws.close()
        if self.http is not None:
            await self.http.close()

    def audit_lines(self) -> list[dict[str, Any]]:
        if not self.audit.exists():
            return []
        return [json.loads(line) for line in self.audit.read_text().splitlines() if line.strip()]

    def messages_lines(self, count: int = 0) -> list[dict[str, Any]]:
        """The lines of model requests, once there are `count` (a line is written when the
        upstream's answer ends, which a kernel may see a moment before the gateway)."""
        deadline = time.monotonic() + 30
        while True:
            lines = [x for x in self.audit_lines() if x.get("path") == "/v1/messages"]
            if len(lines) >= count or time.monotonic() > deadline:
                return lines
            time.sleep(0.01)


@pytest.fixture(scope="module")
def team() -> Iterator[Team]:
    folder = Path(tempfile.mkdtemp(prefix="phoenix-hub-tier-", dir="/var/tmp"))
    folder.chmod(0o755)
    team = Team(folder)
    team.upstream.start()
    try:
        team.run(team.start())
        yield team
    finally:
        try:
            team.run(team.stop())
        finally:
            if team.hub is not None:
                team.hub.stop()
            for dirs in team.cgroups.values():
                remove_cgroup(dirs)
            team.runner.close()
            team.upstream.stop()
            shutil.rmtree(folder, ignore_errors=True)


def turn(team: Team, user: str, words: str, options: str = "") -> str:
    execution = team.run(team.kernels[user].run(f"%%phoenix {options}\n{words}", timeout=180))
    return execution.said


def test_turns_work_for_all_three_and_each_request_is_one_audit_line(team: Team) -> None:
    for user in USERS:
        said = turn(team, user, f"hello, this is {user}")
        assert "hello from upstream" in said, (user, said[-2000:])
    lines = team.messages_lines(3)
    asked = [r for r in team.upstream.requests if r.path == "/v1/messages"]
    assert len(lines) == len(asked) == 3
    for line, request in zip(lines, asked, strict=True):
        assert line["status"] == "ok"
        assert f"this is {line['user']}" in request.last_user_text, "the line names who asked"
        assert line["conversation"] and line["model"] == "claude-sonnet-4-5"
        assert line["dollars"] == pytest.approx(0.0045)


def test_the_hubs_gateway_runs_on_the_loop_its_extra_installs(team: Team) -> None:
    """`phoenix_nb[hub]` installs uvloop and `python -m phoenix_nb.hub.gateway`, as the Hub
    starts it, serves on it: the loop bench_gateway measures is the one a hub runs."""
    gateways = [
        pid
        for pid in (int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit())
        if _cmdline(pid) == [str(team.venv / "bin/python"), "-m", "phoenix_nb.hub.gateway"]
    ]
    assert len(gateways) == 1, gateways
    maps = Path(f"/proc/{gateways[0]}/maps").read_text()
    assert "/uvloop/loop." in maps, "the gateway is not on uvloop"


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # ended meanwhile
        return []
    return raw.decode(errors="replace").split("\0")[:-1]


def test_no_provider_key_in_any_process_store_or_notebook_of_the_users(team: Team) -> None:
    key = ADMIN_KEY.encode()
    scanned = 0
    for user, entry in team.users.items():
        pids = processes_of(entry.pw_uid)
        assert pids, f"{user} has processes (the server, the kernel)"
        for pid in pids:
            assert key not in environ_of(pid), f"{user}'s pid {pid} has the key in its environment"
            scanned += _scan_memory(pid, key)
        for path in Path(entry.pw_dir).rglob("*"):
            if path.is_file() and not path.is_symlink():
                assert key not in path.read_bytes(), f"the key is in {path}"
    assert scanned > 50_000_000, (
        f"the memory scan read {scanned:,} bytes: too little to mean anything"
    )


def _scan_memory(pid: int, needle: bytes) -> int:
    """Every readable mapping of `pid` searched for `needle` (as root, from outside: the
    whole process, what a run_python fork of it would hold and more); bytes read."""
    total = 0
    try:
        maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
        mem = open(f"/proc/{pid}/mem", "rb", buffering=0)  # noqa: SIM115
    except OSError:
        return 0
    with mem:
        for line in maps:
            fields = line.split()
            if "r" not in fields[1] or (len(fields) > 5 and fields[5] in ("[vvar]", "[vsyscall]")):
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            if end - start > 1 << 31:
                continue
            try:
                mem.seek(start)
                data = mem.read(end - start)
            except (OSError, ValueError, OverflowError):
                continue
            total += len(data)
            assert needle not in data, f"pid {pid} holds the key at {fields}"
    return total


def test_b_past_the_daily_budget_is_refused_while_a_and_c_go_on(team: Team) -> None:
    assert "a big answer" in turn(team, "phx-b", "spend-big once")
    assert "a big answer" in turn(team, "phx-b", "spend-big twice")  # $2.10 > $1.50 now
    refused = turn(team, "phx-b", "and once more")
    assert "phx-b has spent $2.10 today" in refused, refused[-2000:]
    assert f"{team.policies['phx-a']} line 9 ([budgets] user_daily)" in refused
    for user in ("phx-a", "phx-c"):
        assert "hello from upstream" in turn(team, user, f"still going, {user}")
    statuses = [(x["user"], x["status"]) for x in team.messages_lines(8)[3:]]
    assert statuses[:3] == [("phx-b", "ok"), ("phx-b", "ok"), ("phx-b", "refused")]
    assert statuses[3:] == [("phx-a", "ok"), ("phx-c", "ok")]
    spend = team.run(team.kernels["phx-b"].run("%phoenix status")).stdout
    assert "$2.1" in spend and "of $1.5 today" in spend, spend


@pytest.mark.parametrize(
    ("cell", "says"),
    [
        ("%config Phoenix.base_url = 'http://127.0.0.1:9/mine'", "line 2 ([gateway] url)"),
        ("%%phoenix --new --model claude-opus-4-5\nhi", "line 5 ([models] allowed)"),
        ("%%phoenix --new --mode unrestricted\nhi", "line 12 ([modes] allow_unrestricted)"),
    ],
)
def test_b_beyond_the_policy_is_refused_naming_it(team: Team, cell: str, says: str) -> None:
    said = team.run(team.kernels["phx-b"].run(cell)).said
    assert f"Refused by the policy {team.policies['phx-b']} {says}" in said, said[-2000:]


def _b_paths(team: Team) -> dict[str, str]:
    home = Path(team.users["phx-b"].pw_dir)
    store = home / ".local/share/jupyter/phoenix/index.jsonl"
    [connection] = sorted((home / ".local/share/jupyter/runtime").glob("kernel-*.json"))[:1]
    assert store.exists() and "phx-b" in (home / "phx-b.ipynb").name
    return {
        "store": str(store),
        "notebook": str(home / "phx-b.ipynb"),
        "connection": str(connection),
    }


def test_a_reads_nothing_of_b_in_cells_commands_and_run_python(team: Team) -> None:
    b = _b_paths(team)
    a = team.kernels["phx-a"]
    probe = (
        f"for name, path in {b!r}.items():\n"
        "    try:\n"
        "        open(path).read()\n"
        "        print(name, 'READ')\n"
        "    except OSError as e:\n"
        "        print(name, type(e).__name__)\n"
    )
    said = team.run(a.ok(probe)).stdout
    assert said.count("PermissionError") == 3 and "READ" not in said, said
    command = " ; ".join(f"cat {p} 2>&1 | head -c 300" for p in b.values()) + " ; echo A-DONE"
    for mode in ("", "--new --mode unrestricted"):
        before = len(team.upstream.requests)
        team.upstream.script(
            Turn([tool_use("bash", {"command": command}, id=f"toolu_cat{len(mode)}")], usage=SMALL),
            Turn([text("looked")], usage=SMALL),
        )
        turn(team, "phx-a", "look at B's files", mode)
        result = json.dumps(team.upstream.requests[-1].body["messages"][-1])
        assert len(team.upstream.requests) == before + 2
        assert "A-DONE" in result and result.count("Permission denied") == 3, result[-1500:]
        assert "this is phx-b" not in result and "spend-big" not in result
    team.upstream.script(
        Turn([tool_use("run_python", {"code": probe, "timeout": 240}, id="toolu_py")], usage=SMALL),
        Turn([text("ran")], usage=SMALL),
    )
    turn(team, "phx-a", "try it in python")
    result = json.dumps(team.upstream.requests[-1].body["messages"][-1])
    assert result.count("PermissionError") == 3 and "READ" not in result, result[-1500:]


def test_a_cannot_reach_bs_kernel_without_its_key(team: Team) -> None:
    """B's kernel listens on loopback; A can connect, but its messages are signed with
    the key in B's connection file, which A cannot read: B's kernel answers nothing."""
    connection = json.loads(Path(_b_paths(team)["connection"]).read_text())
    marker = f"/tmp/phoenix-hub-tier-{os.getpid()}-pwned"
    info = {
        k: connection[k]
        for k in (
            "ip",
            "transport",
            "shell_port",
            "iopub_port",
            "stdin_port",
            "control_port",
            "hb_port",
        )
    }
    info.update(key="a-guess", signature_scheme="hmac-sha256")
    code = f"""
import json, jupyter_client, queue
c = jupyter_client.BlockingKernelClient()
info = json.loads({json.dumps(info)!r})
c.load_connection_info(info)
c.start_channels()
c.execute("open({marker!r}, 'w').write('from A')")
try:
    c.get_shell_msg(timeout=15)
    print("ANSWERED")
except queue.Empty:
    print("NO ANSWER")
c.stop_channels()
"""
    said = team.run(team.kernels["phx-a"].ok(code, timeout=120)).stdout
    assert "NO ANSWER" in said, said
    assert not Path(marker).exists()
    assert team.run(team.kernels["phx-b"].eval("1 + 1")) == 2, "B's kernel is alive and answers B"


def test_a_mcp_server_reads_nothing_of_b_and_cannot_reach_bs_kernel(team: Team) -> None:
    """A's MCP server (the hostile fixture, started by A's kernel from c.Phoenix.mcp_servers,
    inside Restricted mode) tries B's store, notebook and connection file, then B's kernel's
    ports; what reached the upstream in the tool results is what the model would have got."""
    b = _b_paths(team)
    connection = json.loads(Path(b["connection"]).read_text())
    hostile = team.folder / "hostile_mcp.py"
    shutil.copy(Path(__file__).parents[1] / "notebook/fixtures/hostile_mcp.py", hostile)
    hostile.chmod(0o644)
    a = team.kernels["phx-a"]
    python = str(team.venv / "bin/python")
    servers = {"h": {"command": python, "args": [str(hostile)], "timeout": 120}}
    team.run(a.ok(f"%config Phoenix.mcp_servers = {servers!r}"))
    ports = {k: connection[k] for k in ("shell_port", "control_port", "hb_port")}
    calls = {
        **{name: tool_use("mcp__h__read", {"path": path}) for name, path in b.items()},
        **{name: tool_use("mcp__h__connect", {"port": port}) for name, port in ports.items()},
    }
    team.upstream.script(
        Turn(list(calls.values()), usage=SMALL), Turn([text("tried")], usage=SMALL)
    )
    try:
        said = turn(team, "phx-a", "try B's things through the server", "--new")
        assert "tried" in said, said[-2000:]
        results = {
            block["tool_use_id"]: json.dumps(block)
            for block in team.upstream.requests[-1].body["messages"][-1]["content"]
            if block.get("type") == "tool_result"
        }
        got = {name: results[call.id] for name, call in calls.items()}
    finally:
        team.run(a.ok("%config Phoenix.mcp_servers = {}"))
    for name in b:  # the attempt was made, and refused by the file's owner
        assert "read failed" in got[name] and "Permission denied" in got[name], got[name]
        assert "read: " not in got[name]
    for name in ports:  # Restricted mode's network isolation: B's ports are out of reach
        assert "connect failed" in got[name] and "connected" not in got[name], got[name]
    everything = " ".join(got.values())
    assert "this is phx-b" not in everything and connection["key"] not in everything
    assert team.run(team.kernels["phx-b"].eval("1 + 1")) == 2, "B's kernel is alive and answers B"


def test_kernels_report_decisions_to_the_audit_trail(team: Team) -> None:
    async def reported() -> list[dict[str, Any]]:  # kernels report in the background
        for _ in range(300):
            lines = [x for x in team.audit_lines() if x.get("event") != "request"]
            if {"mode_change", "policy_refusal"} <= {x["event"] for x in lines}:
                break
            await asyncio.sleep(0.1)
        return lines

    lines = team.run(reported())
    assert ("phx-a", "mode_change") in [(x["user"], x["event"]) for x in lines]
    assert all(x["user"] in USERS for x in lines)
    assert any(x["user"] == "phx-b" and x["event"] == "policy_refusal" for x in lines)
    assert re.search(r"\d{4}-\d\d-\d\dT", lines[0]["time"])


async def _browse_as(team: Team, user: str) -> tuple[str, list[str], int]:
    """A cookie-following client opens the gateway's page through the Hub's proxy, is
    sent to the Hub's login, logs in as `user`, and comes back through the Hub's OAuth:
    (the page, the URLs it passed, the status of a model request with only the cookie)."""
    assert team.hub is not None
    page_url = f"{team.hub.url}/services/phoenix-gateway/"
    jar = CookieJar(unsafe=True)  # cookies of 127.0.0.1
    async with ClientSession(cookie_jar=jar, timeout=ClientTimeout(total=120)) as browser:
        async with browser.get(page_url) as r:
            login_page = await r.text()
            login_url = r.url
            passed = [str(h.url) for h in r.history]
        found = re.search(r'name="_xsrf" value="([^"]+)"', login_page)
        assert found, (r.status, str(login_url), login_page[:500])
        form = {"username": user, "password": "anything", "_xsrf": found.group(1)}
        async with browser.post(login_url, data=form) as r:
            page = await r.text()
            passed += [str(login_url), *(str(h.url) for h in r.history), str(r.url)]
            assert r.status == 200, (r.status, page[:500])
        # the cookie opens the page, never the model routes (another site's page could
        # make the browser send those)
        async with browser.post(
            f"{team.hub.url}/services/phoenix-gateway/v1/messages",
            json={"model": "claude-sonnet-4-5", "max_tokens": 5, "messages": []},
        ) as r:
            model_status = r.status
    return page, passed, model_status


def test_a_browser_logs_in_through_the_hub_and_sees_only_its_own_spend(team: Team) -> None:
    spent: dict[str, float] = {}
    for line in team.messages_lines():
        spent[line["user"]] = spent.get(line["user"], 0.0) + float(line["dollars"])
    before = len(team.upstream.requests)
    for user, other in (("phx-a", "phx-b"), ("phx-b", "phx-a")):
        page, passed, model_status = team.run(_browse_as(team, user))
        assert any("/hub/login" in u for u in passed), passed
        assert any("/hub/api/oauth2/authorize" in u for u in passed), passed
        assert any("/services/phoenix-gateway/oauth_callback" in u for u in passed), passed
        assert f"<h1>{user}: today</h1>" in page, page
        assert f"${spent.get(user, 0.0):.2f} of $1.5 spent" in page, (spent, page)
        assert other not in page
        assert model_status == 401
    assert len(team.upstream.requests) == before, "the cookie sent nothing upstream"
    assert team.run(_forged_callback(team)) == [403, 403]


async def _forged_callback(team: Team) -> list[int]:
    """A login a third party started (its state, not this browser's) is refused."""
    assert team.hub is not None
    callback = f"{team.hub.url}/services/phoenix-gateway/oauth_callback?code=stolen&state=theirs"
    statuses = []
    for cookies in ({}, {"service-phoenix-gateway-oauth-state": "mine"}):
        async with (
            ClientSession(cookies=cookies, timeout=ClientTimeout(total=60)) as browser,
            browser.get(callback, allow_redirects=False) as r,
        ):
            statuses.append(r.status)
    return statuses


def _cgroup_paths(said: str) -> dict[str, str]:
    """controller -> path, from a `cat /proc/self/cgroup` in a tool result."""
    paths = {}
    for m in re.finditer(r"^\d+:([^:\n]*):(/\S*)$", said, re.MULTILINE):
        for name in m.group(1).split(","):
            paths[name] = m.group(2)
    return paths


def test_two_users_conversations_of_the_same_name_never_share_a_cgroup(team: Team) -> None:
    """A's and C's conversation `same-slug` run their commands in cgroups under each
    user's own kernel directory, `phoenix-u<uid>-…`, 0700 and theirs: C cannot even
    list A's (the Hub's servers run in cgroups delegated to their users). C, not B:
    B's day is spent by the budget test."""
    kernel_dirs = {}
    for user in ("phx-a", "phx-c"):
        call = tool_use("bash", {"command": "cat /proc/self/cgroup"}, id=f"toolu_cg{user[-1]}")
        team.upstream.script(Turn([call], usage=SMALL), Turn([text("seen")], usage=SMALL))
        said = turn(team, user, "where do my commands run?", "--name same-slug")
        assert "seen" in said, said[-2000:]
        [result] = [
            block
            for block in team.upstream.requests[-1].body["messages"][-1]["content"]
            if block.get("type") == "tool_result"
        ]
        content = result["content"]
        text_out = content if isinstance(content, str) else content[0]["text"]
        paths = _cgroup_paths(text_out)
        memory = Path(paths.get("memory") or paths[""])
        # <user's delegated group>/phoenix-u<uid>-<kernel>/<conversation>/<command>
        kernel_dir = memory.parent.parent
        uid = team.users[user].pw_uid
        assert kernel_dir.name.startswith(f"phoenix-u{uid}-"), memory
        assert kernel_dir.parent.name == f"hub-tier-{user}-{os.getpid()}", memory
        kernel_dirs[user] = kernel_dir
    assert kernel_dirs["phx-a"] != kernel_dirs["phx-c"]
    a_dir = Path("/sys/fs/cgroup/memory") / str(kernel_dirs["phx-a"]).lstrip("/")
    if not a_dir.exists():  # the unified hierarchy: one tree
        a_dir = Path("/sys/fs/cgroup") / str(kernel_dirs["phx-a"]).lstrip("/")
    st = a_dir.stat()
    assert (st.st_uid, st.st_mode & 0o777) == (team.users["phx-a"].pw_uid, 0o700), a_dir
    probe = (
        f"import os\ntry:\n    print(os.listdir({str(a_dir)!r}))\n"
        "except OSError as e:\n    print(type(e).__name__)"
    )
    said = team.run(team.kernels["phx-c"].ok(probe)).stdout
    assert said.strip() == "PermissionError", said


def test_chromium_logs_in_to_the_gateways_page_through_the_hub(team: Team) -> None:
    """What a person does: open the gateway's page in a real browser, log in on the
    Hub's own form, land back on the page with their spend; the token stays in an
    HttpOnly cookie for the gateway's path (no page script can read it)."""
    from playwright.sync_api import sync_playwright

    from tests.browser.lab import launch_browser

    assert team.hub is not None
    with sync_playwright() as playwright:
        browser = launch_browser(playwright)
        try:
            page = browser.new_page()
            page.goto(f"{team.hub.url}/services/phoenix-gateway/", timeout=120_000)
            page.fill("input[name=username]", "phx-c", timeout=120_000)
            page.fill("input[name=password]", "anything")
            page.click("#login_submit")
            page.wait_for_url("**/services/phoenix-gateway/", timeout=120_000)
            heading = page.inner_text("h1", timeout=120_000)
            said = page.inner_text("body")
            cookies = page.context.cookies()
        finally:
            browser.close()
    assert heading == "phx-c: today", said
    assert "of $1.5 spent" in said and "phx-a" not in said
    [token] = [
        c for c in cookies if c["path"] == "/services/phoenix-gateway/" and "state" not in c["name"]
    ]
    assert token["httpOnly"] and token["sameSite"] == "Lax", token
