"""Which files and folders a checkpoint covers, and which changed since the last one.

A stat cache, like git's index but in memory (and in one file beside the store
for restarts): every recorded file's and folder's stat data. A later checkpoint
lstat's the recorded files and folders once — that pass also yields every
permission bit, which git's own index does not keep — and reads only the files
whose stat changed; a folder whose stat changed is listed again, and only the
names new in it are judged against the ignore rules. Entries whose time is not
older than the scan that recorded them are "racily clean" (git's term) and read
again, so a change within one timestamp tick is never missed.

What counts is what `git status` would show: ignore rules are judged by git
itself (`ls-files -o -i --directory`, one call per repository, only for new
names), a recorded file stays recorded even once a rule ignores it, and `.git`
entries are never entered. A git repository nested inside the folder is
covered like any folder, its files judged by its own ignore rules (as its own
`git status` would). Folders are recorded too — empty ones and their
permission bits — except those git calls ignored.

When an ignore rule changes (a `.gitignore`, an `info/exclude`) the whole folder
is walked again; the stat cache still spares reading unchanged files.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from phoenix_nb.checkpoints.objects import BLOB, ObjectSink, object_sha

STATE_VERSION = 1
# size, mtime_ns, ctime_ns, inode, st_mode, object name (b"" for a big file), git mode
FileRec = tuple[int, int, int, int, int, bytes, int]
# mtime_ns, ctime_ns, inode, st_mode, the names in it
DirRec = tuple[int, int, int, int, frozenset[str]]
SourceKey = tuple[int, int, int, int] | None
RACY_MARGIN_NS = 20_000_000  # timestamps within this of a scan count as racy


def _dir_rec(st: os.stat_result, names: frozenset[str]) -> DirRec:
    """What is remembered of a folder: its stat (a changed one is listed again) and names."""
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode, names)


# (context root relative to top, pathspecs relative to it) -> ignored paths (relative to
# the context root; folders end with "/")
Lister = Callable[[str, list[str]], list[str]]


class TooManyFiles(Exception):
    def __init__(self, count: int) -> None:
        self.count = count


@dataclass(frozen=True)
class BigRec:
    size: int
    sha256: str


@dataclass
class TreeState:
    """The stat cache: what the checkpoint `commit` recorded, with the stat data seen."""

    commit: str
    stamp: int  # the filesystem's clock when the scan began
    files: dict[str, FileRec]
    dirs: dict[str, DirRec]
    roots: frozenset[str]  # nested repositories (folders with a .git entry)
    sources: dict[str, SourceKey]  # ignore-rule files outside the recorded files
    big: dict[str, BigRec] = field(default_factory=dict)

    def dump(self) -> bytes:
        big = {p: (b.size, b.sha256) for p, b in self.big.items()}
        return marshal.dumps(
            (
                STATE_VERSION,
                self.commit,
                self.stamp,
                self.files,
                self.dirs,
                self.roots,
                self.sources,
                big,
            )
        )

    @classmethod
    def load(cls, data: bytes) -> TreeState | None:
        try:
            v, commit, stamp, files, dirs, roots, sources, big = marshal.loads(data)
            if v != STATE_VERSION:
                return None
            return cls(
                commit,
                stamp,
                files,
                dirs,
                frozenset(roots),
                sources,
                {p: BigRec(int(s), str(h)) for p, (s, h) in big.items()},
            )
        except (ValueError, TypeError, EOFError):
            return None


@dataclass
class Found:
    """One scan's result before hashing: what exists now and what must be read."""

    stats: dict[str, os.stat_result]  # files to (re)read: path -> their lstat
    files: dict[str, FileRec]  # files whose record stands
    dirs: dict[str, DirRec]
    roots: set[str]
    sources: dict[str, SourceKey]
    removed: set[str]
    rules_changed: bool = False
    gone_dirs: set[str] = field(default_factory=set)  # recorded folders found gone


def _key(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode)


def _source_key(path: str) -> SourceKey:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def git_mode(st_mode: int) -> int:
    if stat.S_ISLNK(st_mode):
        return 0o120000
    return 0o100755 if st_mode & stat.S_IXUSR else 0o100644


def _join(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name


def _parse_ignored(root: str, listing: Iterable[str]) -> tuple[set[str], set[str]]:
    """Ignored files and pruned folders (top-relative). git lists a folder holding only
    ignored files as "dir/" followed by those files: such a folder is walked, not pruned."""
    entries = [_join(root, e) for e in listing if e]
    parents: set[str] = set()
    for e in entries:
        path = e.rstrip("/")
        while "/" in path:
            path = path.rpartition("/")[0]
            if path in parents:
                break
            parents.add(path)
    files = {e for e in entries if not e.endswith("/")}
    pruned = {e[:-1] for e in entries if e.endswith("/") and e[:-1] not in parents}
    return files, pruned


class Scanner:
    """Walks one conversation's folder (`scope`, relative to `top`) against a stat cache."""

    def __init__(
        self,
        top: Path,
        scope: str,
        *,
        in_repo: bool,
        skip: Iterable[str],
        lister: Lister,
        max_files: int,
    ) -> None:
        self.top = str(top)
        self.scope = scope  # "" when the folder is the top
        self.in_repo = in_repo
        self.skip = frozenset(skip)
        self.lister = lister
        self.max_files = max_files
        self._ignored: set[str] = set()
        self._pruned: set[str] = set()
        self.on_dir: Callable[[str], None] = _nothing  # called before a folder is listed
        self.linked: set[str] = set()  # files seen with more than one hard link
        self.devices: set[int] = set()  # filesystems of the folders seen

    def _full(self, rel: str) -> str:
        return f"{self.top}/{rel}" if rel else self.top

    # -- ignore rules ---------------------------------------------------------------------
    def _context(self, folder: str, roots: Iterable[str]) -> str:
        """The repository whose rules judge `folder`: the nearest nested root, else the top."""
        best = ""
        for root in roots:
            if (folder == root or folder.startswith(root + "/")) and len(root) > len(best):
                best = root
        return best

    def _list(self, root: str, specs: list[str]) -> None:
        files, pruned = _parse_ignored(root, self.lister(root, specs))
        self._ignored |= files
        self._pruned |= pruned

    def sources(self, roots: Iterable[str]) -> dict[str, SourceKey]:
        """Rule files a change of which means walking everything again."""
        paths = []
        if self.in_repo:
            paths.append(".git/info/exclude")
        for root in roots:
            paths.append(f"{root}/.git/info/exclude")
        if self.scope:  # .gitignore files between the top and the folder
            parts = self.scope.split("/")
            for i in range(len(parts)):
                paths.append("/".join([*parts[:i], ".gitignore"]))
        return {p: _source_key(self._full(p)) for p in paths}

    # -- walking -------------------------------------------------------------------------
    def walk(self, starts: Iterable[str], roots: set[str], found: Found) -> None:
        """Record the folders and files at and under `starts` (not ignored, not skipped)."""
        stack = list(starts)
        while stack:
            rel = stack.pop()
            full = self._full(rel)
            self.on_dir(rel)  # before the listing: a change after it is heard
            try:
                st = os.lstat(full)
                if not stat.S_ISDIR(st.st_mode):
                    if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
                        found.stats[rel] = st
                        if st.st_nlink > 1:
                            self.linked.add(rel)
                    continue
            except OSError:
                continue
            self.devices.add(st.st_dev)
            try:
                with os.scandir(full) as it:
                    entries = list(it)
            except OSError:  # unreadable: recorded with its mode; listed once its stat changes
                entries = []
            names = {e.name for e in entries}
            if ".git" in names and rel != self.scope and rel not in roots:
                roots.add(rel)  # a nested repository: its own rules judge its files
                self._list(rel, [])
            kept = set()
            for e in entries:
                name = e.name
                if name == ".git":
                    kept.add(name)
                    continue
                path = _join(rel, name)
                if path in self.skip or path in self._ignored or path in self._pruned:
                    kept.add(name)
                    continue
                try:
                    est = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                mode = est.st_mode
                if stat.S_ISDIR(mode):
                    stack.append(path)
                elif stat.S_ISREG(mode) or stat.S_ISLNK(mode):
                    found.stats[path] = est
                    if est.st_nlink > 1:
                        self.linked.add(path)
                else:
                    continue  # sockets, fifos, devices: git records none
                kept.add(name)
            found.dirs[rel] = _dir_rec(st, frozenset(kept))
            if len(found.stats) + len(found.files) > self.max_files:
                raise TooManyFiles(len(found.stats) + len(found.files))

    def full(self, cache: TreeState | None, keep: Iterable[str]) -> Found:
        """Walk everything; files in `cache` whose stat is unchanged are not read again.
        Paths in `keep` (recorded before) stay recorded while they exist, ignored or not."""
        self._ignored, self._pruned = set(), set()
        found = Found({}, {}, {}, set(), {}, set())
        self._list("", [self.scope] if self.scope else [])
        self.walk([self.scope], found.roots, found)
        for path in keep:
            if path not in found.stats:
                try:
                    st = os.lstat(self._full(path))
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
                    found.stats[path] = st
        found.sources = self.sources(found.roots)
        if cache is not None:
            racy = cache.stamp
            for path, st in list(found.stats.items()):
                rec = cache.files.get(path)
                if rec is not None and rec[:5] == _key(st) and rec[1] < racy and rec[2] < racy:
                    found.files[path] = rec
                    del found.stats[path]
        return found

    def incremental(self, state: TreeState) -> Found:
        """Stat what `state` recorded; list folders whose stat changed; walk new names."""
        racy = state.stamp
        found = Found({}, {}, {}, set(state.roots), dict(state.sources), set())
        for path, key in state.sources.items():
            now = _source_key(self._full(path))
            if now != key or (now is not None and (now[1] >= racy or now[2] >= racy)):
                found.rules_changed = True
                return found
        new: list[str] = []
        changed_dirs: list[tuple[str, os.stat_result, DirRec]] = []
        lstat = os.lstat
        top = self.top
        for rel in state.dirs:  # watched before any is looked at
            self.on_dir(rel)
        for rel, rec in state.dirs.items():
            try:
                st = lstat(f"{top}/{rel}" if rel else top)
            except OSError:
                continue
            if not stat.S_ISDIR(st.st_mode):
                new.append(rel)
                continue
            self.devices.add(st.st_dev)
            if (
                st.st_mtime_ns != rec[0]
                or st.st_ctime_ns != rec[1]
                or st.st_ino != rec[2]
                or rec[0] >= racy
                or rec[1] >= racy
            ):
                changed_dirs.append((rel, st, rec))
            elif st.st_mode != rec[3]:
                found.dirs[rel] = (*rec[:3], st.st_mode, rec[4])
            else:
                found.dirs[rel] = rec
        found.files = dict(state.files)
        changed, removed, became_dirs = _check_files(top, state.files.items(), racy, self.linked)
        found.stats.update(changed)
        found.removed.update(removed)
        new.extend(became_dirs)
        for path in found.removed:
            del found.files[path]
        for path in found.stats:
            del found.files[path]
        for rel, st, rec in changed_dirs:
            try:
                with os.scandir(self._full(rel)) as it:
                    names = {e.name for e in it}
            except OSError:  # unreadable now: its mode is recorded, its names listed afresh
                found.dirs[rel] = _dir_rec(st, frozenset())
                continue  # once readable again (a chmod changes its stat)
            found.dirs[rel] = _dir_rec(st, self._listed(rel, names, rec[4], found, new))
        return self._finish(found, new)

    def _listed(
        self, rel: str, names: set[str], recorded: frozenset[str], found: Found, new: list[str]
    ) -> frozenset[str]:
        """The names to record for folder `rel` listed again: those still there and the
        new ones. A new .git makes the folder a repository (the rules change); a new
        skipped path is recorded but not walked; any other new path is queued in `new`."""
        for name in sorted(names - recorded):
            if name == ".git":
                if rel != self.scope:
                    found.roots.add(rel)
                    found.rules_changed = True  # a folder became a repository
            elif (path := _join(rel, name)) not in self.skip:
                new.append(path)
        return frozenset(names)

    def _finish(self, found: Found, new: list[str]) -> Found:
        """Walk what is new, unless the ignore rules changed (a .gitignore among the
        changes, a new repository): then the caller scans afresh."""
        if any(p.rpartition("/")[2] == ".gitignore" for p in (*found.stats, *found.removed, *new)):
            found.rules_changed = True
        if found.rules_changed:
            return found
        self._walk_new(new, found)
        found.sources = self.sources(found.roots)
        return found

    def watched(self, state: TreeState, files: Iterable[str], listings: Iterable[str]) -> Found:
        """What `incremental` finds, looking only where a watch heard something.

        `files`: paths whose stat may have changed (recorded files and folders among
        them are lstat'ed; others are new names, found through their folder's listing).
        `listings`: folders whose names may have changed (listed again; names gone are
        removed with everything recorded below them, new names walked). Every other
        recorded file and folder stands as recorded: the caller vouches that nothing
        else changed (`watch.TreeWatch`)."""
        found = Found({}, dict(state.files), dict(state.dirs), set(state.roots), {}, set())
        racy = state.stamp
        for path, key in state.sources.items():
            now = _source_key(self._full(path))
            if now != key or (now is not None and (now[1] >= racy or now[2] >= racy)):
                found.rules_changed = True
                return found
        new: list[str] = []
        relist: set[str] = set()
        lstat = os.lstat
        top = self.top
        recorded = state.files
        to_check = [(p, recorded[p]) for p in files if p in recorded]
        changed, removed, became_dirs = _check_files(top, to_check, racy, self.linked)
        found.stats.update(changed)
        for path in removed:
            found.removed.add(path)
            found.files.pop(path, None)
        for path in found.stats:
            found.files.pop(path, None)
        new.extend(became_dirs)
        for rel in files:
            rec = state.dirs.get(rel)
            if rec is None:
                continue
            try:
                st = lstat(f"{top}/{rel}" if rel else top)
            except OSError:
                relist.add(rel.rpartition("/")[0])  # gone: its folder's listing says so
                continue
            if not stat.S_ISDIR(st.st_mode) or st.st_ino != rec[2]:
                self._drop(rel, found)  # replaced: what was below is gone, the new one new
                new.append(rel)
            elif st.st_mtime_ns != rec[0] or st.st_ctime_ns != rec[1]:
                relist.add(rel)
            elif st.st_mode != rec[3]:
                found.dirs[rel] = (*rec[:3], st.st_mode, rec[4])
        relist.update(listings)
        for rel in sorted(relist, key=_depth_of):
            rec = found.dirs.get(rel)
            if rec is None:
                continue  # dropped above, or never recorded (ignored)
            self.on_dir(rel)  # (again: a folder that was unreadable may be watched now)
            try:
                st = lstat(f"{top}/{rel}" if rel else top)
            except OSError:  # gone: so is everything recorded below it
                self._drop(rel, found)
                continue
            if not stat.S_ISDIR(st.st_mode) or st.st_ino != rec[2]:
                self._drop(rel, found)  # replaced
                new.append(rel)
                continue
            try:
                with os.scandir(self._full(rel)) as it:
                    names = {e.name for e in it}
            except OSError:  # unreadable now: recorded empty, as a full scan records it
                found.dirs[rel] = _dir_rec(st, frozenset())
                for name in rec[4]:
                    self._drop(_join(rel, name), found)
                continue
            self.devices.add(st.st_dev)
            for name in rec[4] - names:
                self._drop(_join(rel, name), found)
            found.dirs[rel] = _dir_rec(st, self._listed(rel, names, rec[4], found, new))
        return self._finish(found, new)

    def _drop(self, path: str, found: Found) -> None:
        """Forget `path` and everything recorded below it (it is gone or was replaced)."""
        stack = [path]
        while stack:
            rel = stack.pop()
            rec = found.dirs.pop(rel, None)
            if rec is not None:
                stack.extend(_join(rel, name) for name in rec[4])
                found.gone_dirs.add(rel)
            elif found.files.pop(rel, None) is not None:
                found.removed.add(rel)
            found.stats.pop(rel, None)

    def _walk_new(self, new: list[str], found: Found) -> None:
        """Judge new names against the ignore rules (git, once per repository) and walk
        the ones that count."""
        if not new:
            return
        self._ignored, self._pruned = set(), set()
        by_context: dict[str, list[str]] = {}
        for path in new:
            root = self._context(path.rpartition("/")[0], found.roots)
            rel = path[len(root) + 1 :] if root else path
            by_context.setdefault(root, []).append(rel)
        for root, specs in by_context.items():
            self._list(root, specs)
        starts = [p for p in new if p not in self._ignored and p not in self._pruned]
        self.walk(starts, found.roots, found)


def _depth_of(path: str) -> int:
    return path.count("/") if path else -1


def _check_files(
    top: str, items: Iterable[tuple[str, FileRec]], racy: int, linked: set[str]
) -> tuple[dict[str, os.stat_result], list[str], list[str]]:
    """lstat recorded files: (changed: their stat, removed, now folders); `linked` gains
    those with more than one hard link and loses the others. One thread: two were no
    faster here (each lstat is too short for the GIL to let them overlap)."""
    changed: dict[str, os.stat_result] = {}
    removed: list[str] = []
    dirs: list[str] = []
    lstat = os.lstat
    for path, frec in items:
        try:
            st = lstat(f"{top}/{path}")
        except OSError:
            removed.append(path)
            continue
        if st.st_nlink > 1:
            linked.add(path)
        elif linked:
            linked.discard(path)
        mode = st.st_mode
        if (
            st.st_mtime_ns == frec[1]
            and st.st_ctime_ns == frec[2]
            and st.st_size == frec[0]
            and st.st_ino == frec[3]
            and mode == frec[4]
            and frec[1] < racy
            and frec[2] < racy
        ):
            continue
        if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
            changed[path] = st
        else:
            removed.append(path)
            if stat.S_ISDIR(mode):
                dirs.append(path)
    return changed, removed, dirs


def _nothing(_rel: str) -> None:
    pass


def read_object(path: str, st: os.stat_result) -> tuple[bytes, int] | None:
    """A file's blob content (a link: its target) and its git mode; None when gone."""
    try:
        if stat.S_ISLNK(st.st_mode):
            return os.fsencode(os.readlink(path)), 0o120000
        with open(path, "rb") as f:
            return f.read(), git_mode(st.st_mode)
    except OSError:
        return None


def sha256_of(path: str) -> str | None:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


def hash_files(
    top: str,
    stats: Mapping[str, os.stat_result],
    previous: Mapping[str, FileRec],
    previous_big: Mapping[str, BigRec],
    sink: ObjectSink,
    known: set[bytes],
    max_file_size: int,
) -> tuple[dict[str, FileRec], dict[str, BigRec]]:
    """Read and hash the files in `stats`, storing new content in `sink`.

    Files over `max_file_size` are recorded by size and SHA-256 only.
    """
    out: dict[str, FileRec] = {}
    big: dict[str, BigRec] = {}
    for path in sorted(stats):
        st = stats[path]
        full = f"{top}/{path}"
        key = _key(st)
        if stat.S_ISREG(st.st_mode) and st.st_size > max_file_size:
            prev = previous.get(path)
            old = previous_big.get(path)
            if prev is not None and old is not None and prev[:4] == key[:4]:
                digest: str | None = old.sha256
            else:
                digest = sha256_of(full)
            if digest is None:
                continue
            big[path] = BigRec(st.st_size, digest)
            out[path] = (*key, b"", 0)
            continue
        got = read_object(full, st)
        if got is None:
            continue
        data, mode = got
        sha = object_sha(BLOB, data)
        if sha not in known:
            sink.add(BLOB, data, sha)
            known.add(sha)
        out[path] = (*key, sha, mode)
    return out, big
