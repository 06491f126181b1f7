"""A policy the admin named that phoenix cannot use fails closed, through a real kernel:
`%load_ext phoenix_nb` fails with one line naming the file, the line and what is wrong,
nothing of phoenix is registered (no `%%phoenix` cell, no `%phoenix` line reaches a
model), and once the file is fixed the same kernel loads phoenix and a turn runs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from phoenix_nb.testing import FakeAnthropic, Turn, text
from tests.notebook.kernel_harness import Execution, Kernel

pytestmark = pytest.mark.timeout(180)

BAD = [
    # (file text, what the one line says after the file's name)
    (
        '[models]\nallowed = ["claude-sonnet-4-5*"]\n\n[budgets]\nturn = \n',
        "line 5: not valid TOML: invalid value (column 8)",
    ),
    (
        "[budgets]\nturn = 1.0\ndaily = 5.0\n",
        "line 3: budgets.daily is unknown "
        "(known: conversation, turn, user_daily, user_daily_tokens)",
    ),
    (
        '[modes]\n# the admin meant false\nallow_unrestricted = "no"\n',
        "line 3: modes.allow_unrestricted must be true or false",
    ),
]


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(default=Turn([text("loaded after all")])) as server:
        yield server


@pytest.fixture(scope="module")
def kernel(fake: FakeAnthropic, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    """A kernel whose phoenix is not loaded yet (each test loads it under its own policy)."""
    k = Kernel(tmp_path_factory.mktemp("policykernel"), fake.base_url)
    try:
        yield k
    finally:
        k.shutdown()


def _point_at(kernel: Kernel, path: Path) -> None:
    kernel.ok(f"import os; os.environ['PHOENIX_POLICY'] = {str(path)!r}")


def _one_line_refusal(execution: Execution) -> str:
    """The cell failed and said exactly one line (no traceback through phoenix)."""
    assert execution.status == "error", execution.summary()
    error = execution.error()
    assert error is not None
    [line] = error["traceback"]
    assert "Traceback" not in line and "File " not in line
    said = json.dumps([o["content"] for o in execution.outputs if o["msg_type"] != "error"])
    assert "Traceback" not in said, said
    return str(line)


def _phoenix_does_nothing(kernel: Kernel, fake: FakeAnthropic) -> None:
    cell = kernel.run("%%phoenix\nhello")
    assert cell.status == "error", "a %%phoenix cell ran without the policy"
    line = kernel.run("%phoenix status")
    assert line.status == "error", "a %phoenix line ran without the policy"
    assert fake.requests == [], "a request reached the model without the policy"


@pytest.mark.parametrize(("policy", "says"), BAD, ids=["toml", "unknown-key", "wrong-type"])
def test_a_malformed_policy_is_one_line_naming_file_and_line_and_phoenix_stays_out(
    kernel: Kernel, fake: FakeAnthropic, tmp_path: Path, policy: str, says: str
) -> None:
    fake.clear()
    path = tmp_path / "policy.toml"
    path.write_text(policy)
    _point_at(kernel, path)
    line = _one_line_refusal(kernel.run("%load_ext phoenix_nb"))
    assert line == f"phoenix is not loaded: The policy {path} {says}", line
    _phoenix_does_nothing(kernel, fake)


def test_an_unreadable_policy_is_one_line_and_phoenix_stays_out(
    kernel: Kernel, fake: FakeAnthropic, tmp_path: Path
) -> None:
    fake.clear()
    # a folder where the file should be: unreadable even to root (the suite runs as root,
    # which a 0000 mode does not stop); not UTF-8 is the other way a file cannot be read
    folder = tmp_path / "policy.toml"
    folder.mkdir()
    _point_at(kernel, folder)
    line = _one_line_refusal(kernel.run("%load_ext phoenix_nb"))
    assert line == f"phoenix is not loaded: The policy {folder} cannot be read: Is a directory."
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"[models]\nallowed = ['\xff\xfe']\n")
    _point_at(kernel, binary)
    line = _one_line_refusal(kernel.run("%load_ext phoenix_nb"))
    assert line == f"phoenix is not loaded: The policy {binary} line 2: not UTF-8 text."
    _phoenix_does_nothing(kernel, fake)


def test_once_the_policy_is_fixed_the_same_kernel_loads_phoenix(
    kernel: Kernel, fake: FakeAnthropic, tmp_path: Path
) -> None:
    """The refusals above come from the policy, not from a kernel that cannot load phoenix."""
    fake.clear()
    path = tmp_path / "policy.toml"
    path.write_text('[models]\nallowed = ["claude-sonnet-4-5*"]\n')
    _point_at(kernel, path)
    kernel.ok("%load_ext phoenix_nb")
    turn = kernel.finish_turn(kernel.submit("%%phoenix\nhello"))
    assert turn.status == "ok", turn.error()
    assert "loaded after all" in json.dumps(
        turn.last_bundle()["application/vnd.phoenix.conversation+json"]
    )
    assert len(fake.requests) == 1
    status = kernel.ok("%phoenix status").text("stdout")
    assert str(path) in status
