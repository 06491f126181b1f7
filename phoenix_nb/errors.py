"""The one root of phoenix_nb's own exceptions.

Every error phoenix raises on purpose subclasses `PhoenixError`, so a caller
(the notebook's magics, a script using the Python API) can catch phoenix's
refusals and failures with one `except PhoenixError` and let real bugs
(TypeError, KeyError …) surface. The message of a `PhoenixError` is worded for
the user: one line that says what happened and what to do.

Packages add their own subclasses next to the code that raises them
(`phoenix_nb.store`, `phoenix_nb.tools`, `phoenix_nb.llm` …); the ones shared
across layers live here.
"""

from __future__ import annotations

__all__ = [
    "ConversationBusy",
    "PhoenixError",
    "Rejected",
    "UnknownConversation",
]


class PhoenixError(Exception):
    """A user mistake, a refusal or a failure phoenix explains (one line, for the user)."""


class UnknownConversation(PhoenixError, LookupError):
    """No stored conversation has this id or slug."""


class Rejected(PhoenixError):
    """The state machine refused an event (e.g. "the agent is busy"); says why."""


class ConversationBusy(Rejected):
    """Another kernel is working on this conversation (it holds the lease)."""
