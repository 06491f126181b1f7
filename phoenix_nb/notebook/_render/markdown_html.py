"""The model's Markdown turned into HTML that cannot run anything.

Why mistune: it is already installed with nbconvert (so no new dependency), it
is a real CommonMark-ish parser (a hand-written converter would mis-nest and be
an injection risk), and with `escape=True` it escapes raw HTML in the model's
text instead of passing it through, while its URL policy turns `javascript:`
and other harmful links into `#harmful-link`. Images are rendered as links so
the shared output never loads anything from outside. If mistune is missing the
text is shown escaped with its line breaks kept, which is still safe and whole.
"""

from __future__ import annotations

from html import escape
from typing import Any

try:
    import mistune
    from mistune.renderers.html import HTMLRenderer
except ImportError:  # pragma: no cover - exercised only without nbconvert's deps
    mistune = None  # type: ignore[assignment]
    HTMLRenderer = object  # type: ignore[assignment,misc]


if mistune is not None:

    class _SafeRenderer(HTMLRenderer):  # type: ignore[misc,valid-type]
        """mistune's HTML renderer, minus anything that would fetch or open a page."""

        def image(self, text: str, url: str, title: str | None = None) -> str:
            href = self.safe_url(url)
            return f'<a class="phx-imglink" href="{href}">[image: {text}]</a>'

        def link(self, text: str, url: str, title: str | None = None) -> str:
            href = self.safe_url(url)
            title_attr = f' title="{self.escape_attribute(title)}"' if title else ""
            return f'<a href="{href}"{title_attr} rel="nofollow noopener noreferrer">{text}</a>'

    _MARKDOWN: Any = mistune.create_markdown(
        escape=True,
        renderer=_SafeRenderer(escape=True),
        plugins=["strikethrough", "table", "url"],
    )
else:  # pragma: no cover
    _MARKDOWN = None


def markdown_to_html(source: str) -> str:
    """Safe HTML for a piece of Markdown (see the module docstring for why mistune)."""
    if _MARKDOWN is None:  # pragma: no cover
        return f'<div class="phx-prewrap">{escape(source)}</div>'
    return str(_MARKDOWN(source))
