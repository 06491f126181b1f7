"""A new user's first hour on a real kernel.

The conversation survives a restart when the kernel knows its notebook, help is
one command away, mistakes suggest the right spelling, a manual continuation
says what happened, an answer with nothing pending is a quiet note, exports are
files, a headless pause ends in a final state, and the saved outputs never
repeat the conversation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from phoenix_nb.notebook.options import CELL_HELP, SUBCOMMAND_HELP, SUBCOMMANDS
from phoenix_nb.store import Store
from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.notebook.kernel_harness import MIME, Kernel, loaded_kernel, state_name

pytestmark = pytest.mark.timeout(180)

UPGRADE = "Write `made.txt` to **fix** it"


@pytest.fixture
def kernel(fake: FakeAnthropic, tmp_path: Path) -> Iterator[Kernel]:
    """A fresh kernel per test (overrides the module-wide one in conftest.py): these tests
    restart kernels and count conversations from an empty store."""
    fake.clear()
    with loaded_kernel(tmp_path, fake.base_url) as k:
        yield k


def _slugs(kernel: Kernel) -> list[str]:
    with Store(kernel.home) as store:
        return [c["slug"] for c in store.list_conversations()]


def _user_texts(kernel: Kernel, slug: str) -> list[str]:
    with Store(kernel.home) as store:
        conv = store.get_conversation(slug)
        assert conv is not None
        return [
            m["content"]["text"] for m in store.messages(conv["id"]) if m["message_type"] == "user"
        ]


def _record(cell_outputs: list[dict]) -> dict:
    [record] = [o["data"][MIME] for o in cell_outputs if MIME in o.get("data", {})]
    return record


def test_restart_continues_the_notebooks_conversation(
    notebook_kernel: Kernel, fake: FakeAnthropic
) -> None:
    kernel = notebook_kernel
    fake.script(Turn([text("First answer.")]), Turn([text("Second answer.")]))
    kernel.ok("%%phoenix\nremember the number 7")
    [slug] = _slugs(kernel)
    kernel.restart()
    kernel.ok("%load_ext phoenix_nb")
    status = kernel.ok("%phoenix status").text("stdout")
    assert f"continuing {slug}" in status.splitlines()[0], "the first output says it"
    assert f"conversation  {slug}" in status
    assert "a restarted kernel continues this conversation" in status
    cell = kernel.ok("%%phoenix\nwhich number?")
    assert _slugs(kernel) == [slug], "no new conversation in another folder"
    assert _user_texts(kernel, slug) == ["remember the number 7", "which number?"]
    assert "remember the number 7" in str(fake.requests[-1].body["messages"])
    assert "continuing" not in cell.text(), "said once, not on every cell"
    assert _record(cell.final_outputs())["conversation"]["slug"] == slug


def test_restart_announces_in_the_first_cell_record(
    notebook_kernel: Kernel, fake: FakeAnthropic
) -> None:
    kernel = notebook_kernel
    fake.script(Turn([text("One.")]), Turn([text("Two.")]))
    kernel.ok("%%phoenix\nhello")
    [slug] = _slugs(kernel)
    kernel.restart()
    kernel.ok("%load_ext phoenix_nb")
    record = _record(kernel.ok("%%phoenix\nagain").final_outputs())
    assert record["conversation"]["slug"] == slug
    assert any(f"continuing {slug}" in note for note in record.get("notes", []))


def test_session_name_set_by_hand_is_honoured(kernel: Kernel, fake: FakeAnthropic) -> None:
    fake.script(Turn([text("Noted.")]))
    kernel.ok("%env JPY_SESSION_NAME=by-hand.ipynb")
    kernel.ok("%%phoenix\nhello")
    [slug] = _slugs(kernel)
    kernel.restart()
    kernel.ok("%load_ext phoenix_nb")
    kernel.ok("%env JPY_SESSION_NAME=by-hand.ipynb")
    history = kernel.ok("%phoenix history")
    assert f"continuing {slug}" in history.text("stdout")
    assert _record(history.final_outputs())["conversation"]["slug"] == slug


def test_without_a_notebook_path_status_says_how_to_reattach(
    kernel: Kernel, fake: FakeAnthropic
) -> None:
    fake.script(Turn([text("Hi.")]))
    kernel.ok("%%phoenix\nhello")
    [slug] = _slugs(kernel)
    status = kernel.ok("%phoenix status").text("stdout")
    assert f"`%phoenix use {slug}`" in status
    kernel.restart()
    kernel.ok("%load_ext phoenix_nb")
    fresh = kernel.ok("%phoenix status").text("stdout")
    assert "No conversation yet" in fresh and "%phoenix use SLUG" in fresh


def test_help_lists_every_option_and_subcommand_with_an_example(kernel: Kernel) -> None:
    for source in ("%phoenix help", "%%phoenix --help", "%phoenix --help"):
        cell = kernel.ok(source)
        out = cell.text("stdout")
        assert cell.text("stderr") == "", source
        for name in SUBCOMMANDS:
            assert f"%phoenix {name}" in out, (source, name)
        for option in ("--new", "--name", "--cwd", "--model", "--mode", "--image", "--on-upgrade"):
            assert f"%%phoenix {option}" in out, (source, option)
        for line in (*CELL_HELP, *SUBCOMMAND_HELP):
            assert f"e.g. {line.example}" in out
    assert _slugs(kernel) == [], "help starts no conversation"


@pytest.mark.parametrize(
    ("source", "suggestion"),
    [
        ("%%phoenix --nwe\nhello", "did you mean --new?"),
        ("%%phoenix --on-upgarde approve\nhello", "did you mean --on-upgrade?"),
        ("%phoenix histroy", "did you mean history?"),
        ("%phoenix export --fromat md", "did you mean --format?"),
    ],
)
def test_unknown_options_suggest_the_closest(kernel: Kernel, source: str, suggestion: str) -> None:
    cell = kernel.ok(source)
    err = cell.text("stderr")
    assert suggestion in err and err.count("\n") == 1, err
    assert _slugs(kernel) == []


def test_manual_continue_says_it_was_asked_for(kernel: Kernel, fake: FakeAnthropic) -> None:
    fake.script(
        Turn([text("Looked around.")]),
        Turn([text("SUMMARY: looked around the project.")]),
        Turn([text("Going on.")]),
    )
    kernel.ok("%%phoenix --name early\nlook around")
    out = kernel.ok("%phoenix continue").text("stdout")
    assert "at your request" in out and "exhaust" not in out and "full" not in out
    kernel.ok("%%phoenix\nnow go on")
    first = fake.requests[-1].last_user_text
    assert "continues early" in first and "exhausted" not in first


def test_approve_with_nothing_pending_is_a_quiet_note(kernel: Kernel, fake: FakeAnthropic) -> None:
    fake.script(Turn([text("Done.")]))
    kernel.ok("%%phoenix --name calm\nhello")
    cell = kernel.ok("%phoenix approve")
    assert cell.text("stderr") == ""
    assert cell.text("stdout").startswith("Nothing to approve: calm is not waiting")
    assert cell.final_outputs() == [
        {"type": "stream", "name": "stdout", "text": cell.text("stdout")}
    ]


@pytest.mark.parametrize("fmt", ["md", "json", "html"])
def test_export_writes_a_file_relative_to_the_kernel_folder(
    kernel: Kernel, fake: FakeAnthropic, fmt: str
) -> None:
    fake.script(Turn([text("The answer is 42.")]))
    kernel.ok("%%phoenix --name exported\nwhat is the answer?")
    cell = kernel.ok(f"%phoenix export --format {fmt} --output out/convo.{fmt}")
    target = kernel.project / "out" / f"convo.{fmt}"
    assert str(target) in cell.text("stdout")
    body = target.read_text(encoding="utf-8")
    assert "The answer is 42." in body and "what is the answer?" in body
    if fmt == "json":
        assert json.loads(body)["conversation"]["slug"] == "exported"
    if fmt == "html":
        assert body.startswith("<!DOCTYPE html>") and "<script" not in body
    default = kernel.ok("%phoenix export exported")
    # A default export goes to phoenix-exports/, which git ignores by its own .gitignore:
    # no untracked file beside the notebook.
    assert (kernel.project / "phoenix-exports" / "exported.md").exists(), default.text()
    assert not (kernel.project / "exported.md").exists()
    ignore = kernel.project / "phoenix-exports" / ".gitignore"
    assert "*" in ignore.read_text(encoding="utf-8").splitlines()
    bad = kernel.ok("%phoenix export --output /proc/nope/x.md")
    assert "cannot write /proc/nope/x.md" in bad.text("stderr")


def _upgrade_script(fake: FakeAnthropic) -> None:
    fake.script(
        Turn([text("I need to write."), tool_use("request_mode_upgrade", {"reason": UPGRADE})]),
        Turn([tool_use("bash", {"command": "echo made > made.txt"})]),
        Turn([text("Wrote made.txt.")]),
    )


def test_headless_pause_ends_final_and_nothing_repeats(kernel: Kernel, fake: FakeAnthropic) -> None:
    """nbclient-style run: the paused cell ends in a final state with no widgets and one
    output; `%phoenix approve` shows only what follows the request; `history` folds what
    the notebook already shows."""
    _upgrade_script(fake)
    cell = kernel.ok("%%phoenix --name paused\nplease make made.txt", allow_stdin=False)
    [paused] = cell.final_outputs()
    record = paused["data"][MIME]
    assert record["conversation"]["state"]["paused"] is True
    assert record["conversation"]["state"]["busy"] is False
    for mime in ("text/html", "text/markdown", "text/plain"):
        shown = re.sub(r"<style>.*?</style>", "", paused["data"][mime], flags=re.S)
        assert "paused — run" in shown, mime
        assert "running" not in shown, mime
    assert not list(kernel.widgets()), "no controls where nobody can click"
    approve = kernel.ok("%phoenix approve", allow_stdin=False)
    [answer] = approve.final_outputs()
    after = answer["data"][MIME]
    steps = [s for c in after["cycles"] for s in c["steps"]]
    assert steps[0]["kind"] == "approval" and steps[0]["decision"] == "approved"
    assert not any(s["kind"] == "user" for s in steps), "the request is not shown twice"
    assert "please make made.txt" not in answer["data"]["text/plain"]
    assert "Wrote made.txt." in answer["data"]["text/plain"]
    history = kernel.ok("%phoenix history", allow_stdin=False)
    [summary] = history.final_outputs()
    folded = summary["data"][MIME]["cycles"]
    assert folded and all(c.get("folded") for c in folded)
    assert "(shown above)" in summary["data"]["text/plain"]
    assert "Wrote made.txt." not in summary["data"]["text/plain"]
    assert state_name(summary["data"][MIME]) == "idle"
