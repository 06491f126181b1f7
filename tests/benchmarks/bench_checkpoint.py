"""Cost of a working-tree checkpoint: the first one, then after 3 files changed, after
3 files added, and after nothing changed, at 10,000 and 50,000 files.

Run: ``python tests/benchmarks/bench_checkpoint.py [files ...]`` (default 10000 50000;
``BENCH_ROUNDS=1`` for one round)

Tree: N files of 10 KB in N/9 folders, made fresh in a temporary directory. Each
round runs, on its own copy of the tree:

  phoenix:  `ShadowRepo.take` (the checkpoint executor): the first checkpoint,
            then an "after" checkpoint with its changes (what a tool call pays,
            diff included) once 3 existing files changed, once 3 new files were
            added (new names: the ignore rules are asked), and once nothing changed
  git:      `git add -A && git commit` in a scratch copy (a fresh repository,
            then again after the same changes)
  cp -r:    copying the whole tree (what a naive snapshot costs each time)

Prints the median of ROUNDS rounds and the ratios phoenix/git and phoenix/cp, the
targets (incremental <= 100 ms and <= 0.5x git at 50,000 files; first <= 0.5x
git) and the load average before and after. The machine is shared: read the
ratios, measured in the same run, not the absolute times alone.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from phoenix_nb.checkpoints.shadow import ShadowRepo

SIZES = (10_000, 50_000)
FILE_SIZE = 10 * 1024
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))  # fewer on a slow, shared machine
TARGET_INCREMENTAL = 0.100  # seconds
TARGET_RATIO = 0.5  # of git add -A && git commit


def make_tree(root: Path, files: int) -> None:
    rng = os.urandom
    for i in range(files):
        folder = root / f"pkg{i % 100:02d}" / f"mod{(i // 100) % (files // 1000)}"
        folder.mkdir(parents=True, exist_ok=True)
        # hex text: diffable, and not compressible to nothing
        (folder / f"file{i}.py").write_bytes(rng(FILE_SIZE // 2).hex().encode())


CHANGED = ("pkg01/mod1/file101.py", "pkg02/mod1/file102.py", "pkg03/mod1/file103.py")
ADDED = ("pkg04/mod2/new1.py", "pkg05/mod3/new2.py", "pkg06/mod4/new3.py")


def change_three(root: Path, n: int) -> None:
    for rel in CHANGED:
        assert (root / rel).is_file(), rel
        with open(root / rel, "ab") as f:
            f.write(f"\n# edit {n}\n".encode())


def add_three(root: Path, n: int) -> None:
    for rel in ADDED:
        (root / rel).write_text(f"# added {n}\n")


def clock(action: object) -> float:
    start = time.perf_counter()
    action()  # type: ignore[operator]
    return time.perf_counter() - start


Times = tuple[float, float, float, float]  # first, 3 changed, 3 added, nothing changed


def run_phoenix(tree: Path, store: Path, n: int) -> Times:
    repo = ShadowRepo(store, tree, max_file_size=20 * 1024 * 1024)
    snaps: list[object] = []
    first = clock(lambda: snaps.append(repo.take("approval")[0]))

    def incremental(expected: tuple[str, ...]) -> None:
        snap, raw = repo.take("after", compare_to=snaps[-1])  # type: ignore[arg-type]
        repo.file_changes(snaps[-1], snap, raw)  # type: ignore[arg-type]
        assert sorted(r.path for r in raw) == sorted(expected), raw
        snaps.append(snap)

    change_three(tree, n)
    changed = clock(lambda: incremental(CHANGED))
    add_three(tree, n)
    added = clock(lambda: incremental(ADDED))
    nothing = clock(lambda: incremental(()))
    return first, changed, added, nothing


def _git(tree: Path, *args: str) -> None:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tree),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@x",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@x",
    }
    subprocess.run(
        ["git", "-c", "gc.auto=0", *args], cwd=tree, env=env, check=True, capture_output=True
    )


def run_git(tree: Path, n: int) -> Times:
    _git(tree, "init", "-q")

    def commit() -> None:
        _git(tree, "add", "-A")
        _git(tree, "commit", "-q", "-m", "checkpoint")

    first = clock(commit)
    change_three(tree, n)
    changed = clock(commit)
    add_three(tree, n)
    added = clock(commit)

    def commit_nothing() -> None:
        _git(tree, "add", "-A")
        _git(tree, "commit", "-q", "--allow-empty", "-m", "checkpoint")

    return first, changed, added, clock(commit_nothing)


def run_cp(tree: Path, scratch: Path) -> Times:
    first = clock(lambda: shutil.copytree(tree, scratch / "copy1", symlinks=True))
    second = clock(lambda: subprocess.run(["cp", "-r", str(tree), str(scratch / "copy2")]))
    return first, second, second, second


def _load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def bench(files: int) -> None:
    results: dict[str, list[Times]] = {"phoenix": [], "git": [], "cp": []}
    load_before = _load()
    with tempfile.TemporaryDirectory(prefix="bench-cp-") as tmp:
        base = Path(tmp) / "tree"
        base.mkdir()
        make_tree(base, files)
        for n in range(ROUNDS):
            work = Path(tmp) / f"round{n}"
            work.mkdir()
            for name in ("phoenix", "git"):
                subprocess.run(["cp", "-a", str(base), str(work / name)], check=True)
            subprocess.run(["sync"], check=False)
            results["phoenix"].append(run_phoenix(work / "phoenix", work / "store", n))
            results["git"].append(run_git(work / "git", n))
            results["cp"].append(run_cp(base, work))
            shutil.rmtree(work)
    med = {
        name: tuple(statistics.median(r[i] for r in rounds) for i in range(4))
        for name, rounds in results.items()
    }
    p, g, c = med["phoenix"], med["git"], med["cp"]
    print(f"\ntree: {files:,} files, {files * FILE_SIZE / 1e6:.0f} MB; median of {ROUNDS} rounds")
    print(f"load average (1/5/15 min): before {load_before}, after {_load()}")
    print(f"{'':22}{'first':>10}{'3 changed':>12}{'3 added':>12}{'nothing':>12}")
    for name, (first, inc, add, none) in med.items():
        print(
            f"{name:<22}{first:>9.3f}s{inc * 1000:>10.1f}ms{add * 1000:>10.1f}ms"
            f"{none * 1000:>10.1f}ms"
        )
    ratios = [p[i] / g[i] for i in range(4)]
    print("ratio phoenix/git:    " + "".join(f"{r:>11.2f}x" for r in ratios))
    print("ratio phoenix/cp -r:  " + "".join(f"{p[i] / c[i]:>11.3f}x" for i in range(4)))
    worst = max(p[1:])
    ok_first = ratios[0] <= TARGET_RATIO
    ok_ms = worst <= TARGET_INCREMENTAL
    ok_ratio = max(ratios[1:]) <= TARGET_RATIO
    print(
        f"targets: first {ratios[0]:.2f}x git <= {TARGET_RATIO}x: "
        f"{'met' if ok_first else 'NOT met'}; incremental worst {worst * 1000:.0f} ms "
        f"<= {TARGET_INCREMENTAL * 1000:.0f} ms: {'met' if ok_ms else 'NOT met'}; "
        f"incremental worst {max(ratios[1:]):.2f}x git <= {TARGET_RATIO}x: "
        f"{'met' if ok_ratio else 'NOT met'}"
    )
    sys.stdout.flush()


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or list(SIZES)
    for files in sizes:
        bench(files)


if __name__ == "__main__":
    main()
