"""`%%phoenix_fails` through a real kernel (notebook/fails.py): the cell's exception is
shown as a traceback on stderr and kept as the kernel's last error, without an `error`
message and with an `ok` execute reply, so papermill and Run All go on."""

from __future__ import annotations

import re

import pytest

from tests.notebook.kernel_harness import Kernel

pytestmark = pytest.mark.timeout(120)


def test_a_failing_cell_shows_its_traceback_and_keeps_its_error_without_failing(
    kern: Kernel,
) -> None:
    kern.ok("def divide(a, b):\n    ratio = a / b\n    return ratio")
    failing = kern.run("%%phoenix_fails\nnumbers = [3, 0]\nresult = divide(*numbers)")
    assert failing.status == "ok", failing.reply
    assert failing.error() is None, "no error message: papermill fails a run on one"
    shown = failing.text("stderr")
    assert "ZeroDivisionError" in shown and "Traceback" in shown, shown
    assert "ratio = a / b" in shown, "IPython's traceback, with the function's source line"
    count = failing.reply["content"]["execution_count"] if failing.reply else None
    assert f"In[{count}]" in re.sub(r"\x1b\[[0-9;]*m", "", shown), "the cell's own number"
    assert kern.eval("numbers") == [3, 0], "the cell ran in the user namespace"
    assert kern.eval("__import__('sys').last_type.__name__") == "ZeroDivisionError"
    # What the kernel tools read: the last exception, its cell, and the frames' locals.
    report = kern.eval(
        "__import__('phoenix_nb.tools.kernel.summarize', fromlist=['x']).summarize_exception("
        "__import__('phoenix_nb.notebook.session', fromlist=['x']).get_session()"
        ".kernel.last_exception())"
    )
    assert report.startswith(f"Last exception (cell [{count}]): ZeroDivisionError"), report
    assert "ratio = a / b" in report and "b = 0" in report, report


def test_a_cell_that_does_not_fail_runs_as_usual(kern: Kernel) -> None:
    done = kern.run("%%phoenix_fails\nfine = 6 * 7\nprint('printed', fine)")
    assert done.status == "ok" and done.error() is None
    assert done.text("stdout").strip() == "printed 42"
    assert not done.text("stderr")
