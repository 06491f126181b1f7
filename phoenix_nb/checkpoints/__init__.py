"""Checkpoints of a conversation's working tree, so every write the agent makes can be undone.

An executor (it imports core-level types only): `shadow` keeps snapshots in a
shadow git object store under `$PHOENIX_HOME/checkpoints/`, `recorder` takes them
when writes are possible and around every Unrestricted tool call, and reverts;
`changes` holds the typed payloads the record's renderers read.

The runtime reaches it through `runtime.ports.WorkTreeRecorder`, which
`recorder.Checkpoints` implements: `writes_possible` before a transition makes
writes possible, `around_tool` around every call (it never fails the call: a
failed checkpoint is said in `ToolChanges.error`). Its face is its modules,
listed below and pinned by tests/runtime/test_front_door.py.
"""

__all__ = ["changes", "config", "manifest", "objects", "recorder", "scan", "shadow", "watch"]
