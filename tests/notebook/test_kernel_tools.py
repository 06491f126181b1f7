"""The kernel tools in a real IPython kernel, driven by the fake Messages API.

A notebook's worth of state is made by ordinary cells (DataFrames, one with
1,700 columns, an array, a dict, `API_TOKEN`, an object whose `__repr__`
appends to a global list, one whose `__repr__` sleeps 30 s, a matplotlib
figure drawn with the kernel's inline backend, a cell that raises
ZeroDivisionError). The fake model then calls each tool; the test reads what
reached the model (the next request's tool_result blocks) and checks the
kernel afterwards: state exactly as before, a later cell runs at once, the
proposed cell arrives as the execute reply's `set_next_input` payload.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from phoenix_nb.sandbox import detect_sandbox
from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.notebook.kernel_harness import Kernel
from tests.tools.kernel_stand_in import alive, descendants, forks_of

pytestmark = pytest.mark.timeout(180)

SECRET = "sk-test-9c1e7a55b3d2f0aa"

SETUP = f"""
import time
import numpy as np
import pandas as pd
import matplotlib.pyplot as plt

df = pd.DataFrame({{"city": ["Oslo", "Lima", "Pune", "Kobe"], "sales": [120.0, 80.5, None, 42.0]}})
wide = pd.DataFrame(np.arange(4 * 1700).reshape(4, 1700),
                    columns=[f"measurement_{{i}}" for i in range(1700)])
arr = np.linspace(-1.0, 1.0, 10_000)
settings = {{"region": "eu", "retries": 3}}
API_TOKEN = "{SECRET}"
calls = []

class Noisy:
    def __repr__(self):
        calls.append("repr")
        return "Noisy()"

class Sleepy:
    def __repr__(self):
        time.sleep(30)
        return "Sleepy()"

noisy = Noisy()
sleepy = Sleepy()
fig, ax = plt.subplots()
ax.plot([1, 2, 3], [2, 4, 3])
ax.set_title("revenue by quarter")
print("setup done")
"""

FAILING = """
def ratio(total, count):
    share = total * 1.0
    return share / count

ratio(10, 0)
"""

STATE = (
    "{'calls': calls, 'names': sorted(k for k in globals() if not k.startswith('_') "
    "and k not in ('In', 'Out', 'exit', 'quit', 'get_ipython')), "
    "'sales': float(df['sales'].sum()), 'rows': len(df), 'arr': float(arr.sum()), "
    "'settings': settings, 'token': API_TOKEN == " + repr(SECRET) + "}"
)


def _notebook_state(k: Kernel) -> None:
    k.ok(SETUP)
    failed = k.run(FAILING)
    assert failed.status == "error" and failed.error()["ename"] == "ZeroDivisionError"


@pytest.fixture(scope="module")
def kernel_setup() -> Callable[[Kernel], None]:
    """The module's kernel holds a notebook's worth of state and one failed cell
    (the shared `kernel`/`kern` fixtures are in tests/notebook/conftest.py)."""
    return _notebook_state


def result_of(fake: FakeAnthropic, tool_use_id: str) -> dict[str, Any]:
    """The tool_result block the model received for one call."""
    for request in fake.requests:
        for message in request.body.get("messages", []):
            content = message.get("content")
            if not isinstance(content, list):
                continue
            for block in content:
                if block.get("type") == "tool_result" and block["tool_use_id"] == tool_use_id:
                    return block
    raise AssertionError(f"no tool_result for {tool_use_id}")


def text_of(block: dict[str, Any]) -> str:
    content = block["content"]
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if b.get("type") == "text")


def images_of(block: dict[str, Any]) -> list[dict[str, Any]]:
    content = block["content"]
    return [b for b in content if b.get("type") == "image"] if isinstance(content, list) else []


def test_the_model_sees_the_kernel_and_the_kernel_stays_as_it_was(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    before = kern.eval(STATE)
    listing = tool_use("inspect_variables", {})
    names = ["df", "wide", "arr", "settings", "API_TOKEN", "noisy", "sleepy", "fig"]
    detail = tool_use("inspect_variables", {"names": names})
    history = tool_use("kernel_history", {"last": 10})
    fake.script(
        Turn([listing]),
        Turn([detail]),
        Turn([history]),
        Turn([text("Done looking.")]),
    )
    cell = kern.run("%%phoenix --name looks\nWhat is in my kernel?", timeout=90)
    assert cell.status == "ok", cell.error()
    after_cell = time.monotonic()
    later = kern.run("1 + 1", timeout=10)
    assert later.status == "ok"
    print(f"a later cell ran {time.monotonic() - after_cell:.3f} s after the turn ended")
    assert time.monotonic() - after_cell < 5  # the 30 s __repr__ never ran in the kernel

    listed = text_of(result_of(fake, listing.id))
    for name in ("df", "wide", "arr", "settings", "noisy", "sleepy", "fig", "calls"):
        assert f"- {name}: " in listed, (name, listed)
    assert "- API_TOKEN: str (value withheld" in listed
    assert "shape 4 × 1,700" in listed
    for internal in ("- np:", "- pd:", "- plt:", "- In:", "- Out:", "- time:"):
        assert internal not in listed

    block = result_of(fake, detail.id)
    summary = text_of(block)
    assert len(summary) <= 20_000
    assert "4 rows × 2 columns" in summary and "sales: float64, 1 null" in summary
    assert "4 rows × 1,700 columns" in summary and "1,660 more columns" in summary
    assert "shape 10,000" in summary and "min -1.0, max 1.0" in summary
    assert "'region': 'eu'" in summary
    assert "API_TOKEN: str — value withheld" in summary
    assert "Noisy()" in summary
    assert "sleepy: not summarised" in summary
    assert "titles ['revenue by quarter']" in summary
    images = images_of(block)
    assert len(images) == 1 and images[0]["source"]["media_type"] == "image/png"

    past = text_of(result_of(fake, history.id))
    assert "ratio(10, 0)" in past and "In [" in past
    assert "[stdout] setup done" in past  # recorded as the kernel sent it
    assert "[error] ZeroDivisionError: float division by zero" in past
    assert "Last exception" in past and "ZeroDivisionError: float division by zero" in past
    assert "in ratio" in past and "return share / count" in past
    assert "count = 0 (int)" in past and "share = 10.0 (float)" in past
    assert 'API_TOKEN = "[REDACTED]"' in past

    everything = json.dumps([r.body for r in fake.requests])
    assert SECRET not in everything
    assert kern.eval(STATE) == before  # the Noisy repr's append happened only in forks


@pytest.mark.skipif(not detect_sandbox().available, reason="run_python needs the sandbox")
@pytest.mark.parametrize("mode", ["restricted", "unrestricted"])
def test_run_python_on_the_live_dataframe_in_both_modes(
    kern: Kernel, fake: FakeAnthropic, mode: str, tmp_path: Any
) -> None:
    before = kern.eval(STATE)
    outside = tmp_path / f"outside-{mode}"
    compute = tool_use(
        "run_python",
        {
            "code": "df['sales'] = df['sales'].fillna(0) * 2\n"
            "settings['region'] = 'us'\nnew_var = 1\ndel arr\n"
            "print('total', df['sales'].sum())\ndf.shape"
        },
    )
    write = tool_use("run_python", {"code": f"open({str(outside)!r}, 'w').write('x')"})
    connect = tool_use(
        "run_python",
        {"code": f"import socket; socket.create_connection(('127.0.0.1', {fake.port}), 2)"},
    )
    kernel_pid = kern.eval("__import__('os').getpid()")
    signal = tool_use(
        "run_python", {"code": f"import os, signal; os.kill({kernel_pid}, signal.SIGINT)"}
    )
    loop = tool_use("run_python", {"code": "while True: pass", "timeout": 1})
    crash = tool_use("run_python", {"code": "import ctypes; ctypes.string_at(0)"})
    exits = tool_use("run_python", {"code": "import os; os._exit(7)"})
    connection = kern.km.connection_file
    hmac_key = kern.km.session.key.decode()
    takeover = tool_use("run_python", {"code": f"print(open({connection!r}).read())"})
    plot = tool_use(
        "run_python", {"code": "plt.figure()\nplt.plot(arr[::100])\nplt.title('arr')\nplt.show()"}
    )
    calls = (compute, write, connect, signal, loop, crash, exits, plot, takeover)
    fake.script(*(Turn([call]) for call in calls), Turn([text("Done.")]))
    cell = kern.run(f"%%phoenix --new --mode {mode}\nTry things on df.", timeout=90)
    assert cell.status == "ok", cell.error()

    computed = text_of(result_of(fake, compute.id))
    assert "total 485.0" in computed and "Result:\n(4, 2)" in computed
    assert "PermissionError" in text_of(result_of(fake, write.id))
    assert not outside.exists()
    refused = text_of(result_of(fake, connect.id))
    assert "Error" in refused and result_of(fake, connect.id)["is_error"]
    signalled = text_of(result_of(fake, signal.id))
    assert "PermissionError" in signalled or "ProcessLookupError" in signalled, signalled
    assert "Timed out after 1 s" in text_of(result_of(fake, loop.id))
    assert "segmentation fault (SIGSEGV)" in text_of(result_of(fake, crash.id))
    assert "exited with status 7" in text_of(result_of(fake, exits.id))
    plotted = result_of(fake, plot.id)
    assert not plotted["is_error"], text_of(plotted)
    assert len(images_of(plotted)) == 1  # shown by the inline backend, captured in the fork
    # The connection file holds the HMAC key that lets anyone run code in the kernel.
    assert result_of(fake, takeover.id)["is_error"]
    assert hmac_key not in json.dumps([r.body for r in fake.requests])
    assert kern.eval(STATE) == before
    assert kern.eval("'new_var' in globals()") is False


def test_proposed_cells_arrive_as_the_set_next_input_payload(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    first = tool_use(
        "propose_cell",
        {"code": "df = df.dropna()", "explanation": "Drop the row without sales."},
    )
    second = tool_use(
        "propose_cell",
        {"code": "df.plot(x='city', y='sales')", "explanation": "Plot sales by city."},
    )
    fake.script(Turn([first]), Turn([second]), Turn([text("Two cells proposed.")]))
    cell = kern.run("%%phoenix --name proposes\nClean and plot df.", timeout=60)
    assert cell.status == "ok", cell.error()
    payloads = [p for p in cell.reply["content"]["payload"] if p["source"] == "set_next_input"]
    assert len(payloads) == 1 and payloads[0]["replace"] is False
    text_ = payloads[0]["text"]
    assert text_.index("# %% Proposal 1 of 2: Drop the row without sales.") < text_.index(
        "df = df.dropna()"
    )
    assert (
        text_.index("df = df.dropna()")
        < text_.index("# %% Proposal 2 of 2")
        < text_.index("df.plot(x='city', y='sales')")
    )
    assert kern.eval("len(df)") == 4  # proposed, not run
    later = kern.run("1 + 1")
    assert not later.reply["content"].get("payload"), "proposals are sent once"


def test_kernel_access_off_keeps_the_tools_declared(kern: Kernel, fake: FakeAnthropic) -> None:
    """Off: the same tools array, an error answer; the switch applies to a running conversation."""
    allowed = tool_use("inspect_variables", {"names": ["df"]})
    fake.script(Turn([allowed]), Turn([text("Looked.")]))
    assert kern.run("%%phoenix --name access\nLook at df.", timeout=60).status == "ok"
    assert not result_of(fake, allowed.id)["is_error"]
    tools_on = fake.requests[0].body["tools"]
    kern.ok('%config Phoenix.kernel_access = "off"')
    try:
        refused = tool_use("inspect_variables", {"names": ["df"]})
        fake.script(Turn([refused]), Turn([text("Cannot look.")]))
        cell = kern.run("%%phoenix --name access\nLook again.", timeout=60)
        assert cell.status == "ok", cell.error()
        block = result_of(fake, refused.id)
        assert block["is_error"] and "Kernel access is off" in text_of(block)
        assert fake.requests[-1].body["tools"] == tools_on  # REQ-BED-017: byte-identical
        assert fake.requests[-1].body["system"] == fake.requests[0].body["system"]
    finally:
        kern.ok('%config Phoenix.kernel_access = "on"')


@pytest.mark.skipif(not detect_sandbox().available, reason="run_python needs the sandbox")
def test_interrupt_kills_a_spinning_run_python_at_once(kern: Kernel, fake: FakeAnthropic) -> None:
    """Kernel interrupt = cancel: the fork and all it started are gone at once, cell stops."""
    kernel_pid = kern.eval("__import__('os').getpid()")
    warm = tool_use("run_python", {"code": "1"})
    fake.script(Turn([warm]), Turn([text("warm")]))
    assert kern.run("%%phoenix --name spin\nwarm up", timeout=60).status == "ok"
    before = descendants(kernel_pid)
    spin = tool_use(
        "run_python",
        {"code": "import subprocess\nsubprocess.Popen(['sleep', '60'])\nwhile True: pass"},
    )
    fake.script(Turn([spin]), Turn([text("never")]))
    cell = kern.submit("%%phoenix --name spin\nSpin.")
    kern.wait_until(
        lambda: len(descendants(kernel_pid) - before) >= 3, 30, "the fork and its sleep"
    )
    forked = forks_of(descendants(kernel_pid) - before)
    start = time.monotonic()
    kern.km.interrupt_kernel()
    # Alive anywhere: the namespace's PID 1 is re-parented to init when the intermediate dies.
    kern.wait_until(lambda: not any(alive(pid) for pid in forked), 30, "the fork to be gone")
    gone = time.monotonic() - start
    kern.finish(cell, timeout=15)
    print(f"interrupt -> fork and its children gone: {gone * 1000:.0f} ms")
    assert cell.status == "error" and "Interrupt" in cell.error()["ename"]
    assert gone < 1.0  # target 100 ms (bench_fork.py); CI bound
    later = kern.run("1 + 1", timeout=10)
    assert later.status == "ok"
