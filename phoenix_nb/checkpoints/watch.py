"""Which paths may have changed since the last checkpoint, from the kernel (inotify).

Why: a stat cache still lstat's every recorded file per checkpoint, so a
checkpoint costs O(files in the folder) even when a tool call changed three.
An inotify watch on every recorded folder hears each change as it happens; at
the next checkpoint only the paths it names are looked at. Watches come from
`inotify_simple` (a thin ctypes wrapper, no thread: the kernel queues events
until the checkpoint reads them).

The watch only narrows where to look; it never says what changed (the files it
names are lstat'ed and read as before). It is trusted only while nothing could
have slipped past it, and otherwise `changes` returns None and the caller scans
every recorded file (the stat cache's own pass) while the watch is set up again:

* the kernel's queue overflowed (`IN_Q_OVERFLOW`), a watch could not be added
  (the per-user watch limit), or an event came from a watch it does not know;
* the state the caller continues from is not the one the watch was synced with
  (another process took a checkpoint, or this process has just started);
* a folder is on a filesystem where other machines can write (NFS, SMB, FUSE…):
  inotify hears only this machine's writes, so such folders are never trusted.

Every watch is added before its folder is listed and its files stat'ed, so a
change made after the scan read a file is always queued. What inotify cannot
hear, and what is therefore looked at on every checkpoint anyway: files with
more than one hard link (a write through a link outside the folder tells no
watched folder), files recorded in folders that are not watched (kept though
ignored), and folders that could not be watched (unreadable). A write through a
shared memory map is heard when the writer unmaps or exits (`IN_CLOSE_WRITE`),
which for a command run by a tool call is before the checkpoint after it.

Not heard at all: a hard link made from outside the folder to a recorded file
after its scan, then written through (the kernel tells neither event to a
watched folder). For that, and for anything else inotify might not say, the
caller scans every recorded file anyway once `FULL_SCAN_EVERY` seconds have
passed since the last full pass (`ShadowRepo`).
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from inotify_simple import INotify, flags

__all__ = ["FULL_SCAN_EVERY", "Changes", "TreeWatch", "local_filesystem"]

FULL_SCAN_EVERY = 600.0  # seconds: a full pass at least this often, whatever the watch says

_MASK = (
    flags.MODIFY
    | flags.ATTRIB
    | flags.CLOSE_WRITE
    | flags.MOVED_FROM
    | flags.MOVED_TO
    | flags.CREATE
    | flags.DELETE
    | flags.DELETE_SELF
    | flags.MOVE_SELF
    | flags.ONLYDIR
    | flags.DONT_FOLLOW
)
_ENTRY = flags.CREATE | flags.DELETE | flags.MOVED_FROM | flags.MOVED_TO
# Filesystems whose every write passes through this machine's kernel (so inotify hears it).
_LOCAL = frozenset(
    {
        "ext2",
        "ext3",
        "ext4",
        "xfs",
        "btrfs",
        "tmpfs",
        "overlay",
        "zfs",
        "f2fs",
        "jfs",
        "reiserfs",
        "bcachefs",
        "ramfs",
        "vfat",
        "exfat",
        "ntfs3",
        "hfsplus",
    }
)


def local_filesystem(devices: Iterable[int]) -> bool:
    """Whether every device in `devices` (st_dev values) holds a local filesystem."""
    wanted = {(os.major(d), os.minor(d)) for d in devices}
    found: dict[tuple[int, int], str] = {}
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) < 10 or "-" not in parts:
                    continue
                major, _, minor = parts[2].partition(":")
                fstype = parts[parts.index("-") + 1]
                with contextlib.suppress(ValueError):
                    found[(int(major), int(minor))] = fstype
    except OSError:
        return False
    return all(found.get(dev) in _LOCAL for dev in wanted)


@dataclass
class Changes:
    """Where to look: relative paths (the folder itself is "")."""

    files: set[str] = field(default_factory=set)  # entries whose stat may have changed
    listings: set[str] = field(default_factory=set)  # folders whose names may have changed


class TreeWatch:
    """inotify watches on the recorded folders of one working tree (paths relative to `top`).

    Not thread-safe: the caller's checkpoint lock serializes every use.
    """

    def __init__(self, top: str) -> None:
        self.top = top
        self._inotify: INotify | None = None
        self._paths: dict[int, str] = {}  # watch descriptor -> folder
        self._wds: dict[str, int] = {}  # folder -> watch descriptor
        self._dropped: set[int] = set()  # removed by us: their late events are not ours
        self.synced = ""  # the checkpoint commit the watch has covered since its scan
        self.broken = False  # a watch could not be added: nothing is trusted until resync
        self.unwatched: set[str] = set()  # folders that exist but could not be watched

    def _full(self, rel: str) -> str:
        return f"{self.top}/{rel}" if rel else self.top

    def reset(self) -> None:
        """Forget what is queued and start trusting afresh (the caller scans everything)."""
        self.broken = False
        if self._inotify is None:
            try:
                self._inotify = INotify(nonblocking=True)
            except OSError:  # the per-user instance limit: every checkpoint scans everything
                self.broken = True
                return
        else:
            self._drain()
        self.synced = ""
        self.unwatched.clear()

    def add(self, rel: str) -> None:
        """Watch folder `rel`; call before listing it, so later changes are queued."""
        if self._inotify is None or self.broken:
            return
        try:
            wd = self._inotify.add_watch(self._full(rel), _MASK)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                return  # gone already: the scan will not record it
            if exc.errno == errno.EACCES:
                self.unwatched.add(rel)
                return
            self.broken = True  # the watch limit, out of memory: scan everything
            return
        self.unwatched.discard(rel)
        old = self._paths.get(wd)
        if old is not None and old != rel and self._wds.get(old) == wd:
            del self._wds[old]  # the same folder, moved: it answers to its new name
        self._paths[wd] = rel
        self._wds[rel] = wd
        self._dropped.discard(wd)

    def forget(self, folders: Iterable[str]) -> None:
        """Folders no longer recorded: stop watching them (unless re-added under that name)."""
        if self._inotify is None:
            return
        for rel in folders:
            self.unwatched.discard(rel)
            wd = self._wds.pop(rel, None)
            if wd is None or self._paths.get(wd) != rel:
                continue
            del self._paths[wd]
            self._dropped.add(wd)
            with contextlib.suppress(OSError):
                self._inotify.rm_watch(wd)

    def _drain(self) -> list[tuple[int, int, str]]:
        assert self._inotify is not None
        events: list[tuple[int, int, str]] = []
        while True:
            try:
                batch = self._inotify.read(timeout=0)
            except BlockingIOError:
                break
            if not batch:
                break
            events.extend((e.wd, e.mask, e.name) for e in batch)
        return events

    def changes(self, commit: str) -> Changes | None:
        """What may have changed since the scan of checkpoint `commit`; None when the watch
        cannot say (then the caller scans everything and calls `reset` first)."""
        if self._inotify is None or self.broken or not commit or self.synced != commit:
            return None
        out = Changes()
        for wd, mask, name in self._drain():
            if mask & flags.Q_OVERFLOW:
                return None
            folder = self._paths.get(wd)
            if folder is None:
                if wd in self._dropped:
                    continue  # a folder that left the tree, or its IN_IGNORED
                return None
            if mask & flags.IGNORED:
                # The folder is gone (its parent's listing says so) or was unmounted.
                self._paths.pop(wd, None)
                if self._wds.get(folder) == wd:
                    del self._wds[folder]
                out.listings.add(folder.rpartition("/")[0] if folder else folder)
                if not folder:
                    return None  # the folder itself went away
                continue
            if not name:  # the folder itself: its mode, or it moved / was removed
                out.files.add(folder)
                if folder:
                    out.listings.add(folder.rpartition("/")[0])
                continue
            path = f"{folder}/{name}" if folder else name
            out.files.add(path)
            if mask & _ENTRY:
                out.listings.add(folder)
        out.listings.update(self.unwatched)
        return out

    def close(self) -> None:
        if self._inotify is not None:
            with contextlib.suppress(OSError):
                self._inotify.close()
        self._inotify = None
        self._paths.clear()
        self._wds.clear()
        self.synced = ""
