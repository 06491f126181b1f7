"""The sandbox's one error: the launcher could not be started or reached."""

from __future__ import annotations

from phoenix_nb.errors import PhoenixError

__all__ = ["SandboxError"]


class SandboxError(PhoenixError, RuntimeError):
    """The launcher could not be started or reached."""
