"""Tagged JSON encoding of the core's values, states, events and effects.

States are persisted (`state_data`) and effects/events cross process and
restart boundaries, so each must survive JSON exactly: `from_json(to_json(x))
== x`. One generic rule keeps this small: a dataclass becomes
`{"type": ClassName, field: ...}`, an enum `{"type": ClassName, "value": ...}`,
a tuple a list (decoded back to a tuple). Fields declared as mappings hold
plain JSON data (tool inputs, display data) and are copied as they are, so a
`"type"` key inside a tool's input can never be mistaken for a tag.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import importlib
from collections.abc import Mapping
from typing import Any

from phoenix_nb.errors import PhoenixError

# Modules whose dataclasses and enums form the encodable vocabulary.
_MODULES = (
    "phoenix_nb.core.values",
    "phoenix_nb.core.models",
    "phoenix_nb.core.states",
    "phoenix_nb.core.events",
    "phoenix_nb.core.effects",
    "phoenix_nb.core.notices",
    "phoenix_nb.core.displays",
    "phoenix_nb.core.changes",
    "phoenix_nb.core.stored",
)


class CodecError(PhoenixError, ValueError):
    """Data that is not an encoding this codec produced."""


@functools.cache
def _registry() -> dict[str, type[Any]]:
    """Class name -> class, for every dataclass or enum defined in the core modules.

    Imported lazily so that the modules themselves may import this codec.
    """
    found: dict[str, type] = {}
    for name in _MODULES:
        module = importlib.import_module(name)
        for obj in vars(module).values():
            if (
                isinstance(obj, type)
                and obj.__module__ == name
                and (dataclasses.is_dataclass(obj) or issubclass(obj, enum.Enum))
            ):
                found[obj.__name__] = obj
    return found


_RAW_FIELDS: dict[type[Any], frozenset[str]] = {}


def _raw_fields(cls: type[Any]) -> frozenset[str]:
    """Fields declared as mappings: plain JSON data, never decoded as tagged values."""
    known = _RAW_FIELDS.get(cls)
    if known is not None:
        return known
    _RAW_FIELDS[cls] = found = frozenset(
        f.name for f in dataclasses.fields(cls) if "Mapping" in str(f.type) or "dict" in str(f.type)
    )
    return found


def _plain(data: Any) -> Any:
    """A JSON-able deep copy of plain data (tuples become lists)."""
    if isinstance(data, Mapping):
        return {str(k): _plain(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_plain(v) for v in data]
    if isinstance(data, enum.Enum):
        return data.value
    return data


def to_json(value: Any) -> Any:
    """Encode a core value as JSON-able data (dicts, lists, str, numbers, bool, None)."""
    if isinstance(value, enum.Enum):
        return {"type": type(value).__name__, "value": value.value}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        raw = _raw_fields(type(value))
        out: dict[str, Any] = {"type": type(value).__name__}
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            out[f.name] = _plain(item) if f.name in raw and item is not None else to_json(item)
        return out
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, Mapping):
        return _plain(value)
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise CodecError(f"cannot encode {type(value).__name__}: not a core value")


def _untyped_display(tag: str, data: Mapping[str, Any]) -> Mapping[str, Any]:
    """A ToolResult in a state persisted before tool displays were typed holds its display
    as the stored JSON (checkpoint `changes` inside): read back by its keys."""
    display = data.get("display")
    if tag != "ToolResult" or not isinstance(display, Mapping) or "type" in display:
        return data
    from phoenix_nb.core.displays import read_stored

    typed, changes = read_stored(display)
    return {**data, "display": to_json(typed), "changes": to_json(changes)}


def from_json(data: Any) -> Any:
    """Decode what `to_json` produced; raises CodecError naming what is wrong."""
    if isinstance(data, list):
        return tuple(from_json(v) for v in data)
    if isinstance(data, Mapping):
        tag = data.get("type")
        cls = _registry().get(tag) if isinstance(tag, str) else None
        if cls is None:
            raise CodecError(f"unknown or missing type tag: {tag!r}")
        if issubclass(cls, enum.Enum):
            try:
                return cls(data.get("value"))
            except ValueError as exc:
                raise CodecError(f"bad {tag} value: {data.get('value')!r}") from exc
        data = _untyped_display(cls.__name__, data)
        raw = _raw_fields(cls)
        kwargs: dict[str, Any] = {}
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names - {"type"}
        if unknown:
            raise CodecError(f"{tag} has no field(s) {sorted(unknown)}")
        for name in names & set(data):
            item = data[name]
            kwargs[name] = _plain(item) if name in raw and item is not None else from_json(item)
        try:
            return cls(**kwargs)
        except TypeError as exc:
            raise CodecError(f"cannot build {tag}: {exc}") from exc
    if data is None or isinstance(data, str | int | float | bool):
        return data
    raise CodecError(f"not JSON data: {type(data).__name__}")
