"""The offline demo model in a real kernel: the kernel-tools scene, and what it says after
a cancel or a revert (the demo's words follow the conversation, not its script).

The kernel runs the demo model (no key, no fake server in between): the official SDK
reaches the demo's loopback server, the kernel tools read the real kernel and fork it,
bash runs the real sample project's tests. What reached the model is read from the
store (the tool results are sent as stored); the proposed cell from the execute
reply's `set_next_input` payload, and it is then run to show that it really fixes
the kernel's data.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from phoenix_nb.demo.screenplay import FIXED_LINE
from phoenix_nb.sandbox import detect_sandbox
from phoenix_nb.store import Store
from tests.notebook.kernel_harness import Kernel, state_name

pytestmark = pytest.mark.timeout(240)

SAMPLE = Path(__file__).resolve().parents[2] / "notebooks" / "sample_project"
TURN = 120.0

# The tour's cells (notebooks/tour.ipynb, section 2), as a user runs them.
ORDERS = """
import pandas as pd

orders = pd.DataFrame(
    {
        "item": ["apples", "pears", "plums", "figs"],
        "quantity": [12, 3, 10, 7],
        "unit_price": ["0.40", "1,20", "0.90", "2.10"],
    }
)


def order_total(row):
    return row["quantity"] * float(row["unit_price"])
"""
FAILING = 'orders["total"] = orders.apply(order_total, axis=1)'
ASK = "My last cell failed. Look at `orders` and the traceback, try a fix, and propose a cell."

# A test module for the sample project that blocks in `python -m unittest` while a FIFO
# exists, until its write end opens: the test knows the tool is running (the open
# succeeds only while a reader waits) without a sleep.
BLOCKING_TEST = """
import os
import unittest

FIFO = {fifo!r}


class TestSlow(unittest.TestCase):
    def test_waits_while_the_fifo_exists(self):
        if os.path.exists(FIFO):
            with open(FIFO) as fifo:
                fifo.read()
"""


@pytest.fixture(scope="module")
def kernel_env() -> Mapping[str, str]:
    """No key and no base URL: the demo model, as a newcomer gets it."""
    return {
        "PHOENIX_MODEL": "demo",
        "PHOENIX_DEMO_PACE": "0",
        "ANTHROPIC_API_KEY": "",
        "ANTHROPIC_BASE_URL": "",
    }


def history(kernel: Kernel, slug: str) -> list[dict[str, Any]]:
    with Store(kernel.home) as store:
        conv = store.get_conversation(slug)
        assert conv is not None, slug
        return store.messages(conv["id"])


def tool_results(kernel: Kernel, slug: str) -> list[tuple[str, dict[str, Any]]]:
    """(tool name, stored result) of every tool call of the conversation, in order."""
    messages = history(kernel, slug)
    names = {
        block["id"]: block["name"]
        for m in messages
        if m["message_type"] == "agent"
        for block in m["content"]["blocks"]
        if block.get("type") == "ToolUseBlock"
    }
    return [
        (names[m["content"]["tool_use_id"]], m["content"])
        for m in messages
        if m["message_type"] == "tool"
    ]


def agent_texts(kernel: Kernel, slug: str) -> list[str]:
    return [
        block["text"]
        for m in history(kernel, slug)
        if m["message_type"] == "agent"
        for block in m["content"]["blocks"]
        if block.get("type") == "TextBlock"
    ]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    target = tmp_path / "shop_project"
    shutil.copytree(SAMPLE, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def test_demo_plays_the_kernel_tools_and_proposes_a_working_cell(kern: Kernel) -> None:
    kern.ok(ORDERS)
    failed = kern.run(FAILING)
    assert failed.status == "error" and failed.error()["ename"] == "ValueError"

    cell = kern.run(f"%%phoenix --name kernel-scene\n{ASK}", timeout=TURN)
    assert cell.status == "ok", (cell.error(), cell.text())
    results = tool_results(kern, "kernel-scene")
    names = [name for name, _ in results]
    assert names == [
        "inspect_variables",
        "inspect_variables",
        "kernel_history",
        "run_python",
        "propose_cell",
    ]
    listing, frame, traceback, trial, proposed = (r for _, r in results)
    # What reached the model: the real kernel, read through the tools.
    assert "- orders: pandas.DataFrame, shape 4 × 3" in listing["content"]
    assert "unit_price: str" in frame["content"] or "unit_price: object" in frame["content"]
    assert "1,20" in frame["content"], "the DataFrame's rows, as summarised"
    tb = traceback["content"]
    assert "ValueError: could not convert string to float: '1,20'" in tb
    assert FAILING in tb, "the cell the kernel ran"
    assert "in order_total" in tb and "row" in tb.split("in order_total", 1)[1]
    if detect_sandbox().available:
        assert not trial["is_error"], trial["content"]
        assert "14.7" in trial["content"], "the fork computed the fixed totals"
        said = "\n".join(agent_texts(kern, "kernel-scene"))
        assert "14.7" in said, "the model quoted the result it received"
    else:
        assert trial["is_error"] and "sandbox" in trial["content"]
    assert not proposed["is_error"]

    # The proposal: the cell's payload, its explanation in the record, and it works.
    [payload] = [p for p in cell.reply["content"]["payload"] if p["source"] == "set_next_input"]
    code = payload["text"]
    assert FAILING in code and 'str.replace(",", "."' in code
    record = json.dumps(cell.last_bundle(), ensure_ascii=False)
    assert "decimal commas" in record, "the explanation is shown with the proposed cell"
    assert kern.eval("orders['unit_price'].tolist()")[1] == "1,20", "proposed, not run"
    assert "total" not in kern.eval("list(orders.columns)")
    kern.ok(code)
    totals = kern.eval("[round(t, 2) for t in orders['total']]")
    assert totals == [4.8, 3.6, 9.0, 14.7]
    final = agent_texts(kern, "kernel-scene")[-1]
    assert "What was wrong" in final and "decimal comma" in final


def test_demo_without_an_error_in_the_kernel_says_so(kern: Kernel) -> None:
    """A kernel that raised nothing yet (a fresh kernel would not have): truthful, no fix."""
    kern.ok("import sys; sys.last_value = sys.last_traceback = None; del sys.last_value")
    cell = kern.run(f"%%phoenix --name no-error\n{ASK}", timeout=TURN)
    assert cell.status == "ok", cell.error()
    assert "raised no exception so far" in agent_texts(kern, "no-error")[-1]
    assert [n for n, _ in tool_results(kern, "no-error")][-1] == "kernel_history"


def _open_writer(fifo: Path) -> int | None:
    """The FIFO's write end, once a reader (the blocked test) has it open."""
    try:
        return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # no reader yet
            return None
        raise


@pytest.fixture
def blocking_project(project: Path, tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    fifo = tmp_path / "hold.fifo"
    os.mkfifo(fifo)
    (project / "tests" / "test_slow.py").write_text(BLOCKING_TEST.format(fifo=str(fifo)))
    yield project, fifo
    fifo.unlink(missing_ok=True)


def test_demo_answers_the_new_message_after_a_cancel(
    kern: Kernel, blocking_project: tuple[Path, Path]
) -> None:
    project, fifo = blocking_project
    ask = "The tests fail. Please fix them."
    since = time.monotonic()
    cell = kern.submit(f"%%phoenix --name after-cancel --mode unrestricted --cwd {project}\n{ask}")
    writer: list[int] = []

    def test_running() -> bool:
        fd = _open_writer(fifo)
        if fd is not None:
            writer.append(fd)
        return bool(writer)

    kern.wait_until(test_running, TURN, "the demo's test run to block on the FIFO")
    try:
        kern.click(kern.wait_for_button("Cancel", since))
        kern.finish(cell, timeout=TURN)
    finally:
        os.close(writer[0])
    assert cell.status == "ok", cell.error()
    assert state_name(cell.last_bundle()["application/vnd.phoenix.conversation+json"]) == "idle"
    cancelled = [r for n, r in tool_results(kern, "after-cancel") if r["is_error"]]
    assert [r["content"] for r in cancelled] == [
        "Cancelled by the user while this tool was running."
    ]
    said_before = len(agent_texts(kern, "after-cancel"))

    fifo.unlink()  # the tests run through from now on
    again = kern.run(f"%%phoenix\n{ask}", timeout=TURN)
    assert again.status == "ok", again.error()
    after = agent_texts(kern, "after-cancel")[said_before:]
    assert after[0].startswith("(You cancelled my last step"), after[0]
    assert not any("no failing unittest test" in text for text in after), after
    assert "All 7 tests pass now" in after[-1], after[-1]
    assert FIXED_LINE in (project / "shop" / "pricing.py").read_text()


def test_demo_after_a_revert_does_not_claim_the_reverted_change(
    kern: Kernel, project: Path
) -> None:
    pricing = project / "shop" / "pricing.py"
    shipped = pricing.read_text()
    fixed = kern.run(
        f"%%phoenix --name after-revert --mode unrestricted --cwd {project}\n"
        "The tests fail. Please fix them.",
        timeout=TURN,
    )
    assert fixed.status == "ok", fixed.error()
    assert FIXED_LINE in pricing.read_text()
    reverted = kern.ok("%phoenix revert")
    assert "Reverted to checkpoint" in reverted.text(), reverted.text()
    assert pricing.read_text() == shipped

    asked = kern.run("%%phoenix\nWhat did you change?", timeout=TURN)
    assert asked.status == "ok", asked.error()
    answer = agent_texts(kern, "after-revert")[-1]
    assert "you reverted that" in answer and "I have changed nothing" in answer, answer
    assert "now starts at 10 items" not in answer, answer
