"""The background jobs of one `Phoenix`: detached commands its conversations can stop.

An object, not module state: the `Phoenix` that owns the conversations owns
their jobs (``Services.jobs`` -> ``CommandRunner.jobs``), so two `Phoenix`
objects in one process never see or kill each other's. The bash tool adds a
job when it starts one; the runtime stops them when the mode goes back to
Restricted and kills them when a conversation ends.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from pathlib import Path

from phoenix_nb.sandbox import ExitReport, Process, remove_tree

__all__ = ["BackgroundJob", "BackgroundJobs"]

_KILL_WAIT = 5.0  # bound on waiting for the supervisor's report after a kill


@dataclass
class BackgroundJob:
    """A detached command the conversation can still stop."""

    conversation_id: str
    process: Process
    log_path: Path
    directory: Path
    command: str
    restricted: bool
    watcher: asyncio.Future[ExitReport] | None = field(default=None, repr=False)

    @property
    def running(self) -> bool:
        return self.watcher is None or not self.watcher.done()


class BackgroundJobs:
    """Every registered background job, by conversation."""

    def __init__(self) -> None:
        self._jobs: dict[str, list[BackgroundJob]] = {}

    def add(self, job: BackgroundJob) -> None:
        self._jobs.setdefault(job.conversation_id, []).append(job)

    def of(self, conversation_id: str) -> list[BackgroundJob]:
        """The conversation's jobs that are still registered (running or not yet reaped)."""
        return list(self._jobs.get(conversation_id, []))

    async def kill(self, conversation_id: str) -> int:
        """Kill every background job of a conversation (when it ends); returns how many."""
        jobs = self._jobs.pop(conversation_id, [])
        for job in jobs:
            job.process.kill()
        for job in jobs:
            with contextlib.suppress(TimeoutError, OSError):
                await asyncio.wait_for(job.process.wait(), _KILL_WAIT)
            remove_tree(str(job.directory))
        return len(jobs)

    async def stop_unrestricted(self, conversation_id: str) -> list[str]:
        """Stop the conversation's running background jobs that have write access.

        For "back to Restricted now": such a job outlives the call that started it,
        with that call's mode. Each is killed through its supervisor, which returns
        only once every process of the job's tree is gone. The jobs stay registered,
        so their logs remain readable until the conversation ends. Returns their
        commands, in the order they were started.
        """
        jobs = [j for j in self.of(conversation_id) if not j.restricted and j.running]
        for job in jobs:
            job.process.kill()
        for job in jobs:
            with contextlib.suppress(TimeoutError, OSError):
                await asyncio.wait_for(job.process.wait(), _KILL_WAIT)
        return [job.command for job in jobs]

    async def stop(self, conversation_id: str, pgid: int) -> BackgroundJob | None:
        """Stop the conversation's job whose process group is `pgid`; None if none is."""
        for job in self.of(conversation_id):
            if pgid == job.process.pgid:
                job.process.kill()
                with contextlib.suppress(TimeoutError, OSError):
                    await asyncio.wait_for(job.process.wait(), _KILL_WAIT)
                return job
        return None
