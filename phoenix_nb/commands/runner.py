"""`CommandRunner`: the one recipe from a policy and a mode to a confined process."""

from __future__ import annotations

import contextlib
import dataclasses
import resource
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from phoenix_nb.commands.environment import CommandEnvironment, command_environment, fork_secrets
from phoenix_nb.commands.jobs import BackgroundJobs
from phoenix_nb.core.secrets import DEFAULT_SECRET_PATTERNS
from phoenix_nb.sandbox import (
    ChildCgroup,
    ChildPolicy,
    Process,
    RunSpec,
    SandboxInfo,
    SandboxLimits,
    SandboxPolicy,
    child_cgroup,
    child_policy,
    group_for,
    hidden_paths,
    start_process,
    with_limits,
)

__all__ = ["CommandRunner", "ForkConfinement"]

# RLIMIT_CPU of a long-lived server: it idles between calls, so its CPU time is
# small; the bound only catches one that spins for a day.
SERVE_CPU_SECONDS = 24 * 3600

# A runner made without the probe's answer: Restricted work is refused, never run
# unconfined (the runtime always passes the Phoenix's `SandboxInfo`).
NO_SANDBOX_GIVEN = SandboxInfo(False, 0, "no sandbox was given to this command runner")


def _no_credentials() -> tuple[str, ...]:
    return ()


@dataclass
class ForkConfinement:
    """What the kernel prepares before a confined fork of itself, and cleans up after it.

    ``policy`` is applied in the child (`sandbox.confine_forked_child`); ``cgroup``
    is the fork's own group inside the conversation's budget (None only where the
    host gives no cgroup); ``counters`` its event counters before the fork, so
    `limits_hit` can say which budget the fork ran into.
    """

    policy: ChildPolicy
    cgroup: ChildCgroup | None
    counters: dict[str, int]

    def limits_hit(self) -> list[str]:
        return self.cgroup.limits_hit(self.counters) if self.cgroup is not None else []

    def release(self) -> None:
        """Kill what is left in the fork's cgroup and remove it (after the reap)."""
        if self.cgroup is not None:
            self.cgroup.kill_members()
            with contextlib.suppress(OSError):
                self.cgroup.remove()


@dataclass(frozen=True)
class CommandRunner:
    """How one conversation's processes start, and everything they are started with.

    Made per conversation by the runtime from its `Phoenix`; a tool gets it as
    ``ToolContext.commands`` and holds nothing of this itself, so a tool that
    starts a process (or forks the kernel) cannot leave a step out.

    ``policy``: the Phoenix's `SandboxPolicy` (limits, deny list), a value passed
    down, never read from module state. ``group``: the cgroup budget's name key
    (the conversation id; an MCP server has its own, so a server cannot eat the
    conversation's memory nor the other way round). ``info``: whether Restricted
    mode can be enforced here (the probe's answer, once per kernel).
    ``env_allow``/``secret_patterns``: what a process's environment may carry
    (`command_environment`). ``jobs``: the owner's background jobs (the
    `Phoenix`'s, so that restrict() and a conversation's end stop them).
    ``live_credentials``: what the owner's model providers hold now, asked
    before each fork of the kernel (the fork scrubs it from its memory).
    """

    policy: SandboxPolicy = field(default_factory=SandboxPolicy)
    group: str = "default"
    info: SandboxInfo = NO_SANDBOX_GIVEN
    env_allow: tuple[str, ...] = ()
    secret_patterns: tuple[str, ...] = DEFAULT_SECRET_PATTERNS
    jobs: BackgroundJobs = field(default_factory=BackgroundJobs, compare=False)
    live_credentials: Callable[[], tuple[str, ...]] = field(default=_no_credentials, compare=False)

    def environment(self, extra: Mapping[str, str] | None = None) -> CommandEnvironment:
        """The environment a process of this conversation gets (an allowlist, never
        the kernel's whole one: `command_environment`), plus phoenix's own ``extra``."""
        return command_environment(allow=self.env_allow, deny=self.secret_patterns, extra=extra)

    def scrub_values(self) -> list[str]:
        """What a fork of the kernel must overwrite in its memory that this runner
        knows of, as of now: the withheld environment values that are or may be
        credentials (`fork_secrets`) and what the providers hold now
        (``live_credentials``). The kernel tools add what only the kernel knows
        (its variables, history literals, credential files, the session key)."""
        return [*fork_secrets(self.environment().withheld), *self.live_credentials()]

    def confine_fork(
        self, cwd: str | Path, env: Mapping[str, str], tmpdir: str, cpu_seconds: int
    ) -> ForkConfinement:
        """The confinement of one fork of the kernel, built in the kernel (no user code
        runs) before the fork: what a Restricted command of this conversation gets.

        The conversation's policy (hidden paths expanded for ``cwd``, limits), its
        cgroup budget (a fresh group under ``group``), ``tmpdir`` as its private
        TMPDIR. The address-space limit is the kernel's own size plus the policy's
        allowance: a fork already maps everything the kernel maps. Raises
        `SandboxError` where Restricted mode is unavailable or the budget cannot be
        applied: the fork must then not run.
        """
        own = int(Path("/proc/self/statm").read_text().split()[0]) * resource.getpagesize()
        base = self.policy.limits
        adjusted = with_limits(base, address_space=own + base.address_space)
        # The policy first: it starts the sandbox launcher on first use, whose start-up
        # sweep of stale cgroups would otherwise remove a cgroup made a moment before.
        policy = child_policy(
            cwd=cwd,
            env=env,
            tmpdir=tmpdir,
            policy=dataclasses.replace(self.policy, limits=adjusted),
            cpu_seconds=cpu_seconds,
        )
        cgroup = child_cgroup(self.group or "default", adjusted)
        if cgroup is not None:
            policy = dataclasses.replace(policy, cgroup_procs=cgroup.procs_files)
        return ForkConfinement(policy, cgroup, cgroup.counters() if cgroup is not None else {})

    def spec(
        self,
        argv: tuple[str, ...],
        cwd: Path,
        env: Mapping[str, str],
        *,
        restricted: bool,
        cpu_seconds: int,
        limits: SandboxLimits | None = None,
        linger: bool = False,
        discard_stderr: bool = False,
        stdin: bool = False,
        separate_stderr: bool = False,
        hide_from: Path | None = None,
        writable: tuple[str, ...] = (),
        network: bool = False,
    ) -> RunSpec:
        """The `RunSpec` of a process of this conversation.

        Restricted: the launcher's sandbox, with the credential paths of the
        conversation's policy hidden (expanded now for ``hide_from``, default
        ``cwd``: the paths may appear after the policy was made). Both modes:
        the conversation's cgroup budget and ``limits`` (default: the policy's).
        ``writable``/``network``: a Restricted process's grants (see `RunSpec`).
        """
        return RunSpec(
            argv=argv,
            cwd=str(cwd),
            env=dict(env),
            restricted=restricted,
            writable=writable if restricted else (),
            network=network and restricted,
            limits=limits or self.policy.limits,
            cpu_seconds=cpu_seconds,
            linger=linger,
            group=group_for(self.group or "default"),
            hidden=tuple(hidden_paths(hide_from or cwd, self.policy)) if restricted else (),
            discard_stderr=discard_stderr,
            stdin=stdin,
            separate_stderr=separate_stderr,
        )

    async def start(self, spec: RunSpec, output_fd: int | None = None) -> Process:
        """Run ``spec`` through this kernel's launcher (`sandbox.start_process`)."""
        return await start_process(spec, output_fd=output_fd)

    async def serve(
        self,
        argv: tuple[str, ...],
        cwd: Path,
        env: Mapping[str, str],
        *,
        restricted: bool = True,
        limits: SandboxLimits | None = None,
        writable: tuple[str, ...] = (),
        network: bool = False,
    ) -> Process:
        """Start a long-lived server speaking on its stdin and stdout.

        The `Process` has ``stdin_fd`` (write), ``output_fd`` (its stdout only)
        and ``stderr_fd`` (read), all non-blocking and the caller's to close.
        Its supervisor kills the whole tree when `Process.kill`/`stop` is called,
        and also when this kernel exits (the status pipe's end), so no server
        outlives its kernel. ``writable``/``network``: its grants, lifted inside
        the Restricted sandbox (everything else stays: see `RunSpec`).
        """
        spec = self.spec(
            argv,
            cwd,
            env,
            restricted=restricted,
            cpu_seconds=SERVE_CPU_SECONDS,
            limits=limits,
            stdin=True,
            separate_stderr=True,
            writable=writable,
            network=network,
        )
        return await self.start(spec)
