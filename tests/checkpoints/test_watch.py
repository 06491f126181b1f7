"""Checkpoints that look only where inotify heard something never miss a change.

Every checkpoint here is compared with what git itself records for the folder
(`git add -A && git write-tree`, a scratch index) and with the permission
manifest of a fresh full scan (a new store), after random operations and in the
cases where the watch cannot be trusted: its queue overflowed, changes were made
while no watch ran (a restart), another process took a checkpoint in between.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from phoenix_nb.checkpoints.shadow import ShadowRepo, Snapshot
from tests.seeds import phoenix_seed

pytestmark = pytest.mark.timeout(600)


def _git_tree_of(folder: Path, scratch: Path) -> str:
    """The tree `git add -A && git write-tree` records for `folder` (never its own .git)."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(scratch),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_DIR": str(scratch / "git"),
        "GIT_WORK_TREE": str(folder),
        "GIT_INDEX_FILE": str(scratch / "index"),
    }
    if not (scratch / "git").exists():
        subprocess.run(["git", "init", "-q", "--bare", str(scratch / "git")], check=True)
    (scratch / "index").unlink(missing_ok=True)
    subprocess.run(["git", "add", "-A"], cwd=folder, env=env, check=True)
    done = subprocess.run(
        ["git", "write-tree"], cwd=folder, env=env, check=True, capture_output=True
    )
    return done.stdout.decode().strip()


def _full_scan(folder: Path, scratch: Path) -> Snapshot:
    """A checkpoint taken by a store that never saw the folder: a full walk, no watch."""
    store = scratch / f"fresh{len(list(scratch.glob('fresh*')))}"
    return ShadowRepo(store, folder, max_file_size=1 << 20).take("approval")[0]


def _check(repo: ShadowRepo, folder: Path, scratch: Path, previous: Snapshot | None) -> Snapshot:
    snap, raw = repo.take("after", compare_to=previous)
    assert snap.tree == _git_tree_of(folder, scratch), "the tree git add -A records"
    fresh = _full_scan(folder, scratch)
    assert snap.perms == fresh.perms, "every file's and folder's permission bits"
    blob = repo.git("cat-file", "blob", str(repo.meta(snap.checkpoint.commit)["perms"]))
    assert blob == json.dumps(fresh.perms, sort_keys=True, separators=(",", ":")).encode()
    if previous is not None:
        slow = repo.raw_changes(previous, snap)
        assert raw == slow, "changes from the watch's delta equal a full comparison"
    return snap


def _tree(root: Path) -> None:
    for d in range(6):
        (root / f"d{d}" / "sub").mkdir(parents=True)
        for f in range(5):
            (root / f"d{d}" / f"f{f}.txt").write_text(f"{d}-{f}\n")
            (root / f"d{d}" / "sub" / f"g{f}.txt").write_text(f"sub {d}-{f}\n")
    (root / ".gitignore").write_text("*.log\nbuild/\n")


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def _dirs(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_dir() and not p.is_symlink())


def _same_stat_rewrite(path: Path, rng: random.Random) -> None:
    """New bytes, same size, same mtime: only a watch can tell."""
    st = path.stat()
    data = bytearray(path.read_bytes() or b"x")
    data[rng.randrange(len(data))] ^= 0x20
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _random_op(root: Path, rng: random.Random, n: int) -> str:
    files, dirs = _files(root), _dirs(root)
    op = rng.choice(
        [
            "write",
            "append",
            "same_stat",
            "chmod",
            "delete",
            "mkdir",
            "rmtree",
            "rename_file",
            "rename_dir",
            "symlink",
            "file_to_dir",
            "dir_to_file",
            "ignored",
            "chmod_dir",
        ]
    )
    folder = rng.choice(dirs) if dirs else root
    if op == "write" or not files:
        (folder / f"new{n}.txt").write_text(f"new {n}\n")
    elif op == "append":
        with open(rng.choice(files), "a") as fh:
            fh.write(f"more {n}\n")
    elif op == "same_stat":
        _same_stat_rewrite(rng.choice(files), rng)
    elif op == "chmod":
        os.chmod(rng.choice(files), rng.choice([0o600, 0o644, 0o755]))
    elif op == "delete":
        rng.choice(files).unlink()
    elif op == "mkdir":
        (folder / f"dir{n}" / "deeper").mkdir(parents=True)
        (folder / f"dir{n}" / "deeper" / "x.txt").write_text("x\n")
    elif op == "rmtree" and dirs:
        shutil.rmtree(rng.choice(dirs))
    elif op == "rename_file":
        rng.choice(files).rename(folder / f"moved{n}.txt")
    elif op == "rename_dir" and dirs:
        source = rng.choice(dirs)
        target = root / f"renamed{n}"
        source.rename(target)
        (target / f"after_move{n}.txt").write_text("written after the move\n")
    elif op == "symlink":
        os.symlink(f"target{n}", folder / f"link{n}")
    elif op == "file_to_dir":
        victim = rng.choice(files)
        victim.unlink()
        victim.mkdir()
        (victim / "inside.txt").write_text("was a file\n")
    elif op == "dir_to_file" and dirs:
        victim = rng.choice(dirs)
        shutil.rmtree(victim)
        victim.write_text("was a folder\n")
    elif op == "ignored":
        (folder / f"noise{n}.log").write_text("ignored\n")
        if not (root / "build").exists():
            (root / "build").mkdir()
        if (root / "build").is_dir():
            (root / "build" / f"out{n}").write_text("ignored\n")
    elif op == "chmod_dir" and dirs:
        os.chmod(rng.choice(dirs), rng.choice([0o700, 0o755, 0o750]))
    return op


def test_random_changes_equal_git_add_all(tmp_path: Path) -> None:
    """Random edits of every kind between checkpoints (renamed and replaced folders, a
    rewrite that keeps size and mtime, writes through hard links from outside the
    folder): each checkpoint equals git's own tree and a fresh full scan."""
    seed = phoenix_seed()
    rng = random.Random(seed)
    root, outside, scratch = tmp_path / "w", tmp_path / "outside", tmp_path / "scratch"
    for folder in (root, outside, scratch):
        folder.mkdir()
    _tree(root)
    for i, victim in enumerate(_files(root)[::7]):  # linked from outside before it is watched
        os.link(victim, outside / f"link{i}")
    repo = ShadowRepo(tmp_path / "store", root, max_file_size=1 << 20)
    snap = _check(repo, root, scratch, None)
    for n in range(40):
        for k in range(rng.randint(1, 4)):
            _random_op(root, rng, n * 10 + k)
        for link in outside.iterdir():  # writes no watched folder hears
            if link.stat().st_nlink > 1:
                with open(link, "a") as fh:
                    fh.write(f"through the outside link {n}\n")
        assert repo._watch.synced == snap.checkpoint.commit, f"seed {seed}: watch trusted"
        snap = _check(repo, root, scratch, snap)


def test_a_change_keeping_size_and_mtime_is_heard(tmp_path: Path) -> None:
    """What a stat cache cannot see (same size, mtime put back), the watch hears."""
    root, scratch = tmp_path / "w", tmp_path / "scratch"
    root.mkdir()
    scratch.mkdir()
    _tree(root)
    repo = ShadowRepo(tmp_path / "store", root, max_file_size=1 << 20)
    first, _ = repo.take("approval")
    target = root / "d1" / "f1.txt"
    _same_stat_rewrite(target, random.Random(phoenix_seed()))
    snap, raw = repo.take("after", compare_to=first)
    assert [r.path for r in raw] == ["d1/f1.txt"]
    assert snap.tree == _git_tree_of(root, scratch)


def _queue_limit() -> int:
    return int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())


def test_a_queue_overflow_falls_back_to_a_full_scan(tmp_path: Path) -> None:
    """More events than the kernel queues: the watch cannot say what changed, so every
    recorded file is looked at, and the changes among the flood are all found."""
    root, scratch = tmp_path / "w", tmp_path / "scratch"
    root.mkdir()
    scratch.mkdir()
    _tree(root)
    repo = ShadowRepo(tmp_path / "store", root, max_file_size=1 << 20)
    snap = _check(repo, root, scratch, None)
    flood = root / "d0"
    for i in range(_queue_limit() // 2 + 100):  # create + close-write: two events each
        fd = os.open(flood / f"flood{i}", os.O_CREAT | os.O_WRONLY, 0o644)
        os.close(fd)
    (root / "d3" / "f2.txt").unlink()
    with open(root / "d4" / "sub" / "g1.txt", "a") as fh:
        fh.write("changed among the flood\n")
    os.chmod(root / "d5" / "f0.txt", 0o700)
    snap = _check(repo, root, scratch, snap)
    # The watch is set up again: later changes are heard once more.
    assert repo._watch.synced == snap.checkpoint.commit
    (root / "d2" / "f4.txt").write_text("after the overflow\n")
    _check(repo, root, scratch, snap)


def test_changes_made_while_no_watch_ran_are_found_after_a_restart(tmp_path: Path) -> None:
    """A new process (a restarted kernel) has no watch: it scans every recorded file
    against the stat cache saved by the last one, then watches from there."""
    root, scratch = tmp_path / "w", tmp_path / "scratch"
    root.mkdir()
    scratch.mkdir()
    _tree(root)
    store = tmp_path / "store"
    first = ShadowRepo(store, root, max_file_size=1 << 20)
    snap = _check(first, root, scratch, None)
    first.wait_saved()
    first._watch.close()  # the kernel went away
    (root / "d1" / "f1.txt").write_text("changed while nobody watched\n")
    (root / "d2").rename(root / "d2-renamed")
    (root / "d3" / "sub" / "new.txt").write_text("new\n")
    os.chmod(root / "d4", 0o700)
    second = ShadowRepo(store, root, max_file_size=1 << 20)
    snap = _check(second, root, scratch, snap)
    assert second._watch.synced == snap.checkpoint.commit
    (root / "d5" / "f3.txt").unlink()
    _check(second, root, scratch, snap)


def test_a_checkpoint_by_another_process_is_not_taken_for_ours(tmp_path: Path) -> None:
    """Two kernels on one store: one whose watch is synced with its own last checkpoint
    must not trust it once the other wrote a later one; what both saw is found."""
    root, scratch = tmp_path / "w", tmp_path / "scratch"
    root.mkdir()
    scratch.mkdir()
    _tree(root)
    store = tmp_path / "store"
    one = ShadowRepo(store, root, max_file_size=1 << 20)
    other = ShadowRepo(store, root, max_file_size=1 << 20)
    snap = _check(one, root, scratch, None)
    (root / "d1" / "f1.txt").write_text("seen by the other kernel\n")
    one.wait_saved()
    snap = _check(other, root, scratch, snap)
    other.wait_saved()
    (root / "d2" / "f2.txt").write_text("after the other's checkpoint\n")
    later, raw = one.take("after", compare_to=snap)
    assert [r.path for r in raw] == ["d2/f2.txt"]
    assert later.tree == _git_tree_of(root, scratch)
