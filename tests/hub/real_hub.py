"""A real JupyterHub for tests: three Unix users, LocalProcessSpawner, the phoenix
gateway as a managed service, and a client for a user's server (REST + kernel
websocket).

The users cannot run the test's python (it lives under /root, mode 700), so the
Hub, its proxy (`configurable-http-proxy`, the Python port: CI hides Node), the
users' servers and the gateway run from a venv made from /usr/bin/python3 that
every user can run. The venv's third-party packages are installed once per set of
pins (kept in /var/tmp); phoenix_nb itself is copied in fresh each run from the
checkout, so the tier always tests the code under test.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tomllib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import ClientSession, ClientTimeout, WSMsgType
from filelock import FileLock

REPO = Path(__file__).resolve().parents[2]
SYSTEM_PYTHON = "/usr/bin/python3"
HUB_PINS = ("jupyterhub==6.1.1", "configurable-http-proxy==0.4.0")
USERS = ("phx-a", "phx-b", "phx-c")


def _pins() -> list[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    # the MCP SDK too: user A's kernel starts an MCP server in the tier; the hub extra
    # as an admin installs it (uvloop for the gateway), with the Hub's pinned versions
    extras = project["optional-dependencies"]
    return [*project["dependencies"], *extras["mcp"], *extras["hub"], *HUB_PINS]


def shared_venv() -> Path:
    """The venv every user can run, with phoenix_nb's dependencies, jupyterhub and the
    proxy (made once per set of pins), and this checkout's phoenix_nb (copied each run)."""
    pins = _pins()
    key = hashlib.sha256(json.dumps([pins, SYSTEM_PYTHON]).encode()).hexdigest()[:12]
    venv = Path(f"/var/tmp/phoenix-hub-venv-{key}")
    with FileLock(f"{venv}.lock"):
        if not (venv / "ready").exists():
            shutil.rmtree(venv, ignore_errors=True)  # a build cut short
            subprocess.run([SYSTEM_PYTHON, "-m", "venv", str(venv)], check=True)
            subprocess.run(
                [str(venv / "bin/python"), "-m", "pip", "install", "-q", *pins],
                check=True,
                timeout=1200,
            )
            (venv / "ready").write_text("\n".join(pins))
    site = Path(
        subprocess.run(
            [
                str(venv / "bin/python"),
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    target = site / "phoenix_nb"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(
        REPO / "phoenix_nb",
        target,
        ignore=shutil.ignore_patterns("__pycache__", "labextension", "node_modules"),
    )
    subprocess.run(["chmod", "-R", "a+rX", str(venv)], check=True)
    return venv


def make_users() -> dict[str, pwd.struct_passwd]:
    """The three users (test-only accounts), each with a fresh home only they can enter
    (as an admin would set: HOME_MODE 0700). No process of theirs may be running."""
    found = {}
    for name in USERS:
        try:
            pwd.getpwnam(name)
        except KeyError:
            subprocess.run(["useradd", "-m", "-s", "/bin/bash", name], check=True)
        entry = pwd.getpwnam(name)
        # a fresh home each run: an earlier run's store and notebooks would carry over
        shutil.rmtree(entry.pw_dir, ignore_errors=True)
        shutil.copytree("/etc/skel", entry.pw_dir, symlinks=True)
        subprocess.run(["chown", "-R", f"{entry.pw_uid}:{entry.pw_gid}", entry.pw_dir], check=True)
        os.chmod(entry.pw_dir, 0o700)
        found[name] = entry
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Hub:
    """A started Hub and what a test needs to drive it."""

    process: subprocess.Popen[bytes]
    url: str
    admin_token: str
    folder: Path
    gateway_url: str
    log: Path

    def api(self, path: str) -> str:
        return f"{self.url}/hub/api{path}"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"token {self.admin_token}"}

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(30)


HUB_CONFIG = """\
import json
c = get_config()  # noqa
s = json.loads({settings!r})
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = s["port"]
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = s["hub_port"]
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:%d" % s["proxy_api_port"]
c.ConfigurableHTTPProxy.command = [s["venv"] + "/bin/configurable-http-proxy"]
c.ConfigurableHTTPProxy.should_start = True
c.JupyterHub.db_url = "sqlite:///" + s["folder"] + "/hub.sqlite"
c.JupyterHub.cookie_secret_file = s["folder"] + "/cookie_secret"
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allowed_users = set(s["users"])
c.JupyterHub.spawner_class = "localprocess"
if s["cgroups"]:
    from jupyterhub.spawner import LocalProcessSpawner

    # servers start in a cgroup their user owns (what SystemdSpawner's Delegate=yes
    # gives): joined while still root, then the uid
    class DelegatingSpawner(LocalProcessSpawner):

        def make_preexec_fn(self, name):
            become = super().make_preexec_fn(name)
            procs = s["cgroups"].get(name, [])

            def preexec():
                for path in procs:
                    with open(path, "w") as fh:
                        fh.write("0")
                become()

            return preexec

    c.JupyterHub.spawner_class = DelegatingSpawner
c.Spawner.cmd = [s["venv"] + "/bin/jupyterhub-singleuser"]
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 180
c.Spawner.default_url = "/lab"
# each user's own policy file (the same gateway and budgets; B may not go Unrestricted)
c.Spawner.environment = {{
    "PHOENIX_POLICY": lambda spawner: s["policies"][spawner.user.name],
    **s["user_env"],
}}
# the server's token may reach the gateway (docs/jupyterhub.md)
c.Spawner.server_token_scopes = [
    "access:servers!server", "users:activity!user",
    "access:services!service=phoenix-gateway",
]
c.JupyterHub.load_roles = [
    {{"name": "user", "scopes": ["self", "access:services!service=phoenix-gateway"]}},
    {{"name": "tests", "scopes": ["admin:users", "admin:servers", "access:servers",
                                 "read:users", "tokens"], "services": ["tests"]}},
]
c.JupyterHub.services = [
    {{"name": "tests", "api_token": s["admin_token"]}},
    {{
        "name": "phoenix-gateway",
        "url": s["gateway_url"],
        "command": [s["venv"] + "/bin/python", "-m", "phoenix_nb.hub.gateway"],
        "environment": s["gateway_env"],
        "oauth_no_confirm": True,
    }},
]
"""


async def start_hub(
    venv: Path,
    folder: Path,
    *,
    policies: Mapping[str, str],
    gateway_env: Mapping[str, str],
    gateway_port: int,
    user_env: Mapping[str, str],
    cgroups: Mapping[str, list[str]] | None = None,
) -> Hub:
    """`cgroups`: per user, the `cgroup.procs` files of groups delegated to them, which
    their servers join as they start (None: the servers stay in the Hub's groups)."""
    port = free_port()
    settings = {
        "port": port,
        "hub_port": free_port(),
        "proxy_api_port": free_port(),
        "venv": str(venv),
        "folder": str(folder),
        "users": list(USERS),
        "policies": dict(policies),
        "gateway_url": f"http://127.0.0.1:{gateway_port}",
        "gateway_env": dict(gateway_env),
        "user_env": dict(user_env),
        "cgroups": {user: list(paths) for user, paths in (cgroups or {}).items()},
        "admin_token": uuid.uuid4().hex,
    }
    config = folder / "jupyterhub_config.py"
    config.write_text(HUB_CONFIG.format(settings=json.dumps(settings)))
    config.chmod(0o600)  # it holds the admin's key for the gateway
    log = folder / "hub.log"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "PHOENIX_", "JUPYTER"))
    }
    env["PATH"] = f"{venv}/bin:/usr/bin:/bin"
    process = subprocess.Popen(
        [str(venv / "bin/jupyterhub"), "-f", str(config)],
        cwd=folder,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    hub = Hub(
        process,
        f"http://127.0.0.1:{port}",
        settings["admin_token"],
        folder,
        settings["gateway_url"],
        log,
    )
    async with ClientSession(timeout=ClientTimeout(total=10)) as http:
        for _ in range(600):  # 120 s
            if process.poll() is not None:
                raise RuntimeError(f"the Hub exited: {log.read_text()[-3000:]}")
            try:
                async with http.get(hub.api("/"), headers=hub.headers) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            await asyncio.sleep(0.2)
        else:
            hub.stop()
            raise RuntimeError(f"the Hub did not answer in 120 s: {log.read_text()[-3000:]}")
        for _ in range(600):  # the gateway, started by the Hub
            try:
                async with http.get(hub.gateway_url + "/spend") as r:
                    if r.status == 401:
                        return hub
            except OSError:
                pass
            await asyncio.sleep(0.2)
    hub.stop()
    raise RuntimeError(f"the gateway did not answer in 120 s: {log.read_text()[-3000:]}")


@dataclass
class Execution:
    outputs: list[dict[str, Any]] = field(default_factory=list)
    reply: dict[str, Any] | None = None

    @property
    def said(self) -> str:
        return json.dumps([o["content"] for o in self.outputs], default=str)

    @property
    def stdout(self) -> str:
        return "".join(
            o["content"].get("text", "") for o in self.outputs if o["msg_type"] == "stream"
        )


class UserKernel:
    """One notebook of one user: its session on the user's server, and a websocket."""

    def __init__(self, hub: Hub, user: str, http: ClientSession) -> None:
        self.hub, self.user, self.http = hub, user, http
        self.base = f"{hub.url}/user/{user}"
        self.kernel_id = ""
        self.session = uuid.uuid4().hex
        self.ws: Any = None

    async def start_server(self) -> None:
        async with self.http.post(
            self.hub.api(f"/users/{self.user}/server"), headers=self.hub.headers
        ) as r:
            said = await r.text()
            assert r.status in (201, 202, 400), (said, self.hub.log.read_text()[-3000:])
        for _ in range(900):  # 180 s
            async with self.http.get(
                self.hub.api(f"/users/{self.user}"), headers=self.hub.headers
            ) as r:
                model = await r.json()
            server = (model.get("servers") or {}).get("")
            if server and server.get("ready"):
                return
            await asyncio.sleep(0.2)
        raise RuntimeError(
            f"{self.user}'s server did not start: {self.hub.log.read_text()[-3000:]}"
        )

    async def open_notebook(self, name: str) -> None:
        """A notebook in the user's home and a kernel for it (the sessions API, as a front end)."""
        notebook = {
            "type": "notebook",
            "content": {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5},
        }
        async with self.http.put(
            f"{self.base}/api/contents/{name}", json=notebook, headers=self.hub.headers
        ) as r:
            assert r.status in (200, 201), await r.text()
        body = {"path": name, "name": name, "type": "notebook", "kernel": {"name": "python3"}}
        async with self.http.post(
            f"{self.base}/api/sessions", json=body, headers=self.hub.headers
        ) as r:
            assert r.status == 201, await r.text()
            self.kernel_id = (await r.json())["kernel"]["id"]
        ws_url = (
            self.base.replace("http", "ws", 1)
            + f"/api/kernels/{self.kernel_id}/channels?session_id={self.session}"
        )
        self.ws = await self.http.ws_connect(ws_url, headers=self.hub.headers, max_msg_size=0)

    async def run(self, code: str, timeout: float = 120) -> Execution:
        msg_id = uuid.uuid4().hex
        await self.ws.send_str(
            json.dumps(
                {
                    "header": {
                        "msg_id": msg_id,
                        "username": self.user,
                        "session": self.session,
                        "msg_type": "execute_request",
                        "version": "5.3",
                        "date": "",
                    },
                    "parent_header": {},
                    "metadata": {},
                    "channel": "shell",
                    "buffers": [],
                    "content": {
                        "code": code,
                        "silent": False,
                        "store_history": True,
                        "user_expressions": {},
                        "allow_stdin": False,
                        "stop_on_error": True,
                    },
                }
            )
        )
        execution = Execution()
        idle = False
        async with asyncio.timeout(timeout):
            while execution.reply is None or not idle:
                msg = await self.ws.receive()
                if msg.type != WSMsgType.TEXT:
                    raise RuntimeError(f"the kernel websocket closed: {msg}")
                data = json.loads(msg.data)
                if data.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                kind = data["msg_type"]
                if kind == "execute_reply":
                    execution.reply = data["content"]
                elif kind == "status":
                    idle = data["content"]["execution_state"] == "idle"
                elif kind in (
                    "stream",
                    "display_data",
                    "update_display_data",
                    "execute_result",
                    "error",
                ):
                    execution.outputs.append(data)
        return execution

    async def ok(self, code: str, timeout: float = 120) -> Execution:
        execution = await self.run(code, timeout)
        assert execution.reply and execution.reply["status"] == "ok", execution.said
        return execution

    async def eval(self, expression: str) -> Any:
        execution = await self.ok(f"import json as _j; print(_j.dumps({expression}))")
        return json.loads(execution.stdout.strip().splitlines()[-1])


def processes_of(uid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def environ_of(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def is_root() -> bool:
    return os.geteuid() == 0 and sys.platform == "linux"
