"""The schema validator names the exact field at fault (issue item 7)."""

from __future__ import annotations

from typing import Any

import pytest

from phoenix_nb.tools.schema import invalid_input_result, validate

PATCH_LIKE: dict[str, Any] = {
    "type": "object",
    "required": ["path", "patches"],
    "properties": {
        "path": {"type": "string", "minLength": 1},
        "patches": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["operation"],
                "properties": {
                    "operation": {
                        "type": "string",
                        "enum": ["overwrite", "replace", "append_eof", "prepend_bof"],
                    },
                    "oldText": {"type": "string"},
                    "count": {"type": "integer", "minimum": 0},
                },
            },
        },
        "flag": {"type": "boolean"},
        "ratio": {"type": "number"},
    },
}


def test_valid_input_has_no_problem() -> None:
    value = {"path": "a.py", "patches": [{"operation": "replace", "oldText": "x"}], "ratio": 1}
    assert validate(value, PATCH_LIKE) is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"patches": []}, "path is required"),
        ({"path": 3, "patches": []}, "path must be a string, got integer"),
        ({"path": "", "patches": [{}]}, "path must not be empty"),
        ({"path": "a", "patches": []}, "patches must have at least 1 item"),
        ({"path": "a", "patches": "x"}, "patches must be an array, got string"),
        (
            {"path": "a", "patches": [{"operation": "overwrite"}, {"operation": "zap"}]},
            "patches[1].operation must be one of overwrite, replace, append_eof, prepend_bof",
        ),
        ({"path": "a", "patches": [{}]}, "patches[0].operation is required"),
        ({"path": "a", "patches": [None]}, "patches[0] must be an object, got null"),
        (
            {"path": "a", "patches": [{"operation": "replace", "count": -1}]},
            "patches[0].count must be at least 0",
        ),
        (
            {"path": "a", "patches": [{"operation": "replace", "count": True}]},
            "patches[0].count must be an integer, got boolean",
        ),
        (
            {"path": "a", "patches": [{"operation": "replace"}], "flag": 1},
            "flag must be a boolean, got integer",
        ),
        (
            {"path": "a", "patches": [{"operation": "replace"}], "ratio": "1"},
            "ratio must be a number, got string",
        ),
        ([1, 2], "input must be an object, got array"),
        ("junk", "input must be an object, got string"),
    ],
)
def test_first_problem_names_the_field(value: Any, message: str) -> None:
    assert validate(value, PATCH_LIKE) == message


def test_unknown_fields_refused_only_when_schema_says_so() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert validate({"a": "x", "b": 1}, schema) is None
    closed = {**schema, "additionalProperties": False}
    assert validate({"a": "x", "b": 1}, closed) == "b is not a known field"


def test_invalid_input_result_is_an_error_naming_tool_and_field() -> None:
    result = invalid_input_result("toolu_1", "patch", "path is required")
    assert result.is_error
    assert result.tool_use_id == "toolu_1"
    assert result.content == "Invalid input for patch: path is required."
