"""A shadow git object store of one conversation's working tree, driven through plumbing.

Why git: it is content-addressed, incremental through the stat data of its index
(only files whose stat changed are read again), and fast at it; a hand-written
store would re-invent all of that. Why the `git` command rather than a library:
it is the reference implementation, already on every machine that has a
repository, and every call here is plumbing with a stable interface.

Isolation from the user's repository is total: every call runs with
`GIT_DIR`, `GIT_INDEX_FILE` and `GIT_WORK_TREE` pointing at this store (under
`$PHOENIX_HOME/checkpoints/<conversation id>/`), with a fresh environment (no
inherited `GIT_*`), no system or global config, and the only file read from the
user's `.git` is `info/exclude`. The user's HEAD, index, refs and stash are
never opened. Inside a repository the work tree is the repository's top, so
every `.gitignore` between the top and the conversation's folder applies;
checkpoints cover the conversation's folder only (a pathspec).

Byte-exactness: `info/attributes` unsets text/eol/filter/ident/encoding for
every path, so no `.gitattributes` of the user converts line endings or runs a
filter (git-lfs …) on the way in or out. Git records only the executable bit;
the full permission bits of every file are kept in a manifest blob per
checkpoint. Files over `max_file_size` are kept out of the object store and
recorded by size and SHA-256 only ("not restorable").

First snapshot: one pass over the files, streamed into `git fast-import`
(every blob and tree into one pack, no delta search) while Python reads the
next file; the index is then written here from each file's stat data (git's
documented index format), so the next snapshot is incremental at once. Creating
ten thousand loose object files, or re-hashing every file to fill an index,
costs seconds on some filesystems. Later snapshots: one `git status` walk (stat
data, untracked cache on, fsmonitor off; HEAD follows the checkpoints) names
the few changed paths, and only they are added; many changes at once go into
one pack by bulk check-in. Permission bits of known files are re-read in a
thread while git works (git's stat check misses a chmod within the same second).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import json
import os
import shutil
import stat
import struct
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from phoenix_nb.checkpoints.changes import Checkpoint, CheckpointKind, FileChange
from phoenix_nb.errors import PhoenixError

REF_PREFIX = "refs/phoenix/cp/"
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
BULK_THRESHOLD = 200  # more changed files than this: bulk check-in into one pack
GIT_TIMEOUT = 600.0
DIFF_FILE_LIMIT = 20_000  # characters of diff kept per file
DIFF_TOTAL_LIMIT = 100_000  # characters of diff kept per tool call
FILES_LIMIT = 500  # files listed per tool call

_WORK_TREE_VARS = ("GIT_WORK_TREE", "GIT_INDEX_FILE")
_ATTRIBUTES = "* -text -eol -filter -ident -working-tree-encoding\n"
_CONFIG = {
    "core.bare": "false",
    "core.autocrlf": "false",
    "core.safecrlf": "false",
    "core.filemode": "true",
    "core.symlinks": "true",
    "core.ignorecase": "false",
    "core.untrackedCache": "true",
    "core.fsmonitor": "false",
    "core.quotePath": "false",
    "core.precomposeUnicode": "false",
    "core.hooksPath": os.devnull,
    "index.threads": "true",
    "gc.auto": "0",
    "maintenance.auto": "false",
    "advice.addEmbeddedRepo": "false",
    "status.showUntrackedFiles": "all",
}


class CheckpointError(PhoenixError):
    """A checkpoint could not be taken or read (git missing, disk full, bad store)."""


def git_available() -> bool:
    return shutil.which("git") is not None


@dataclass(frozen=True)
class BigFile:
    """A file over the size limit: recorded by size and hash, never stored."""

    size: int
    sha256: str
    perm: str


@dataclass(frozen=True)
class Snapshot:
    """What one checkpoint holds: a tree, the permission bits, the big files."""

    checkpoint: Checkpoint
    tree: str
    perms: Mapping[str, str]  # path -> "0644" for every file and "link" for symlinks
    big: Mapping[str, BigFile] = field(default_factory=dict)


@dataclass(frozen=True)
class RawChange:
    """One path that differs between two snapshots."""

    path: str
    status: str  # A | D | M | T (type) | P (permission bits only) | B (big file)
    old_mode: str | None
    new_mode: str | None
    old_sha: str | None
    new_sha: str | None


def find_top(cwd: Path) -> Path | None:
    """The top of the git repository holding `cwd`, if any (a `.git` dir or file)."""
    for folder in (cwd, *cwd.parents):
        if (folder / ".git").exists():
            return folder
    return None


def _perm_of(st: os.stat_result) -> str:
    if stat.S_ISLNK(st.st_mode):
        return "link"
    return f"{stat.S_IMODE(st.st_mode):04o}"


def _git_mode_perm(mode: str) -> str:
    """The permission bits git would give a file of this index mode when writing it."""
    if mode == "120000":
        return "link"
    return "0755" if mode == "100755" else "0644"


class ShadowRepo:
    """One conversation's checkpoints: a git dir, an index and the user's folder."""

    def __init__(
        self,
        root: Path,
        cwd: Path,
        *,
        max_file_size: int,
        max_files: int = 250_000,
        exclude: Sequence[Path] = (),
    ) -> None:
        self.root = root
        self.cwd = cwd.resolve()
        self.max_file_size = max_file_size
        self.git_dir = root / "git"
        self.index = root / "index"
        top = find_top(self.cwd)
        self.top = top if top is not None else self.cwd
        self.in_repo = top is not None
        rel = self.cwd.relative_to(self.top).as_posix()
        self.prefix = "" if rel == "." else rel + "/"
        self.exclude = [Path(p).resolve() for p in exclude]
        self.max_files = max_files
        self._last: Snapshot | None = None
        self._last_marker = ""
        self._last_perms_sha = ""
        self._big_cache_file = root / "bigfiles.json"
        self._env = self._environment()
        self._perms_cache: dict[str, dict[str, str]] = {}

    # -- running git --------------------------------------------------------------------------
    def _environment(self) -> dict[str, str]:
        ident = "phoenix checkpoints"
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.root),
            "LANG": "C",
            "LC_ALL": "C",
            "GIT_DIR": str(self.git_dir),
            "GIT_INDEX_FILE": str(self.index),
            "GIT_WORK_TREE": str(self.top),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_AUTHOR_NAME": ident,
            "GIT_AUTHOR_EMAIL": "phoenix@localhost",
            "GIT_COMMITTER_NAME": ident,
            "GIT_COMMITTER_EMAIL": "phoenix@localhost",
        }

    def git(
        self,
        *args: str,
        input: bytes | None = None,
        env: Mapping[str, str] | None = None,
        check: bool = True,
        config: Mapping[str, str] | None = None,
    ) -> bytes:
        extra = ["-c", "safe.directory=*"]
        for key, value in (config or {}).items():
            extra += ["-c", f"{key}={value}"]
        full_env = {**self._env, **(env or {})}
        try:
            done = subprocess.run(
                ["git", *extra, *args],
                input=input,
                capture_output=True,
                env=full_env,
                cwd=str(self.top),
                timeout=GIT_TIMEOUT,
                check=False,
            )
        except FileNotFoundError:
            raise CheckpointError("git is not installed: checkpoints are unavailable") from None
        except subprocess.TimeoutExpired:
            raise CheckpointError(f"git {args[0]} took longer than {GIT_TIMEOUT:.0f} s") from None
        if check and done.returncode != 0:
            err = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise CheckpointError(f"git {args[0]} failed: {err[-1] if err else done.returncode}")
        return done.stdout

    # -- set-up ----------------------------------------------------------------------------------
    def ensure(self) -> None:
        """Create the store on first use; refresh what is copied from the user's repo."""
        if not (self.git_dir / "HEAD").exists():
            self.root.mkdir(parents=True, exist_ok=True)
            tmp = self.root / f"git.tmp{os.getpid()}"
            if tmp.exists():
                shutil.rmtree(tmp)
            bare_env = {k: v for k, v in self._env.items() if k not in _WORK_TREE_VARS}
            for argv in (
                ["git", "init", "-q", "--bare", str(tmp)],
                *(["git", "config", key, value] for key, value in _CONFIG.items()),
            ):
                done = subprocess.run(
                    argv, env={**bare_env, "GIT_DIR": str(tmp)}, capture_output=True, check=False
                )
                if done.returncode != 0:
                    raise CheckpointError(
                        f"cannot create the checkpoint store in {self.root}: "
                        + done.stderr.decode("utf-8", "replace").strip()
                    )
            (tmp / "info").mkdir(exist_ok=True)
            (tmp / "info" / "attributes").write_text(_ATTRIBUTES)
            os.replace(tmp, self.git_dir)
        self._write_excludes()

    def _write_excludes(self) -> None:
        lines = ["# written by phoenix: the user's info/exclude and phoenix's own folders"]
        user_exclude = self.top / ".git" / "info" / "exclude"
        if self.in_repo and user_exclude.is_file():
            with contextlib.suppress(OSError):
                lines.append(user_exclude.read_text(errors="replace"))
        for path in [self.root, *self.exclude]:
            try:
                rel = path.resolve().relative_to(self.top)
            except ValueError:
                continue
            if str(rel) != ".":
                lines.append("/" + rel.as_posix() + "/")
        text = "\n".join(lines) + "\n"
        target = self.git_dir / "info" / "exclude"
        if not target.exists() or target.read_text() != text:
            target.write_text(text)

    def scope(self) -> list[str]:
        """Pathspecs limiting git to the conversation's folder."""
        return [f":(top,literal){self.prefix.rstrip('/')}"] if self.prefix else []

    # -- checkpoints ------------------------------------------------------------------------------
    def checkpoints(self) -> list[Checkpoint]:
        if not (self.git_dir / "HEAD").exists():
            return []
        out = self.git(
            "for-each-ref",
            "--format=%(objectname)%00%(contents)%00",
            REF_PREFIX,
        )
        parts = out.split(b"\0")
        checkpoints = []
        for i in range(0, len(parts) - 1, 2):
            commit = parts[i].decode().strip()
            try:
                meta = json.loads(parts[i + 1].decode("utf-8", "replace"))
            except ValueError:
                continue
            checkpoints.append(_checkpoint(commit, meta))
        return sorted(checkpoints, key=lambda c: c.number)

    def meta(self, commit: str) -> dict[str, Any]:
        body = self.git("cat-file", "commit", commit).split(b"\n\n", 1)[1]
        data = json.loads(body.decode("utf-8", "replace"))
        return data if isinstance(data, dict) else {}

    def snapshot_of(self, checkpoint: Checkpoint) -> Snapshot:
        meta = self.meta(checkpoint.commit)
        tree = self.git("rev-parse", f"{checkpoint.commit}^{{tree}}").decode().strip()
        perms = self._perms_blob(str(meta.get("perms") or ""))
        big = {
            p: BigFile(int(b["size"]), str(b["sha256"]), str(b.get("perm", "0644")))
            for p, b in dict(meta.get("big") or {}).items()
        }
        return Snapshot(checkpoint, tree, perms, big)

    def _perms_blob(self, sha: str) -> dict[str, str]:
        if not sha:
            return {}
        if sha not in self._perms_cache:
            data = json.loads(self.git("cat-file", "blob", sha))
            self._perms_cache[sha] = {str(k): str(v) for k, v in data.items()}
        return self._perms_cache[sha]

    def take(
        self,
        kind: CheckpointKind,
        *,
        tool_use_id: str | None = None,
        tool: str | None = None,
        compare_to: Snapshot | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> tuple[Snapshot, list[RawChange]]:
        """Record the working tree now as the next checkpoint.

        Incremental: `git diff-files` (stat data against the shadow index) names
        what changed since the last checkpoint, `ls-files -o` what is new; only
        those paths are added, stat'ed for their permission bits and hashed.
        With `compare_to`, also returns what changed since that snapshot (and
        stores the count in the checkpoint, for listings).
        """
        self.ensure()
        last = self._latest()
        number = last.checkpoint.number + 1 if last is not None else 1
        first = last is None or not self.index.exists()
        if first:
            self.index.unlink(missing_ok=True)  # a crashed first attempt's, if any
        # Permission bits of the known files, read while git works: a chmod within the
        # second of the last stat is invisible to git's stat data (ctime in seconds).
        scan = None
        if not first and last is not None:
            scan = _POOL.submit(_scan_perms, self.top, list(last.perms))
        if first:
            untracked = self._lines(
                "ls-files", "-o", "--exclude-standard", "-z", "--", *self.scope()
            )
            if len(untracked) > self.max_files:
                raise CheckpointError(
                    f"{len(untracked):,} files under {self.cwd}: more than the "
                    f"{self.max_files:,} checkpoints cover; work in a smaller folder"
                )
            changed = sorted(untracked)
        else:
            untracked = []
            changed = self._status()
        previous_big = dict(last.big) if last is not None and not first else {}
        big = self._big_files(changed, previous_big)
        if first:
            tree, perms = self._first(untracked, big)
        else:
            bulk = len(changed) > BULK_THRESHOLD
            self._stage(changed, big, bulk=bulk)
            tree = self._write_tree_packed() if bulk else self.git("write-tree").decode().strip()
            scanned = scan.result() if scan is not None else {}
            perms = self._perms_update(scanned, changed, big, previous_big)
        if last is not None and perms == last.perms:
            perms_sha = self._last_perms_sha
        else:
            perms_sha = self._store_perms(perms)
        created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        meta: dict[str, Any] = {
            "v": 1,
            "n": number,
            "kind": kind,
            "at": created,
            "tool_use_id": tool_use_id,
            "tool": tool,
            "perms": perms_sha,
            "big": {
                p: {"size": b.size, "sha256": b.sha256, "perm": b.perm} for p, b in big.items()
            },
            "cwd": str(self.cwd),
            **dict(extra or {}),
        }
        raw: list[RawChange] = []
        if compare_to is not None:
            provisional = Snapshot(_checkpoint("", meta), tree, perms, big)
            raw = self.raw_changes(compare_to, provisional)
            meta["files_changed"] = len(raw)
        body = json.dumps(meta, sort_keys=True).encode()
        commit = self.git("commit-tree", tree, input=body).decode().strip()
        # HEAD follows the index's tree, so `git status` lists only what changed since.
        refs = f"create {REF_PREFIX}{number:08d} {commit}\nupdate HEAD {commit}\n"
        self.git("update-ref", "--stdin", input=refs.encode())
        snapshot = Snapshot(_checkpoint(commit, meta), tree, perms, big)
        self._remember(snapshot, perms_sha)
        return snapshot, raw

    def _status(self) -> list[str]:
        """Paths changed, deleted or new since the last checkpoint: one `git status` walk
        (stat data for tracked files, the untracked cache for new ones)."""
        out = self.git(
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=all",
            "--no-renames",
            "--ignore-submodules=all",
            "--",
            *self.scope(),
        )
        return sorted(os.fsdecode(e[3:]) for e in out.split(b"\0") if len(e) > 3)

    def _lines(self, *args: str) -> list[str]:
        return [os.fsdecode(p) for p in self.git(*args).split(b"\0") if p]

    def _latest(self) -> Snapshot | None:
        """The last checkpoint, from memory unless another process took one since."""
        try:
            marker = (self.root / "last").read_text()
        except OSError:
            marker = ""
        if self._last is not None and marker == self._last_marker:
            return self._last
        found = self.checkpoints()
        self._last = self.snapshot_of(found[-1]) if found else None
        if found:  # a store written before HEAD followed the checkpoints, or by a crash
            self.git("update-ref", "HEAD", found[-1].commit)
        self._last_marker = marker
        self._last_perms_sha = str(self.meta(found[-1].commit).get("perms") or "") if found else ""
        return self._last

    def _remember(self, snapshot: Snapshot, perms_sha: str) -> None:
        marker = f"{snapshot.checkpoint.number} {snapshot.checkpoint.commit}\n"
        tmp = self.root / "last.tmp"
        tmp.write_text(marker)
        os.replace(tmp, self.root / "last")
        self._last, self._last_marker, self._last_perms_sha = snapshot, marker, perms_sha

    def _big_files(
        self, changed: Sequence[str], previous: Mapping[str, BigFile]
    ) -> dict[str, BigFile]:
        """Files over the size limit among the changed ones, and the big ones still there."""
        candidates = set(changed) | set(previous)
        cache = self._load_big_cache()
        big: dict[str, BigFile] = {}
        for path in sorted(candidates):
            try:
                st = os.lstat(f"{self.top}/{path}")
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode) or st.st_size <= self.max_file_size:
                continue
            key = f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}"
            cached = cache.get(path)
            if cached is None or cached[0] != key:
                cached = (key, _sha256(self.top / path))
                cache[path] = cached
            big[path] = BigFile(st.st_size, cached[1], _perm_of(st))
        if big or cache:
            self._save_big_cache({p: v for p, v in cache.items() if p in big})
        return big

    def _load_big_cache(self) -> dict[str, tuple[str, str]]:
        try:
            data = json.loads(self._big_cache_file.read_text())
            return {str(k): (str(v[0]), str(v[1])) for k, v in data.items()}
        except (OSError, ValueError, TypeError, IndexError, AttributeError):
            return {}

    def _save_big_cache(self, cache: Mapping[str, tuple[str, str]]) -> None:
        tmp = self._big_cache_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({k: list(v) for k, v in cache.items()}))
        os.replace(tmp, self._big_cache_file)

    def _stage(self, changed: Sequence[str], big: Mapping[str, BigFile], *, bulk: bool) -> None:
        if big:
            self.git(
                "update-index",
                "--force-remove",
                "-z",
                "--stdin",
                input=b"".join(os.fsencode(p) + b"\0" for p in big),
            )
        excludes = [f":(top,literal,exclude){p}" for p in big]
        if bulk:
            specs = [*(self.scope() or [":(top)"]), *excludes]
            config = {"core.bigFileThreshold": "1", "core.compression": "0"}
        else:
            specs = [f":(top,literal){p}" for p in changed if p not in big]
            config = {}
            if not specs:
                return
        self.git(
            "add",
            "-A",
            "--ignore-errors",
            "--pathspec-from-file=-",
            "--pathspec-file-nul",
            input=b"".join(os.fsencode(s) + b"\0" for s in specs),
            config=config,
        )

    def _first(
        self, paths: Sequence[str], big: Mapping[str, BigFile]
    ) -> tuple[str, dict[str, str]]:
        """The first snapshot: every file into one pack by `git fast-import`, the index
        written here with each file's stat data (so the next snapshot is incremental).

        One pass over the files, hashed and packed by one git process while this one
        reads the next file: creating thousands of loose objects, or an index by
        re-hashing every file, costs seconds on some filesystems.
        """
        marks_file = self.root / "first.marks"
        if not any(not p.endswith("/") and p not in big for p in paths):
            _write_index(self.index, [])
            return self.git("write-tree").decode().strip(), {p: b.perm for p, b in big.items()}
        proc = subprocess.Popen(
            [
                "git",
                "-c",
                "safe.directory=*",
                "-c",
                "pack.compression=0",
                "fast-import",
                "--quiet",
                "--done",
                "--depth=0",  # no delta search between unrelated files: it dominates the time
                "--date-format=raw",
                f"--export-marks={marks_file}",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self._env,
            cwd=str(self.top),
        )
        assert proc.stdin is not None and proc.stdout is not None
        entries: list[tuple[bytes, os.stat_result, int, int]] = []
        perms: dict[str, str] = {}
        try:
            write = proc.stdin.write
            for path in paths:
                if path.endswith("/") or path in big:
                    continue  # an embedded repository; a file kept by hash only
                full = f"{self.top}/{path}"
                try:
                    st = os.lstat(full)
                    if stat.S_ISLNK(st.st_mode):
                        data, mode = os.fsencode(os.readlink(full)), 0o120000
                    elif stat.S_ISREG(st.st_mode):
                        with open(full, "rb") as f:
                            data = f.read()
                        mode = 0o100755 if st.st_mode & stat.S_IXUSR else 0o100644
                    else:
                        continue
                except OSError:
                    continue  # vanished or unreadable: not in this checkpoint
                mark = len(entries) + 1
                write(b"blob\nmark :%d\ndata %d\n" % (mark, len(data)))
                write(data)
                write(b"\n")
                entries.append((os.fsencode(path), st, mode, mark))
                perms[path] = _perm_of(st)
            commit_mark = len(entries) + 1
            write(
                b"commit refs/phoenix/tmp-trees\nmark :%d\n"
                b"committer phoenix <phoenix@localhost> 0 +0000\ndata 0\n" % commit_mark
            )
            for name, _st, mode, mark in entries:
                write(b"M %o :%d %s\n" % (mode, mark, _fi_path(name)))
            write(b'\nls :%d ""\ndone\n' % commit_mark)
            proc.stdin.close()
            out = proc.stdout.read()
            err = proc.stderr.read() if proc.stderr else b""
        finally:
            if proc.poll() is None:
                proc.wait(timeout=GIT_TIMEOUT)
        if proc.returncode != 0:
            last_line = err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["?"]
            raise CheckpointError(f"git fast-import failed: {last_line[0]}")
        self.git("update-ref", "-d", "refs/phoenix/tmp-trees", check=False)
        shas: dict[int, str] = {}
        for line in marks_file.read_text().splitlines():
            mark_text, sha = line.split()
            shas[int(mark_text[1:])] = sha
        marks_file.unlink(missing_ok=True)
        _write_index(self.index, [(n, st, mode, shas[m]) for n, st, mode, m in entries])
        if out.startswith(b"040000 tree "):
            tree = out.split(b" ")[2].split(b"\t")[0].decode()
        else:  # nothing to record: the empty tree
            tree = self.git("write-tree").decode().strip()
        self.git("write-tree")  # fills the index's cache-tree (the trees exist: no writes)
        for p, b in big.items():
            perms[p] = b.perm
        return tree, perms

    def _write_tree_packed(self) -> str:
        """Write the index's trees into one pack with fast-import (no loose object files)."""
        listing = self.git("ls-files", "-s", "-z")
        lines = []
        for entry in listing.split(b"\0"):
            if not entry:
                continue
            meta, path = entry.split(b"\t", 1)
            mode, sha, _stage = meta.split(b" ")
            if mode == b"160000":
                continue  # an embedded repository: its content is its own
            lines.append(b"M " + mode + b" " + sha + b" " + _fi_path(path) + b"\n")
        stream = (
            b"commit refs/phoenix/tmp-trees\nmark :1\n"
            b"committer phoenix <phoenix@localhost> 0 +0000\ndata 0\n"
            + b"".join(lines)
            + b'\nls :1 ""\ndone\n'
        )
        out = self.git(
            "fast-import",
            "--quiet",
            "--done",
            "--date-format=raw",
            input=stream,
            config={"pack.compression": "1"},
        )
        self.git("update-ref", "-d", "refs/phoenix/tmp-trees", check=False)
        # `ls :1 ""` answers "040000 tree <sha>\t" for the root ("missing" when empty).
        if not out.startswith(b"040000 tree "):
            return self.git("write-tree").decode().strip()
        tree = out.split(b" ")[2].split(b"\t")[0].decode()
        # Fill the index's cache-tree so the next write-tree is instant (trees exist: no writes).
        self.git("write-tree")
        return tree

    def _perms_all(self, big: Mapping[str, BigFile]) -> dict[str, str]:
        """Permission bits of every file in the index (and of the big files)."""
        paths = self._lines("ls-files", "-z", "--", *self.scope())
        top = self.top

        def lstat_perm(chunk: Sequence[str]) -> list[tuple[str, str]]:
            out = []
            for p in chunk:
                with contextlib.suppress(OSError):
                    out.append((p, _perm_of(os.lstat(f"{top}/{p}"))))
            return out

        perms: dict[str, str] = {}
        if len(paths) > 2000:
            half = len(paths) // 2
            with concurrent.futures.ThreadPoolExecutor(2) as pool:
                for part in pool.map(lstat_perm, (paths[:half], paths[half:])):
                    perms.update(part)
        else:
            perms.update(lstat_perm(paths))
        for p, b in big.items():
            perms[p] = b.perm
        return perms

    def _perms_update(
        self,
        previous: Mapping[str, str],
        changed: Sequence[str],
        big: Mapping[str, BigFile],
        previous_big: Mapping[str, BigFile],
    ) -> dict[str, str]:
        """Permission bits now: the known files' (`previous`, scanned afresh) plus the
        paths git reports changed or new."""
        perms = dict(previous)
        for p in changed:
            try:
                st = os.lstat(f"{self.top}/{p}")
            except OSError:
                perms.pop(p, None)
                continue
            if stat.S_ISDIR(st.st_mode):
                perms.pop(p, None)  # an embedded repository, not a file
            else:
                perms[p] = _perm_of(st)
        for p in previous_big:
            if p not in changed:  # a big file still there is untracked, so listed: it is gone
                perms.pop(p, None)
        for p, b in big.items():
            perms[p] = b.perm
        return perms

    def _store_perms(self, perms: Mapping[str, str]) -> str:
        body = json.dumps(dict(sorted(perms.items())), separators=(",", ":")).encode()
        sha = self.git("hash-object", "-w", "--stdin", input=body).decode().strip()
        self._perms_cache[sha] = dict(perms)
        return sha

    # -- comparing -------------------------------------------------------------------------------
    def raw_changes(self, a: Snapshot, b: Snapshot) -> list[RawChange]:
        """Every path that differs between two snapshots (content, type, mode, big files)."""
        out = self.git("diff-tree", "-r", "-z", "--no-renames", "--raw", a.tree, b.tree)
        found: dict[str, RawChange] = {}
        fields_ = out.split(b"\0")
        i = 0
        while i + 1 < len(fields_):
            head, path = fields_[i], os.fsdecode(fields_[i + 1])
            i += 2
            if not head.startswith(b":"):
                continue
            old_mode, new_mode, old_sha, new_sha, status = head[1:].decode().split(" ")
            found[path] = RawChange(
                path,
                status[0],
                None if old_mode == "000000" else old_mode,
                None if new_mode == "000000" else new_mode,
                None if set(old_sha) == {"0"} else old_sha,
                None if set(new_sha) == {"0"} else new_sha,
            )
        for path in sorted(set(a.big) | set(b.big)):
            old, new = a.big.get(path), b.big.get(path)
            if old is not None and new is not None and old.sha256 == new.sha256:
                if old.perm != new.perm:
                    found[path] = RawChange(path, "P", old.perm, new.perm, None, None)
                continue
            found[path] = RawChange(
                path,
                "B",
                old.perm if old else (found[path].old_mode if path in found else None),
                new.perm if new else (found[path].new_mode if path in found else None),
                old.sha256 if old else (found[path].old_sha if path in found else None),
                new.sha256 if new else (found[path].new_sha if path in found else None),
            )
        for path in sorted(set(a.perms) & set(b.perms)):
            if path in found or path in a.big or path in b.big:
                continue
            if a.perms[path] != b.perms[path]:
                found[path] = RawChange(path, "P", a.perms[path], b.perms[path], None, None)
        return [found[p] for p in sorted(found)]

    def file_changes(
        self, a: Snapshot, b: Snapshot, raw: Sequence[RawChange] | None = None
    ) -> tuple[list[FileChange], int, bool]:
        """The changes between two snapshots as the record shows them; (files, omitted, cut)."""
        raw = list(self.raw_changes(a, b) if raw is None else raw)
        omitted = max(0, len(raw) - FILES_LIMIT)
        raw = raw[:FILES_LIMIT]
        diffs = self._diffs(a, b, [r.path for r in raw if r.status in "AMDT"])
        total = 0
        truncated = False
        files = []
        for r in raw:
            in_a = r.path in a.perms or r.path in a.big
            in_b = r.path in b.perms or r.path in b.big
            kind = "added" if not in_a else "deleted" if not in_b else "modified"
            old_perm = a.perms.get(r.path) if in_a else None
            new_perm = b.perms.get(r.path) if in_b else None
            if r.status == "P" or (r.status == "M" and r.old_sha == r.new_sha):
                kind = "mode"
            diff, binary = diffs.get(r.path, ("", False))
            if len(diff) > DIFF_FILE_LIMIT or total + len(diff) > DIFF_TOTAL_LIMIT:
                diff = diff[: max(0, min(DIFF_FILE_LIMIT, DIFF_TOTAL_LIMIT - total))]
                diff += "\n… (diff cut)\n"
                truncated = True
            total += len(diff)
            size = None
            if in_b:
                big = b.big.get(r.path)
                size = big.size if big else self._blob_size(r.path, r.new_sha)
            files.append(
                FileChange(
                    path=self.display_path(r.path),
                    kind=kind,  # type: ignore[arg-type]
                    old_mode=old_perm,
                    new_mode=new_perm,
                    diff=diff,
                    binary=binary,
                    stored=not (r.path in a.big or r.path in b.big),
                    size=size,
                )
            )
        return files, omitted, truncated

    def display_path(self, path: str) -> str:
        """Paths are shown relative to the conversation's folder."""
        return path[len(self.prefix) :] if self.prefix and path.startswith(self.prefix) else path

    def _blob_size(self, path: str, sha: str | None) -> int | None:
        """The size of the version just checkpointed: the file on disk (a link: its target)."""
        if not sha:
            return None
        try:
            return os.lstat(self.top / path).st_size
        except OSError:
            return None

    def _diffs(self, a: Snapshot, b: Snapshot, paths: Sequence[str]) -> dict[str, tuple[str, bool]]:
        if not paths:
            return {}
        out = self.git(
            "diff-tree",
            "-r",
            "-p",
            "--no-renames",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            a.tree,
            b.tree,
            "--",
            *(f":(top,literal){p}" for p in paths),
        ).decode("utf-8", "replace")
        result: dict[str, tuple[str, bool]] = {}
        chunks = out.split("\ndiff --git ")
        for n, chunk in enumerate(chunks):
            if not chunk.strip():
                continue
            text = chunk if n == 0 else "diff --git " + chunk
            path = _patch_path(text)
            if path is None:
                continue
            binary = "\nBinary files " in text or "\nGIT binary patch" in text
            result[path] = ("" if binary else text.rstrip("\n") + "\n", binary)
        return result

    def changed_names(self, a: Snapshot, b: Snapshot) -> set[str]:
        return {r.path for r in self.raw_changes(a, b)}

    # -- restoring -------------------------------------------------------------------------------
    def restore(self, target: Snapshot, current: Snapshot) -> dict[str, list[str]]:
        """Make the folder match `target`: bytes, permission bits and presence.

        Returns what was done by category (paths relative to the conversation's
        folder). Files over the size limit at the target whose content changed
        cannot be brought back and are left as they are.
        """
        done: dict[str, list[str]] = {
            "restored": [],
            "recreated": [],
            "removed": [],
            "modes": [],
            "not_restorable": [],
        }
        raw = self.raw_changes(target, current)
        to_checkout: list[str] = []
        for r in raw:
            path = self.top / r.path
            in_target = r.path in target.perms or r.path in target.big
            in_current = r.path in current.perms or r.path in current.big
            show = self.display_path(r.path)
            if r.path in target.big:
                big = target.big[r.path]
                if r.status == "P" and in_current:
                    _chmod(path, big.perm)
                    done["modes"].append(show)
                else:
                    done["not_restorable"].append(show)
                continue
            if not in_target:
                _remove(path)
                done["removed"].append(show)
                continue
            if r.status == "P" or (r.status == "M" and r.old_sha == r.new_sha):
                _chmod(path, target.perms[r.path])
                done["modes"].append(show)
                continue
            to_checkout.append(r.path)
            done["restored" if in_current else "recreated"].append(show)
        for r in raw:
            if r.path not in target.perms and r.path not in target.big:
                _prune_empty_dirs((self.top / r.path).parent, self.cwd)
        if to_checkout:
            for p in to_checkout:
                _clear_way(self.top, p)
            tmp_index = self.root / "restore.index"
            env = {"GIT_INDEX_FILE": str(tmp_index)}
            try:
                self.git("read-tree", target.tree, env=env)
                self.git(
                    "checkout-index",
                    "-f",
                    "-z",
                    "--stdin",
                    input=b"".join(os.fsencode(p) + b"\0" for p in to_checkout),
                    env=env,
                )
            finally:
                tmp_index.unlink(missing_ok=True)
            for p in to_checkout:
                perm = target.perms.get(p)
                if perm and perm != "link":
                    _chmod(self.top / p, perm)
        return done


_POOL = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="phoenix-perms")
_U32 = 0xFFFFFFFF


def _write_index(path: Path, entries: Sequence[tuple[bytes, os.stat_result, int, str]]) -> None:
    """A git index (version 2) holding these entries with their stat data.

    The format is git's documented on-disk index (Documentation/gitformat-index):
    a header, one entry per path sorted by name, and a SHA-1 of it all. Entries
    whose mtime is not older than the index are "racily clean" to git, which
    then compares content: correctness never rests on the stat data alone.
    """
    body = bytearray(b"DIRC" + struct.pack(">II", 2, len(entries)))
    for name, st, mode, sha in sorted(entries, key=lambda e: e[0]):
        body += struct.pack(
            ">10I",
            (st.st_ctime_ns // 1_000_000_000) & _U32,
            st.st_ctime_ns % 1_000_000_000,
            (st.st_mtime_ns // 1_000_000_000) & _U32,
            st.st_mtime_ns % 1_000_000_000,
            st.st_dev & _U32,
            st.st_ino & _U32,
            mode,
            st.st_uid & _U32,
            st.st_gid & _U32,
            st.st_size & _U32,
        )
        body += bytes.fromhex(sha) + struct.pack(">H", min(len(name), 0xFFF)) + name
        body += b"\0" * (8 - (62 + len(name)) % 8)
    body += hashlib.sha1(body).digest()
    tmp = path.with_name(path.name + ".phoenix-tmp")
    tmp.write_bytes(bytes(body))
    os.replace(tmp, path)


def _scan_perms(top: Path, paths: Sequence[str]) -> dict[str, str]:
    """Permission bits of the files that still exist (lstat; os.lstat releases the GIL)."""
    out: dict[str, str] = {}
    for p in paths:
        with contextlib.suppress(OSError):
            st = os.lstat(f"{top}/{p}")
            if not stat.S_ISDIR(st.st_mode):
                out[p] = _perm_of(st)
    return out


def _checkpoint(commit: str, meta: Mapping[str, Any]) -> Checkpoint:
    kind = meta.get("kind")
    return Checkpoint(
        number=int(meta.get("n", 0)),
        kind=kind if isinstance(kind, str) else "turn",  # type: ignore[arg-type]
        created_at=str(meta.get("at", "")),
        commit=commit,
        tool_use_id=meta.get("tool_use_id") if isinstance(meta.get("tool_use_id"), str) else None,
        tool=meta.get("tool") if isinstance(meta.get("tool"), str) else None,
        files_changed=int(meta.get("files_changed", 0) or 0),
        reverted_to=meta.get("reverted_to") if isinstance(meta.get("reverted_to"), int) else None,
    )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _fi_path(path: bytes) -> bytes:
    """A path for fast-import: C-quoted when it holds a quote, backslash or control byte."""
    if path.startswith(b'"') or any(c < 0x20 or c in (0x22, 0x5C, 0x7F) for c in path):
        out = bytearray(b'"')
        for c in path:
            if c in (0x22, 0x5C):
                out += b"\\" + bytes([c])
            elif c < 0x20 or c == 0x7F:
                out += f"\\{c:03o}".encode()
            else:
                out.append(c)
        return bytes(out + b'"')
    return path


def _patch_path(text: str) -> str | None:
    """The path a `diff --git` section is about (from its +++/--- or header line)."""
    for line in text.splitlines()[:6]:
        for marker in ("+++ b/", "--- a/"):
            if line.startswith(marker):
                return _unquote(line[len(marker) :])
    first = text.splitlines()[0] if text else ""
    if first.startswith("diff --git a/"):
        body = first[len("diff --git a/") :]
        half = (len(body) - 3) // 2  # "X b/X"
        if body[half : half + 3] == " b/":
            return body[:half]
    return None


def _unquote(path: str) -> str:
    if path.startswith('"') and path.endswith('"'):
        raw = path[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
        return raw.encode("latin-1").decode("utf-8", "replace")
    return path.rstrip("\t")


def _chmod(path: Path, perm: str) -> None:
    if perm == "link":
        return
    try:
        os.chmod(path, int(perm, 8), follow_symlinks=False)
    except (OSError, NotImplementedError, ValueError):
        with contextlib.suppress(OSError, ValueError):
            os.chmod(path, int(perm, 8))


def _remove(path: Path) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            return  # a file became a folder: its files are listed on their own
        path.unlink()
    except FileNotFoundError:
        pass


def _clear_way(top: Path, rel: str) -> None:
    """Remove an empty folder standing where a file must come back."""
    path = top / rel
    if path.is_dir() and not path.is_symlink():
        with contextlib.suppress(OSError):
            path.rmdir()


def _prune_empty_dirs(folder: Path, stop: Path) -> None:
    """Remove folders left empty by removed files, up to (not including) the conversation's."""
    while folder != stop and stop in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent


def size_of(folder: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


def iter_paths(listing: bytes) -> Iterable[str]:
    return (os.fsdecode(p) for p in listing.split(b"\0") if p)
