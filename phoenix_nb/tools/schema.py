"""Input validation for tool calls against the small JSON-schema subset our tools use.

The model sometimes sends a missing field, a number where a string belongs, or
junk from a truncated stream. Such input must become a tool error the model can
act on — naming the exact field — never an exception into the runtime (issue
item 7). We validate by hand rather than with `jsonschema`: the subset is tiny
(object, required, properties, string/boolean/integer/number/array/object,
enum, items, minItems, maxItems, minLength) and the wording matters more than coverage —
`jsonschema` would need every message rewritten to name paths like
`patches[1].operation`, and it is only a transitive dependency here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from phoenix_nb.core.displays import ErrorDisplay, ToolErrorKind
from phoenix_nb.core.values import ToolResult

_TYPE_NAMES: dict[str, str] = {
    "string": "a string",
    "boolean": "a boolean",
    "integer": "an integer",
    "number": "a number",
    "array": "an array",
    "object": "an object",
}


def _json_type(value: Any) -> str:
    """Name the JSON type of a value, so a mismatch message says what was sent."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        return "array"
    return type(value).__name__


def _matches_type(value: Any, expected: str) -> bool:
    # bool is an int in Python but never a JSON integer/number.
    actual = _json_type(value)
    if expected == "number":
        return actual in ("integer", "number")
    return actual == expected


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _check(value: Any, schema: Mapping[str, Any], path: str) -> str | None:
    where = path or "input"
    expected = schema.get("type")
    if isinstance(expected, str) and not _matches_type(value, expected):
        return f"{where} must be {_TYPE_NAMES.get(expected, expected)}, got {_json_type(value)}"
    enum = schema.get("enum")
    if enum is not None and value not in enum:
        options = ", ".join(str(option) for option in enum)
        return f"{where} must be one of {options}"
    if expected == "string":
        min_length = schema.get("minLength")
        if isinstance(min_length, int) and len(value) < min_length:
            return (
                f"{where} must not be empty"
                if min_length == 1
                else (f"{where} must have at least {min_length} characters")
            )
    if expected == "integer" or expected == "number":
        minimum = schema.get("minimum")
        if minimum is not None and value < minimum:
            return f"{where} must be at least {minimum}"
        maximum = schema.get("maximum")
        if maximum is not None and value > maximum:
            return f"{where} must be at most {maximum}"
    if expected == "object":
        for key in schema.get("required", ()):
            if key not in value:
                return f"{_join(path, key)} is required"
        properties: Mapping[str, Any] = schema.get("properties", {})
        for key, sub_schema in properties.items():
            if key in value:
                problem = _check(value[key], sub_schema, _join(path, key))
                if problem:
                    return problem
        if schema.get("additionalProperties") is False:
            for key in value:
                if key not in properties:
                    return f"{_join(path, str(key))} is not a known field"
    if expected == "array":
        min_items = schema.get("minItems")
        if isinstance(min_items, int) and len(value) < min_items:
            return f"{where} must have at least {min_items} item{'s' if min_items != 1 else ''}"
        max_items = schema.get("maxItems")
        if isinstance(max_items, int) and len(value) > max_items:
            return f"{where} must have at most {max_items} items"
        items = schema.get("items")
        if isinstance(items, Mapping):
            for index, item in enumerate(value):
                problem = _check(item, items, f"{where}[{index}]")
                if problem:
                    return problem
    return None


def validate(value: Any, schema: Mapping[str, Any]) -> str | None:
    """Return the first problem with `value` as a sentence naming the field, or None.

    Only the first problem is reported: the model fixes one thing per retry
    anyway, and a short message is easier to act on than a list.
    """
    return _check(value, schema, "")


def invalid_input_result(tool_use_id: str, tool_name: str, problem: str) -> ToolResult:
    """Word every tool's bad-input error the same, so the model learns one shape."""
    return ToolResult(
        tool_use_id=tool_use_id,
        content=f"Invalid input for {tool_name}: {problem}.",
        is_error=True,
        display=ErrorDisplay(ToolErrorKind.INVALID_INPUT, problem),
    )
