"""The four kernel tools over a `DictKernel` (a real KernelPort of plain data), real forks.

The real-kernel path (IPython, ZMQ, the fake Messages API) is
tests/notebook/test_kernel_tools.py; here each tool's contract is checked
directly: bounds, secrets, isolation, errors, both modes.
"""

from __future__ import annotations

import asyncio
import base64
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from phoenix_nb.commands import CommandRunner
from phoenix_nb.core.values import Mode
from phoenix_nb.sandbox import SandboxInfo, detect_sandbox
from phoenix_nb.tools.base import ToolContext
from phoenix_nb.tools.kernel import (
    InspectVariablesTool,
    KernelHistoryTool,
    ProposeCellTool,
    RunPythonTool,
)
from phoenix_nb.tools.kernel.access import MAX_OUTPUT, redact
from phoenix_nb.tools.kernel.fork import sandbox_ready
from phoenix_nb.tools.kernel.summarize import list_variables, looks_secret
from phoenix_nb.tools.kernel_port import (
    CellOutput,
    DictKernel,
    HistoryEntry,
    LastException,
)

SECRET = "sk-live-4f9a8b7c6d5e"
MODES = (Mode.RESTRICTED, Mode.UNRESTRICTED)
needs_sandbox = pytest.mark.skipif(
    not (detect_sandbox().available and sandbox_ready()), reason="no kernel sandbox"
)


class Sleepy:
    def __repr__(self) -> str:
        time.sleep(30)
        return "finally"


class Mutating:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def __repr__(self) -> str:
        self.log.append("repr ran")
        return "Mutating()"


def divide(a: int, b: int) -> float:
    scale = 10
    return a * scale / b


def make_kernel() -> DictKernel:
    log: list[str] = []
    figure = Figure()
    axes = figure.add_subplot()
    axes.plot([1, 2, 3], [3, 1, 2])
    axes.set_title("sales")
    ns: dict[str, Any] = {
        "df": pd.DataFrame({"price": [1.5, 2.5, None, 4.0], "city": ["a", "b", "c", "d"]}),
        "wide": pd.DataFrame(np.arange(3 * 1700).reshape(3, 1700)),
        "arr": np.linspace(0, 1, 1000),
        "config": {"host": "db", "password": "hunter2-db-pass"},
        "API_TOKEN": SECRET,
        "blob": f"the token is {SECRET} here",
        "log": log,
        "mutating": Mutating(log),
        "sleepy": Sleepy(),
        "fig": figure,
        "np": np,
        "_private": 1,
        "In": ["", "x = 1"],
    }
    try:
        divide(1, 0)
    except ZeroDivisionError as exc:
        error = LastException(type(exc), exc, exc.__traceback__, 7)
    return DictKernel(
        namespace=ns,
        entries=[
            HistoryEntry(5, f'API_TOKEN = "{SECRET}"'),
            HistoryEntry(6, "df = load()\ndf.head()", (CellOutput("result", "   price city"),)),
            HistoryEntry(7, "divide(1, 0)", (CellOutput("error", "ZeroDivisionError: ..."),)),
        ],
        exception=error,
        hidden=frozenset({"In"}),
    )


def ctx_for(kernel: DictKernel | None, mode: Mode = Mode.RESTRICTED, **kw: Any) -> ToolContext:
    return ToolContext(
        cwd=Path.cwd(),
        mode=mode,
        commands=CommandRunner(group="conv-1", info=kw.pop("sandbox", detect_sandbox())),
        conversation_id="conv-1",
        kernel=kernel,
        **kw,
    )


@pytest.fixture
def kernel() -> DictKernel:
    return make_kernel()


# ------------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("API_TOKEN", True),
        ("apiKey", True),
        ("db_password", True),
        ("DB_PASS", True),
        ("github_pat", True),
        ("sentryDsn", True),
        ("session_cookie", True),
        ("aws_credentials", True),
        ("Auth", True),
        ("passenger", False),
        ("monkey", False),
        ("keyboard", False),
        ("tokenizer", False),
        ("df", False),
        ("path", False),
    ],
)
def test_secret_names_are_whole_name_parts(name: str, secret: bool) -> None:
    assert looks_secret(name) is secret


# ------------------------------------------------------------------- inspect_variables


@pytest.mark.parametrize("mode", MODES)
async def test_listing_is_the_users_variables_largest_first(kernel: DictKernel, mode: Mode) -> None:
    result = await InspectVariablesTool().run({}, ctx_for(kernel, mode), "t")
    assert not result.is_error, result.content
    text = result.content
    listed = [line.split(":")[0][2:] for line in text.splitlines() if line.startswith("- ")]
    assert listed[:2] == ["wide", "arr"]  # 40 KB, 8 KB
    assert set(listed) >= {"df", "config", "API_TOKEN", "blob", "log", "fig", "sleepy"}
    assert not {"np", "_private", "In"} & set(listed)
    assert "shape 3 × 1,700" in text and "dtype float64" in text
    assert "API_TOKEN: str (value withheld" in text
    assert SECRET not in text


async def test_named_summaries_are_bounded_and_withhold_secrets(kernel: DictKernel) -> None:
    names = ["df", "wide", "arr", "config", "API_TOKEN", "blob", "mutating"]
    result = await InspectVariablesTool().run({"names": names}, ctx_for(kernel), "t")
    text = result.content
    assert not result.is_error, text
    assert len(text) <= MAX_OUTPUT
    assert "4 rows × 2 columns" in text and "price: float64, 1 null" in text
    assert "describe()" in text and "mean" in text
    assert "3 rows × 1,700 columns" in text and "1,660 more columns" in text
    assert "shape 1,000" in text and "min 0.0, max 1.0" in text
    assert "hunter2-db-pass" not in text and "'password': [withheld" in text
    # blob holds the token verbatim: the fork starred it in its memory before summarising
    assert SECRET not in text and "*" * len(SECRET) in text
    assert "API_TOKEN: str — value withheld" in text
    assert "Mutating()" in text
    assert kernel.namespace["log"] == []  # the repr ran in the fork only


async def test_a_1700_column_frame_alone_stays_within_the_bound(kernel: DictKernel) -> None:
    kernel.namespace["huge"] = pd.DataFrame(
        np.zeros((5, 1700)), columns=[f"a_very_long_column_name_number_{i}" for i in range(1700)]
    )
    result = await InspectVariablesTool().run({"names": ["huge"]}, ctx_for(kernel), "t")
    assert len(result.content) <= 8000
    assert "1,700 columns" in result.content


async def test_a_sleeping_repr_costs_its_budget_and_blocks_nothing(kernel: DictKernel) -> None:
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    ticker = asyncio.ensure_future(tick())
    start = time.monotonic()
    result = await InspectVariablesTool().run({"names": ["sleepy", "df"]}, ctx_for(kernel), "t")
    took = time.monotonic() - start
    ticker.cancel()
    assert "sleepy: not summarised" in result.content
    assert "4 rows × 2 columns" in result.content
    assert took < 10
    # The event loop kept running while the repr slept: a loop blocked until the tool
    # returned would tick at most once (how often it ticks is the scheduler's, not asserted).
    assert ticks >= 5, (ticks, took)


async def test_a_figure_comes_back_as_an_image(kernel: DictKernel) -> None:
    result = await InspectVariablesTool().run({"names": ["fig"]}, ctx_for(kernel), "t")
    assert len(result.images) == 1
    image = result.images[0]
    assert image.media_type == "image/png"
    assert base64.b64decode(image.data).startswith(b"\x89PNG")
    assert "titles ['sales']" in result.content


async def test_unknown_and_dotted_names(kernel: DictKernel) -> None:
    result = await InspectVariablesTool().run(
        {"names": ["nope", "df.columns", "config.password"]}, ctx_for(kernel), "t"
    )
    assert "nope: not defined" in result.content
    assert "price" in result.content
    assert "config.password: dict — value withheld" in result.content


# ------------------------------------------------------------------- kernel_history


async def test_history_and_last_exception_with_locals(kernel: DictKernel) -> None:
    result = await KernelHistoryTool().run({"last": 10}, ctx_for(kernel), "t")
    text = result.content
    assert not result.is_error, text
    assert text.index("In [5]") < text.index("In [6]") < text.index("In [7]")
    assert SECRET not in text and 'API_TOKEN = "[REDACTED]"' in text
    assert "[result]    price city" in text
    assert "Last exception (cell [7]): ZeroDivisionError: division by zero" in text
    assert "in divide" in text and "return a * scale / b" in text
    assert "a = 1 (int)" in text and "b = 0 (int)" in text and "scale = 10 (int)" in text


# ------------------------------------------------------------------- run_python


@needs_sandbox
@pytest.mark.parametrize("mode", MODES)
async def test_run_python_computes_on_live_data_without_changing_it(
    kernel: DictKernel, mode: Mode
) -> None:
    code = "df['price'] = df['price'] * 2\ntotal = df['price'].sum()\nprint('rows', len(df))\ntotal"
    result = await RunPythonTool().run({"code": code}, ctx_for(kernel, mode), "t")
    assert not result.is_error, result.content
    assert "rows 4" in result.content and "Result:\nnp.float64(16.0)" in result.content
    assert kernel.namespace["df"]["price"].sum() == 8.0
    assert "total" not in kernel.namespace


@needs_sandbox
async def test_run_python_returns_new_figures_as_images(kernel: DictKernel) -> None:
    code = "import matplotlib.pyplot as plt\nplt.figure()\nplt.plot(arr)\nplt.title('arr')"
    result = await RunPythonTool().run({"code": code}, ctx_for(kernel), "t")
    assert not result.is_error, result.content
    assert len(result.images) == 1 and "1 figure attached" in result.content


@needs_sandbox
async def test_run_python_cannot_see_or_print_secrets(kernel: DictKernel) -> None:
    hidden = await RunPythonTool().run({"code": "API_TOKEN"}, ctx_for(kernel), "t")
    assert hidden.is_error and "NameError" in hidden.content
    assert "withheld from run_python" in hidden.content
    leaked = await RunPythonTool().run({"code": "print(blob)\nblob"}, ctx_for(kernel), "t")
    # blob's copy of the token was starred in the fork's memory before the code ran
    assert SECRET not in leaked.content and leaked.content.count("*" * len(SECRET)) == 2


@needs_sandbox
async def test_run_python_errors_and_limits(kernel: DictKernel, tmp_path: Path) -> None:
    ctx = ctx_for(kernel)
    target = tmp_path / "nope"
    cases = {
        "1/0": "ZeroDivisionError",
        f"open({str(target)!r}, 'w')": "PermissionError",
        "import socket; socket.create_connection(('127.0.0.1', 9), timeout=1)": "Error",
        f"import os, signal; os.kill({os.getpid()}, signal.SIGTERM)": "Error",
        "import ctypes; ctypes.string_at(0)": "segmentation fault (SIGSEGV)",
        "import os; os._exit(3)": "exited with status 3",
        "def f(:": "SyntaxError",
    }
    for code, expected in cases.items():
        result = await RunPythonTool().run({"code": code}, ctx, "t")
        assert result.is_error, code
        assert expected in result.content, (code, result.content)
        if "os.kill" in code:  # the kernel's own error: EPERM (Landlock) or ESRCH (PID ns)
            assert "PermissionError" in result.content or "ProcessLookupError" in result.content
    assert not target.exists()
    start = time.monotonic()
    result = await RunPythonTool().run({"code": "while True: pass", "timeout": 0.5}, ctx, "t")
    assert result.is_error and "Timed out after 0.5 s" in result.content
    assert time.monotonic() - start < 30  # the loop never ends: only a missed timeout reaches this


async def test_run_python_refuses_without_the_sandbox(kernel: DictKernel) -> None:
    ctx = ctx_for(kernel, sandbox=SandboxInfo(False, 0, "Landlock is not enabled."))
    result = await RunPythonTool().run({"code": "1"}, ctx, "t")
    assert result.is_error and "needs the kernel sandbox" in result.content
    assert "Landlock is not enabled." in result.content


# ------------------------------------------------------------------- propose_cell


async def test_propose_cell_queues_without_running(kernel: DictKernel) -> None:
    result = await ProposeCellTool().run(
        {"code": "df = df.dropna()", "explanation": "Drop the row without a price."},
        ctx_for(kernel),
        "t",
    )
    assert not result.is_error
    assert [(p.conversation_id, p.code) for p in kernel.proposals] == [
        ("conv-1", "df = df.dropna()")
    ]
    assert result.display is not None and result.display.to_json() == {
        "proposed_cell": "df = df.dropna()",
        "explanation": "Drop the row without a price.",
    }
    assert len(kernel.namespace["df"]) == 4


# ------------------------------------------------------------------- access and input

TOOLS = (InspectVariablesTool(), KernelHistoryTool(), RunPythonTool(), ProposeCellTool())
VALID = {
    "inspect_variables": {},
    "kernel_history": {},
    "run_python": {"code": "1"},
    "propose_cell": {"code": "1", "explanation": "x"},
}


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.name)
async def test_kernel_access_off_is_a_clear_error(kernel: DictKernel, tool: Any) -> None:
    result = await tool.run(VALID[tool.name], ctx_for(kernel, kernel_access=False), "t")
    assert result.is_error and "Kernel access is off" in result.content
    assert kernel.proposals == []


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.name)
async def test_no_kernel_is_a_clear_error(tool: Any) -> None:
    result = await tool.run(VALID[tool.name], ctx_for(None), "t")
    assert result.is_error and "No Jupyter kernel is attached" in result.content


@pytest.mark.parametrize(
    ("tool", "payload", "field"),
    [
        (InspectVariablesTool(), {"names": "df"}, "names"),
        (InspectVariablesTool(), {"names": [""]}, "names[0]"),
        (InspectVariablesTool(), {"names": [f"v{i}" for i in range(21)]}, "names"),
        (KernelHistoryTool(), {"last": 0}, "last"),
        (KernelHistoryTool(), {"last": "5"}, "last"),
        (RunPythonTool(), {}, "code"),
        (RunPythonTool(), {"code": "1", "timeout": 0}, "timeout"),
        (RunPythonTool(), {"code": "1", "timeout": 10_000}, "timeout"),
        (ProposeCellTool(), {"code": "x"}, "explanation"),
        (ProposeCellTool(), {"code": "", "explanation": "x"}, "code"),
    ],
)
async def test_bad_input_names_the_field(
    kernel: DictKernel, tool: Any, payload: dict[str, Any], field: str
) -> None:
    result = await tool.run(payload, ctx_for(kernel), "t")
    assert result.is_error
    assert f"Invalid input for {tool.name}: {field}" in result.content


def test_redact_covers_values_and_literals() -> None:
    source = 'db_password = "abc123"\nopts = {"token": "t-1"}\nname = "ok"\nx = SECRET_VALUE'
    text = redact(source, ["SECRET_VALUE"])
    assert "abc123" not in text and "t-1" not in text and "SECRET_VALUE" not in text
    assert 'name = "ok"' in text


def test_descriptions_do_not_depend_on_mode() -> None:
    """REQ-BED-017: one static description per tool; nothing mode- or kernel-specific."""
    for tool in TOOLS:
        assert "{" not in tool.description
    assert sys.modules["phoenix_nb.tools.kernel.reads"].INSPECT_DESCRIPTION


class SlowLen(list[int]):
    def __len__(self) -> int:
        time.sleep(1)
        return 0


def test_listing_bounds_the_time_a_hanging_len_can_take() -> None:
    """Runs in this process on purpose (the tools run it in a fork): the budgets themselves."""
    namespace = {f"slow{i}": SlowLen() for i in range(10)}
    start = time.monotonic()
    rows, total = list_variables(namespace, set(), budget=0.05, total_budget=0.2)
    assert time.monotonic() - start < 5.0  # unbounded: 10 s
    assert total == 10
    notes = [row.get("note", "") for row in rows]
    assert any("size unknown (OutOfTime)" in n for n in notes)
    assert any("size not measured" in n for n in notes)


class SlowMessage(Exception):
    def __str__(self) -> str:
        time.sleep(30)
        return "never"


async def test_an_exception_whose_str_hangs_is_still_reported(kernel: DictKernel) -> None:
    try:
        raise SlowMessage()
    except SlowMessage as exc:
        kernel.exception = LastException(type(exc), exc, exc.__traceback__, 9)
    start = time.monotonic()
    result = await KernelHistoryTool().run({}, ctx_for(kernel), "t")
    assert time.monotonic() - start < 10
    assert "Last exception (cell [9]): SlowMessage: <str() took longer than 1 s>" in result.content


async def test_a_polars_frame_is_summarised(kernel: DictKernel) -> None:
    import polars as pl

    kernel.namespace["pf"] = pl.DataFrame({"price": [1.5, None, 3.0], "city": ["a", "b", None]})
    kernel.namespace["pwide"] = pl.DataFrame({f"c{i}": [i] for i in range(1700)})
    listing = await InspectVariablesTool().run({}, ctx_for(kernel), "t")
    assert "- pf: polars.DataFrame, shape 3 × 2" in listing.content
    result = await InspectVariablesTool().run({"names": ["pf", "pwide"]}, ctx_for(kernel), "t")
    text = result.content
    assert "polars.DataFrame: 3 rows × 2 columns" in text
    assert "price: Float64, 1 null" in text and "city: String, 1 null" in text
    assert "describe()" in text and "mean" in text
    assert "1 rows × 1,700 columns" in text and "1,660 more columns" in text
    assert len(text) <= MAX_OUTPUT
