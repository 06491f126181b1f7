"""The phoenix gateway's cost: a streamed turn through it against the same turn direct.

The gateway runs as its own process, served as `python -m phoenix_nb.hub.gateway`
serves it (`serve`: uvloop where installed, as `phoenix_nb[hub]` installs it), with a
table of 20 users' tokens in place of the Hub (the Hub's token check is cached by HubAuth, so a turn
pays it once a minute); the fake upstream runs in this process and checks the
admin's key. Measured in the same run, alternating, best and median of several
rounds: time to first text and total time of one streamed turn (through the real
provider, `AnthropicProvider`), then 20 users' turns at once through one gateway
process against the same 20 direct. Target: through <= 1.2x direct.

A bare pass-through (aiohttp on the same loop, one shared upstream session, nothing
checked, metered or written) runs beside it as the floor of any Python hop on this machine: what
the gateway adds above that floor is its own cost; what the floor adds above
direct is the hop's (another process, two more HTTP parses, its wake-ups).

Run: .venv/bin/python tests/benchmarks/bench_gateway.py [tokens] [rounds]
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from phoenix_nb.core.values import Usage
from phoenix_nb.llm.provider import AnthropicProvider, LlmRequest
from phoenix_nb.llm.stream import LlmOutcome, TextDelta
from phoenix_nb.testing import FakeAnthropic, Turn, text

ADMIN_KEY = "sk-ant-bench-admin-0123456789"
USERS = {f"tok-{i:02d}-0123456789": f"user-{i:02d}" for i in range(20)}
SERVE = """
import sys, json
from phoenix_nb.hub import AuditLog, Gateway
from phoenix_nb.hub.gateway import serve
from phoenix_nb.testing.hub import TokenTable
upstream, port, audit, users, key = sys.argv[1:6]
gateway = Gateway(upstream=upstream, upstream_key=key, policy=None,
                  auth=TokenTable(json.loads(users)), audit=AuditLog(audit))
serve(gateway, "127.0.0.1", int(port))
"""


BARE = """
import sys
from aiohttp import ClientSession, web
from phoenix_nb.hub.gateway import _event_loop  # the gateway's own loop (uvloop where installed)
upstream, port, key = sys.argv[1:4]
state = {}
async def handle(request):
    if request.path == "/spend":
        return web.json_response({}, status=401)
    if "session" not in state:
        state["session"] = ClientSession(auto_decompress=False)
    body = await request.read()
    skip = ("host", "content-length", "x-api-key", "accept-encoding", "connection")
    headers = {k: v for k, v in request.headers.items() if k.lower() not in skip}
    headers["x-api-key"] = key
    async with state["session"].post(upstream + request.path, data=body, headers=headers) as up:
        response = web.StreamResponse(status=up.status)
        response.content_type = up.content_type
        await response.prepare(request)
        async for chunk in up.content.iter_any():
            await response.write(chunk)
        await response.write_eof()
        return response
async def close(_app):
    if "session" in state:
        await state["session"].close()
app = web.Application()
app.router.add_route("*", "/{tail:.*}", handle)
app.on_cleanup.append(close)
web.run_app(app, host="127.0.0.1", port=int(port), print=None, loop=_event_loop())
"""


def _wait_listening(url: str) -> None:
    for _ in range(300):
        try:
            urllib.request.urlopen(url + "/spend", timeout=1)
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.1)


def _cpu_ns(pid: int) -> int:
    """CPU time the process has used so far, all threads (ns; /proc's schedstat): what
    the gateway costs per turn, much less at the scheduler's mercy than wall time."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):  # a thread that ended
            total += int((task / "schedstat").read_text().split()[0])
    return total


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _request(tokens: int) -> LlmRequest:
    return LlmRequest(
        model="claude-sonnet-4-5",
        system="bench",
        messages=[{"role": "user", "content": f"write {tokens} tokens"}],
        max_tokens=tokens * 2,
    )


async def one_turn(url: str, key: str, tokens: int) -> tuple[float, float]:
    """(time to first text, total) of one streamed turn."""
    provider = AnthropicProvider(api_key=key, base_url=url, stall_timeout=60)
    await provider._client()  # the SDK's client is built before the clock starts
    start = time.perf_counter()
    first = None
    outcome = None
    async for update in provider.stream(_request(tokens)):
        if first is None and isinstance(update, TextDelta):
            first = time.perf_counter() - start
        if isinstance(update, LlmOutcome):
            outcome = update
    total = time.perf_counter() - start
    await provider.aclose()
    assert outcome is not None and outcome.response is not None, outcome
    assert first is not None
    return first, total


async def many(url: str, keys: list[str], tokens: int) -> float:
    start = time.perf_counter()
    await asyncio.gather(*(one_turn(url, key, tokens) for key in keys))
    return time.perf_counter() - start


def main() -> None:
    tokens = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    answer = "word " * tokens  # ~1 token a word, in chunks of 20 characters
    folder = Path(tempfile.mkdtemp(prefix="bench-gateway-"))
    with FakeAnthropic(
        api_key=ADMIN_KEY,
        default=Turn([text(answer, chunk=20)], usage=Usage(input_tokens=50, output_tokens=tokens)),
    ) as fake:
        port = _port()
        gateway = subprocess.Popen(
            [
                sys.executable,
                "-c",
                SERVE,
                fake.base_url,
                str(port),
                str(folder / "audit.jsonl"),
                json.dumps(USERS),
                ADMIN_KEY,
            ],
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        )
        url = f"http://127.0.0.1:{port}"
        bare_port = _port()
        bare = subprocess.Popen(
            [sys.executable, "-c", BARE, fake.base_url, str(bare_port), ADMIN_KEY]
        )
        bare_url = f"http://127.0.0.1:{bare_port}"
        try:
            _wait_listening(url)
            _wait_listening(bare_url)
            key = next(iter(USERS))
            direct: list[tuple[float, float]] = []
            through: list[tuple[float, float]] = []
            floor: list[tuple[float, float]] = []
            asyncio.run(one_turn(fake.base_url, ADMIN_KEY, tokens))  # warm every path
            asyncio.run(one_turn(url, key, tokens))
            asyncio.run(one_turn(bare_url, "anyone", tokens))
            cpu_single = cpu_bare = 0
            for _ in range(rounds):
                direct.append(asyncio.run(one_turn(fake.base_url, ADMIN_KEY, tokens)))
                before = _cpu_ns(gateway.pid)
                through.append(asyncio.run(one_turn(url, key, tokens)))
                cpu_single += _cpu_ns(gateway.pid) - before
                before = _cpu_ns(bare.pid)
                floor.append(asyncio.run(one_turn(bare_url, "anyone", tokens)))
                cpu_bare += _cpu_ns(bare.pid) - before
            keys = list(USERS)
            crowd_direct, crowd_through = [], []
            cpu_crowd, crowd_rounds = 0, max(3, rounds // 2)
            for _ in range(crowd_rounds):
                crowd_direct.append(asyncio.run(many(fake.base_url, [ADMIN_KEY] * 20, tokens)))
                before = _cpu_ns(gateway.pid)
                crowd_through.append(asyncio.run(many(url, keys, tokens)))
                cpu_crowd += _cpu_ns(gateway.pid) - before
        finally:
            for process in (gateway, bare):
                process.terminate()
                process.wait(30)
        lines = [json.loads(x) for x in (folder / "audit.jsonl").read_text().splitlines()]
    crowd_users = {x["user"] for x in lines[-20:]}
    assert len(crowd_users) == 20, crowd_users
    load = os.getloadavg()[0]
    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio's own (no uvloop)"
    print(
        f"one streamed turn of ~{tokens} tokens, {rounds} alternating rounds; load {load:.2f};"
        f" the gateway's loop: {loop}"
    )
    for name, index in (("time to first text", 0), ("total", 1)):
        d = [x[index] for x in direct]
        t = [x[index] for x in through]
        f = [x[index] for x in floor]
        md, mt, mf = statistics.median(d), statistics.median(t), statistics.median(f)
        print(
            f"  {name:20s} direct best {min(d) * 1000:7.1f} ms  median {md * 1000:7.1f} ms"
            f" | gateway best {min(t) * 1000:7.1f} ms  median {mt * 1000:7.1f} ms"
            f" | ratio best {min(t) / min(d):.2f}x  median {mt / md:.2f}x"
            f" | bare hop ratio best {min(f) / min(d):.2f}x  median {mf / md:.2f}x"
        )
    best = min(crowd_through) / min(crowd_direct)
    median = statistics.median(crowd_through) / statistics.median(crowd_direct)
    print(
        f"20 users' turns at once through one gateway: direct best {min(crowd_direct):.2f} s,"
        f" gateway best {min(crowd_through):.2f} s, ratio {best:.2f}x (median {median:.2f}x);"
        f" {len(lines)} audit lines, 20 distinct users in the last 20"
    )
    print(
        f"gateway process CPU per turn: {cpu_single / rounds / 1e6:.2f} ms alone,"
        f" {cpu_crowd / crowd_rounds / 20 / 1e6:.2f} ms in the crowd;"
        f" a bare pass-through: {cpu_bare / rounds / 1e6:.2f} ms alone"
    )
    print("target: <= 1.2x")


if __name__ == "__main__":
    main()
