"""The permission manifest's bytes, kept up to date key by key.

A checkpoint stores every file's and folder's permission bits as one JSON blob
(`json.dumps(perms, sort_keys=True, separators=(",", ":"))`, which readers
parse). Encoding 50,000 entries afresh took longer than a whole incremental
checkpoint may; here the encoded entries are kept in key order and only the
keys a checkpoint touched are encoded again, so the bytes are the same and the
cost is a join.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Iterable, Mapping

__all__ = ["ManifestText"]


def _entry(key: str, value: str) -> str:
    return f"{json.dumps(key)}:{json.dumps(value)}"


class ManifestText:
    """The encoded manifest of one checkpoint; `update` moves it to the next."""

    def __init__(self, perms: Mapping[str, str]) -> None:
        self._keys = sorted(perms)
        self._parts = [_entry(k, perms[k]) for k in self._keys]

    def update(self, perms: Mapping[str, str], touched: Iterable[str]) -> None:
        """Take `perms` (the new manifest), which differs from the last only at `touched`."""
        keys, parts = self._keys, self._parts
        for key in touched:
            i = bisect_left(keys, key)
            present = i < len(keys) and keys[i] == key
            value = perms.get(key)
            if value is not None:
                if present:
                    parts[i] = _entry(key, value)
                else:
                    keys.insert(i, key)
                    parts.insert(i, _entry(key, value))
            elif present:
                del keys[i]
                del parts[i]

    def body(self) -> bytes:
        return ("{" + ",".join(self._parts) + "}").encode()
