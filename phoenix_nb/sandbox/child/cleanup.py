"""Remove a directory tree that a sandboxed command made, whatever it did to it.

One job, and it must never raise: ``remove_tree(path) -> bool``. Iterative
(an explicit stack, so a 2000-deep tree cannot hit Python's recursion limit,
which ``shutil.rmtree`` does on Python 3.11), opens every directory relative
to its parent's fd (``O_NOFOLLOW``: a symlink planted in the tree is removed,
never followed), makes unreadable directories readable, and clears the
immutable/append-only inode flags it meets (root only) before unlinking.
Standard library only: the launcher loads it by file path.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import stat
import struct
from collections.abc import Iterator

_FS_IOC_GETFLAGS = 0x80086601
_FS_IOC_SETFLAGS = 0x40086602
_IMMUTABLE_APPEND = 0x00000010 | 0x00000020
_MAX_DEPTH = 64
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _clear_flags(dir_fd: int, name: str | None) -> None:
    """Drop immutable/append-only flags (best effort; needs CAP_LINUX_IMMUTABLE)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(name, flags, dir_fd=dir_fd) if name is not None else os.dup(dir_fd)
    except OSError:
        return
    try:
        buf = fcntl.ioctl(fd, _FS_IOC_GETFLAGS, struct.pack("l", 0))
        value = struct.unpack("l", buf)[0]
        if value & _IMMUTABLE_APPEND:
            fcntl.ioctl(fd, _FS_IOC_SETFLAGS, struct.pack("l", value & ~_IMMUTABLE_APPEND))
    except OSError:
        pass
    finally:
        os.close(fd)


def _unlink(dir_fd: int, name: str, is_dir: bool) -> None:
    for attempt in range(2):
        try:
            if is_dir:
                os.rmdir(name, dir_fd=dir_fd)
            else:
                os.unlink(name, dir_fd=dir_fd)
            return
        except FileNotFoundError:
            return
        except OSError:
            if attempt:
                return
            _clear_flags(dir_fd, name)
            _clear_flags(dir_fd, None)


def _open_dir(parent_fd: int, name: str) -> int | None:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except PermissionError:
        with contextlib.suppress(OSError):
            os.chmod(name, 0o700, dir_fd=parent_fd, follow_symlinks=False)
        with contextlib.suppress(OSError):
            return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except OSError:
        pass
    return None


def remove_tree(path: str) -> bool:
    """Remove `path` and everything below it; True if it is gone. Never raises."""
    try:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return True
        parent, name = os.path.split(os.path.abspath(path))
        top_parent = os.open(parent, _DIR_FLAGS)
        try:
            if not stat.S_ISDIR(st.st_mode):
                _unlink(top_parent, name, False)
            else:
                _remove_dir(top_parent, name)
        finally:
            os.close(top_parent)
        return not os.path.lexists(path)
    except Exception:
        return False


def _remove_dir(top_parent: int, top_name: str) -> None:
    """Depth-first with an fd per level, at most ``_MAX_DEPTH`` deep.

    A deeper directory is renamed up to just below the top (same filesystem,
    so a rename) and removed from there later: the walk never holds more than
    ``_MAX_DEPTH`` fds and never builds a path longer than one name.
    """
    top = _open_dir(top_parent, top_name)
    if top is None:
        _unlink(top_parent, top_name, True)
        return
    stack: list[tuple[int, str, int, Iterator[os.DirEntry[str]]]] = [
        (top_parent, top_name, top, _entries(top))
    ]
    moved = 0
    while stack:
        parent_fd, name, fd, entries = stack[-1]
        child: tuple[int, str, int, Iterator[os.DirEntry[str]]] | None = None
        for entry in entries:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if not is_dir:
                _unlink(fd, entry.name, False)
                continue
            if len(stack) >= _MAX_DEPTH:
                moved += 1
                with contextlib.suppress(OSError):
                    os.rename(entry.name, f".phoenix-rm-{moved}", src_dir_fd=fd, dst_dir_fd=top)
                    continue
            opened = _open_dir(fd, entry.name)
            if opened is None:
                _unlink(fd, entry.name, True)
                continue
            child = (fd, entry.name, opened, _entries(opened))
            break
        if child is not None:
            stack.append(child)
            continue
        again = _entries(fd)  # whatever arrived while iterating (renamed-up dirs)
        first = next(again, None)
        if first is not None:
            stack[-1] = (parent_fd, name, fd, itertools.chain([first], again))
            continue
        stack.pop()
        os.close(fd)
        _unlink(parent_fd, name, True)


def _entries(fd: int) -> Iterator[os.DirEntry[str]]:
    try:
        return iter(list(os.scandir(fd)))
    except OSError:
        return iter(())
