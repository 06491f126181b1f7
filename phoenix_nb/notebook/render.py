"""The shareable fallbacks of a conversation record, as one MIME bundle.

A `%%phoenix` cell's output is one display. JupyterLab with our extension reads
the JSON record; everywhere else (nbconvert HTML, VS Code, GitHub, terminals)
the reader gets one of the fallbacks built here from the same record, so a
shared notebook still tells the whole conversation. These are pure functions of
the record (no IPython, no I/O): the notebook layer calls them and displays the
result, re-rendering on throttled streaming updates, which is why every
renderer is linear in the size of the record.

Bad input: a record that is not a mapping raises `TypeError`; inside a mapping,
missing or malformed fields and unknown step kinds are shown as well as they
can be (unknown steps as escaped JSON), never dropped and never raised on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from phoenix_nb.notebook._render.html import render_html as _render_html
from phoenix_nb.notebook._render.markdown import render_markdown as _render_markdown
from phoenix_nb.notebook._render.plain import render_plain as _render_plain

MIME_TYPE = "application/vnd.phoenix.conversation+json"

__all__ = ["MIME_TYPE", "render_bundle", "render_html", "render_markdown", "render_plain"]


def check_record(record: object) -> Mapping[str, Any]:
    if not isinstance(record, Mapping):
        raise TypeError(
            "a conversation record must be a mapping (the JSON object of "
            f"{MIME_TYPE}), not {type(record).__name__}"
        )
    return record


def render_html(record: Mapping[str, Any]) -> str:
    """Self-contained, script-free HTML: every string escaped, folding by <details>."""
    return _render_html(check_record(record))


def render_markdown(record: Mapping[str, Any]) -> str:
    """Markdown that reads on its own: whole texts, short tool output, safe fences."""
    return _render_markdown(check_record(record))


def render_plain(record: Mapping[str, Any]) -> str:
    """A compact transcript for terminals and `print`."""
    return _render_plain(check_record(record))


def render_bundle(record: Mapping[str, Any]) -> dict[str, Any]:
    """The full MIME bundle for one display: the record and its three fallbacks.

    The record itself is passed through unchanged (the same object), so the
    caller decides whether to copy it before the next streaming update.
    """
    checked = check_record(record)
    return {
        MIME_TYPE: checked,
        "text/html": _render_html(checked),
        "text/markdown": _render_markdown(checked),
        "text/plain": _render_plain(checked),
    }
