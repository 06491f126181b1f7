"""Undo on a real kernel: the agent's writes are recorded and reverted.

The agent's tool calls are the fake server's scripted calls, run by the real
tools in real subprocesses; checkpoints are taken by the real executor with the
real `git`; the user's side is cells, clicks and edits made from this process.
"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from phoenix_nb.store import Store
from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.checkpoints.scratch import git_dir_state, tree_state, user_git
from tests.notebook.kernel_harness import MIME, Kernel

pytestmark = pytest.mark.timeout(240)


def make_project(root: Path) -> Path:
    """A user's repository with a commit, a stash, a staged file and a branch."""
    root.mkdir(parents=True)
    user_git(root, "init", "-q", "-b", "main")
    (root / "app.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "README.md").write_text("# demo project\n")
    (root / "run.sh").write_text("#!/bin/sh\necho run\n")
    (root / "data.txt").write_text("old data\n")
    (root / ".gitignore").write_text("*.log\n")
    user_git(root, "add", "-A")
    user_git(root, "commit", "-q", "-m", "start")
    (root / "README.md").write_text("# demo project\nwork in progress\n")
    user_git(root, "stash", "-q")
    user_git(root, "branch", "topic")
    (root / "notes.md").write_text("staged notes\n")
    user_git(root, "add", "notes.md")
    (root / "secret.txt").write_text("mine only\n")
    os.chmod(root / "secret.txt", 0o600)
    (root / "debug.log").write_text("ignored\n")
    return root


def script_the_agent(fake: FakeAnthropic, *, last: str = "Done.") -> None:
    fake.script(
        Turn([text("I need to write."), tool_use("request_mode_upgrade", {"reason": "fix add"})]),
        Turn(
            [
                tool_use(
                    "patch",
                    {
                        "path": "app.py",
                        "patches": [
                            {
                                "operation": "replace",
                                "oldText": "return a - b",
                                "newText": "return a + b",
                            }
                        ],
                    },
                )
            ]
        ),
        Turn(
            [
                tool_use(
                    "bash",
                    {
                        "command": "echo one > new1.txt && mkdir -p out && echo two > out/new2.txt"
                        " && rm data.txt && chmod +x run.sh"
                    },
                )
            ]
        ),
        Turn([tool_use("bash", {"command": "sed -i 's/demo/DEMO/' README.md"})]),
        Turn([text(last)]),
    )


def calls_with_changes(record: dict[str, Any]) -> list[tuple[str, dict[str, str]]]:
    """(tool name, {path: kind}) for every call of the record, in order."""
    out = []
    for cycle in record["cycles"]:
        for step in cycle["steps"]:
            for group in step.get("tool_groups") or ():
                for call in group["calls"]:
                    display = (call.get("result") or {}).get("display") or {}
                    if "changes" in display:
                        files = {f["path"]: f["kind"] for f in display["changes"]["files"]}
                        out.append((call["name"], files))
    return out


def run_turn(kern: Kernel, name: str, cwd: Path) -> Any:
    cell = kern.run(
        f"%%phoenix --name {name} --cwd {cwd} --on-upgrade approve\nplease fix add()",
        timeout=90,
    )
    assert cell.status == "ok", (cell.error(), cell.text())
    return cell


def test_revert_to_approval_restores_exactly_and_the_record_lists_each_call(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    project = make_project(kern.root / "rv-exact")
    start = tree_state(project)
    git_before = git_dir_state(project / ".git")
    script_the_agent(fake)
    since = time.monotonic()
    cell = run_turn(kern, "rv-exact", project)

    assert (project / "app.py").read_text().endswith("return a + b\n")
    assert (project / "out" / "new2.txt").exists() and not (project / "data.txt").exists()
    assert os.stat(project / "run.sh").st_mode & stat.S_IXUSR
    assert "DEMO" in (project / "README.md").read_text()
    record = cell.last_bundle()[MIME]
    assert calls_with_changes(record) == [
        ("patch", {"app.py": "modified"}),
        (
            "bash",
            {
                "new1.txt": "added",
                "out/new2.txt": "added",
                "data.txt": "deleted",
                "run.sh": "mode",
            },
        ),
        ("bash", {"README.md": "modified"}),
    ]
    bundle = cell.last_bundle()
    for mime in ("text/html", "text/markdown", "text/plain"):
        shown = bundle[mime]
        assert "bash changed 4 files" in shown, mime
        assert "patch changed 1 file" in shown, mime
        assert "out/new2.txt" in shown and "data.txt" in shown, mime
    assert "+    return a + b" in bundle["text/markdown"], "the diff is under the call"
    kern.wait_for_button("Revert", since)  # a live Revert button after a turn that wrote

    listing = kern.ok("%phoenix checkpoints").text()
    assert "approval" in listing and "4 files changed" in listing, listing

    out = kern.ok("%phoenix revert --to-approval").text()
    assert "Reverted to checkpoint" in out, out
    assert tree_state(project) == start, "bytes, modes and presence as at approval"
    assert not (project / "out").exists()
    assert git_dir_state(project / ".git") == git_before, "the user's .git is untouched"

    # The agent is told, in a system message the record shows and the next request carries.
    payload = kern.eval(
        "[s['text'] for c in __import__('phoenix_nb.notebook.session', fromlist=['x'])"
        ".get_session().phoenix.get('rv-exact').payload()['cycles'] for s in c['steps']"
        " if s['kind'] == 'system']"
    )
    told = [t for t in payload if "reverted the working tree" in t]
    assert told and "data.txt" in told[-1] and "new1.txt" in told[-1], payload
    fake.script(Turn([text("Understood.")]))
    kern.run("%%phoenix --name rv-exact\nwhat happened?", timeout=60)
    sent = json.dumps(fake.requests[-1].body["messages"])
    assert "reverted the working tree" in sent


def test_user_edit_refuses_force_overrides_across_a_restart(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    project = make_project(kern.root / "rv-user")
    start = tree_state(project)
    git_before = git_dir_state(project / ".git")
    script_the_agent(fake)
    run_turn(kern, "rv-user", project)
    (project / "app.py").write_text("# the user's own fix\n")  # someone other than the agent
    refused = kern.ok("%phoenix revert --to-approval")
    said = refused.text()
    assert "Not reverted" in said and "app.py" in said, said
    assert (project / "app.py").read_text() == "# the user's own fix\n"
    assert (project / "new1.txt").exists(), "nothing was reverted"

    kern.km.restart_kernel(now=True)
    kern.client.wait_for_ready(timeout=60)
    kern.ok("%load_ext phoenix_nb")
    kern.ok("%phoenix use rv-user")
    again = kern.ok("%phoenix revert --to-approval").text()
    assert "Not reverted" in again and "app.py" in again, "still refused after a restart"
    forced = kern.ok("%phoenix revert --to-approval --force").text()
    assert "Reverted to checkpoint" in forced, forced
    assert tree_state(project) == start
    assert git_dir_state(project / ".git") == git_before
    with Store(kern.home) as store:
        conv = store.get_conversation("rv-user")
        assert conv is not None
        notes = [
            m["content"]["text"]
            for m in store.messages(conv["id"])
            if m["message_type"] == "system"
        ]
    assert any("reverted the working tree" in n and "app.py" in n for n in notes)


def test_a_200_mb_file_is_reported_not_restorable_and_nothing_crashes(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    project = kern.root / "rv-big"
    project.mkdir()
    (project / "small.txt").write_text("small\n")
    with open(project / "big.bin", "wb") as f:
        f.truncate(200 * 1024 * 1024)  # the user's 200 MB file (sparse)
    fake.script(
        Turn([tool_use("request_mode_upgrade", {"reason": "append"})]),
        Turn([tool_use("bash", {"command": "printf x >> big.bin; echo s >> small.txt"})]),
        Turn([text("Appended.")]),
    )
    cell = run_turn(kern, "rv-big", project)
    record = cell.last_bundle()[MIME]
    changes = next(
        (call.get("result") or {}).get("display", {}).get("changes")
        for cycle in record["cycles"]
        for step in cycle["steps"]
        for group in step.get("tool_groups") or ()
        for call in group["calls"]
        if call["name"] == "bash"
    )
    big = next(f for f in changes["files"] if f["path"] == "big.bin")
    assert big["stored"] is False and big["kind"] == "modified"
    assert "not restorable" in cell.last_bundle()["text/markdown"]
    stored = (kern.home / "checkpoints").rglob("*")
    store_size = sum(p.stat().st_size for p in stored if p.is_file())
    assert store_size < 50 * 1024 * 1024, "the 200 MB file never entered the store"
    out = kern.ok("%phoenix revert --to-approval").text()
    assert "NOT restorable" in out and "big.bin" in out, out
    assert (project / "small.txt").read_text() == "small\n"
    assert (project / "big.bin").stat().st_size == 200 * 1024 * 1024 + 1, "left as it is"


def _html_values(kernel: Kernel, since: float) -> list[str]:
    values: list[str] = []
    for model_id, state in kernel.widgets(since):
        if state.get("_model_name") == "HTMLModel":
            values.append(str(state.get("value", "")))
            values += [
                str(u["value"]) for u in kernel.widget_updates(model_id, since) if "value" in u
            ]
    return values


def test_revert_button_undoes_the_turn_and_offers_revert_anyway(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    project = kern.root / "rv-button"
    project.mkdir()
    (project / "keep.txt").write_text("before the turn\n")
    fake.script(
        Turn([tool_use("bash", {"command": "echo agent > keep.txt; echo new > made.txt"})]),
        Turn([text("Wrote them.")]),
    )
    since = time.monotonic()
    cell = kern.run(
        f"%%phoenix --name rv-button --cwd {project} --mode unrestricted\nwrite", timeout=60
    )
    assert cell.status == "ok", cell.error()
    revert = kern.wait_for_button("Revert", since)
    (project / "keep.txt").write_text("the user typed this\n")  # someone else, after the turn
    kern.click(revert)
    kern.wait_until(
        lambda: any("data-phoenix-revert='refused'" in v for v in _html_values(kern, since)),
        20,
        "the refusal next to the button",
    )
    assert any("keep.txt" in v for v in _html_values(kern, since) if "refused" in v)
    assert (project / "made.txt").exists(), "refused: nothing reverted"
    anyway = kern.button("Revert anyway", since)
    kern.click(anyway)
    kern.wait_until(
        lambda: any("data-phoenix-revert='done'" in v for v in _html_values(kern, since)),
        20,
        "the revert to finish",
    )
    assert (project / "keep.txt").read_text() == "before the turn\n"
    assert not (project / "made.txt").exists()


def test_restricted_conversations_take_no_checkpoints(kern: Kernel, fake: FakeAnthropic) -> None:
    project = kern.root / "rv-restricted"
    project.mkdir()
    (project / "a.txt").write_text("a\n")
    fake.script(
        Turn([tool_use("bash", {"command": "cat a.txt"})]),
        Turn([text("It says a.")]),
    )
    cell = kern.run(f"%%phoenix --name rv-restricted --cwd {project}\nread a.txt", timeout=60)
    assert cell.status == "ok", cell.error()
    record = cell.last_bundle()[MIME]
    assert record["conversation"]["mode"] == "restricted"
    assert calls_with_changes(record) == [], "no changes recorded: nothing can change"
    with Store(kern.home) as store:
        conv = store.get_conversation("rv-restricted")
        assert conv is not None
    assert not (kern.home / "checkpoints" / conv["id"]).exists()
    said = kern.ok("%phoenix revert").text() + kern.ok("%phoenix checkpoints").text()
    assert "no checkpoints" in said
