"""What a person sees first, and the thumbnails, in real Chromium.

A saved record carrying the "continuing SLUG" note and an image with its thumbnail,
drawn by the labextension in JupyterLab and, as nbconvert and untrusted front ends
show it, by the record's HTML fallback: the note is above the header (by element
bounds, not by markup order alone), and the thumbnail is a loaded image no larger
than 96 px.
"""

from __future__ import annotations

import base64
import io
from typing import Any

import pytest
from playwright.sync_api import Browser, Locator, expect

from phoenix_nb.notebook.render import render_html
from phoenix_nb.notebook.thumbnails import THUMBNAIL_EDGE
from tests.browser.lab import LabPage, load_fixture, record_output, write_notebook

pytestmark = pytest.mark.browser

NOTE = "continuing quiet-otter, this notebook's conversation (picked up after a restart)"


def _record() -> dict[str, Any]:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (THUMBNAIL_EDGE, 72), "purple").save(out, "PNG")
    thumb = "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()
    record = load_fixture("sample_record.json")
    record["notes"] = [NOTE]
    user = next(s for c in record["cycles"] for s in c["steps"] if s["kind"] == "user")
    user["images"] = [{"media_type": "image/png", "name": "plot.png", "thumbnail": thumb}]
    return record


def _above(first: Locator, second: Locator) -> None:
    a, b = first.bounding_box(), second.bounding_box()
    assert a is not None and b is not None
    assert a["y"] + a["height"] <= b["y"] + 1, (a, b)


def _bounded_image(img: Locator) -> None:
    expect(img).to_be_visible()
    assert img.evaluate("n => n.complete && n.naturalWidth") > 0, "the thumbnail loaded"
    # the drawn picture (inside its 1 px frame) is at most 96 px either way
    size = img.evaluate("n => [n.clientWidth, n.clientHeight, n.naturalWidth, n.naturalHeight]")
    assert max(size) <= THUMBNAIL_EDGE, size


def test_lab_record_shows_the_note_first_and_the_thumbnail(lab: LabPage) -> None:
    record = _record()
    write_notebook(
        lab.server.root,
        "continuing.ipynb",
        [("%%phoenix\nagain", [record_output(record, render_html(record), "record")])],
    )
    lab.open_notebook("continuing.ipynb")
    root = lab.page.locator(".jp-PhoenixConversation [data-phoenix-record]")
    root.wait_for(timeout=60_000)
    first = root.locator(":scope > *").first
    expect(first).to_have_text(NOTE)
    _above(first, root.locator(".jp-Phoenix-header"))
    _bounded_image(root.locator("img.jp-Phoenix-thumb"))


def test_html_fallback_shows_the_note_first_and_the_thumbnail(browser: Browser) -> None:
    context = browser.new_context(viewport={"width": 1000, "height": 900})
    try:
        page = context.new_page()
        page.set_content(f"<!DOCTYPE html><html><body>{render_html(_record())}</body></html>")
        note = page.locator(".phx-record > .phx-note").first
        expect(note).to_have_text(NOTE)
        _above(note, page.locator(".phx-head"))
        _bounded_image(page.locator("img.phx-thumb"))
    finally:
        context.close()
