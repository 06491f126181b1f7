"""MCP tools through a real kernel and `%%phoenix`, with a scripted model.

The servers are real: the reference `mcp-server-time` and `mcp-server-git`
(PyPI, in a venv of their own: tests/mcp_servers.py) and a hostile server
written for the tests (fixtures/hostile_mcp.py), all over stdio, all started by
phoenix inside the Restricted sandbox from `c.Phoenix.mcp_servers`. What the
model received is read from the fake Messages API's recorded requests; what a
server could not do is checked from outside: a listener's connection count,
the files on disk, the kernel's pid, /proc.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from phoenix_nb.sandbox import detect_sandbox
from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.mcp_servers import everything, server_venv
from tests.notebook.kernel_harness import Kernel, pid_alive

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(
        not detect_sandbox().available, reason="stdio MCP servers run in the sandbox"
    ),
]

HOSTILE = Path(__file__).parent / "fixtures" / "hostile_mcp.py"
SSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY----- phoenix-test-key"


class Listener:
    """A loopback TCP listener counting the connections it accepted."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The kernel's HOME, with a private key where ~/.ssh is."""
    folder = tmp_path_factory.mktemp("home")
    (folder / ".ssh").mkdir()
    (folder / ".ssh" / "id_ed25519").write_text(SSH_KEY)
    return folder


@pytest.fixture(scope="module")
def kernel_env(home: Path) -> Mapping[str, str]:
    return {"HOME": str(home)}


@pytest.fixture(scope="module")
def bin_dir() -> Path:
    return server_venv()


def result_of(fake: FakeAnthropic, tool_use_id: str) -> dict[str, Any]:
    for request in fake.requests:
        for message in request.body.get("messages", []):
            content = message.get("content")
            if isinstance(content, list):
                for block in content:
                    if block.get("type") == "tool_result" and block["tool_use_id"] == tool_use_id:
                        return dict(block)
    raise AssertionError(f"no tool_result for {tool_use_id}")


def text_of(block: Mapping[str, Any]) -> str:
    content = block["content"]
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if b.get("type") == "text")


def offered(fake: FakeAnthropic, index: int = 0) -> list[str]:
    return [t["name"] for t in fake.requests[index].body.get("tools", [])]


def processes_with(token: str) -> list[int]:
    """Pids whose command line holds `token` (read from /proc, outside any namespace)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if token.encode() in cmdline:
            found.append(int(entry.name))
    return found


def configure(kern: Kernel, servers: Mapping[str, Any]) -> None:
    kern.ok(f"%config Phoenix.mcp_servers = {dict(servers)!r}")


def hostile(**more: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(HOSTILE)], **more}


def test_load_ext_imports_no_mcp_module(kern: Kernel) -> None:
    loaded = kern.eval(
        "sorted(m for m in __import__('sys').modules if m.split('.')[0] in ('mcp', 'mcp_types'))"
    )
    assert loaded == []


def test_real_servers_and_a_hostile_one_through_a_turn(
    kern: Kernel, fake: FakeAnthropic, bin_dir: Path, home: Path
) -> None:
    project = kern.project
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / "notes.txt").write_text("hello\n")
    before = {p.name: p.read_bytes() for p in project.iterdir() if p.is_file()}
    home_before = sorted(p.name for p in home.iterdir())
    kernel_pid = kern.eval("__import__('os').getpid()")
    connection_file = kern.km.connection_file
    kern.home.mkdir(parents=True, exist_ok=True)
    store_file = kern.home / "probe.txt"  # the store's folder is hidden as a whole
    store_file.write_text("store secret")
    listener = Listener()
    try:
        configure(
            kern,
            {
                "time": {
                    "command": str(bin_dir / "mcp-server-time"),
                    "args": ["--local-timezone", "UTC"],
                },
                "git": {"command": str(bin_dir / "mcp-server-git")},
                "h": hostile(timeout=30),
            },
        )
        calls = {
            "now": tool_use("mcp__time__get_current_time", {"timezone": "Europe/Paris"}),
            "status": tool_use("mcp__git__git_status", {"repo_path": str(project)}),
            "connect": tool_use("mcp__h__connect", {"port": listener.port}),
            "dns": tool_use("mcp__h__dns", {"name": "example.com"}),
            "write_cwd": tool_use("mcp__h__write", {"path": str(project / "notes.txt")}),
            "write_home": tool_use("mcp__h__write", {"path": str(home / "planted")}),
            "ssh": tool_use("mcp__h__read", {"path": str(home / ".ssh" / "id_ed25519")}),
            "conn": tool_use("mcp__h__read", {"path": connection_file}),
            "store": tool_use("mcp__h__read", {"path": str(store_file)}),
            "kill": tool_use("mcp__h__kill", {"pid": kernel_pid}),
            "env": tool_use("mcp__h__env", {}),
        }
        fake.script(Turn(list(calls.values())), Turn([text("All tried.")]))
        cell = kern.run("%%phoenix --name mcp-real\nTry the servers.", timeout=240)
        assert cell.status == "ok", cell.error()
        names = offered(fake)
        for name in ("mcp__time__get_current_time", "mcp__git__git_status", "mcp__h__connect"):
            assert name in names, names
        descriptions = " ".join(t["description"] for t in fake.requests[0].body["tools"])
        assert "A server that tries everything." in descriptions  # the server's instructions
        got = {key: result_of(fake, call.id) for key, call in calls.items()}
        now = json.loads(text_of(got["now"]))
        assert now["timezone"] == "Europe/Paris" and not got["now"].get("is_error")
        assert "On branch" in text_of(got["status"]) or "No commits" in text_of(got["status"])
        assert "connect failed" in text_of(got["connect"])
        assert "dns failed" in text_of(got["dns"])
        assert "write failed" in text_of(got["write_cwd"])
        assert "write failed" in text_of(got["write_home"])
        for key in ("ssh", "conn", "store"):
            assert "read failed" in text_of(got[key]), (key, text_of(got[key]))
        assert "kill failed" in text_of(got["kill"])
        env_names = set(text_of(got["env"]).split())
        assert "ANTHROPIC_API_KEY" not in env_names and "PHOENIX_HOME" not in env_names
        # From outside: nothing reached the listener, no file changed, the kernel lives.
        assert listener.accepted == 0
        assert {p.name: p.read_bytes() for p in project.iterdir() if p.is_file()} == before
        assert sorted(p.name for p in home.iterdir()) == home_before
        assert pid_alive(kernel_pid) and kern.run("1 + 1", timeout=10).status == "ok"
        everything = json.dumps([r.body for r in fake.requests])
        assert SSH_KEY not in everything
        # The record shows the calls like any other tool's.
        assert "mcp__time__get_current_time" in json.dumps(cell.records())
        status = kern.run("%phoenix status", timeout=30).text()
        assert "mcp servers   3 ready" in status, status
        listed = kern.run("%phoenix mcp", timeout=30).text()
        assert "time  [config]  ready" in listed and "2 tools" in listed, listed
    finally:
        listener.close()


def images_of(block: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = block["content"]
    return [b for b in content if b.get("type") == "image"] if isinstance(content, list) else []


def test_server_everything_over_stdio_and_streamable_http(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    """Text, structured, image and error results reach the model intact, both transports."""
    node, index = everything()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    http = subprocess.Popen(
        [str(node), str(index), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert http.stderr is not None
        for line in http.stderr:  # the server says when it listens
            if "listening" in line:
                break
        configure(
            kern,
            {
                "ev": {"command": str(node), "args": [str(index), "stdio"]},
                "evh": {"url": f"http://127.0.0.1:{port}/mcp"},
            },
        )
        calls = {}
        for server in ("ev", "evh"):
            calls[server, "echo"] = tool_use(f"mcp__{server}__echo", {"message": "hi <b>x</b>"})
            calls[server, "structured"] = tool_use(
                f"mcp__{server}__get-structured-content", {"location": "New York"}
            )
            calls[server, "image"] = tool_use(f"mcp__{server}__get-tiny-image", {})
            calls[server, "error"] = tool_use(f"mcp__{server}__get-sum", {"a": "not a number"})
        fake.script(Turn(list(calls.values())), Turn([text("seen")]))
        cell = kern.run("%%phoenix --new\nUse everything.", timeout=240)
        assert cell.status == "ok", cell.error()
        for server in ("ev", "evh"):
            got = {
                kind: result_of(fake, calls[server, kind].id)
                for kind in ("echo", "structured", "image", "error")
            }
            assert text_of(got["echo"]) == "Echo: hi <b>x</b>"
            weather = json.loads(text_of(got["structured"]))
            assert set(weather) == {"temperature", "conditions", "humidity"}
            images = images_of(got["image"])
            assert len(images) == 1 and images[0]["source"]["media_type"] == "image/png"
            assert got["error"].get("is_error"), got["error"]
        record = json.dumps(cell.records())
        assert "mcp__evh__get-tiny-image" in record and "mcp__ev__echo" in record
    finally:
        http.kill()
        http.wait(10)


def test_a_hundred_tools_are_deferred_and_the_prompt_stays_cached(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    """Over the threshold the first request carries names and first lines, not 100
    schemas; the model finds a schema with mcp_tool_search and calls with mcp_call; over
    30 rounds at least 95% of input tokens are read from the (simulated) prompt cache."""
    many = Path(__file__).parent / "fixtures" / "many_tools_mcp.py"
    configure(kern, {"many": {"command": sys.executable, "args": [str(many)]}})
    search = tool_use("mcp_tool_search", {"query": "quantity 57"})
    calls = [
        tool_use("mcp_call", {"name": f"mcp__many__measure_{i:03d}", "arguments": {"sample": "s"}})
        for i in range(28)
    ]
    fake.script(Turn([search]), *(Turn([c]) for c in calls), Turn([text("measured")]))
    cell = kern.run("%%phoenix --new\nMeasure everything.", timeout=300)
    assert cell.status == "ok", cell.error()
    first = fake.requests[0].body["tools"]
    names = [t["name"] for t in first]
    assert "mcp_call" in names and "mcp_tool_search" in names
    assert not [n for n in names if n.startswith("mcp__many__")]
    call_tool = next(t for t in first if t["name"] == "mcp_call")
    assert "mcp__many__measure_099" in call_tool["description"]
    mcp_bytes = sum(len(json.dumps(t)) for t in first if t["name"].startswith("mcp"))
    assert mcp_bytes < 16_000, mcp_bytes  # 100 full schemas would be ~60 KB
    found = text_of(result_of(fake, search.id))
    assert found.startswith("mcp__many__measure_057") and '"sample"' in found
    assert text_of(result_of(fake, calls[5].id)) == "measure_005: s x 1.0"
    assert len(fake.requests) == 30
    read = total = 0
    for index in range(len(fake.requests)):
        billed = fake.billing(index)
        assert billed is not None
        read += billed.cache_read_input_tokens
        total += (
            billed.input_tokens
            + billed.cache_read_input_tokens
            + billed.cache_creation_input_tokens
        )
    print(f"30 rounds with 100 MCP tools: {read / total:.1%} of input tokens read from cache")
    assert read / total >= 0.95


def test_a_server_ready_after_a_conversation_started_is_announced_not_added(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    fake.script(Turn([text("hi")]))
    assert kern.run("%%phoenix --name early\nHello.", timeout=60).status == "ok"
    configure(kern, {"late": hostile()})
    fake.clear()
    fake.script(Turn([text("hi")]))
    cell = kern.run("%%phoenix --name early\nAgain.", timeout=120)
    assert cell.status == "ok", cell.error()
    assert "late became ready after this conversation started" in cell.text()
    assert not [n for n in offered(fake) if n.startswith("mcp__late__")]  # the list is fixed
    sent = json.dumps(fake.requests[0].body["messages"])
    assert "late became ready after this conversation started" in sent  # the agent is told
    fake.clear()
    fake.script(Turn([text("hi")]))
    again = kern.run("%%phoenix --name early\nOnce more.", timeout=120)
    assert "became ready" not in again.text()  # said once


def test_fork_bomb_and_2_gb_fail_and_the_kernel_lives(kern: Kernel, fake: FakeAnthropic) -> None:
    kernel_pid = kern.eval("__import__('os').getpid()")
    configure(kern, {"h": hostile(timeout=60)})
    bomb = tool_use("mcp__h__fork_bomb", {})
    memory = tool_use("mcp__h__memory", {"megabytes": 2048})
    fake.script(Turn([bomb]), Turn([memory]), Turn([text("done")]))
    cell = kern.run("%%phoenix --new\nExhaust things.", timeout=300)
    assert cell.status == "ok", cell.error()
    bombed = text_of(result_of(fake, bomb.id))
    assert "without failing" not in bombed, bombed
    mem = result_of(fake, memory.id)
    assert mem.get("is_error") or "allocation failed" in text_of(mem), text_of(mem)
    assert "allocated 2048 MB" not in text_of(mem)
    assert pid_alive(kernel_pid) and kern.run("1 + 1", timeout=10).status == "ok"


def test_a_network_grant_is_a_write_tool_that_connects_only_in_unrestricted_mode(
    kern: Kernel, fake: FakeAnthropic, home: Path
) -> None:
    """``network: true`` lifts the network and nothing else: the granted server still
    runs in the Restricted sandbox, so it writes neither the working folder nor $HOME
    and cannot read ~/.ssh (checked on disk and in what the model received)."""
    listener = Listener()
    project = kern.project
    (project / "notes.txt").write_text("hello\n")
    home_before = sorted(p.name for p in home.iterdir())
    try:
        configure(kern, {"net": hostile(network=True)})
        attempt = tool_use("mcp__net__connect", {"port": listener.port})
        fake.script(Turn([attempt]), Turn([text("done")]))
        assert kern.run("%%phoenix --new\nConnect.", timeout=120).status == "ok"
        refused = result_of(fake, attempt.id)
        assert refused.get("is_error") and "request_mode_upgrade" in text_of(refused)
        assert listener.accepted == 0
        calls = {
            "connect": tool_use("mcp__net__connect", {"port": listener.port}),
            "write_cwd": tool_use("mcp__net__write", {"path": str(project / "notes.txt")}),
            "write_home": tool_use("mcp__net__write", {"path": str(home / "planted")}),
            "ssh": tool_use("mcp__net__read", {"path": str(home / ".ssh" / "id_ed25519")}),
        }
        fake.clear()
        fake.script(Turn(list(calls.values())), Turn([text("done")]))
        cell = kern.run("%%phoenix --new --mode unrestricted\nConnect.", timeout=120)
        assert cell.status == "ok", cell.error()
        got = {key: text_of(result_of(fake, call.id)) for key, call in calls.items()}
        assert got["connect"] == "connected", got
        kern.wait_until(lambda: listener.accepted > 0, 10, "the granted connection")
        assert (project / "notes.txt").read_text() == "hello\n", got
        assert sorted(p.name for p in home.iterdir()) == home_before, got
        assert SSH_KEY not in json.dumps([r.body for r in fake.requests]), got
        listed = kern.run("%phoenix mcp", timeout=30).text()
        assert "Restricted sandbox (read-only, the host's network" in listed, listed
    finally:
        listener.close()


def test_restrict_stops_a_granted_server_and_its_next_use_starts_it(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    token = f"phoenix-mcp-{uuid.uuid4().hex}"
    configure(kern, {"g": {**hostile(network=True), "args": [str(HOSTILE), token]}})
    first = tool_use("mcp__g__env", {})
    fake.script(Turn([first]), Turn([text("done")]))
    cell = kern.run("%%phoenix --name granted --mode unrestricted\nUse it.", timeout=120)
    assert cell.status == "ok", cell.error()
    assert "PATH" in text_of(result_of(fake, first.id))
    assert processes_with(token), "the granted server runs"

    kern.ok("%phoenix restrict")
    kern.wait_until(lambda: processes_with(token) == [], 30, "the granted server stopped")
    assert "stopped at `%phoenix restrict`" in kern.run("%phoenix mcp", timeout=30).text()
    fake.clear()
    fake.script(Turn([text("hi")]))
    assert kern.run("%%phoenix --name granted\nStill here?", timeout=60).status == "ok"
    assert processes_with(token) == [], "a cell does not start it again"
    assert "mcp__g__env" in offered(fake), "its tools stay in the conversation's list"

    again = tool_use("mcp__g__env", {})
    fake.clear()
    fake.script(Turn([again]), Turn([text("done")]))
    cell = kern.run("%%phoenix --new --mode unrestricted\nUse it again.", timeout=120)
    assert cell.status == "ok", cell.error()
    assert "PATH" in text_of(result_of(fake, again.id)), "started again at its next use"
    assert processes_with(token)


def test_a_write_grant_writes_only_below_its_folder(
    kern: Kernel, fake: FakeAnthropic, home: Path, tmp_path: Path
) -> None:
    """``write: [dir]`` is narrowed to dir: the granted server (in Unrestricted mode,
    where its write tools answer) writes there, and neither into the working folder
    nor $HOME, and reaches no listener (checked on disk and by the listener)."""
    grant = tmp_path / "granted"
    grant.mkdir()
    project = kern.project
    (project / "notes.txt").write_text("hello\n")
    home_before = sorted(p.name for p in home.iterdir())
    listener = Listener()
    try:
        configure(kern, {"w": hostile(write=[str(grant)])})
        calls = {
            "write_grant": tool_use("mcp__w__write", {"path": str(grant / "out.txt")}),
            "write_cwd": tool_use("mcp__w__write", {"path": str(project / "notes.txt")}),
            "write_home": tool_use("mcp__w__write", {"path": str(home / "planted")}),
            "connect": tool_use("mcp__w__connect", {"port": listener.port}),
        }
        fake.script(Turn(list(calls.values())), Turn([text("done")]))
        cell = kern.run("%%phoenix --new --mode unrestricted\nWrite.", timeout=120)
        assert cell.status == "ok", cell.error()
        got = {key: text_of(result_of(fake, call.id)) for key, call in calls.items()}
        assert (grant / "out.txt").read_text() == "hostile was here\n", got
        assert (project / "notes.txt").read_text() == "hello\n", got
        assert sorted(p.name for p in home.iterdir()) == home_before, got
        assert "connect failed" in got["connect"] and listener.accepted == 0, got
    finally:
        listener.close()


def test_project_file_runs_nothing_before_approve_and_pins_what_was_approved(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    token = f"phoenix-mcp-{uuid.uuid4().hex}"
    project = kern.project
    configure(kern, {})
    spec = {"mcpServers": {"proj": {"command": sys.executable, "args": [str(HOSTILE), token]}}}
    (project / ".mcp.json").write_text(json.dumps(spec))
    try:
        # Headless (no one can click): the turn goes on without it, nothing starts.
        fake.script(Turn([text("hi")]))
        cell = kern.run("%%phoenix --new\nHello.", allow_stdin=False, timeout=60)
        assert cell.status == "ok", cell.error()
        assert "pending approval" in cell.text() and token in cell.text()
        assert processes_with(token) == []
        assert not [n for n in offered(fake) if n.startswith("mcp__proj__")]

        # A front end that can answer: the cell waits for Approve before its turn,
        # and that turn gets the server's tools.
        fake.clear()
        fake.script(Turn([text("hi")]))
        since = time.monotonic()
        cell = kern.submit("%%phoenix --new\nHello again.")
        approve = kern.wait_for_button("Approve proj", since, timeout=60)
        assert processes_with(token) == []
        assert fake.requests == [], "the turn waits for the answer"
        kern.click(approve)  # the cell's button
        kern.finish(cell, timeout=60)
        assert cell.status == "ok", cell.error()
        assert processes_with(token) != [], "the approved server runs"
        assert "mcp__proj__connect" in offered(fake)

        # The file changes: pending again, the new command does not run, the old stops.
        token2 = f"phoenix-mcp-{uuid.uuid4().hex}"
        spec["mcpServers"]["proj"]["args"] = [str(HOSTILE), token2]
        (project / ".mcp.json").write_text(json.dumps(spec))
        listed = kern.run("%phoenix mcp", timeout=30)
        assert "pending approval" in listed.text() and token2 in listed.text()
        kern.wait_until(lambda: processes_with(token) == [], 30, "the old command to stop")
        assert processes_with(token2) == []

        # A project file asking for network is refused, and runs nothing.
        spec["mcpServers"]["proj"]["network"] = True
        (project / ".mcp.json").write_text(json.dumps(spec))
        refused = kern.run("%phoenix mcp", timeout=30)
        assert "can never grant" in refused.text()
        assert processes_with(token2) == []
    finally:
        (project / ".mcp.json").unlink()


SESSION = "__import__('phoenix_nb.notebook.session', fromlist=['_']).get_session()"


def mcp_requests(kern: Kernel) -> list[dict[str, Any]]:
    """What `Phoenix.pending` lists of kind mcp_server, read in the kernel."""
    found = kern.eval(f"[r.as_json() for r in {SESSION}.phoenix.pending.list()]")
    return [r for r in found if r["kind"] == "mcp_server"]


def test_a_pending_server_is_a_request_of_phoenix_pending_answered_by_id(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    token, other = (f"phoenix-mcp-{uuid.uuid4().hex}" for _ in range(2))
    project = kern.project
    configure(kern, {})
    entry = {"command": sys.executable, "args": [str(HOSTILE), token], "env": {"TEAM_DB": "x"}}
    spec = {"mcpServers": {"asked": entry, "other": {**entry, "args": [str(HOSTILE), other]}}}
    (project / ".mcp.json").write_text(json.dumps(spec))
    kern.ok(f"_heard = []; _unwatch = {SESSION}.phoenix.pending.watch(lambda: _heard.append(1))")
    try:
        listed = kern.run("%phoenix mcp", timeout=30).text()
        requests = {r["detail"]["server"]: r for r in mcp_requests(kern)}
        assert set(requests) == {"asked", "other"}, requests
        asked = requests["asked"]
        assert asked["conversation"] == "" and asked["answers"] == ["approve", "deny"]
        for shown in (sys.executable, str(HOSTILE), token, "TEAM_DB"):
            assert shown in asked["reason"], asked["reason"]
        assert f"%phoenix approve {asked['id']}" in listed
        heard = kern.eval("len(_heard)")
        assert heard >= 1, "watchers heard the servers enter pending"

        said = kern.run(f"%phoenix approve {asked['id']}", timeout=60).text()
        assert "Approved MCP server asked" in said, said
        kern.wait_until(lambda: processes_with(token) != [], 30, "the approved server")
        assert [r["detail"]["server"] for r in mcp_requests(kern)] == ["other"]
        assert kern.eval("len(_heard)") > heard, "watchers heard it leave pending"

        # The file changes: the old id answers nothing, and the new command does not run.
        spec["mcpServers"]["other"]["args"] = [str(HOSTILE), other, "changed"]
        (project / ".mcp.json").write_text(json.dumps(spec))
        kern.run("%phoenix mcp", timeout=30)
        old = requests["other"]["id"]
        refused = kern.run(f"%phoenix approve {old}", timeout=30).text()
        assert "No request" in refused, refused
        [new] = mcp_requests(kern)
        assert new["id"] != old and "changed" in new["reason"]
        denied = kern.run(f"%phoenix deny {new['id']}", timeout=30).text()
        assert "Denied MCP server other" in denied, denied
        assert mcp_requests(kern) == []
        assert processes_with(other) == []
        assert "denied: it does not run" in kern.run("%phoenix mcp", timeout=30).text()
    finally:
        kern.ok("_unwatch()")
        (project / ".mcp.json").unlink()


def test_an_interrupt_ends_a_cell_waiting_for_an_mcp_approval(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    token = f"phoenix-mcp-{uuid.uuid4().hex}"
    spec = {"mcpServers": {"later": {"command": sys.executable, "args": [str(HOSTILE), token]}}}
    (kern.project / ".mcp.json").write_text(json.dumps(spec))
    try:
        # A server already running: the hub's threads exist, and SIGINT may reach one
        # of them rather than the loop waiting in epoll (notebook/interrupt.py).
        configure(kern, {"bg": hostile()})
        since = time.monotonic()
        cell = kern.submit("%%phoenix --new\nHello.")
        kern.wait_for_button("Approve later", since, timeout=60)
        kern.km.interrupt_kernel()
        kern.finish(cell, timeout=30)
        assert fake.requests == [] and processes_with(token) == []
        assert [r["detail"]["server"] for r in mcp_requests(kern)] == ["later"], "still asks"
        assert kern.eval("1 + 1") == 2, "the kernel answers again"
    finally:
        (kern.project / ".mcp.json").unlink()


def test_a_changed_tool_list_puts_the_server_back_to_pending(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    variant = kern.project / "hostile-variant.txt"
    configure(kern, {"rug": hostile(env={"HOSTILE_VARIANT_FILE": str(variant)})})
    fake.script(Turn([text("hi")]))
    assert kern.run("%%phoenix --new\nHello.", timeout=60).status == "ok"
    assert "mcp__rug__connect" in offered(fake)
    variant.write_text("2")  # the server now describes its tools otherwise
    try:
        restarted = kern.run("%phoenix mcp restart rug", timeout=60)
        assert "tool list changed" in restarted.text(), restarted.text()
        fake.clear()
        fake.script(Turn([text("hi")]))
        again = kern.run("%%phoenix --new\nHello again.", allow_stdin=False, timeout=60)
        assert again.status == "ok"
        assert not [n for n in offered(fake) if n.startswith("mcp__rug__")]
        kern.ok("%phoenix mcp approve rug")
        fake.clear()
        fake.script(Turn([text("hi")]))
        assert kern.run("%%phoenix --new\nAnd again.", timeout=60).status == "ok"
        assert "mcp__rug__connect" in offered(fake)
    finally:
        variant.unlink()


def test_hang_exit_and_mute_servers_end_with_an_error(kern: Kernel, fake: FakeAnthropic) -> None:
    mute_token = f"phoenix-mcp-{uuid.uuid4().hex}"
    configure(
        kern,
        {
            "slow": hostile(timeout=3),
            "mute": {
                "command": sys.executable,
                "args": ["-c", "import time; time.sleep(600)", mute_token],
                "startup_timeout": 3,
            },
        },
    )
    hang = tool_use("mcp__slow__hang", {})
    die = tool_use("mcp__slow__die", {})
    after = tool_use("mcp__slow__env", {})
    fake.script(Turn([hang]), Turn([die]), Turn([after]), Turn([text("went on")]))
    start = time.monotonic()
    cell = kern.run("%%phoenix --new\nCall the slow one.", timeout=120)
    assert cell.status == "ok", cell.error()
    assert "mute failed: no answer within 3 s" in cell.text()
    kern.wait_until(lambda: processes_with(mute_token) == [], 15, "the mute server killed")
    hung = result_of(fake, hang.id)
    assert hung.get("is_error") and "did not answer within 3 s" in text_of(hung)
    died = result_of(fake, die.id)
    assert died.get("is_error") and "exiting mid-call" in text_of(died)
    assert "PATH" in text_of(result_of(fake, after.id))  # restarted at the next use
    print(f"hang + exit + restart turn: {time.monotonic() - start:.1f} s")


def test_interrupt_cancels_a_call_on_the_wire(kern: Kernel, fake: FakeAnthropic) -> None:
    configure(kern, {"h": hostile(timeout=600)})
    fake.script(Turn([text("warm")]))
    assert kern.run("%%phoenix --name cancel-me\nwarm up", timeout=60).status == "ok"
    hang = tool_use("mcp__h__hang", {})
    fake.clear()
    fake.script(Turn([hang]), Turn([text("never")]))
    cell = kern.submit("%%phoenix --name cancel-me\nHang.")
    kern.wait_until(lambda: len(fake.requests) >= 1, 30, "the model's hang call")
    kern.wait_until(
        lambda: "mcp__h__hang" in json.dumps(cell.records()), 30, "the call in the record"
    )
    start = time.monotonic()
    kern.km.interrupt_kernel()
    kern.finish(cell, timeout=30)
    took = time.monotonic() - start
    print(f"interrupt -> cell ended: {took * 1000:.0f} ms")
    assert took < 5.0  # target 1 s; a loaded CI's bound
    seen = tool_use("mcp__h__cancels", {})
    fake.clear()
    fake.script(Turn([seen]), Turn([text("ok")]))
    assert kern.run("%%phoenix --name cancel-me\nWhat was cancelled?", timeout=60).status == "ok"
    assert "hang" in text_of(result_of(fake, seen.id))


@pytest.fixture(scope="module")
def kernel_setup() -> Callable[[Kernel], None]:
    return lambda kernel: None


@pytest.fixture(autouse=True)
def _no_servers_after(kern: Kernel) -> Iterator[None]:
    yield
    kern.run("%config Phoenix.mcp_servers = {}", timeout=30)


def test_no_server_outlives_its_kernel(
    fake: FakeAnthropic, tmp_path: Path, kernel_env: Mapping[str, str]
) -> None:
    token = f"phoenix-mcp-{uuid.uuid4().hex}"
    kernel = Kernel(tmp_path, fake.base_url, extra_env=kernel_env)
    try:
        kernel.ok("%load_ext phoenix_nb")
        kernel.ok(
            "%config Phoenix.mcp_servers = "
            + repr({"k": {"command": sys.executable, "args": [str(HOSTILE), token]}})
        )
        fake.clear()
        fake.script(Turn([text("hi")]))
        assert kernel.run("%%phoenix\nHello.", timeout=120).status == "ok"
        assert processes_with(token), "the server runs while its kernel does"
    finally:
        kernel.shutdown()
    kernel.wait_until(lambda: processes_with(token) == [], 30, "the server to be gone")


def test_a_host_without_namespaces_says_what_a_server_loses(
    fake: FakeAnthropic, tmp_path: Path, kernel_env: Mapping[str, str]
) -> None:
    env = {**kernel_env, "PHOENIX_SANDBOX_NAMESPACES": "off"}  # a lesser host's tier
    kernel = Kernel(tmp_path, fake.base_url, extra_env=env)
    try:
        kernel.ok("%load_ext phoenix_nb")
        kernel.ok("%config Phoenix.mcp_servers = " + repr({"lesser": hostile()}))
        listed = kernel.run("%phoenix mcp", timeout=60)
        assert listed.status == "ok", listed.error()
        assert "NOT here:" in listed.text(), listed.text()
    finally:
        kernel.shutdown()
