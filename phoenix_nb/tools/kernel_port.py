"""What the kernel tools may know of the kernel they live in: a port, not IPython.

The kernel tools (inspect_variables, kernel_history, run_python,
propose_cell, edit_cell, insert_cell) read the user's namespace, what the
kernel ran and the last exception, and hand proposed cells and cell edits back
to the front end. They do so only
through `KernelPort`, so the tools layer never imports IPython (the notebook
layer's adapter, `phoenix_nb.notebook.ipython_kernel`, is the one place that
does), and tests can drive the tools with a plain dictionary standing in for a
kernel (`DictKernel`, below, is a real implementation, not a mock).

The port hands out live objects. Nothing in the tools layer calls a method of a
user object in the kernel process: summaries and scratchpad code run in a
copy-on-write fork (`tools/kernel/fork.py`), where `enter_child` first reroutes the
kernel's own output channels so that nothing in the child can reach the
front end.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol, runtime_checkable

from phoenix_nb.core.secrets import SecretValues
from phoenix_nb.tools.cell_edits import EditBook


@dataclass(frozen=True)
class CellOutput:
    """One output of an executed cell, as text the kernel already produced (bounded).

    kind: "stdout" | "stderr" | "result" | "display" | "error".
    """

    kind: str
    text: str


@dataclass(frozen=True)
class HistoryEntry:
    """One cell the kernel ran, in execution order (deleted cells included).

    `cell_id` is the notebook cell's id when the front end sent one with the
    execute request (JupyterLab and Notebook 7 do, as `metadata.cellId`)."""

    execution_count: int
    source: str
    outputs: tuple[CellOutput, ...] = ()
    cell_id: str | None = None


@dataclass(frozen=True)
class LastException:
    """The exception of the most recent failed cell, with its live traceback."""

    type: type[BaseException]
    value: BaseException
    traceback: TracebackType | None
    execution_count: int | None = None


@dataclass(frozen=True)
class Proposal:
    """A cell the agent proposes; inserted below the %%phoenix cell at turn end, not run."""

    conversation_id: str
    code: str
    explanation: str


class ChildOutput(Protocol):
    """Where a forked child's kernel channels go instead of the front end."""

    def write(self, stream: str, text: str) -> None: ...

    def display(self, data: Mapping[str, Any]) -> None: ...


@runtime_checkable
class KernelPort(Protocol):
    def user_namespace(self) -> Mapping[str, Any]:
        """The live user namespace (read in a fork only)."""
        ...

    def hidden_names(self) -> Collection[str]:
        """Names the kernel itself put in the namespace (In, Out, _, exit, …)."""
        ...

    def history(self, last: int) -> Sequence[HistoryEntry]:
        """The last `last` executed cells, oldest first."""
        ...

    def last_exception(self) -> LastException | None: ...

    def propose_cell(self, proposal: Proposal) -> None:
        """Queue a cell for the front end; sent when the turn's cell ends."""
        ...

    def cell_edits(self) -> EditBook:
        """The kernel's proposed cell edits and what the human decided (edit_cell)."""
        ...

    def enter_child(self, sink: ChildOutput) -> None:
        """Called in a forked child only: send the kernel's display/stream channels to `sink`,
        and drop the kernel's own references to its session key and connection info."""
        ...

    def connection_secrets(self) -> SecretValues:
        """What the kernel itself must keep from its forks and from the model: the
        session's HMAC key, the connection file's path, its endpoints and ports."""
        ...


@dataclass
class DictKernel:
    """A kernel made of plain data: a namespace, a history, an exception.

    Used where no IPython kernel exists (tests, scripts driving the runtime);
    implements `KernelPort` fully. Its output channels are sys.stdout/stderr,
    which the fork machinery already reroutes, so `enter_child` keeps the sink
    only for `display` calls made through it.
    """

    namespace: dict[str, Any] = field(default_factory=dict)
    entries: list[HistoryEntry] = field(default_factory=list)
    exception: LastException | None = None
    proposals: list[Proposal] = field(default_factory=list)
    hidden: frozenset[str] = frozenset()
    sink: ChildOutput | None = None
    secrets: SecretValues = field(default_factory=SecretValues)  # stands for a session key
    edits: EditBook = field(default_factory=EditBook)

    def __post_init__(self) -> None:
        for entry in self.entries:
            if entry.cell_id is not None:
                self.edits.saw_run(entry.cell_id, entry.source, entry.execution_count)

    def user_namespace(self) -> Mapping[str, Any]:
        return self.namespace

    def hidden_names(self) -> Collection[str]:
        return self.hidden

    def history(self, last: int) -> Sequence[HistoryEntry]:
        return self.entries[-last:] if last > 0 else []

    def last_exception(self) -> LastException | None:
        return self.exception

    def propose_cell(self, proposal: Proposal) -> None:
        self.proposals.append(proposal)

    def cell_edits(self) -> EditBook:
        return self.edits

    def enter_child(self, sink: ChildOutput) -> None:
        self.sink = sink

    def connection_secrets(self) -> SecretValues:
        return self.secrets
