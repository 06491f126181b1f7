"""A shadow git object store of one conversation's working tree.

Why git's object store: it is content-addressed and incremental, and git
already reads, diffs and checks it out well; a hand-written store would
re-invent all of that. Git (the command, the reference implementation) does
the reading: ignore rules (`ls-files`), diffs (`diff-tree`), restores
(`read-tree`/`checkout-index`), refs (`update-ref`). The writing is done here,
in-process: which files changed comes from a stat cache (`checkpoints.scan`),
and their objects are written in git's own formats (`checkpoints.objects`),
because one git process per step, each reading a 10,000-entry index, cost more
than the 100 ms a checkpoint after a tool call may take (benchmark:
tests/benchmarks/bench_checkpoint.py).

Isolation from the user's repository is total: every call runs with
`GIT_DIR` pointing at this store (under `$PHOENIX_HOME/checkpoints/<conversation
id>/`), an index file that never exists, a fresh environment (no inherited
`GIT_*`), no system or global config; the only files read from a user's
`.git` are `info/exclude` (copied into a rules file here). The user's HEAD,
index, refs and stash are never opened. Inside a repository the work tree is
the repository's top, so every `.gitignore` between the top and the
conversation's folder applies; checkpoints cover the conversation's folder.

Byte-exactness: files are read and written as bytes (no filters, no line-end
conversion; `info/attributes` unsets text/eol/filter/ident/encoding for the
restores). Git records only the executable bit and no folders: a manifest blob
per checkpoint keeps the full permission bits of every file and folder
("dir/" keys), so empty folders and folder modes come back too. Files over
`max_file_size` are kept out of the object store and recorded by size and
SHA-256 only ("not restorable").
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import shutil
import stat
import subprocess
import threading
import time
from collections import OrderedDict
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from phoenix_nb.checkpoints.changes import Checkpoint, CheckpointKind, FileChange
from phoenix_nb.checkpoints.manifest import ManifestText
from phoenix_nb.checkpoints.objects import BLOB, COMMIT, ObjectSink, Trees
from phoenix_nb.checkpoints.scan import (
    RACY_MARGIN_NS,
    FileRec,
    Found,
    Scanner,
    TooManyFiles,
    TreeState,
    hash_files,
)
from phoenix_nb.checkpoints.watch import FULL_SCAN_EVERY, TreeWatch, local_filesystem
from phoenix_nb.errors import PhoenixError

REF_PREFIX = "refs/phoenix/cp/"
BULK_THRESHOLD = 200  # more files to read than this: their objects go into one pack
GIT_TIMEOUT = 600.0
DIFF_FILE_LIMIT = 20_000  # characters of diff kept per file
DIFF_TOTAL_LIMIT = 100_000  # characters of diff kept per tool call
FILES_LIMIT = 500  # files listed per tool call
META_VERSION = 2  # 2: folders are in the manifest ("dir/" keys)
_PATHSPECS_MAX = 2_000  # new names listed by name; more: the whole repository is listed
_FLATS_KEPT = 16  # snapshots whose file listing stays in memory for comparisons

_ATTRIBUTES = "* -text -eol -filter -ident -working-tree-encoding\n"
_CONFIG = {
    "core.bare": "false",
    "core.autocrlf": "false",
    "core.safecrlf": "false",
    "core.filemode": "true",
    "core.symlinks": "true",
    "core.ignorecase": "false",
    "core.fsmonitor": "false",
    "core.quotePath": "false",
    "core.precomposeUnicode": "false",
    "core.hooksPath": os.devnull,
    "gc.auto": "0",
    "maintenance.auto": "false",
}
_IDENT = b"phoenix checkpoints <phoenix@localhost>"
_EXCLUDE_PLACEHOLDER = "# rules: each listing's core.excludesFile (exclude* beside git/)\n"


def _config_text() -> str:
    sections: dict[str, list[str]] = {}
    for key, value in _CONFIG.items():
        section, _, name = key.partition(".")
        sections.setdefault(section, []).append(f"\t{name} = {value}\n")
    return "".join(f"[{section}]\n" + "".join(lines) for section, lines in sections.items())


Flat = dict[str, tuple[int, bytes]]  # path -> (git mode, object name)


class CheckpointError(PhoenixError):
    """A checkpoint could not be taken or read (git missing, disk full, bad store)."""


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
    dirs_recorded: bool = False  # folders are in `perms` ("dir/" -> "0755")


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


_PERMS: dict[int, str] = {}


def _perm_of_mode(mode: int) -> str:
    perm = _PERMS.get(mode)
    if perm is None:
        perm = _PERMS[mode] = "link" if stat.S_ISLNK(mode) else f"{stat.S_IMODE(mode):04o}"
    return perm


class ShadowRepo:
    """One conversation's checkpoints: a git dir, a stat cache and the user's folder."""

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
        self.no_index = root / "no-index"  # never created: git sees an empty index
        self.state_file = root / "state"
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
        self._env = self._environment()
        self._perms_cache: dict[str, dict[str, str]] = {}
        self._state: TreeState | None = None
        self._trees: Trees | None = None  # the trees of the checkpoint `self._state` describes
        self._flats: OrderedDict[str, Flat] = OrderedDict()
        # What the inotify watch needs besides its events (see checkpoints.watch).
        self._watch = TreeWatch(str(self.top))
        self._linked: set[str] = set()  # files with more than one hard link: always looked at
        self._orphans: set[str] = set()  # recorded files in folders not watched (kept, ignored)
        self._devices: set[int] = set()  # filesystems of the recorded folders
        self._local = False  # all of them local (inotify hears every write)
        self._manifest_text: ManifestText | None = None  # the encoded last manifest …
        self._manifest_sha = ""  # … and its blob's name ("" when not in step)
        self._full_pass_at = 0.0  # time.monotonic() of the last pass over every file

    # -- running git --------------------------------------------------------------------------
    def _environment(self) -> dict[str, str]:
        ident = "phoenix checkpoints"
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.root),
            "LANG": "C",
            "LC_ALL": "C",
            "GIT_DIR": str(self.git_dir),
            "GIT_INDEX_FILE": str(self.no_index),
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
        cwd: Path | None = None,
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
                cwd=str(cwd or self.top),
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
        """Create the store on first use."""
        if not (self.git_dir / "HEAD").exists():
            self.root.mkdir(parents=True, exist_ok=True)
            tmp = self.root / f"git.tmp{os.getpid()}"
            if tmp.exists():
                shutil.rmtree(tmp)
            bare_env = {k: v for k, v in self._env.items() if k != "GIT_WORK_TREE"}
            done = subprocess.run(
                ["git", "init", "-q", "--bare", str(tmp)],
                env={**bare_env, "GIT_DIR": str(tmp)},
                capture_output=True,
                check=False,
            )
            if done.returncode != 0:
                raise CheckpointError(
                    f"cannot create the checkpoint store in {self.root}: "
                    + done.stderr.decode("utf-8", "replace").strip()
                )
            with open(tmp / "config", "a") as config:  # git's config format, written here:
                config.write(_config_text())  # a `git config` process per setting costs more
            (tmp / "info").mkdir(exist_ok=True)
            (tmp / "info" / "attributes").write_text(_ATTRIBUTES)
            (tmp / "info" / "exclude").write_text(_EXCLUDE_PLACEHOLDER)
            os.replace(tmp, self.git_dir)
        exclude = self.git_dir / "info" / "exclude"
        try:
            stale = exclude.read_text() != _EXCLUDE_PLACEHOLDER
        except OSError:
            stale = True
        if stale:  # a store of an older version kept top-anchored rules here
            exclude.parent.mkdir(exist_ok=True)
            exclude.write_text(_EXCLUDE_PLACEHOLDER)
        # An index of an older version of this store would make git see tracked files.
        self.no_index.unlink(missing_ok=True)

    def _skipped(self) -> list[str]:
        """The store and the other excluded folders, relative to the top."""
        out = []
        for path in [self.root, *self.exclude]:
            try:
                rel = path.resolve().relative_to(self.top).as_posix()
            except ValueError:
                continue
            if rel != ".":
                out.append(rel)
        return out

    def _rules_file(self, context: str) -> Path:
        """The extra ignore rules of one repository (the top, or one nested in the folder):
        its own `info/exclude`, and the store's folders anchored to it."""
        base = self.top / context if context else self.top
        lines = ["# written by phoenix: info/exclude of the repository and phoenix's folders"]
        user_exclude = base / ".git" / "info" / "exclude"
        if (self.in_repo or context) and user_exclude.is_file():
            with contextlib.suppress(OSError):
                lines.append(user_exclude.read_text(errors="replace"))
        for rel in self._skipped():
            if not context:
                lines.append("/" + rel + "/")
            elif rel.startswith(context + "/"):
                lines.append("/" + rel[len(context) + 1 :] + "/")
        text = "\n".join(lines) + "\n"
        name = "exclude" if not context else "exclude-" + _short_hash(context)
        target = self.root / name
        try:
            same = target.read_text() == text
        except OSError:
            same = False
        if not same:
            tmp = target.with_name(name + ".tmp")
            tmp.write_text(text)
            os.replace(tmp, target)
        return target

    def _list_ignored(self, context: str, specs: list[str]) -> list[str]:
        """Ignored paths in one repository (relative to it; pruned folders end with "/")."""
        work = self.top / context if context else self.top
        args = ["ls-files", "-z", "-o", "-i", "--exclude-standard", "--directory", "--"]
        if len(specs) <= _PATHSPECS_MAX:  # else: the whole repository, still one call
            args += [f":(top,literal){s}" for s in specs]
        out = self.git(
            *args,
            env={"GIT_WORK_TREE": str(work)},
            config={"core.excludesFile": str(self._rules_file(context))},
            cwd=work,
        )
        return [os.fsdecode(p) for p in out.split(b"\0") if p]

    def _scanner(self) -> Scanner:
        return Scanner(
            self.top,
            self.prefix.rstrip("/"),
            in_repo=self.in_repo,
            skip=self._skipped(),
            lister=self._list_ignored,
            max_files=self.max_files,
        )

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
        dirs = int(meta.get("v", 1) or 1) >= META_VERSION
        return Snapshot(checkpoint, tree, perms, big, dirs)

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

        Incremental: the stat cache of the last checkpoint names what changed
        (`scan.Scanner.incremental`); only those files are read and hashed, and
        only the trees above them written. With `compare_to`, also returns what
        changed since that snapshot (and stores the count in the checkpoint,
        for listings).
        """
        with _SAVER.busy():
            return self._take(kind, tool_use_id, tool, compare_to, extra)

    def _take(
        self,
        kind: CheckpointKind,
        tool_use_id: str | None,
        tool: str | None,
        compare_to: Snapshot | None,
        extra: Mapping[str, Any] | None,
    ) -> tuple[Snapshot, list[RawChange]]:
        self.ensure()
        last = self._latest()
        number = last.checkpoint.number + 1 if last is not None else 1
        stamp = self._stamp()
        state = self._state_for(last)
        scanner = self._scanner()
        watch = self._watch
        heard = None
        if state is not None and self._local:
            heard = watch.changes(state.commit)
            if time.monotonic() - self._full_pass_at > FULL_SCAN_EVERY:
                heard = None  # what inotify cannot hear is bounded by a full pass
        watch.synced = ""  # trusted again only once this checkpoint is written
        scanner.on_dir = watch.add
        cache = state
        walked_all = state is None
        rescanned = heard is None  # every recorded file looked at: the watch starts afresh
        try:
            if state is not None and heard is not None:
                scanner.linked = self._linked
                found = scanner.watched(
                    state, heard.files | self._linked | self._orphans, heard.listings
                )
            elif state is not None:
                watch.reset()
                found = scanner.incremental(state)
            else:
                watch.reset()
                cache = self._stale_cache(last)
                keep = list(self._flat(last.tree)) if last is not None else []
                found = scanner.full(cache, keep)
            if state is not None and found.rules_changed:
                scanner.linked = set()
                found = scanner.full(state, state.files)
                walked_all = rescanned = True
        except TooManyFiles as many:
            raise CheckpointError(
                f"more than {self.max_files:,} files under {self.cwd} ({many.count:,} so "
                "far): more than checkpoints cover; work in a smaller folder"
            ) from None
        packed = len(found.stats) > BULK_THRESHOLD
        known: set[bytes] = set()
        if packed and last is not None:
            known = {sha for _mode, sha in self._flat(last.tree).values()}
        sink = ObjectSink(self.git_dir / "objects", packed=packed)
        previous_files = cache.files if cache is not None else {}
        previous_big = cache.big if cache is not None else {}
        hashed, new_big = hash_files(
            str(self.top),
            found.stats,
            previous_files,
            previous_big,
            sink,
            known,
            self.max_file_size,
        )
        files = found.files
        files.update(hashed)
        big = {p: b for p, b in previous_big.items() if p in files and not files[p][5]}
        big.update(new_big)
        trees = None if walked_all else self._trees
        if trees is not None:
            for path in found.removed | (found.stats.keys() - hashed.keys()):
                trees.remove(path)
            for path, rec in hashed.items():
                if rec[5]:
                    trees.set(path, rec[6], rec[5])
                else:
                    trees.remove(path)  # now over the size limit
        else:
            trees = Trees()
            for path, rec in files.items():
                if rec[5]:
                    trees.set(path, rec[6], rec[5])
        tree = trees.flush(sink).hex()
        incremental = not walked_all and state is not None and last is not None
        touched: set[str] | None = None  # manifest keys that may differ from the last's
        if incremental and last is not None and state is not None and last.dirs_recorded:
            perms, touched = self._manifest_patch(last.perms, state, found, hashed)
        else:
            perms = self._manifest(files, found)
        if last is not None and (
            perms == last.perms
            if touched is None
            else all(perms.get(k) == last.perms.get(k) for k in touched)
        ):
            perms_sha = self._last_perms_sha
        else:
            text = self._manifest_text
            fresh = text is None or touched is None or self._manifest_sha != self._last_perms_sha
            self._manifest_sha = ""
            if text is None or touched is None or fresh:
                text = self._manifest_text = ManifestText(perms)
            else:
                text.update(perms, touched)
            perms_sha = sink.add(BLOB, text.body()).hex()
            self._manifest_sha = perms_sha
            self._perms_cache[perms_sha] = perms
        created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        big_files = {p: BigFile(b.size, b.sha256, perms[p]) for p, b in big.items()}
        meta: dict[str, Any] = {
            "v": META_VERSION,
            "n": number,
            "kind": kind,
            "at": created,
            "tool_use_id": tool_use_id,
            "tool": tool,
            "perms": perms_sha,
            "big": {
                p: {"size": b.size, "sha256": b.sha256, "perm": b.perm}
                for p, b in big_files.items()
            },
            "cwd": str(self.cwd),
            **dict(extra or {}),
        }
        previous_flat = self._flats.get(last.tree) if incremental and last is not None else None
        if previous_flat is not None:
            flat = dict(previous_flat)
            for path in found.removed | (found.stats.keys() - hashed.keys()):
                flat.pop(path, None)
            for path, rec in hashed.items():
                if rec[5]:
                    flat[path] = (rec[6], rec[5])
                else:
                    flat.pop(path, None)
        else:
            flat = {p: (r[6], r[5]) for p, r in files.items() if r[5]}
        self._keep_flat(tree, flat)
        raw: list[RawChange] = []
        if compare_to is not None:
            provisional = Snapshot(_checkpoint("", meta), tree, perms, big_files, True)
            among = None  # the paths that can differ, when this checkpoint follows compare_to
            follows = last is not None and compare_to.checkpoint.commit == last.checkpoint.commit
            if touched is not None and follows:
                among = touched | found.removed | found.stats.keys()
            raw = self.raw_changes(compare_to, provisional, among)
            meta["files_changed"] = len(raw)
        body = json.dumps(meta, sort_keys=True).encode()
        stamp_text = b"%d +0000" % int(time.time())
        commit_body = b"tree %s\nauthor %s %s\ncommitter %s %s\n\n%s\n" % (
            tree.encode(),
            _IDENT,
            stamp_text,
            _IDENT,
            stamp_text,
            body,
        )
        commit = sink.add(COMMIT, commit_body).hex()
        sink.close()
        self._create_ref(f"{REF_PREFIX}{number:08d}", commit)
        snapshot = Snapshot(_checkpoint(commit, meta), tree, perms, big_files, True)
        self._remember(snapshot, perms_sha)
        self._state = TreeState(
            commit, stamp, files, found.dirs, frozenset(found.roots), found.sources, big
        )
        self._trees = trees
        self._save_state(self._state)
        self._resync_watch(state, found, scanner, rescanned, commit)
        return snapshot, raw

    def _resync_watch(
        self,
        state: TreeState | None,
        found: Found,
        scanner: Scanner,
        rescanned: bool,
        commit: str,
    ) -> None:
        """After a checkpoint: what the next one may skip, and whether the watch is trusted."""
        dirs = found.dirs
        gone = set(found.gone_dirs)
        if rescanned:
            self._full_pass_at = time.monotonic()
            if state is not None:
                gone |= state.dirs.keys() - dirs.keys()
            self._orphans = {p for p in found.files if p.rpartition("/")[0] not in dirs}
            self._devices = set(scanner.devices)
            self._local = local_filesystem(self._devices)
        elif not scanner.devices <= self._devices:
            self._devices |= scanner.devices
            self._local = self._local and local_filesystem(self._devices)
        self._linked = scanner.linked
        if self._watch.broken:
            self._watch.close()  # give the watches back (a per-user limit); retried next time
            return
        self._watch.forget(gone - dirs.keys())
        if self._local:
            self._watch.synced = commit

    def _create_ref(self, name: str, commit: str) -> None:
        """A new loose ref, as `git update-ref` writes one (a `.lock` file renamed over it):
        a git process here cost more than the rest of an incremental checkpoint. Checkpoint
        numbers only grow and the recorder's file lock orders the writers."""
        path = self.git_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = path.with_name(path.name + ".lock")
        if path.exists():
            raise CheckpointError(f"checkpoint ref {name} exists already")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
        try:
            fd = os.open(lock, flags, 0o644)
        except FileExistsError:  # a crashed writer's (writers are serialized by the caller)
            lock.unlink(missing_ok=True)
            fd = os.open(lock, flags, 0o644)
        try:
            os.write(fd, f"{commit}\n".encode())
        finally:
            os.close(fd)
        os.replace(lock, path)

    def _manifest_patch(
        self,
        previous: Mapping[str, str],
        state: TreeState,
        found: Found,
        hashed: Mapping[str, FileRec],
    ) -> tuple[dict[str, str], set[str]]:
        """The last manifest with this scan's changes applied (what `_manifest` would give),
        and the keys it may have changed."""
        perms = dict(previous)
        touched: set[str] = set()
        for path in found.removed | (found.stats.keys() - hashed.keys()):
            perms.pop(path, None)
            touched.add(path)
        for path, rec in hashed.items():
            perms[path] = _perm_of_mode(rec[4])
            touched.add(path)
        scope = self.prefix.rstrip("/")
        old_dirs, new_dirs = state.dirs, found.dirs
        for folder in old_dirs.keys() - new_dirs.keys():
            perms.pop(folder + "/", None)
            touched.add(folder + "/")
        for folder, drec in new_dirs.items():
            old = old_dirs.get(folder)
            if folder != scope and (old is None or old[3] != drec[3]):
                perms[folder + "/"] = _perm_of_mode(drec[3])
                touched.add(folder + "/")
        return perms, touched

    def _manifest(self, files: Mapping[str, FileRec], found: Found) -> dict[str, str]:
        """Permission bits of every file ("link" for links) and folder ("dir/" keys)."""
        perm = _perm_of_mode
        perms = {p: perm(r[4]) for p, r in files.items()}
        scope = self.prefix.rstrip("/")
        for folder, rec in found.dirs.items():
            if folder != scope:
                perms[folder + "/"] = perm(rec[3])
        return perms

    def _stamp(self) -> int:
        """The filesystem's clock now (minus a margin): later times are "racy"."""
        path = self.root / "stamp"
        with open(path, "wb") as f:
            f.write(b"x")
            f.flush()
            now = os.fstat(f.fileno()).st_mtime_ns
        return min(now, time.time_ns()) - RACY_MARGIN_NS

    def _state_for(self, last: Snapshot | None) -> TreeState | None:
        """The stat cache of the last checkpoint, if this process (or the file) has it."""
        if last is None:
            return None
        commit = last.checkpoint.commit
        if self._state is not None and self._state.commit == commit and self._trees is not None:
            return self._state
        loaded = self._load_state()
        if loaded is None or loaded.commit != commit:
            return None
        trees = Trees()
        for path, rec in loaded.files.items():
            if rec[5]:
                trees.set(path, rec[6], rec[5])
        if trees.flush(ObjectSink(self.git_dir / "objects", packed=False)).hex() != last.tree:
            return None
        self._state, self._trees = loaded, trees
        return loaded

    def _stale_cache(self, last: Snapshot | None) -> TreeState | None:
        """A stat cache of an older checkpoint, holding only what the last one still has
        (other objects may have been pruned since)."""
        if last is None:
            return None
        cache = self._load_state()
        if cache is None:
            return None
        flat = self._flat(last.tree)
        present = {sha for _mode, sha in flat.values()}
        cache.files = {
            p: r for p, r in cache.files.items() if r[5] in present or (not r[5] and p in last.big)
        }
        return cache

    def _load_state(self) -> TreeState | None:
        _SAVER.flush(self.state_file)
        try:
            data = self.state_file.read_bytes()
        except OSError:
            return None
        return TreeState.load(data)

    def _save_state(self, state: TreeState) -> None:
        """Written a moment later by a timer thread (and at exit): serializing the cache
        holds the GIL for milliseconds, which right after a checkpoint would delay the
        caller's next steps (the diff of the tool call). A lost or stale file only costs
        reading the files again."""
        _SAVER.schedule(self.state_file, state)

    def wait_saved(self) -> None:
        """Write the stat cache of the last checkpoint now, if it is still pending."""
        _SAVER.flush(self.state_file)

    def _flat(self, tree: str) -> Flat:
        """path -> (git mode, object name) of every file in a tree."""
        flat = self._flats.get(tree)
        if flat is not None:
            self._flats.move_to_end(tree)
            return flat
        out = self.git("ls-tree", "-r", "-z", "--full-tree", tree)
        flat = {}
        for entry in out.split(b"\0"):
            if not entry:
                continue
            head, path = entry.split(b"\t", 1)
            mode, _kind, sha = head.split(b" ")
            flat[os.fsdecode(path)] = (int(mode, 8), bytes.fromhex(sha.decode()))
        self._keep_flat(tree, flat)
        return flat

    def _keep_flat(self, tree: str, flat: Flat) -> None:
        self._flats[tree] = flat
        self._flats.move_to_end(tree)
        while len(self._flats) > _FLATS_KEPT:
            self._flats.popitem(last=False)

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
        self._last_marker = marker
        self._last_perms_sha = str(self.meta(found[-1].commit).get("perms") or "") if found else ""
        return self._last

    def _remember(self, snapshot: Snapshot, perms_sha: str) -> None:
        marker = f"{snapshot.checkpoint.number} {snapshot.checkpoint.commit}\n"
        tmp = self.root / "last.tmp"
        tmp.write_text(marker)
        os.replace(tmp, self.root / "last")
        self._last, self._last_marker, self._last_perms_sha = snapshot, marker, perms_sha

    # -- comparing -------------------------------------------------------------------------------
    def raw_changes(
        self, a: Snapshot, b: Snapshot, among: Collection[str] | None = None
    ) -> list[RawChange]:
        """Every path that differs between two snapshots (content, type, mode, big files,
        folders: an added or removed folder counts when nothing recorded is inside it).

        `among`: every path (files, "dir/" folders) at which `b` can differ from `a`,
        when the caller knows them (`b` was taken right after `a`, the ignore rules
        unchanged); only those are compared, instead of every recorded path."""
        if among is not None and a.dirs_recorded and b.dirs_recorded:
            return self._raw_among(a, b, among)
        found: dict[str, RawChange] = {}
        if a.tree != b.tree:
            if a.tree in self._flats and b.tree in self._flats:
                self._compare_flats(self._flat(a.tree), self._flat(b.tree), found)
            else:
                self._diff_tree(a.tree, b.tree, found)
        self._compare_big(a, b, set(a.big) | set(b.big), found)
        if a.perms != b.perms:
            b_perms = b.perms
            for path in {p for p, _v in a.perms.items() - b_perms.items()}:
                perm, other = a.perms[path], b_perms.get(path)
                if other is None or other == perm or path in found:
                    continue
                if path in a.big or path in b.big:
                    continue
                found[path] = RawChange(path, "P", perm, other, None, None)
            if a.dirs_recorded and b.dirs_recorded:
                for side, other_side, status in ((a, b, "D"), (b, a, "A")):
                    gone = [p for p in side.perms.keys() - other_side.perms.keys() if p[-1:] == "/"]
                    if not gone:
                        continue
                    holders = _holding_folders(side.perms)
                    for path in gone:
                        if path not in holders:
                            perm = side.perms[path]
                            old, new = (perm, None) if status == "D" else (None, perm)
                            found[path] = RawChange(path, status, old, new, None, None)
        return [found[p] for p in sorted(found)]

    def _raw_among(self, a: Snapshot, b: Snapshot, among: Collection[str]) -> list[RawChange]:
        """`raw_changes` looking only at `among` (folders below a gone folder changed too,
        so its holders are among them)."""
        found: dict[str, RawChange] = {}
        if a.tree != b.tree:
            fa, fb = self._flat(a.tree), self._flat(b.tree)
            self._compare_flats(fa, fb, found, [p for p in among if fa.get(p) != fb.get(p)])
        self._compare_big(a, b, [p for p in among if p in a.big or p in b.big], found)
        a_perms, b_perms = a.perms, b.perms
        for path in among:
            perm, other = a_perms.get(path), b_perms.get(path)
            if perm is None or other is None or other == perm or path in found:
                continue
            if path in a.big or path in b.big:
                continue
            found[path] = RawChange(path, "P", perm, other, None, None)
        for side, other_side, status in ((a, b, "D"), (b, a, "A")):
            only = [p for p in among if p in side.perms and p not in other_side.perms]
            gone = [p for p in only if p[-1:] == "/"]
            if not gone:
                continue
            holders = _holding_folders(dict.fromkeys(only, ""))
            for path in gone:
                if path not in holders:
                    perm = side.perms[path]
                    old, new = (perm, None) if status == "D" else (None, perm)
                    found[path] = RawChange(path, status, old, new, None, None)
        return [found[p] for p in sorted(found)]

    @staticmethod
    def _compare_big(
        a: Snapshot, b: Snapshot, paths: Iterable[str], found: dict[str, RawChange]
    ) -> None:
        for path in sorted(paths):
            was, now = a.big.get(path), b.big.get(path)
            if was is not None and now is not None and was.sha256 == now.sha256:
                if was.perm != now.perm:
                    found[path] = RawChange(path, "P", was.perm, now.perm, None, None)
                continue
            found[path] = RawChange(
                path,
                "B",
                was.perm if was else (found[path].old_mode if path in found else None),
                now.perm if now else (found[path].new_mode if path in found else None),
                was.sha256 if was else (found[path].old_sha if path in found else None),
                now.sha256 if now else (found[path].new_sha if path in found else None),
            )

    @staticmethod
    def _compare_flats(
        fa: Flat, fb: Flat, found: dict[str, RawChange], paths: Iterable[str] | None = None
    ) -> None:
        if paths is None:
            paths = {p for p, _v in fa.items() ^ fb.items()}
        for path in sorted(paths):
            was, now = fa.get(path), fb.get(path)
            if now is None and was is not None:
                found[path] = RawChange(path, "D", f"{was[0]:06o}", None, was[1].hex(), None)
            elif was is None and now is not None:
                found[path] = RawChange(path, "A", None, f"{now[0]:06o}", None, now[1].hex())
            elif was is not None and now is not None:
                status = "T" if (was[0] ^ now[0]) & 0o170000 else "M"
                found[path] = RawChange(
                    path, status, f"{was[0]:06o}", f"{now[0]:06o}", was[1].hex(), now[1].hex()
                )

    def _diff_tree(self, a: str, b: str, found: dict[str, RawChange]) -> None:
        out = self.git("diff-tree", "-r", "-z", "--no-renames", "--raw", a, b)
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

    def file_changes(
        self, a: Snapshot, b: Snapshot, raw: Sequence[RawChange] | None = None
    ) -> tuple[list[FileChange], int, bool]:
        """The changes between two snapshots as the record shows them; (files, omitted, cut)."""
        raw = list(self.raw_changes(a, b) if raw is None else raw)
        omitted = max(0, len(raw) - FILES_LIMIT)
        raw = raw[:FILES_LIMIT]
        diffs = self._diffs(
            a, b, [r.path for r in raw if r.status in "AMDT" and not r.path.endswith("/")]
        )
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
        """Make the folder match `target`: bytes, permission bits and presence, of files and
        (when both checkpoints recorded them) folders.

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
        shown = {r.path for r in raw}
        folders = target.dirs_recorded and current.dirs_recorded
        to_checkout: list[str] = []
        to_chmod: list[tuple[str, str]] = []
        to_remove: list[str] = []
        for r in raw:
            if r.path.endswith("/"):
                continue  # folders: below
            in_target = r.path in target.perms or r.path in target.big
            in_current = r.path in current.perms or r.path in current.big
            show = self.display_path(r.path)
            if r.path in target.big:
                big = target.big[r.path]
                if r.status == "P" and in_current:
                    to_chmod.append((r.path, big.perm))
                    done["modes"].append(show)
                else:
                    done["not_restorable"].append(show)
                continue
            if not in_target:
                to_remove.append(r.path)
                done["removed"].append(show)
                continue
            if r.status == "P" or (r.status == "M" and r.old_sha == r.new_sha):
                to_chmod.append((r.path, target.perms[r.path]))
                done["modes"].append(show)
                continue
            to_checkout.append(r.path)
            done["restored" if in_current else "recreated"].append(show)
        want = {p[:-1]: m for p, m in target.perms.items() if p[-1:] == "/"} if folders else {}
        have = {p[:-1]: m for p, m in current.perms.items() if p[-1:] == "/"} if folders else {}
        touched = [*to_remove, *to_checkout, *(p for p, _m in to_chmod), *want, *have]
        opened = _open_parents(self.top, touched, self.cwd)
        for path in to_remove:
            _remove(self.top / path)
        if folders:
            for folder in sorted(have.keys() - want.keys(), key=_depth, reverse=True):
                try:
                    (self.top / folder).rmdir()
                except OSError:
                    continue  # holds what checkpoints do not record: left, reported after
                if folder + "/" in shown:
                    done["removed"].append(self.display_path(folder + "/"))
            for folder in sorted(want.keys() - have.keys(), key=_depth):
                made = self.top / folder
                if made.is_symlink() or (made.exists() and not made.is_dir()):
                    _remove(made)
                with contextlib.suppress(OSError):
                    made.mkdir(exist_ok=True)
                if folder + "/" in shown:
                    done["recreated"].append(self.display_path(folder + "/"))
        else:
            for path in to_remove:
                _prune_empty_dirs((self.top / path).parent, self.cwd)
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
        for path, perm in to_chmod:
            _chmod(self.top / path, perm)
        # Folder modes last, deepest first: writing into them needed them open.
        for folder in sorted(want, key=_depth, reverse=True):
            if want[folder] != have.get(folder) or folder in opened:
                _chmod(self.top / folder, want[folder])
                if folder in have and want[folder] != have[folder]:
                    done["modes"].append(self.display_path(folder + "/"))
        for folder, perm in opened.items():
            if folder not in want and (self.top / folder).is_dir():
                _chmod(self.top / folder, perm)
        return done


class _StateSaver:
    """Stat caches waiting to be written: by a timer thread once no checkpoint has been
    taken for `SAVE_DELAY` seconds and none is under way, by `flush` when one is needed
    now, and at interpreter exit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._pending: dict[Path, TreeState] = {}
        self._timer: threading.Timer | None = None
        self._busy = 0

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        """A checkpoint is being taken: writing now would hold the GIL under it."""
        with self._lock:
            self._busy += 1
        try:
            yield
        finally:
            with self._lock:
                self._busy -= 1

    def schedule(self, path: Path, state: TreeState) -> None:
        with self._lock:
            self._pending[path] = state
            self._restart_timer()

    def _restart_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = threading.Timer(SAVE_DELAY, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            if self._busy:
                self._restart_timer()
                return
        self.flush()

    def flush(self, only: Path | None = None) -> None:
        with self._write_lock:
            with self._lock:
                if only is None:
                    items, self._pending = list(self._pending.items()), {}
                else:
                    state = self._pending.pop(only, None)
                    items = [] if state is None else [(only, state)]
            for path, state in items:
                tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
                with contextlib.suppress(OSError):
                    tmp.write_bytes(state.dump())
                    os.replace(tmp, path)


SAVE_DELAY = 1.0
_SAVER = _StateSaver()
atexit.register(_SAVER.flush)


def _depth(path: str) -> int:
    return path.count("/")


def _short_hash(text: str) -> str:
    return hashlib.sha1(os.fsencode(text)).hexdigest()[:16]


def _holding_folders(perms: Mapping[str, str]) -> set[str]:
    """Folders ("dir/") with anything recorded below them: an added or removed folder is
    listed only when nothing below it is (`mkdir -p a/b` lists "a/b/")."""
    out: set[str] = set()
    for path in perms:
        folder = path.rstrip("/").rpartition("/")[0]
        while folder and folder + "/" not in out:
            out.add(folder + "/")
            folder = folder.rpartition("/")[0]
    return out


def _open_parents(top: Path, paths: Iterable[str], stop: Path) -> dict[str, str]:
    """Give the owner rwx on every folder holding a path about to change (a revert must
    write into a folder the agent made read-only); returns their previous modes."""
    opened: dict[str, str] = {}
    seen: set[str] = set()
    for path in paths:
        folder = path.rpartition("/")[0]
        while folder and folder not in seen:
            seen.add(folder)
            full = top / folder
            if full == stop or stop not in full.parents:
                break
            try:
                st = os.lstat(full)
            except OSError:
                folder = folder.rpartition("/")[0]
                continue
            if stat.S_ISDIR(st.st_mode) and st.st_mode & 0o700 != 0o700:
                opened[folder] = f"{stat.S_IMODE(st.st_mode):04o}"
                with contextlib.suppress(OSError):
                    os.chmod(full, stat.S_IMODE(st.st_mode) | 0o700)
            folder = folder.rpartition("/")[0]
    return opened


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
