"""Commands that do not call the model never wait for the SDK import `%load_ext` starts.

The kernel's environment holds a `sitecustomize` whose import hook holds `anthropic`'s
import on a gate file the test controls (it writes a marker when the import starts):
so the test checks what waits for the SDK, not how long anything takes. While the
gate is closed, `%phoenix new`, `status`, `list` and `history` complete and the SDK is
still not imported; a model turn started then runs once the gate opens.

The first turn after `%load_ext` must wait for that import without holding the kernel's
loop: a task on the loop opens the gate only after it has run several times during the
turn, so a turn that blocked the loop on the import (e.g. on the import lock of a module
the warm-up thread is importing) would never finish.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from phoenix_nb.testing import FakeAnthropic, Turn, text
from phoenix_nb.testing.fake_openai import FakeOpenAI
from tests.notebook.kernel_harness import Kernel, loaded_kernel, settle, state_name

pytestmark = pytest.mark.timeout(240)

REPO = Path(__file__).resolve().parents[2]
WAIT = 60.0  # generous: a command that waited for the gate would never finish

HOOK = '''
"""Test hook: `import anthropic` (or the module named by PHOENIX_TEST_SDK_GATE_MODULE)
runs its module code only once the gate file exists.

It waits in the loader, as a slow import does, not in `find_spec`: Python calls
finders under the global import lock, so waiting there would hold every other
import in every thread, which no real import does.
"""
import importlib.machinery
import os
import sys
import time
from pathlib import Path

_GATE = os.environ.get("PHOENIX_TEST_SDK_GATE")
_HELD = os.environ.get("PHOENIX_TEST_SDK_GATE_MODULE", "anthropic")


class _GatedLoader:
    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        gate = Path(_GATE)
        (gate.parent / "import-started").touch()
        while not gate.exists():
            time.sleep(0.01)
        self._loader.exec_module(module)


class _HoldAnthropic:
    def find_spec(self, name, path=None, target=None):
        if name != _HELD or not _GATE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _GatedLoader(spec.loader)
        return spec


sys.meta_path.insert(0, _HoldAnthropic())
'''


@pytest.fixture(scope="module")
def gate_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("sdk-gate")
    (folder / "sitecustomize.py").write_text(HOOK)
    return folder


@pytest.fixture(scope="module")
def kernel_env(gate_dir: Path) -> Mapping[str, str]:
    return {
        "PYTHONPATH": f"{gate_dir}:{REPO}",
        "PHOENIX_TEST_SDK_GATE": str(gate_dir / "open"),
    }


def sdk_imported(kern: Kernel) -> bool:
    """Whether `anthropic` finished importing (a module held at the gate is in
    sys.modules already, still empty)."""
    return bool(kern.eval("hasattr(__import__('sys').modules.get('anthropic'), 'AsyncAnthropic')"))


def test_commands_without_the_model_do_not_wait_for_the_sdk_import(
    kern: Kernel, fake: FakeAnthropic, gate_dir: Path
) -> None:
    kern.wait_until(
        lambda: (gate_dir / "import-started").exists(), WAIT, "the warm-up to import anthropic"
    )
    created = kern.ok("%phoenix new", timeout=WAIT).text("stdout")
    assert created.startswith("New conversation"), created
    status = kern.ok("%phoenix status", timeout=WAIT).text("stdout")
    assert "state         idle" in status, status
    listed = kern.ok("%phoenix list", timeout=WAIT).text("stdout")
    assert "idle" in listed, listed
    shown = kern.ok("%phoenix history", timeout=WAIT)
    assert shown.records(), "the history record is displayed"
    assert not (gate_dir / "open").exists()
    assert not sdk_imported(kern), "nothing above imported the SDK"

    # A turn started now waits for what is left of that import, then runs.
    fake.script(Turn([text("Hello after the import.")]))
    turn = kern.submit("%%phoenix\nhello")
    (gate_dir / "open").touch()
    kern.finish(turn, timeout=WAIT)
    assert turn.status == "ok", turn.error()
    record = turn.last_bundle()
    assert state_name(record["application/vnd.phoenix.conversation+json"]) == "idle"
    assert "Hello after the import." in record["text/plain"]
    assert len(fake.requests) == 1
    assert sdk_imported(kern)


# Runs before `%load_ext`: when the next `%%phoenix` cell starts, a task on the loop counts
# its own turns and, after TICKS of them, opens the gate the warm-up import waits on.
TICKER = """
import asyncio as _asyncio
from pathlib import Path as _Path
_turn_started = _asyncio.Event()
_ticks_before_gate = []

def _on_cell(info):
    if (info.raw_cell or "").startswith("%%phoenix"):
        _turn_started.set()

get_ipython().events.register("pre_run_cell", _on_cell)

async def _open_gate_after_ticks(gate, ticks):
    await _turn_started.wait()
    for i in range(ticks):
        await _asyncio.sleep(0)  # one turn of the loop: only runs if the cell lets it
        _ticks_before_gate.append(i)
    _Path(gate).touch()

_ticker = _asyncio.get_running_loop().create_task(_open_gate_after_ticks(GATE, TICKS))
"""
TICKS = 20


@pytest.fixture
def gated_kernel(
    request: pytest.FixtureRequest, gate_dir: Path, tmp_path: Path, fake: FakeAnthropic
) -> Iterator[tuple[Kernel, Path]]:
    """A fresh kernel whose warm-up import of `request.param` waits at a gate of its own."""
    fake.clear()
    gate = tmp_path / "gate" / "open"
    gate.parent.mkdir()
    env = {
        "PYTHONPATH": f"{gate_dir}:{REPO}",
        "PHOENIX_TEST_SDK_GATE": str(gate),
        "PHOENIX_TEST_SDK_GATE_MODULE": request.param,
    }
    kern = Kernel(tmp_path / "kernel", fake.base_url, extra_env=env)
    try:
        yield kern, gate
    finally:
        gate.touch()  # a turn that held the loop waits for the import: let it end
        settle(kern)
        kern.shutdown()


@pytest.mark.parametrize(
    "gated_kernel",
    # the SDK itself; and a module of the runtime, which the first cell used to import on
    # the loop while the warm-up thread held its import lock
    ["anthropic", "phoenix_nb.runtime.manager"],
    indirect=True,
)
def test_the_first_turn_waits_for_the_warm_up_import_without_holding_the_loop(
    gated_kernel: tuple[Kernel, Path], fake: FakeAnthropic
) -> None:
    kern, gate = gated_kernel
    kern.ok(f"GATE = {str(gate)!r}\nTICKS = {TICKS}\n" + TICKER)
    kern.ok("%load_ext phoenix_nb")
    kern.wait_until(
        lambda: (gate.parent / "import-started").exists(), WAIT, "the warm-up to reach the gate"
    )
    assert not gate.exists()
    _first_turn_ends_with_the_loop_free(kern, gate, fake, "Hello once the loop was free.")


OPENAI_MODEL = "gpt-test-unknown"


@pytest.fixture
def openai_kernel(gate_dir: Path, tmp_path: Path) -> Iterator[tuple[Kernel, Path, FakeOpenAI]]:
    """A fresh kernel configured for `c.Phoenix.provider = "openai"` (the Chat Completions
    fake) whose `import openai` waits at a gate of its own."""
    gate = tmp_path / "gate" / "open"
    gate.parent.mkdir()
    env = {
        "PYTHONPATH": f"{gate_dir}:{REPO}",
        "PHOENIX_TEST_SDK_GATE": str(gate),
        "PHOENIX_TEST_SDK_GATE_MODULE": "openai",
        "PHOENIX_MODEL": OPENAI_MODEL,
        "OPENAI_API_KEY": "sk-kernel-test",
    }
    with FakeOpenAI(api_key="sk-kernel-test") as fake:
        kern = Kernel(tmp_path / "kernel", "http://127.0.0.1:9", extra_env=env)
        try:
            yield kern, gate, fake
        finally:
            gate.touch()  # a command that held the loop waits for the import: let it end
            settle(kern)
            kern.shutdown()


def test_another_providers_sdk_is_imported_by_the_first_turn_off_the_loop(
    openai_kernel: tuple[Kernel, Path, FakeOpenAI],
) -> None:
    kern, gate, fake = openai_kernel
    kern.ok(f"GATE = {str(gate)!r}\nTICKS = {TICKS}\n" + TICKER)
    kern.ok("%load_ext phoenix_nb")
    kern.ok("%config Phoenix.provider = 'openai'")
    kern.ok(f"%config Phoenix.base_url = {fake.base_url!r}")

    # Commands that never call the model do not import the provider's SDK at all.
    created = kern.ok("%phoenix new", timeout=WAIT).text("stdout")
    assert created.startswith("New conversation"), created
    status = kern.ok("%phoenix status", timeout=WAIT).text("stdout")
    assert "state         idle" in status, status
    listed = kern.ok("%phoenix list", timeout=WAIT).text("stdout")
    assert "idle" in listed, listed
    assert kern.ok("%phoenix history", timeout=WAIT).records(), "the history is displayed"
    assert not (gate.parent / "import-started").exists(), "nothing above imported openai"
    assert not gate.exists()

    # The first turn imports it on a worker thread: a task on the loop opens the gate
    # only after it has run TICKS times during the turn.
    _first_turn_ends_with_the_loop_free(kern, gate, fake, "Hello through Chat Completions.")


def test_a_missing_provider_extra_is_the_turns_error_and_status_still_answers(
    tmp_path: Path,
) -> None:
    env = {"PHOENIX_MODEL": OPENAI_MODEL, "OPENAI_API_KEY": "sk-kernel-test"}
    with loaded_kernel(tmp_path, "http://127.0.0.1:9", extra_env=env) as kern:
        kern.ok("import sys; sys.modules['openai'] = None  # as if the extra were missing")
        kern.ok("%config Phoenix.provider = 'openai'")
        kern.ok("%config Phoenix.base_url = 'http://127.0.0.1:9'")
        turn = kern.run("%%phoenix\nhello", timeout=WAIT)
        assert turn.status == "ok", turn.error()
        shown = turn.last_bundle()["text/plain"]
        assert "pip install 'phoenix_nb[openai]'" in shown, shown
        status = kern.ok("%phoenix status", timeout=WAIT).text("stdout")
        assert "provider" in status and "openai" in status, status


def test_a_provider_configured_before_load_ext_is_imported_by_the_warm_up(
    openai_kernel: tuple[Kernel, Path, FakeOpenAI],
) -> None:
    kern, gate, fake = openai_kernel
    kern.ok(f"GATE = {str(gate)!r}\nTICKS = {TICKS}\n" + TICKER)
    kern.ok(
        "get_ipython().config.Phoenix.provider = 'openai'\n"
        f"get_ipython().config.Phoenix.base_url = {fake.base_url!r}"
    )
    kern.ok("%load_ext phoenix_nb")
    kern.wait_until(
        lambda: (gate.parent / "import-started").exists(), WAIT, "the warm-up to import openai"
    )
    kern.ok("%phoenix new", timeout=WAIT)
    status = kern.ok("%phoenix status", timeout=WAIT).text("stdout")  # no wait for it
    assert "openai" in status, status
    assert not gate.exists()

    fake.script(Turn([text("Hello after the warm-up.")]))
    turn = kern.run("%%phoenix\nhello", timeout=WAIT)  # would hang if the loop were held
    assert turn.status == "ok", turn.error()
    assert kern.eval("len(_ticks_before_gate)") == TICKS
    assert "Hello after the warm-up." in turn.last_bundle()["text/plain"]
    assert len(fake.requests) == 1


def _first_turn_ends_with_the_loop_free(kern: Kernel, gate: Path, fake: Any, answer: str) -> None:
    """The first turn ends, answered once, while a task on the loop opened the held
    import's gate only after running TICKS times during it (a held loop never ends it)."""
    fake.script(Turn([text(answer)]))
    turn = kern.run("%%phoenix\nhello", timeout=WAIT)
    assert turn.status == "ok", turn.error()
    assert gate.exists(), "the loop task opened the gate during the turn"
    assert kern.eval("len(_ticks_before_gate)") == TICKS
    record = turn.last_bundle()
    assert state_name(record["application/vnd.phoenix.conversation+json"]) == "idle"
    assert answer in record["text/plain"]
    assert len(fake.requests) == 1
