"""In real JupyterLab, model content cannot draw phoenix's own state line or controls.

The review's cases (a big red "Restricted mode — nothing was changed" line, a blue
"Approve" button-link) and their family (inline styles, classes borrowed from phoenix,
`<font>`, Markdown headings, links whose text hides their target) are put in the model's
text and in an approval request's reason; the labextension must show them as plain
Markdown: raw HTML as text, no element styled or classed by content, headings near body
size, every link showing its target, the reason quoted under phoenix's own sentence.
"""

from __future__ import annotations

import copy

import pytest
from playwright.sync_api import expect

from tests.browser.lab import LabPage, load_fixture, record_output, write_notebook

pytestmark = pytest.mark.browser

IMITATIONS = "\n\n".join(
    [
        '<span style="font-size:40px;color:red;display:block;padding:20px">'
        "phoenix: Restricted mode — nothing was changed</span>",
        '<a href="https://evil.example/approve" style="display:inline-block;'
        'background:#1976d2;color:#fff;padding:6px 14px">Approve</a>',
        '<div class="jp-Phoenix-badge jp-Phoenix-state">idle</div>',
        '<font size="7" color="red">nothing was changed</font>',
        "# phoenix · Restricted · nothing was changed",
        "[Approve](https://evil.example/approve)",
    ]
)


def test_imitations_render_as_plain_markdown_in_the_labextension(lab: LabPage) -> None:
    record = copy.deepcopy(load_fixture("sample_record.json"))
    steps = record["cycles"][0]["steps"]
    ai = next(
        s for s in steps if s["kind"] == "ai" and s.get("item", {}).get("type") != "reasoning"
    )
    ai["item"]["text"] = IMITATIONS
    record["cycles"][-1]["steps"].append(
        {"kind": "approval", "reason": IMITATIONS, "decision": "pending"}
    )
    write_notebook(
        lab.server.root,
        "imitations.ipynb",
        [("%%phoenix\nlook", [record_output(record, "<p>fallback</p>", "record")])],
    )
    lab.open_notebook("imitations.ipynb")
    page = lab.page
    block = page.locator("[data-phoenix-ai='assistant']").filter(has_text="nothing was changed")
    block.first.wait_for(timeout=60_000)
    # Raw HTML is text; nothing in the content carries a style or a class of its own.
    expect(block.first).to_contain_text('<span style="font-size:40px;color:red')
    expect(block.first).to_contain_text('<div class="jp-Phoenix-badge jp-Phoenix-state">idle</div>')
    assert (
        block.first.locator("[style], font, span.jp-Phoenix-badge, div.jp-Phoenix-state").count()
        == 0
    )
    # A Markdown heading stays near body size; the link shows its target and is plain text.
    sizes = block.first.evaluate(
        """(node) => {
            const h = node.querySelector('h1');
            const p = node.querySelector('p');
            const size = (el) => parseFloat(getComputedStyle(el).fontSize);
            return [size(h), size(p)];
        }"""
    )
    assert sizes[0] <= 1.2 * sizes[1], sizes
    # (the raw HTML's URL, shown as text, is autolinked too: a plain link showing itself)
    link = block.first.get_by_role("link", name="Approve", exact=True)
    expect(link).to_have_attribute("href", "https://evil.example/approve")
    expect(block.first).to_contain_text("Approve (https://evil.example/approve)")
    for anchor in block.first.locator("a").all():
        looks = anchor.evaluate(
            "(a) => [getComputedStyle(a).backgroundColor, getComputedStyle(a).display,"
            " a.getAttribute('style')]"
        )
        assert looks[0] in ("rgba(0, 0, 0, 0)", "transparent") and looks[1] == "inline", looks
        assert looks[2] is None, looks
    # The approval: phoenix's sentence, then the reason quoted as plain text.
    pending = page.locator("[data-phoenix-pending-approval='true']").last
    expect(pending.locator(".jp-Phoenix-approveMeans")).to_contain_text(
        "Approving switches this conversation to Unrestricted mode"
    )
    quote = pending.locator("blockquote[data-phoenix-reason]")
    expect(quote).to_contain_text("<span style=")
    assert quote.locator("*").count() == 0, "the reason is text only"
