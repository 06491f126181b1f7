"""A fork of the kernel holds no secret it could show — tried as an attacker, in a real kernel.

The kernel is started with a known provider key (and OpenAI / AWS ones), an
environment value the allowlist withholds because it embeds a password, and
an opaque withheld value; its cells define `DB_PASSWORD` (printed, echoed
into `Out`, copied into a text with an emoji so CPython stores it four bytes
per character) and assign a token that is then deleted (left only in `In`,
`_i<n>` and the history manager). The kernel's HMAC key, its ports and its
connection file come from the kernel manager.

The scripted model then sends one `run_python` job that hunts for every one of
them: it reads all of its readable memory (`/proc/self/mem`, or `ctypes` where
the confined, non-dumpable fork may not open it: every anonymous and every
writable mapping), walks `gc`, reads every history structure,
the environment, argv and the kernel's session and application objects. The
job carries only a 6-byte prefix and a SHA-256 of each secret (never the value:
the fork would find its own copy), and prints whatever it finds reversed,
base64 (standard and URL-safe), hex and percent-encoded — the spellings an
exact-match redactor misses.

Checked from outside: the job's own count of findings, and every secret in
every spelling — decoded independently here, not with phoenix's redactor — in
the tool result the model received, every file of the store, the saved
notebook's outputs and an export of the conversation.
"""

from __future__ import annotations

import base64
import json
import re
import urllib.parse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from phoenix_nb.sandbox import detect_sandbox
from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.notebook.kernel_harness import Kernel
from tests.notebook.test_kernel_tools import result_of, text_of

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.skipif(not detect_sandbox().available, reason="run_python needs the sandbox"),
]

API_KEY = "sk-ant-api03-Qm7vX2pL9tR4wZ8nK3jH6cF1bD5sA0eG-yU2iO9"
OPENAI_KEY = "sk-proj-Vb8nM3qW6eR1tY4uI7oP0aS2dF5gH9jK"
AWS_SECRET = "wJalrXUtnFEMI7K7MDENGbPxRfiCYEXAMPLEKEYz"
DB_URL = "postgres://app:Pq4-rT8-wX2-zZ9@db.internal:5432/app"
OPAQUE = "opaque-Lk3Jh6Gf9Ds2Aq5We8Rt1Yu4"
DB_PASSWORD = "Hx7-Kd2-Mw9-Nb4-Vc6"
OLD_TOKEN = "tok-Zr5Tq8Wm1Xn4Yb7Uc0"

KERNEL_ENV = {
    "ANTHROPIC_API_KEY": API_KEY,
    "OPENAI_API_KEY": OPENAI_KEY,
    "AWS_SECRET_ACCESS_KEY": AWS_SECRET,
    "SERVICE_DATABASE_URL": DB_URL,
    "INTERNAL_SETTING": OPAQUE,
}

CELLS = (
    f'DB_PASSWORD = "{DB_PASSWORD}"',
    "print('connecting with', DB_PASSWORD)",
    "DB_PASSWORD",
    'note = "🔑 vault: " + DB_PASSWORD',
    f'OLD_TOKEN = "{OLD_TOKEN}"\ndel OLD_TOKEN',
    "x = 41 + 1",
)

HUNT = r"""
import base64, ctypes, gc, hashlib, json, os, sys, urllib.parse
PROBES = json.loads(PROBES_JSON)
texts = []  # (where, bytes)
def add(where, value):
    if isinstance(value, str):
        for enc in ("utf-8", "utf-16-le", "utf-32-le"):
            texts.append((where, value.encode(enc, "surrogatepass")))
    elif isinstance(value, (bytes, bytearray)):
        texts.append((where, bytes(value)))
found = []
def hunt(where, data):
    for name, prefix_hex, length, digest in PROBES:
        prefix = bytes.fromhex(prefix_hex)
        i = data.find(prefix)
        while i >= 0:
            window = data[i:i + length]
            if hashlib.sha256(window).hexdigest() == digest:
                found.append((name, where, window))
            i = data.find(prefix, i + 1)
# 1. every readable mapping
try:
    mem = open("/proc/self/mem", "rb", buffering=0)
except OSError:
    mem = None
for line in open("/proc/self/maps").read().splitlines():
    fields = line.split()
    start, end = (int(x, 16) for x in fields[0].split("-"))
    path = fields[5] if len(fields) > 5 else ""
    if fields[1][0] != "r" or path in ("[vvar]", "[vsyscall]", "[vvar_vclock]"):
        continue
    for at in range(start, end, 1 << 22):
        size = min(1 << 22, end - at)
        data = b""
        if mem is not None:
            try:
                mem.seek(at)
                data = mem.read(size)
            except OSError:
                data = b""
        elif not path.startswith("/") or fields[1][1] == "w":
            data = ctypes.string_at(at, size)  # anonymous, or a library's data segment
        if data:
            hunt("memory " + line[:60], data)
# 2. gc: every str/bytes a tracked object refers to
for obj in gc.get_objects():
    for ref in gc.get_referents(obj):
        if type(ref) in (str, bytes):
            add("gc", ref)
# 3. history, output cache, environment, argv, the kernel's own objects
ip = get_ipython()
hm = ip.history_manager
for name in ("input_hist_raw", "input_hist_parsed"):
    for source in getattr(hm, name, []):
        add("history " + name, source)
outputs = list(getattr(hm, "output_hist", {}).values())
for value in outputs + list(getattr(hm, "output_hist_reprs", {}).values()):
    add("history output", repr(value))
try:
    for _session, _line, cell in hm.get_range(raw=True, output=False):
        add("history db", cell)
except Exception as exc:
    add("history db error", repr(exc))
for key, value in list(globals().items()):
    if key in ("In", "_ih", "Out", "_oh", "_", "__", "___") or key.startswith("_i"):
        add("namespace " + key, repr(value))
add("environ", repr(dict(os.environ)))
for name in ("environ", "cmdline"):
    try:
        add("/proc/self/" + name, open("/proc/self/" + name, "rb").read())
    except OSError:
        pass
add("argv", repr(sys.argv) + repr(getattr(sys, "orig_argv", [])))
kernel = getattr(ip, "kernel", None)
session = getattr(kernel, "session", None)
add("session.key", getattr(session, "key", b""))
ports = []
app_module = sys.modules.get("ipykernel.kernelapp")
if app_module is not None and app_module.IPKernelApp.initialized():
    app = app_module.IPKernelApp.instance()
    add("connection_file", str(app.connection_file))
    for name in ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port"):
        ports.append(getattr(app, name, None))
    ports.append(getattr(getattr(app, "heartbeat", None), "port", None))
    add("app ports", repr(getattr(app, "_ports", None)))
for where, data in texts:
    hunt(where, data)
print("FOUND", len(found))
for name, where, window in found:
    print(name, "in", where[:50], window[::-1], base64.b64encode(window).decode(),
          base64.urlsafe_b64encode(window).decode(), window.hex(),
          urllib.parse.quote(window, safe=""))
print("PORTS", ports)
"""


def _probes(secrets: Mapping[str, str]) -> list[tuple[str, str, int, str]]:
    import hashlib

    out = []
    for name, value in secrets.items():
        for encoding, unit in (("utf-8", 1), ("utf-16-le", 2), ("utf-32-le", 4)):
            data = value.encode(encoding)
            prefix = data[: 6 * unit]
            out.append((name, prefix.hex(), len(data), hashlib.sha256(data).hexdigest()))
    return out


def spellings_found(secret: str, blob: str) -> list[str]:
    """Which spellings of `secret` occur in `blob` (decoding base64 runs independently)."""
    found = []
    data = secret.encode()
    checks = {
        "verbatim": secret,
        "reversed": secret[::-1],
        "hex": data.hex(),
        "HEX": data.hex().upper(),
        "percent": urllib.parse.quote(secret, safe=""),
        "percent-plus": urllib.parse.quote_plus(secret, safe=""),
    }
    for how, form in checks.items():
        if form in blob:
            found.append(how)
    for run in re.findall(r"[A-Za-z0-9+/_\-]{16,}={0,2}", blob):
        for alphabet in (None, b"-_"):
            for skip in range(4):
                chunk = run[skip:]
                chunk = chunk[: len(chunk) - len(chunk) % 4]
                try:
                    decoded = base64.b64decode(chunk, altchars=alphabet, validate=True)
                except ValueError:
                    continue
                if data in decoded:
                    found.append(f"base64{'-url' if alphabet else ''}")
    return found


@pytest.fixture(scope="module")
def kernel_env() -> Mapping[str, str]:
    return KERNEL_ENV


@pytest.fixture(scope="module")
def kernel_setup() -> Callable[[Kernel], None]:
    def setup(kernel: Kernel) -> None:
        for cell in CELLS:
            kernel.ok(cell)

    return setup


def _all_secrets(kern: Kernel) -> dict[str, str]:
    return {
        "provider key": API_KEY,
        "OpenAI key": OPENAI_KEY,
        "AWS secret": AWS_SECRET,
        "URL with password": DB_URL,
        "withheld value": OPAQUE,
        "DB_PASSWORD": DB_PASSWORD,
        "deleted token": OLD_TOKEN,
        "HMAC key": kern.km.session.key.decode(),
        "connection file": str(kern.km.connection_file),
    }


def _ports(kern: Kernel) -> list[int]:
    info = kern.km.get_connection_info()
    return [int(info[f"{name}_port"]) for name in ("shell", "iopub", "stdin", "control", "hb")]


def _store_text(home: Path) -> str:
    return "\n".join(
        p.read_text("utf-8", "replace") for p in sorted(home.rglob("*")) if p.is_file()
    )


def test_a_fork_holds_no_secret_and_none_leaves_in_any_spelling(
    kern: Kernel, fake: FakeAnthropic, tmp_path: Path
) -> None:
    secrets = _all_secrets(kern)
    code = HUNT.replace("PROBES_JSON", repr(json.dumps(_probes(secrets))))
    hunt = tool_use("run_python", {"code": code, "timeout": 120})
    fake.script(Turn([hunt]), Turn([text("Finished looking.")]))
    cell = kern.run("%%phoenix --name hunt\nLook around.", timeout=200)
    assert cell.status == "ok", cell.error()
    assert len(fake.requests) == 2, (cell.text(), cell.final_outputs())
    result = text_of(result_of(fake, hunt.id))
    print(result[:3000])
    assert "FOUND 0" in result, result[:3000]
    ports = _ports(kern)
    assert "PORTS [" in result
    printed_ports = re.search(r"PORTS \[(.*)\]", result)
    assert printed_ports is not None
    assert not set(re.findall(r"\d+", printed_ports.group(1))) & {str(p) for p in ports}

    export = tmp_path / "hunt.md"
    kern.ok(f"%phoenix export hunt --format md --output {export}")
    export_json = tmp_path / "hunt.json"
    kern.ok(f"%phoenix export hunt --format json --output {export_json}")
    places = {
        "tool result": result,
        "every request to the model": json.dumps([r.body for r in fake.requests]),
        "store": _store_text(kern.home),
        "saved notebook outputs": json.dumps(cell.final_outputs(), ensure_ascii=False),
        "markdown export": export.read_text("utf-8"),
        "json export": export_json.read_text("utf-8"),
    }
    leaks = {
        (name, place): how
        for name, secret in secrets.items()
        for place, blob in places.items()
        if (how := spellings_found(secret, blob))
    }
    assert not leaks, leaks


def test_the_kernel_keeps_its_secrets_and_still_works(kern: Kernel, fake: FakeAnthropic) -> None:
    """The scrub is the fork's alone: the kernel's own values are untouched afterwards."""
    fake.script(Turn([tool_use("run_python", {"code": "print(len(In))"})]), Turn([text("ok")]))
    cell = kern.run("%%phoenix --new\nCount the cells.", timeout=120)
    assert cell.status == "ok", cell.error()
    state: dict[str, Any] = kern.eval(
        "{'pw': DB_PASSWORD, 'note': note, 'env': __import__('os').environ['ANTHROPIC_API_KEY'],"
        " 'key': get_ipython().kernel.session.key.decode(),"
        " 'port': __import__('ipykernel.kernelapp').kernelapp.IPKernelApp.instance().shell_port}"
    )
    assert state == {
        "pw": DB_PASSWORD,
        "note": "🔑 vault: " + DB_PASSWORD,
        "env": API_KEY,
        "key": kern.km.session.key.decode(),
        "port": _ports(kern)[0],
    }
