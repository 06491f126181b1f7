"""Checkpoints on real folders with the real `git`: exact restores, attribution, isolation.

No mocks: every test writes real files, runs the real executor (git plumbing
against a shadow store) and checks the folder byte for byte afterwards.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from phoenix_nb.checkpoints.changes import ToolChanges, changes_of
from phoenix_nb.checkpoints.recorder import (
    CheckpointConfig,
    Checkpoints,
    NoCheckpoint,
    RevertRefused,
)
from phoenix_nb.core.displays import BashDisplay, stored_display
from phoenix_nb.core.values import Mode, ToolResult
from tests.checkpoints.scratch import git_dir_state, tree_state, user_git

pytestmark = pytest.mark.timeout(120)


class Agent:
    """Plays the runtime: tool calls through `around_tool`, as the loop makes them."""

    def __init__(self, checkpoints: Checkpoints, cwd: Path, cid: str = "conv-1") -> None:
        self.cp = checkpoints
        self.cwd = cwd
        self.cid = cid
        self.n = 0

    def approve(self) -> None:
        asyncio.run(self.cp.writes_possible(self.cid, str(self.cwd), "approval"))

    def call(
        self,
        tool: str,
        action: Callable[[], None],
        *,
        mode: Mode = Mode.UNRESTRICTED,
        writes: bool = True,
    ) -> ToolChanges | None:
        self.n += 1
        call_id = f"toolu_{self.n:03d}"

        async def run() -> ToolResult:
            await asyncio.to_thread(action)
            return ToolResult(call_id, "done", display=BashDisplay("x", None))

        result = asyncio.run(
            self.cp.around_tool(
                conversation_id=self.cid,
                cwd=str(self.cwd),
                mode=mode,
                tool=tool,
                tool_use_id=call_id,
                run=run,
                writes=writes,
            )
        )
        assert isinstance(result.display, BashDisplay) and result.display.command == "x"
        return changes_of(stored_display(result.display, result.changes))

    def bash(self, command: str) -> ToolChanges | None:
        return self.call("bash", lambda: _sh(self.cwd, command))

    def history(self):  # type: ignore[no-untyped-def]
        return self.cp.history(self.cid, str(self.cwd))


def _sh(cwd: Path, command: str) -> None:
    subprocess.run(["bash", "-c", command], cwd=cwd, check=True)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "README.md").write_text("# demo\n")
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "data").mkdir()
    (root / "data" / "blob.bin").write_bytes(bytes(range(256)) * 40)
    (root / "secret.txt").write_text("keep me private\n")
    os.chmod(root / "secret.txt", 0o600)
    os.symlink("src/app.py", root / "link.py")
    return root


@pytest.fixture
def checkpoints(tmp_path: Path) -> Checkpoints:
    return Checkpoints(tmp_path / "home" / "checkpoints", CheckpointConfig(max_file_size=1_000_000))


def test_revert_restores_bytes_modes_and_presence(project: Path, checkpoints: Checkpoints) -> None:
    agent = Agent(checkpoints, project)
    start = tree_state(project)
    agent.approve()
    patch = agent.call(
        "patch",
        lambda: (project / "src" / "app.py").write_text("def add(a, b):\n    return a + b\n"),
    )
    assert patch is not None and [(f.kind, f.path) for f in patch.files] == [
        ("modified", "src/app.py")
    ]
    assert "+    return a + b" in patch.files[0].diff
    bash = agent.bash(
        "echo one > new1.txt; mkdir -p deep/er && printf 'x\\0y' > deep/er/new2.bin;"
        " rm data/blob.bin; chmod +x run.sh; chmod 644 secret.txt; ln -sf README.md link.py"
    )
    assert bash is not None
    kinds = {f.path: f.kind for f in bash.files}
    assert kinds == {
        "new1.txt": "added",
        "deep/er/new2.bin": "added",
        "data/blob.bin": "deleted",
        "run.sh": "mode",
        "secret.txt": "mode",
        "link.py": "modified",
    }
    modes = {f.path: (f.old_mode, f.new_mode) for f in bash.files}
    assert modes["run.sh"] == ("0644", "0755") and modes["secret.txt"] == ("0600", "0644")
    assert bash.summary("bash") == "bash changed 6 files"
    sed = agent.bash("sed -i 's/demo/DEMO/' README.md")
    assert sed is not None and [f.path for f in sed.files] == ["README.md"]

    history = agent.history()
    target = history.resolve_target(None, to_approval=True)
    report = asyncio.run(history.arevert(target.number))
    assert tree_state(project) == start
    assert not (project / "deep").exists(), "folders the agent created are gone"
    assert set(report.removed) == {"new1.txt", "deep/er/new2.bin"}
    assert set(report.recreated) == {"data/blob.bin"}
    assert {"src/app.py", "README.md", "link.py"} <= set(report.restored)
    assert set(report.modes) == {"run.sh", "secret.txt"}
    assert "data/blob.bin" in report.agent_message()


def test_user_edit_refuses_and_names_the_file_force_overrides(
    project: Path, checkpoints: Checkpoints
) -> None:
    agent = Agent(checkpoints, project)
    start = tree_state(project)
    agent.approve()
    agent.bash("echo agent >> README.md; echo a > made.txt")
    (project / "README.md").write_text("the user's own edit\n")  # someone else
    (project / "notes.txt").write_text("user notes\n")
    history = agent.history()
    target = history.resolve_target(None, to_approval=True)
    with pytest.raises(RevertRefused) as refused:
        asyncio.run(history.arevert(target.number))
    assert set(refused.value.report.foreign) == {"README.md", "notes.txt"}
    assert "README.md" in str(refused.value) and "--force" in str(refused.value)
    assert (project / "README.md").read_text() == "the user's own edit\n", "nothing reverted"
    assert (project / "made.txt").exists()
    report = asyncio.run(history.arevert(target.number, force=True))
    assert tree_state(project) == start
    assert set(report.foreign) == {"README.md", "notes.txt"}
    # The user's edit is still in the checkpoint taken just before the revert.
    back = asyncio.run(history.arevert(refused.value.report.pre_revert or 0, force=True))
    assert (project / "README.md").read_text() == "the user's own edit\n"
    assert back.target == refused.value.report.pre_revert


def test_agent_writing_after_a_user_edit_owns_the_file_again(
    project: Path, checkpoints: Checkpoints
) -> None:
    agent = Agent(checkpoints, project)
    start = tree_state(project)
    agent.approve()
    (project / "README.md").write_text("user first\n")
    agent.bash("echo agent second >> README.md")
    history = agent.history()
    report = asyncio.run(history.arevert(history.resolve_target(None, to_approval=True).number))
    assert tree_state(project) == start and report.foreign == ()


def test_restricted_calls_and_read_only_tools_take_no_checkpoint(
    project: Path, checkpoints: Checkpoints
) -> None:
    agent = Agent(checkpoints, project)
    assert agent.call("bash", lambda: None, mode=Mode.RESTRICTED) is None
    from phoenix_nb.tools.think import ThinkTool

    assert agent.call("think", lambda: None, writes=ThinkTool.writes) is None  # its own trait
    assert not checkpoints.exists(agent.cid)


def test_the_users_repository_is_untouched_and_its_ignores_hold(
    tmp_path: Path, checkpoints: Checkpoints
) -> None:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    user_git(repo, "init", "-q", "-b", "main")
    (repo / ".gitignore").write_text("*.log\nbuild/\n")
    (repo / "pkg" / "mod.py").write_text("x = 1\n")
    (repo / "pkg" / ".gitignore").write_text("local.cfg\n")
    user_git(repo, "add", "-A")
    user_git(repo, "commit", "-q", "-m", "first")
    (repo / "pkg" / "mod.py").write_text("x = 2\n")
    user_git(repo, "stash", "-q")
    user_git(repo, "branch", "feature")
    (repo / "pkg" / "staged.py").write_text("s\n")
    user_git(repo, "add", "pkg/staged.py")
    (repo / ".git" / "info" / "exclude").write_text("secret-notes.md\n")
    (repo / "pkg" / "local.cfg").write_text("token=1\n")
    (repo / "pkg" / "debug.log").write_text("log\n")
    (repo / "pkg" / "secret-notes.md").write_text("mine\n")
    (repo / "top.txt").write_text("outside the conversation's folder\n")
    before = git_dir_state(repo / ".git")
    status_before = user_git(repo, "status", "--porcelain")

    agent = Agent(checkpoints, repo / "pkg")  # the conversation works in a sub-folder
    agent.approve()
    changes = agent.bash(
        "echo 3 > mod.py; echo new > new.py; echo more >> debug.log; echo t2 > local.cfg;"
        " echo edited > secret-notes.md; echo agent > ../top.txt"
    )
    assert changes is not None
    assert [f.path for f in changes.files] == ["mod.py", "new.py"], "ignored and outside: not seen"
    history = agent.history()
    asyncio.run(history.arevert(history.resolve_target(None, to_approval=True).number))
    assert (repo / "pkg" / "mod.py").read_text() == "x = 1\n"
    assert not (repo / "pkg" / "new.py").exists()
    assert (repo / "pkg" / "debug.log").read_text() == "log\nmore\n", "ignored: left alone"
    assert (repo / "top.txt").read_text() == "agent\n", "outside the folder: left alone"
    assert git_dir_state(repo / ".git") == before, "HEAD, index, refs, stash byte-identical"
    (repo / "top.txt").write_text("outside the conversation's folder\n")
    (repo / "pkg" / "debug.log").write_text("log\n")
    (repo / "pkg" / "local.cfg").write_text("token=1\n")
    (repo / "pkg" / "secret-notes.md").write_text("mine\n")
    assert user_git(repo, "status", "--porcelain") == status_before
    assert user_git(repo, "stash", "list").count("stash@") == 1


def test_gitattributes_never_convert_bytes(project: Path, checkpoints: Checkpoints) -> None:
    (project / ".gitattributes").write_text("* text eol=crlf\n*.txt filter=nonexistent\n")
    (project / "crlf.txt").write_bytes(b"a\r\nb\nc\r\n")
    (project / "lf.md").write_bytes(b"one\ntwo\n")
    start = tree_state(project)
    agent = Agent(checkpoints, project)
    agent.approve()
    agent.bash("printf 'x\\n' > crlf.txt; printf 'y\\r\\n' > lf.md")
    history = agent.history()
    asyncio.run(history.arevert(history.resolve_target(None, to_approval=True).number))
    assert tree_state(project) == start


def test_big_files_are_recorded_by_hash_and_reported_not_restorable(
    project: Path, tmp_path: Path
) -> None:
    checkpoints = Checkpoints(tmp_path / "cp", CheckpointConfig(max_file_size=100_000))
    (project / "huge.dat").write_bytes(b"\1" * 300_000)
    agent = Agent(checkpoints, project)
    agent.approve()
    changes = agent.bash(
        "head -c 250000 /dev/zero > made.dat; printf z >> huge.dat; echo t > t.txt"
    )
    assert changes is not None
    by_path = {f.path: f for f in changes.files}
    assert by_path["made.dat"].kind == "added" and not by_path["made.dat"].stored
    assert by_path["huge.dat"].kind == "modified" and not by_path["huge.dat"].stored
    assert "not restorable" in by_path["huge.dat"].describe()
    assert by_path["t.txt"].stored
    store_bytes = sum(p.stat().st_size for p in (tmp_path / "cp").rglob("*") if p.is_file())
    assert store_bytes < 100_000, "big files never enter the object store"
    history = agent.history()
    report = asyncio.run(history.arevert(history.resolve_target(None, to_approval=True).number))
    assert report.not_restorable == ("huge.dat",)
    assert not (project / "made.dat").exists() and not (project / "t.txt").exists()
    assert "huge.dat" in report.agent_message()


def test_checkpoints_survive_a_restart(project: Path, tmp_path: Path) -> None:
    root = tmp_path / "cp"
    start = tree_state(project)
    agent = Agent(Checkpoints(root), project)
    agent.approve()
    agent.bash("echo changed > README.md; touch added.txt")
    fresh = Checkpoints(root)  # a new kernel: nothing in memory
    history = fresh.history("conv-1", str(project))
    kinds = [c.kind for c in history.checkpoints()]
    assert kinds == ["approval", "before", "after"]
    asyncio.run(history.arevert(history.resolve_target(None, to_approval=False).number))
    assert tree_state(project) == start


def test_odd_file_names_round_trip(project: Path, checkpoints: Checkpoints) -> None:
    agent = Agent(checkpoints, project)
    agent.approve()
    names = [
        "with space.txt",
        'quote"d.txt',
        "back\\slash.txt",
        "ünïcode.txt",
        "new\nline.txt",
        "-dash",
    ]

    def make() -> None:
        for name in names:
            (project / name).write_text(name)

    changes = agent.call("bash", make)
    assert changes is not None and sorted(f.path for f in changes.files) == sorted(names)
    history = agent.history()
    before = tree_state(project)
    asyncio.run(history.arevert(history.resolve_target(None, to_approval=True).number))
    assert not any((project / n).exists() for n in names)
    asyncio.run(history.arevert(changes.after))
    assert tree_state(project) == before
    repo = history.repo
    latest = history.checkpoints()[-1]
    tree = _git_tree_of(project, repo._env, project.parent / "plain-index")
    assert history.snapshot(latest).tree == tree, "odd names sort and encode as git's do"
    _fsck(repo._env, project)


def test_a_failing_store_never_fails_the_tool_call(project: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the store should be")
    agent = Agent(Checkpoints(blocker / "cp"), project)
    with pytest.raises(OSError):
        agent.call("bash", lambda: None)  # creating the store's folder fails …
    checkpoints = Checkpoints(tmp_path / "ok")
    agent = Agent(checkpoints, project)
    agent.approve()
    (tmp_path / "ok" / "conv-1" / "git" / "objects").chmod(0o500)
    try:
        changes = agent.bash("echo x > y.txt")
    finally:
        (tmp_path / "ok" / "conv-1" / "git" / "objects").chmod(0o755)
    assert (project / "y.txt").exists(), "the call ran"
    if os.geteuid() != 0:  # root writes anyway; then the checkpoint simply succeeds
        assert changes is not None and changes.error


def test_resolving_targets(project: Path, checkpoints: Checkpoints) -> None:
    agent = Agent(checkpoints, project)
    history = agent.history()
    with pytest.raises(NoCheckpoint):
        history.resolve_target(None, to_approval=True)
    asyncio.run(checkpoints.writes_possible(agent.cid, str(project), "turn"))
    with pytest.raises(NoCheckpoint, match="approval"):
        history.resolve_target(None, to_approval=True)
    with pytest.raises(NoCheckpoint, match="Nothing to revert"):
        history.resolve_target(None, to_approval=False)
    agent.bash("touch a")
    assert history.resolve_target(None, to_approval=False).kind == "before"
    asyncio.run(checkpoints.writes_possible(agent.cid, str(project), "turn"))
    agent.bash("true")
    agent.bash("touch b")
    agent.bash("touch c")
    target = history.resolve_target(None, to_approval=False)
    assert target.kind == "before" and target.tool_use_id == "toolu_003", "the turn's first write"
    asyncio.run(history.arevert(target.number))
    assert (project / "a").exists() and not (project / "b").exists()
    with pytest.raises(NoCheckpoint, match="No checkpoint 99"):
        history.resolve_target(99, to_approval=False)


def test_pruning_keeps_what_a_revert_may_want_and_says_what_it_removed(
    project: Path, tmp_path: Path
) -> None:
    checkpoints = Checkpoints(tmp_path / "cp", CheckpointConfig(keep_days=1))
    agent = Agent(checkpoints, project)
    agent.approve()
    agent.bash("echo 1 > one.txt")
    asyncio.run(checkpoints.writes_possible(agent.cid, str(project), "turn"))
    agent.bash("echo 2 > two.txt")
    history = agent.history()
    numbers = [c.number for c in history.checkpoints()]
    report = history.prune(now=__import__("time").time() + 3 * 86400)
    assert report is not None
    kept = [c.number for c in history.checkpoints()]
    # the latest approval (1) and the latest turn (4) onward are kept
    assert kept == [1, 4, 5, 6] and set(report.removed) == set(numbers) - set(kept)
    assert history.prune_log()[-1].removed == report.removed
    with pytest.raises(RevertRefused, match="pruned") as refused:
        asyncio.run(history.arevert(1))  # who wrote one.txt is no longer known
    assert refused.value.report.foreign == ("one.txt",)
    asyncio.run(history.arevert(1, force=True))
    assert not (project / "one.txt").exists() and not (project / "two.txt").exists()


def _git_tree_of(folder: Path, repo_env: dict[str, str], index: Path) -> str:
    """The tree `git add -A && git write-tree` records for the folder (a scratch index)."""
    env = {**repo_env, "GIT_INDEX_FILE": str(index)}
    index.unlink(missing_ok=True)
    subprocess.run(["git", "add", "-A"], cwd=folder, env=env, check=True)
    done = subprocess.run(
        ["git", "write-tree"], cwd=folder, env=env, check=True, capture_output=True
    )
    return done.stdout.decode().strip()


def _fsck(repo_env: dict[str, str], cwd: Path) -> None:
    done = subprocess.run(
        ["git", "fsck", "--strict", "--full", "--no-dangling"],
        cwd=cwd,
        env=repo_env,
        capture_output=True,
    )
    problems = [
        line
        for line in done.stderr.decode().splitlines()
        if not line.startswith("notice: HEAD points to an unborn branch")
    ]
    assert done.returncode == 0 and not problems, problems


@pytest.mark.parametrize("files", [5, 400], ids=["loose", "packed"])
def test_snapshots_are_the_trees_git_itself_records_and_the_store_is_sound(
    project: Path, checkpoints: Checkpoints, files: int
) -> None:
    """Objects, trees and packs are written here in git's formats: every checkpoint's
    tree equals `git add -A`'s, and `git fsck --strict` finds nothing wrong."""
    for i in range(files):
        folder = project / "many" / f"d{i % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i}.txt").write_bytes(os.urandom(40) + b"\n" * (i % 3))
    os.chmod(project / "run.sh", 0o755)
    agent = Agent(checkpoints, project)
    agent.approve()
    repo = agent.history().repo
    scratch = project.parent / "plain-index"
    first = agent.history().checkpoints()[0]
    assert agent.history().snapshot(first).tree == _git_tree_of(project, repo._env, scratch)
    agent.bash(
        "echo changed >> README.md; rm many/d1/f1.txt; mkdir -p many/new && echo n > many/new/n;"
        " chmod -x run.sh; ln -s README.md many/d2/ln; printf 'x' > 'many/d3/sp ace'"
    )
    latest = agent.history().checkpoints()[-1]
    assert agent.history().snapshot(latest).tree == _git_tree_of(project, repo._env, scratch)
    _fsck(repo._env, project)


def test_an_empty_folder_and_a_crashed_first_attempt(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    checkpoints = Checkpoints(tmp_path / "cp")
    agent = Agent(checkpoints, empty)
    agent.approve()
    changes = agent.bash("echo x > made.txt")
    assert changes is not None and [f.path for f in changes.files] == ["made.txt"]
    history = agent.history()
    asyncio.run(history.arevert(1))
    assert list(empty.iterdir()) == []
    # A first attempt that died after writing objects and its stat cache, but no ref:
    # the next one starts afresh.
    other = Agent(Checkpoints(tmp_path / "cp2"), empty, cid="c2")
    repo = other.history().repo
    (empty / "a.txt").write_text("a")
    repo.take("approval")
    for ref in (repo.git_dir / "refs" / "phoenix" / "cp").iterdir():
        ref.unlink()
    (repo.root / "last").unlink()
    (empty / "b.txt").write_text("b")
    repo._last = None
    snap, _ = repo.take("approval")
    assert snap.checkpoint.number == 1 and {"a.txt", "b.txt"} <= set(snap.perms)


def test_a_store_inside_the_folder_is_never_checkpointed_or_reverted(project: Path) -> None:
    home = project / ".phoenix"  # PHOENIX_HOME under the conversation's folder
    (home / "db").mkdir(parents=True)
    (home / "db" / "conversations.json").write_text("{}")
    checkpoints = Checkpoints(home / "checkpoints", exclude=(home,))
    agent = Agent(checkpoints, project)
    agent.approve()

    def work() -> None:
        (project / "made.txt").write_text("x")
        (home / "db" / "conversations.json").write_text('{"grown": true}')

    changes = agent.call("bash", work)
    assert changes is not None and [f.path for f in changes.files] == ["made.txt"]
    history = agent.history()
    asyncio.run(history.arevert(history.resolve_target(None, to_approval=True).number))
    assert not (project / "made.txt").exists()
    assert (home / "db" / "conversations.json").read_text() == '{"grown": true}'


def test_empty_folders_and_folder_modes_are_recorded_and_restored(
    project: Path, checkpoints: Checkpoints
) -> None:
    (project / "empty").mkdir()
    (project / "keep").mkdir()  # an empty folder the agent removes
    os.chmod(project / "data", 0o750)
    start = tree_state(project)
    agent = Agent(checkpoints, project)
    agent.approve()
    changes = agent.bash(
        "rmdir keep; mkdir -p made/deeper; chmod 711 empty; rm data/blob.bin; chmod 555 data"
    )
    assert changes is not None
    made = oct(stat.S_IMODE(os.lstat(project / "made" / "deeper").st_mode))[2:].zfill(4)
    assert {f.path: (f.kind, f.old_mode, f.new_mode) for f in changes.files} == {
        "keep/": ("deleted", "0755", None),
        "made/deeper/": ("added", None, made),  # the leaf: "made/" goes without saying
        "empty/": ("mode", "0755", "0711"),
        "data/": ("mode", "0750", "0555"),
        "data/blob.bin": ("deleted", "0644", None),
    }
    history = agent.history()
    report = asyncio.run(history.arevert(history.resolve_target(None, to_approval=True).number))
    assert tree_state(project) == start, "folders back, with their modes; made/ gone"
    assert "keep/" in report.recreated and "made/deeper/" in report.removed
    assert {"empty/", "data/"} <= set(report.modes) and "data/blob.bin" in report.recreated
    assert report.not_restorable == ()


def test_a_nested_repository_is_covered_like_any_folder_and_its_git_untouched(
    tmp_path: Path, checkpoints: Checkpoints
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    user_git(repo, "init", "-q", "-b", "main")
    (repo / "top.py").write_text("top\n")
    user_git(repo, "add", "-A")
    user_git(repo, "commit", "-q", "-m", "top")
    lib = repo / "vendor" / "lib"
    (lib / "pkg").mkdir(parents=True)
    user_git(lib, "init", "-q", "-b", "main")
    (lib / ".gitignore").write_text("*.tmp\n")
    (lib / "a.py").write_text("a = 1\n")
    (lib / "b.py").write_text("b = 1\n")
    (lib / "pkg" / "c.py").write_text("c = 1\n")
    user_git(lib, "add", "-A")
    user_git(lib, "commit", "-q", "-m", "lib")
    (lib / "a.py").write_text("a = 'stashed'\n")
    user_git(lib, "stash", "-q")
    (lib / "staged.py").write_text("s\n")
    user_git(lib, "add", "staged.py")
    (lib / "cache.tmp").write_text("ignored by the nested repository's own rules\n")
    outer, inner = git_dir_state(repo / ".git"), git_dir_state(lib / ".git")
    start = tree_state(repo)

    agent = Agent(checkpoints, repo)
    agent.approve()
    changes = agent.bash(
        "echo 2 > vendor/lib/a.py; rm vendor/lib/b.py; echo new > vendor/lib/pkg/new.py;"
        " echo more >> vendor/lib/cache.tmp; chmod +x vendor/lib/pkg/c.py"
    )
    assert changes is not None
    assert {f.path: f.kind for f in changes.files} == {
        "vendor/lib/a.py": "modified",
        "vendor/lib/b.py": "deleted",
        "vendor/lib/pkg/new.py": "added",
        "vendor/lib/pkg/c.py": "mode",
    }
    # A repository the agent makes: its files are recorded, never its .git.
    made = agent.bash("git init -q made && echo x > made/f.txt && mkdir made/empty")
    assert made is not None
    assert {f.path for f in made.files} == {"made/f.txt", "made/empty/"}

    history = agent.history()
    report = asyncio.run(history.arevert(history.resolve_target(None, to_approval=True).number))
    assert (lib / "cache.tmp").read_text().endswith("more\n"), "ignored there: left alone"
    (lib / "cache.tmp").write_text("ignored by the nested repository's own rules\n")
    assert (repo / "made" / ".git").is_dir(), "a .git is never touched, even one the agent made"
    assert "made/" in report.not_restorable, "so its folder stays, and the report says so"
    shutil.rmtree(repo / "made")
    assert tree_state(repo) == start
    assert git_dir_state(repo / ".git") == outer, "the outer repository byte-identical"
    assert git_dir_state(lib / ".git") == inner, "the nested one too (index, stash, refs)"


def test_a_lost_stat_cache_only_costs_reading_again(project: Path, tmp_path: Path) -> None:
    root = tmp_path / "cp"
    start = tree_state(project)
    agent = Agent(Checkpoints(root), project)
    agent.approve()
    agent.bash("echo changed > README.md")
    agent.history().repo.wait_saved()
    (root / "conv-1" / "state").unlink()
    agent = Agent(Checkpoints(root), project)  # a new kernel, and no stat cache
    changes = agent.bash("echo two > two.txt; chmod 700 src")
    assert changes is not None
    assert {f.path: f.kind for f in changes.files} == {"two.txt": "added", "src/": "mode"}
    history = agent.history()
    asyncio.run(history.arevert(history.resolve_target(None, to_approval=True).number))
    assert tree_state(project) == start
