"""Exporting a conversation record as a file a person or a program keeps.

`%phoenix export` writes these. Markdown is the record's Markdown fallback with a
title and a metadata list, so it stands alone as a document; JSON is the record
itself, indented and with sorted keys, so exports of the same conversation diff
cleanly; HTML is the record's HTML fallback in a page of its own (no script, no
external resource), to open in any browser or attach to a message. Exports are
where the notebook's fallbacks send a reader for a block they abbreviate, so they
render every block whole (`document=True`); content in them is as inert as in the
notebook (README "Security model").
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from html import escape
from typing import Any

from phoenix_nb.notebook._render.html import render_html as _render_html
from phoenix_nb.notebook._render.markdown import render_markdown as _render_markdown
from phoenix_nb.notebook.render import check_record

__all__ = ["export_html", "export_json", "export_markdown"]


def export_markdown(record: Mapping[str, Any]) -> str:
    """A Markdown document: title (slug), model, cwd and mode, then the conversation."""
    return _render_markdown(check_record(record), document=True)


def _plain_json(value: Any) -> Any:
    """Mappings and sequences other than dict/list (e.g. read-only views) as JSON types."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, set | frozenset):
        raise TypeError("sets have no stable order; the record must not contain one")
    raise TypeError(
        f"the record holds a {type(value).__name__}, which is not JSON "
        "(records carry only JSON data: see docs/record-format.md)"
    )


def export_json(record: Mapping[str, Any]) -> str:
    """Pretty JSON with sorted keys (stable across runs); raises TypeError on non-JSON data."""
    return (
        json.dumps(
            check_record(record),
            indent=2,
            sort_keys=True,
            ensure_ascii=False,
            allow_nan=False,
            default=_plain_json,
        )
        + "\n"
    )


def export_html(record: Mapping[str, Any]) -> str:
    """A standalone HTML page holding the record's HTML rendering."""
    checked = check_record(record)
    conv = checked.get("conversation")
    slug = str(conv.get("slug") or "conversation") if isinstance(conv, Mapping) else "conversation"
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head><meta charset="utf-8">'
        # Defence in depth for a file opened from disk: even a renderer bug could not
        # make this page load anything but its own inline style and data: thumbnails.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">"
        f"<title>phoenix conversation {escape(slug)}</title></head>\n"
        '<body style="max-width:60em;margin:1em auto">\n'
        f"{_render_html(checked, document=True)}\n</body>\n</html>\n"
    )
