"""Issue 38 through a real kernel: a turn waiting for an answer never holds the shell.

A `%%phoenix` cell that asks for write access ends at the request (the kernel goes
idle) and its record keeps updating in place; `%phoenix approve / deny / cancel` in
another cell answers the request at once (it used to queue behind the waiting cell);
`Phoenix.pending` lists the request and answers it by id, as a comm or a panel would.
After a restart the "continuing …" line names the mode, and `restrict_on_restart`
decides whether write access survives.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.notebook.kernel_harness import MIME, Execution, Kernel, loaded_kernel, state_name

pytestmark = pytest.mark.timeout(180)

REASON = "I need to create a file"


def _script(fake: FakeAnthropic, name: str) -> None:
    fake.script(
        Turn([text("I will ask."), tool_use("request_mode_upgrade", {"reason": REASON})]),
        Turn([tool_use("bash", {"command": f"touch {name}"})]),
        Turn([text(f"Wrote {name}.")]),
    )


def _waiting(kern: Kernel, fake: FakeAnthropic, slug: str, name: str) -> Execution:
    """Run a turn that asks; return its cell once the cell ended with the request shown."""
    _script(fake, name)
    cell = kern.submit(f"%%phoenix --name {slug}\nplease create {name}")
    kern.finish(cell, timeout=60)  # the cell ends: nothing holds the shell
    assert cell.status == "ok", cell.error()
    assert any(state_name(r) == "awaiting_mode_approval" for r in cell.records())
    return cell


def test_approve_from_another_cell_completes_the_turn_in_the_asking_cell(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    cell = _waiting(kern, fake, "approve-elsewhere", "elsewhere.txt")
    answer = kern.run("%phoenix approve", timeout=30)  # runs at once: the shell is free
    assert answer.status == "ok", answer.error()
    assert "goes on in the cell that asked" in answer.text("stdout")
    assert not answer.records(), "the answering cell shows no second copy of the turn"
    kern.finish_turn(cell, timeout=60)
    record = cell.last_bundle()[MIME]
    assert state_name(record) == "idle"
    assert "Wrote elsewhere.txt." in cell.last_bundle()["text/markdown"]
    assert (kern.project / "elsewhere.txt").exists(), "the tool really ran"


def test_pending_requests_are_listed_and_answered_by_id(kern: Kernel, fake: FakeAnthropic) -> None:
    cell = _waiting(kern, fake, "by-id", "by-id.txt")
    listed = kern.eval(
        "[r.as_json() for r in __import__('phoenix_nb.notebook.session', fromlist=['x'])"
        ".get_session().phoenix.pending.list()]"
    )
    mine = [r for r in listed if r["conversation"] == "by-id"]
    assert len(mine) == 1, listed
    request = mine[0]
    assert request["kind"] == "mode_approval" and request["reason"] == REASON
    assert request["answers"] == ["approve", "deny", "cancel"]
    denied = kern.run(
        "from phoenix_nb.notebook.session import get_session\n"
        f"await get_session().phoenix.pending.answer({json.dumps(request['id'])}, 'deny')",
        timeout=30,
    )
    assert denied.status == "ok", denied.error()
    kern.finish_turn(cell, timeout=60)
    record = cell.last_bundle()[MIME]
    steps = [s for c in record["cycles"] for s in c["steps"] if s["kind"] == "approval"]
    assert steps and steps[-1]["decision"] == "denied"
    assert not (kern.project / "by-id.txt").exists()
    again = kern.run(
        "from phoenix_nb.notebook.session import get_session\n"
        f"await get_session().phoenix.pending.answer({json.dumps(request['id'])}, 'deny')",
        timeout=30,
    )
    assert "already answered" in json.dumps(again.error()), "an answered request is gone"


def test_cancel_from_another_cell_ends_a_waiting_turn(kern: Kernel, fake: FakeAnthropic) -> None:
    cell = _waiting(kern, fake, "cancel-elsewhere", "never.txt")
    done = kern.run("%phoenix cancel", timeout=30)
    assert done.status == "ok", done.error()
    kern.finish_turn(cell, timeout=60)
    record = cell.last_bundle()[MIME]
    assert state_name(record) != "awaiting_mode_approval"
    assert not (kern.project / "never.txt").exists()


@pytest.mark.parametrize("restrict", [True, False])
def test_a_restart_says_the_mode_and_restrict_on_restart_decides(
    fake: FakeAnthropic, tmp_path: Path, restrict: bool
) -> None:
    fake.clear()
    env = {"JPY_SESSION_NAME": "work/restart.ipynb"}
    with loaded_kernel(tmp_path, fake.base_url, extra_env=env) as kernel:
        fake.script(Turn([text("Hello.")]))
        kernel.ok("%%phoenix --name keeps --mode unrestricted\nhello", timeout=60)
        kernel.restart()
        kernel.ok("%load_ext phoenix_nb")
        if not restrict:
            kernel.ok("%config Phoenix.restrict_on_restart = False")
        said = kernel.ok("%phoenix status", timeout=60).text()
        mode = kernel.eval(
            "__import__('phoenix_nb.notebook.session', fromlist=['x'])"
            ".get_session().current_conversation().mode.value"
        )
    assert "continuing keeps" in said, said
    if restrict:
        assert "now Restricted" in said and "restrict_on_restart" in said, said
        assert mode == "restricted"
    else:
        assert "still Unrestricted" in said and "%phoenix restrict" in said, said
        assert mode == "unrestricted"
