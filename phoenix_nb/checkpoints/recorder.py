"""When checkpoints are taken, what each tool call changed, and how a revert is decided.

`Checkpoints` is the executor the runtime reaches through its work-tree port:
`writes_possible` at approval and at the start of a turn that begins
Unrestricted, `around_tool` before and after every Unrestricted tool call that
can write. Because every writing call is bracketed by its own "before" and
"after" checkpoints, the changes between them are exactly that call's, and the
changes between one call's "after" and the next checkpoint are someone else's
(the user, an editor, another program): that is how a revert knows which files
it would take from someone other than the agent, and refuses unless forced.

Git runs in a worker thread (`asyncio.to_thread`) so the kernel's loop stays
free for Cancel clicks; one asyncio lock per conversation orders the
checkpoints, and a file lock keeps two kernels from writing one store at once.
Failures never fail the tool call: its changes then say why they are missing
and that the call cannot be reverted, and the user reads one line about it —
unless the disk holding the store is full, where the store's own line (its
saves fail for the same cause) already says it (`_failed`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import itertools
import json
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from filelock import FileLock

from phoenix_nb.checkpoints.changes import (
    Checkpoint,
    CheckpointKind,
    PruneReport,
    RevertReport,
    ToolChanges,
)
from phoenix_nb.checkpoints.config import CheckpointConfig
from phoenix_nb.checkpoints.shadow import (
    CheckpointError,
    ShadowRepo,
    Snapshot,
    size_of,
)
from phoenix_nb.core.values import Mode, ToolResult
from phoenix_nb.errors import PhoenixError

log = logging.getLogger(__name__)

STARTS = ("approval", "turn")


class ToolCtx(Protocol):
    """What a checkpointing tool runner reads of a tool context (`tools.base.ToolContext`)."""

    @property
    def conversation_id(self) -> str: ...

    @property
    def cwd(self) -> Path: ...

    @property
    def mode(self) -> Mode: ...


ToolRunnerLike = Callable[[Any, str, Any, Any, str], Awaitable[ToolResult]]


class RevertRefused(PhoenixError):
    """A revert that would take files changed by someone other than the agent."""

    def __init__(self, report: RevertReport) -> None:
        self.report = report
        files = ", ".join(report.foreign[:20]) + (" …" if len(report.foreign) > 20 else "")
        gap = (
            " (checkpoints in between were pruned, so some of these may be the agent's)"
            if report.pruned_gap
            else ""
        )
        super().__init__(
            f"Not reverted: {len(report.foreign)} file(s) were changed by someone other than "
            f"the agent since it last wrote them{gap}: {files}. Use `%phoenix revert "
            f"{report.target} --force` to revert them too (the current state stays in "
            f"checkpoint {report.pre_revert})."
        )


class NoCheckpoint(PhoenixError):
    """There is no checkpoint to revert to."""


class WorkTreeHistory:
    """One conversation's checkpoints: taking them, listing them, reverting to one."""

    def __init__(
        self,
        root: Path,
        cwd: Path,
        config: CheckpointConfig,
        *,
        exclude: Sequence[Path] = (),
    ) -> None:
        self.root = root
        self.config = config
        self.repo = ShadowRepo(root, cwd, max_file_size=config.max_file_size, exclude=exclude)
        root.mkdir(parents=True, exist_ok=True)
        self._file_lock = FileLock(str(root / "lock"))
        self._thread_lock = threading.RLock()
        self._async_lock: asyncio.Lock | None = None
        self._snapshots: dict[str, Snapshot] = {}
        self._last: Snapshot | None = None
        self.pruned_once = False

    # -- sync API (runs in a worker thread) -----------------------------------------------------
    def _locked(self) -> Any:
        return _Both(self._thread_lock, self._file_lock)

    def take(
        self,
        kind: CheckpointKind,
        *,
        tool_use_id: str | None = None,
        tool: str | None = None,
        compare_to: Snapshot | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> tuple[Snapshot, ToolChanges | None]:
        with self._locked():
            snap, raw = self.repo.take(
                kind, tool_use_id=tool_use_id, tool=tool, compare_to=compare_to, extra=extra
            )
            self._snapshots[snap.checkpoint.commit] = snap
            self._last = snap
            changes = None
            if compare_to is not None:
                files, omitted, cut = self.repo.file_changes(compare_to, snap, raw)
                changes = ToolChanges(
                    before=compare_to.checkpoint.number,
                    after=snap.checkpoint.number,
                    files=tuple(files),
                    omitted=omitted,
                    diff_truncated=cut,
                )
            return snap, changes

    def checkpoints(self) -> list[Checkpoint]:
        with self._locked():
            return self.repo.checkpoints()

    def snapshot(self, checkpoint: Checkpoint) -> Snapshot:
        cached = self._snapshots.get(checkpoint.commit)
        if cached is None:
            cached = self.repo.snapshot_of(checkpoint)
            self._snapshots[checkpoint.commit] = cached
        return cached

    def latest(self) -> int:
        found = self.checkpoints()
        return found[-1].number if found else 0

    def resolve_target(
        self, number: int | None, *, to_approval: bool, after: int = 0
    ) -> Checkpoint:
        """The checkpoint a revert goes back to.

        `N`: that checkpoint. `--to-approval`: the latest approval. Neither: just
        before the first write of the latest turn that changed files (looking
        only at checkpoints after `after`), so that turn's changes are undone
        and nothing older.
        """
        found = self.checkpoints()
        if not found:
            raise NoCheckpoint("No checkpoints yet: the agent has not had write access here.")
        if number is not None:
            for c in found:
                if c.number == number:
                    return c
            raise NoCheckpoint(
                f"No checkpoint {number}; `%phoenix checkpoints` lists "
                f"{found[0].number}–{found[-1].number}."
            )
        if to_approval:
            approvals = [c for c in found if c.kind == "approval"]
            if not approvals:
                raise NoCheckpoint(
                    "No approval checkpoint: this conversation was not approved here "
                    "(it may have started Unrestricted). Give a checkpoint number."
                )
            return approvals[-1]
        changed = [c for c in found if c.kind == "after" and c.files_changed and c.number > after]
        if not changed:
            raise NoCheckpoint("Nothing to revert: no tool call changed files since then.")
        last = changed[-1].number
        starts = [c.number for c in found if c.kind in STARTS and after < c.number < last]
        turn_start = starts[-1] if starts else after
        writes = [
            c
            for c in found
            if c.kind == "after" and c.files_changed and turn_start < c.number <= last
        ]
        first_write = writes[0]
        befores = [
            c
            for c in found
            if c.kind == "before"
            and c.tool_use_id == first_write.tool_use_id
            and c.number < first_write.number
        ]
        return befores[-1] if befores else first_write

    def revert(self, target_number: int, *, force: bool = False) -> RevertReport:
        """Bring the folder back to checkpoint `target_number` (bytes, modes, presence)."""
        with self._locked():
            found = {c.number: c for c in self.repo.checkpoints()}
            if target_number not in found:
                raise NoCheckpoint(f"No checkpoint {target_number}.")
            target = self.snapshot(found[target_number])
            pre, _ = self.repo.take("pre-revert", extra={"reverted_to": target_number})
            self._snapshots[pre.checkpoint.commit] = pre
            sequence = [c for n, c in sorted(found.items()) if n >= target_number]
            sequence.append(pre.checkpoint)
            foreign, gap = self._foreign(sequence, target, pre)
            display = self.repo.display_path
            if foreign and not force:
                report = RevertReport(
                    target=target_number,
                    foreign=tuple(display(p) for p in foreign),
                    refused=True,
                    pruned_gap=gap,
                    pre_revert=pre.checkpoint.number,
                )
                raise RevertRefused(report)
            done = self.repo.restore(target, pre)
            post, raw = self.repo.take(
                "revert", compare_to=target, extra={"reverted_to": target_number}
            )
            self._snapshots[post.checkpoint.commit] = post
            self._last = post
            left = {display(r.path) for r in raw} - set(done["not_restorable"])
            return RevertReport(
                target=target_number,
                restored=tuple(done["restored"]),
                recreated=tuple(done["recreated"]),
                removed=tuple(done["removed"]),
                modes=tuple(done["modes"]),
                not_restorable=tuple(sorted({*done["not_restorable"], *left})),
                foreign=tuple(display(p) for p in foreign),
                pre_revert=pre.checkpoint.number,
                post_revert=post.checkpoint.number,
            )

    def _foreign(
        self, sequence: Sequence[Checkpoint], target: Snapshot, now: Snapshot
    ) -> tuple[list[str], bool]:
        """Files the revert would change whose last writer was not the agent (or phoenix).

        Also says whether pruned checkpoints left a gap: a change across a gap
        cannot be attributed and counts as someone else's (deny by default).
        """
        to_restore = self.repo.changed_names(target, now)
        if not to_restore:
            return [], False
        owner: dict[str, bool] = {}  # path -> written last by the agent / a revert
        snaps = [self.snapshot(c) if c is not now.checkpoint else now for c in sequence]
        gap = False
        for a, b in itertools.pairwise(snaps):
            ca, cb = a.checkpoint, b.checkpoint
            adjacent = cb.number == ca.number + 1
            agent = adjacent and (
                (ca.kind == "before" and cb.kind == "after" and ca.tool_use_id == cb.tool_use_id)
                or cb.kind == "revert"
            )
            names = self.repo.changed_names(a, b)
            gap = gap or (not adjacent and bool(names & to_restore))
            for path in names:
                owner[path] = agent
        return sorted(p for p in to_restore if owner.get(p) is False), gap

    def prune(self, now: float | None = None) -> PruneReport | None:
        """Drop old checkpoints by age, then by size; never what a revert may still want.

        Kept always: the latest approval, the latest turn start and every
        checkpoint after the newer of the two. What was pruned is appended to
        `pruned.jsonl` and listed by `%phoenix checkpoints`, so it is never silent.
        """
        with self._locked():
            found = self.repo.checkpoints()
            if not found:
                return None
            now = time.time() if now is None else now
            keep = set()
            for kind in STARTS:
                of_kind = [c.number for c in found if c.kind == kind]
                if of_kind:
                    keep.add(of_kind[-1])
            newest_start = max(keep, default=found[-1].number)
            candidates = [c for c in found if c.number not in keep and c.number < newest_start]
            cutoff = now - self.config.keep_days * 86400
            drop = [c for c in candidates if _epoch(c.created_at) < cutoff]
            reason = f"older than {self.config.keep_days:g} days"
            before = size_of(self.repo.git_dir)
            if before > self.config.max_bytes:
                drop = candidates  # oldest first; the store shrinks only after a repack
                reason = f"the store exceeded {self.config.max_bytes:,} bytes"
            if not drop:
                return None
            self.repo.git(
                "update-ref",
                "--stdin",
                input="".join(f"delete refs/phoenix/cp/{c.number:08d}\n" for c in drop).encode(),
            )
            self.repo.git("repack", "-a", "-d", "-q")
            self.repo.git("prune", "--expire=now")
            self._snapshots.clear()
            report = PruneReport(
                removed=tuple(c.number for c in drop),
                reason=reason,
                when=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
                bytes_before=before,
                bytes_after=size_of(self.repo.git_dir),
            )
            with open(self.root / "pruned.jsonl", "a") as f:
                f.write(json.dumps(dataclasses.asdict(report)) + "\n")
            return report

    def prune_log(self) -> list[PruneReport]:
        try:
            lines = (self.root / "pruned.jsonl").read_text().splitlines()
        except OSError:
            return []
        out = []
        for line in lines:
            try:
                data = json.loads(line)
                out.append(
                    PruneReport(
                        removed=tuple(data.get("removed", ())),
                        reason=str(data.get("reason", "")),
                        when=str(data.get("when", "")),
                        bytes_before=int(data.get("bytes_before", 0)),
                        bytes_after=int(data.get("bytes_after", 0)),
                    )
                )
            except (ValueError, TypeError, AttributeError):
                continue
        return out

    # -- async API (the kernel's loop) ------------------------------------------------
    def _alock(self) -> asyncio.Lock:
        if self._async_lock is None:
            self._async_lock = asyncio.Lock()
        return self._async_lock

    async def atake(
        self,
        kind: CheckpointKind,
        *,
        tool_use_id: str | None = None,
        tool: str | None = None,
        compare_to: Snapshot | None = None,
    ) -> tuple[Snapshot, ToolChanges | None]:
        async with self._alock():
            return await asyncio.to_thread(
                self.take, kind, tool_use_id=tool_use_id, tool=tool, compare_to=compare_to
            )

    async def astart(self, reason: CheckpointKind) -> Snapshot:
        """Write access begins: prune once per process, then checkpoint, both under the
        lock taken at once, so no tool call of this turn can checkpoint (or write) first."""
        async with self._alock():
            if not self.pruned_once:
                self.pruned_once = True
                await asyncio.to_thread(self.prune)
            snapshot, _ = await asyncio.to_thread(self.take, reason)
            return snapshot

    async def arevert(self, target_number: int, *, force: bool = False) -> RevertReport:
        async with self._alock():
            return await asyncio.to_thread(self.revert, target_number, force=force)


class Checkpoints:
    """The checkpoint executor of one process: a store per conversation under `root`."""

    def __init__(
        self,
        root: Path,
        config: CheckpointConfig | None = None,
        *,
        exclude: Sequence[Path] = (),
    ) -> None:
        self.root = root
        self.config = config or CheckpointConfig()
        self.exclude = tuple(exclude)
        self._histories: dict[str, WorkTreeHistory] = {}

    def reconfigure(self, config: CheckpointConfig) -> None:
        """New settings, for every conversation's next checkpoint."""
        self.config = config
        for found in self._histories.values():
            found.config = config
            found.repo.max_file_size = config.max_file_size

    def history(self, conversation_id: str, cwd: str | Path) -> WorkTreeHistory:
        found = self._histories.get(conversation_id)
        if found is None:
            found = WorkTreeHistory(
                self.root / _safe(conversation_id),
                Path(cwd),
                self.config,
                exclude=(self.root, *self.exclude),
            )
            self._histories[conversation_id] = found
        return found

    def exists(self, conversation_id: str) -> bool:
        return (self.root / _safe(conversation_id) / "git" / "HEAD").exists()

    async def writes_possible(self, conversation_id: str, cwd: str, reason: CheckpointKind) -> None:
        """Write access begins (approval) or a turn begins Unrestricted: checkpoint now."""
        if not self.config.enabled:
            return
        history = self.history(conversation_id, cwd)
        try:
            await history.astart(reason)
        except (CheckpointError, OSError) as exc:
            self._failed(f"the checkpoint at {reason}", exc, "changes from here on")

    async def around_tool(
        self,
        *,
        conversation_id: str,
        cwd: str,
        mode: Mode,
        tool: str,
        tool_use_id: str,
        run: Callable[[], Awaitable[ToolResult]],
        writes: bool = True,
    ) -> ToolResult:
        """Run one tool call between two checkpoints; its result carries what it changed.

        ``writes``: the tool's own trait (`Tool.writes`); a call that cannot write runs
        without checkpoints."""
        if not self.config.enabled or mode != Mode.UNRESTRICTED or not writes:
            return await run()
        history = self.history(conversation_id, cwd)
        before: Snapshot | None = None
        error: str | None = None
        try:
            before, _ = await history.atake("before", tool_use_id=tool_use_id, tool=tool)
        except (CheckpointError, OSError) as exc:
            error = self._failed(f"the checkpoint before {tool}", exc)
        try:
            result = await run()
        except asyncio.CancelledError:
            if before is not None:  # what a cancelled call changed is still the agent's
                await asyncio.shield(self._after(history, before, tool, tool_use_id))
            raise
        changes: ToolChanges | None = None
        if before is not None:
            changes, failure = await self._after(history, before, tool, tool_use_id)
            error = self._failed(f"the checkpoint after {tool}", failure) if failure else None
        if changes is None:
            changes = ToolChanges(before=0, after=0, error=error or "no checkpoint")
        return dataclasses.replace(result, changes=changes)

    def runner(self, inner: ToolRunnerLike) -> ToolRunnerLike:
        """`inner` (a tool runner: tools, name, input, ctx, id -> result) with checkpoints."""

        async def run(
            tools: Any, name: str, input: Any, ctx: ToolCtx, tool_use_id: str, /
        ) -> ToolResult:
            return await self.around_tool(
                conversation_id=ctx.conversation_id,
                cwd=str(ctx.cwd),
                mode=ctx.mode,
                tool=name,
                tool_use_id=tool_use_id,
                run=lambda: inner(tools, name, input, ctx, tool_use_id),
                writes=bool(
                    getattr(next((t for t in tools if t.name == name), None), "writes", True)
                ),
            )

        return run

    @staticmethod
    async def _after(
        history: WorkTreeHistory, before: Snapshot, tool: str, tool_use_id: str
    ) -> tuple[ToolChanges | None, BaseException | None]:
        try:
            _, changes = await history.atake(
                "after", tool_use_id=tool_use_id, tool=tool, compare_to=before
            )
            return changes, None
        except (CheckpointError, OSError) as exc:
            return None, exc

    def _failed(self, what: str, exc: BaseException, lost: str = "this call's changes") -> str:
        """Say once that a checkpoint failed and what it means for undo; returns the
        reason the call's changes record.

        On a full disk inside the store's own folder (`exclude` holds it: the
        manager keeps checkpoints under PHOENIX_HOME/checkpoints) the store's saves
        fail for the same cause and its one line is what the user reads, so this
        one is only logged at info: one cause, one line.
        """
        why = " ".join(str(exc).split()) or type(exc).__name__
        full = _disk_full(exc)
        if full:
            why = f"the disk is full ({why})"
        reason = f"{what} failed: {why}; {lost} cannot be reverted"
        if full and any(self.root.is_relative_to(folder) for folder in self.exclude):
            log.info("phoenix: %s (the store's own line says the disk is full)", reason)
            return reason
        todo = (
            f"Free some space in {self.root} so later calls are checkpointed"
            if full
            else f"Check {self.root}, or turn checkpoints off (%config Phoenix.checkpoints = False)"
        )
        log.warning("phoenix: %s. %s.", reason, todo)
        return reason


class _Both:
    """Enter a thread lock, then a file lock (two kernels, one store)."""

    def __init__(self, thread_lock: threading.RLock, file_lock: FileLock) -> None:
        self.thread_lock = thread_lock
        self.file_lock = file_lock

    def __enter__(self) -> None:
        self.thread_lock.acquire()
        try:
            self.file_lock.acquire(timeout=120)
        except BaseException:
            self.thread_lock.release()
            raise

    def __exit__(self, *exc: object) -> None:
        try:
            self.file_lock.release()
        finally:
            self.thread_lock.release()


def _disk_full(exc: BaseException) -> bool:
    """ENOSPC/EDQUOT anywhere in the exception's chain, or git saying so."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        seen = seen.__cause__ or seen.__context__
    text = str(exc)
    return "No space left on device" in text or "Disk quota exceeded" in text


def _safe(conversation_id: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in conversation_id) or "_"


def _epoch(created_at: str) -> float:
    try:
        return time.mktime(time.strptime(created_at, "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    except ValueError:
        return 0.0
