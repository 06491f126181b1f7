"""No HMAC state of the kernel's session survives in a fork's memory — checked, in a real kernel.

jupyter_client signs every message with ``hmac.HMAC(key, digestmod=sha256)``, which
Python builds on OpenSSL: the context keeps SHA-256's state after one block of
``key ^ ipad`` and one of ``key ^ opad``. Those two 32-byte states are enough to sign
any message without the key, so a fork that still held them (in the live object, or
in freed memory of the many copies each signature makes) would leak the key's power.
The fork drops the session's HMAC object (`KernelPort.enter_child`) and scrubs the key;
OpenSSL clears a digest context when it frees it (``OPENSSL_clear_free`` in the
default provider). This test checks the result instead of trusting either: it
computes both states here, from the kernel's key (a SHA-256 compression written from
FIPS 180-4), and the scripted model's `run_python` job searches every readable mapping
of its fork for them, as OpenSSL stores them (eight little-endian words) and
big-endian. The kernel signs many messages before and during the turn.
"""

from __future__ import annotations

import hashlib
import json
import struct

import pytest

from phoenix_nb.sandbox import detect_sandbox
from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.notebook.kernel_harness import Kernel
from tests.notebook.test_fork_secrets import HUNT
from tests.notebook.test_kernel_tools import result_of, text_of

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.skipif(not detect_sandbox().available, reason="run_python needs the sandbox"),
]

_K = struct.unpack(
    ">64I",
    bytes.fromhex(
        "428a2f9871374491b5c0fbcfe9b5dba53956c25b59f111f1923f82a4ab1c5ed5"
        "d807aa9812835b01243185be550c7dc372be5d7480deb1fe9bdc06a7c19bf174"
        "e49b69c1efbe47860fc19dc6240ca1cc2de92c6f4a7484aa5cb0a9dc76f988da"
        "983e5152a831c66db00327c8bf597fc7c6e00bf3d5a7914706ca635114292967"
        "27b70a852e1b21384d2c6dfc53380d13650a7354766a0abb81c2c92e92722c85"
        "a2bfe8a1a81a664bc24b8b70c76c51a3d192e819d6990624f40e3585106aa070"
        "19a4c1161e376c082748774c34b0bcb5391c0cb34ed8aa4a5b9cca4f682e6ff3"
        "748f82ee78a5636f84c878148cc7020890befffaa4506cebbef9a3f7c67178f2"
    ),
)
_H0 = [0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB,
       0x5BE0CD19]  # fmt: skip
_M = 0xFFFFFFFF


def _rotr(x: int, n: int) -> int:
    return ((x >> n) | (x << (32 - n))) & _M


def _compress(state: list[int], block: bytes) -> list[int]:
    """SHA-256's compression of one 64-byte block (FIPS 180-4, 6.2.2)."""
    w = list(struct.unpack(">16I", block))
    for t in range(16, 64):
        s0 = _rotr(w[t - 15], 7) ^ _rotr(w[t - 15], 18) ^ (w[t - 15] >> 3)
        s1 = _rotr(w[t - 2], 17) ^ _rotr(w[t - 2], 19) ^ (w[t - 2] >> 10)
        w.append((w[t - 16] + s0 + w[t - 7] + s1) & _M)
    a, b, c, d, e, f, g, h = state
    for t in range(64):
        t1 = (h + (_rotr(e, 6) ^ _rotr(e, 11) ^ _rotr(e, 25)) + ((e & f) ^ (~e & g)) + _K[t]
              + w[t]) & _M  # fmt: skip
        t2 = ((_rotr(a, 2) ^ _rotr(a, 13) ^ _rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) & _M
        a, b, c, d, e, f, g, h = (t1 + t2) & _M, a, b, c, (d + t1) & _M, e, f, g
    return [(x + y) & _M for x, y in zip(state, (a, b, c, d, e, f, g, h), strict=True)]


def _pads(key: bytes) -> dict[str, list[int]]:
    if len(key) > 64:
        key = hashlib.sha256(key).digest()
    key = key.ljust(64, b"\0")
    return {
        "inner": _compress(_H0, bytes(k ^ 0x36 for k in key)),
        "outer": _compress(_H0, bytes(k ^ 0x5C for k in key)),
    }


def test_the_compression_is_sha256() -> None:
    """The compression above, checked against hashlib on a one-block message."""
    message = b"abc"
    block = message + b"\x80" + b"\0" * (55 - len(message)) + struct.pack(">Q", 8 * len(message))
    assert struct.pack(">8I", *_compress(_H0, block)) == hashlib.sha256(message).digest()


def test_a_fork_holds_no_hmac_state_of_the_session(kern: Kernel, fake: FakeAnthropic) -> None:
    key = kern.km.session.key
    assert len(key) >= 16
    probes = []
    for name, state in _pads(key).items():
        for order, fmt in (("little-endian", "<8I"), ("big-endian", ">8I")):
            data = struct.pack(fmt, *state)
            probes.append(
                (f"{name} pad state {order}", data[:6].hex(), 32, hashlib.sha256(data).hexdigest())
            )
    for _ in range(20):  # many signed messages: many freed HMAC copies
        kern.ok("1 + 1")
    code = HUNT.replace("PROBES_JSON", repr(json.dumps(probes)))
    hunt = tool_use("run_python", {"code": code, "timeout": 120})
    fake.script(Turn([hunt]), Turn([text("Done.")]))
    cell = kern.run("%%phoenix --name hmac\nLook around.", timeout=200)
    assert cell.status == "ok", cell.error()
    result = text_of(result_of(fake, hunt.id))
    print(result[:2000])
    assert "FOUND 0" in result, result[:3000]
    # The search finds the states where they are: in the kernel itself (its live HMAC).
    # Run last: the search keeps what it found in the kernel's namespace.
    control = kern.ok(code).text()
    assert "FOUND 0" not in control and "pad state" in control, control[:2000]
