"""Checkpoints of a conversation's working tree, so every write the agent makes can be undone.

An executor (it imports core-level types only): `shadow` keeps snapshots in a
shadow git object store under `$PHOENIX_HOME/checkpoints/`, `recorder` takes them
when writes are possible and around every Unrestricted tool call, and reverts;
`changes` holds the typed payloads the record's renderers read.
"""
