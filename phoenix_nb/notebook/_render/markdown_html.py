"""Model-authored Markdown made inert: as HTML, and as Markdown again.

Everything the model writes (text, thinking, summaries) is hostile: it may try
to make a viewer's browser fetch a URL (an image, a `<video>`, a stylesheet, a
CSS `url()`, a `srcset`, an SVG `<use>`), or to draw something that looks like
phoenix's own state line or buttons. So it is rendered as Markdown *without raw
HTML*, in one parser for every fallback:

* Why mistune: it is already a dependency (nbconvert's too), it is a real
  CommonMark parser that gives an AST (a hand-written converter would mis-nest
  and be an injection risk), and it parses in time linear in the input.
* HTML (`markdown_to_html`): mistune's HTML renderer with `escape=True`, so raw
  HTML in the text is shown as text; no element of the output carries a `style`,
  a `class` from content, or any attribute that loads a resource. An image
  becomes a visible link whose text is its full target; every link shows its
  target after its text, so a link cannot pass for a control or hide where it
  goes; only http(s) and mailto targets are clickable at all.
* Markdown (`markdown_to_markdown`): the AST written back as canonical Markdown
  in which every character of content text that Markdown or HTML gives a meaning
  (`< > & [ ] ! * _` …) is backslash-escaped, so no viewer (JupyterLab without
  our extension, VS Code, GitHub and its image proxy) can find an image, a raw
  HTML element or an autolinked tag in it. Images become links as above.

Without mistune the text is shown escaped with its line breaks kept, which is
still safe and whole.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from html import escape, unescape
from typing import Any
from urllib.parse import quote

try:
    import mistune
    from mistune.renderers.html import HTMLRenderer
except ImportError:  # pragma: no cover - mistune is a declared dependency
    mistune = None  # type: ignore[assignment]
    HTMLRenderer = object  # type: ignore[assignment,misc]

__all__ = ["link_target", "markdown_to_html", "markdown_to_markdown"]

_PLUGINS = ["strikethrough", "table", "url"]
_CLICKABLE = ("https://", "http://", "mailto:")


def link_target(url: str) -> str:
    """The URL a content link may point at, percent-quoted so nothing in it can end an
    attribute, a Markdown link destination or a line; '' when it must not be clickable
    (javascript:, data:, file:, relative paths: a shared record has no base to resolve
    them against, and a click must never do more than open a page)."""
    url = url.strip()
    if not url.lower().startswith(_CLICKABLE):
        return ""
    return quote(url, safe=":/?#[]@!$&*+,;=%-._~")


if mistune is not None:

    class _SafeRenderer(HTMLRenderer):  # type: ignore[misc,valid-type]
        """mistune's HTML renderer, minus anything that would fetch, style or pose."""

        def text(self, text: str) -> str:
            # Entities in the source (`&lt;`) read as the characters they name, escaped once.
            return escape(unescape(text), quote=False)

        def image(self, text: str, url: str, title: str | None = None) -> str:
            return _image_html(text, url)

        def link(self, text: str, url: str, title: str | None = None) -> str:
            return _link_html(text, url)

        def inline_html(self, html: str) -> str:
            return escape(html)

        def block_html(self, html: str) -> str:
            return f'<p class="phx-rawhtml">{escape(html)}</p>\n'

    _MARKDOWN: Any = mistune.create_markdown(
        escape=True, renderer=_SafeRenderer(escape=True), plugins=_PLUGINS
    )
    _AST: Any = mistune.create_markdown(renderer=None, plugins=_PLUGINS)
else:  # pragma: no cover
    _MARKDOWN = None
    _AST = None


def _shown_url(url: str) -> str:
    """A link's target as the reader sees it: whole, escaped."""
    return escape(url.strip(), quote=True)


def _image_html(alt_html: str, url: str) -> str:
    href = link_target(url)
    label = f"image {alt_html}: " if alt_html else "image: "
    shown = _shown_url(url)
    if href:
        target = f'<a href="{escape(href)}" rel="nofollow noopener noreferrer">{shown}</a>'
    else:
        target = f"<code>{shown}</code>"
    return f'<span class="phx-imglink">[{label}{target}]</span>'


def _link_html(text_html: str, url: str) -> str:
    href = link_target(url)
    shown = _shown_url(url)
    if not href:
        return f'{text_html} <span class="phx-href">(<code>{shown}</code>)</span>'
    anchor = f'<a href="{escape(href)}" rel="nofollow noopener noreferrer">{text_html}</a>'
    if re.sub(r"<[^>]*>", "", text_html).strip() in (shown, escape(href)):
        return anchor
    return f'{anchor} <span class="phx-href">({shown})</span>'


def markdown_to_html(source: str) -> str:
    """Inert HTML for a piece of model Markdown (see the module docstring)."""
    if _MARKDOWN is None:  # pragma: no cover
        return f'<div class="phx-prewrap">{escape(source)}</div>'
    return str(_MARKDOWN(source))


# --- Markdown written back, inert -------------------------------------------------

# Every ASCII character CommonMark or GFM gives a meaning inside a line: escaping one that
# did not need it costs a backslash in the source and nothing in the rendering.
_INLINE_SPECIAL = re.compile(r"[\\`*_\[\]<>&!#|~]")
_LINE_START = re.compile(r"^(\s*)([-+=>]|\d+[.)])")
_BACKTICKS = re.compile(r"`+")


def escape_text(raw: str) -> str:
    """Content text as Markdown that renders exactly as this text, and as nothing else."""
    return _INLINE_SPECIAL.sub(lambda m: "\\" + m.group(0), raw)


def _fence_for(content: str) -> str:
    longest = max((len(m) for m in _BACKTICKS.findall(content)), default=0)
    return "`" * max(3, longest + 1)


def _code_span(content: str) -> str:
    content = content.replace("\n", " ")
    if not content:
        return "` `"
    longest = max((len(m) for m in _BACKTICKS.findall(content)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if content.startswith("`") or content.endswith("`") or content.isspace() else ""
    return f"{ticks}{pad}{content}{pad}{ticks}"


def _md_link(url: str) -> str:
    """A link whose visible text is its own full target."""
    href = link_target(url)
    if not href:
        return _code_span(url.strip())
    return f"[{escape_text(url.strip())}](<{href}>)"


class _MdWriter:
    """mistune's AST back to Markdown; unknown nodes keep their text, escaped."""

    def inline(self, nodes: Sequence[Any]) -> str:
        out: list[str] = []
        line_start = True
        for node in nodes:
            if not isinstance(node, Mapping):
                continue
            kind = node.get("type")
            piece = self.inline_node(node)
            if line_start and kind == "text":
                # A line beginning "- ", "1." or "> " would start a block: escape its marker.
                piece = _LINE_START.sub(lambda m: m.group(1) + "\\" + m.group(2), piece)
            out.append(piece)
            line_start = kind in ("softbreak", "linebreak")
        return "".join(out)

    def inline_node(self, node: Mapping[str, Any]) -> str:
        kind = node.get("type")
        children = node.get("children") or []
        raw = str(node.get("raw", ""))
        attrs = node.get("attrs") or {}
        if kind == "text":
            return escape_text(unescape(raw))
        if kind == "codespan":
            return _code_span(unescape(raw))
        if kind == "emphasis":
            return f"*{self.inline(children)}*"
        if kind == "strong":
            return f"**{self.inline(children)}**"
        if kind == "strikethrough":
            return f"~~{self.inline(children)}~~"
        if kind == "softbreak":
            return "\n"
        if kind == "linebreak":
            return "\\\n"
        if kind == "inline_html":
            return escape_text(raw)
        url = str(attrs.get("url", "")) if isinstance(attrs, Mapping) else ""
        if kind == "image":
            alt = self.inline(children)
            return f"\\[image{' ' + alt if alt else ''}: {_md_link(url)}\\]"
        if kind == "link":
            label = self.inline(children)
            href = link_target(url)
            if not href:
                return f"{label} ({_code_span(url.strip())})"
            if label == escape_text(url.strip()):
                return f"[{label}](<{href}>)"
            return f"[{label}](<{href}>) ({_code_span(url.strip())})"
        if children:
            return self.inline(children)
        return escape_text(raw)

    def blocks(self, nodes: Sequence[Any]) -> list[str]:
        return [b for b in (self.block(n) for n in nodes if isinstance(n, Mapping)) if b]

    def block(self, node: Mapping[str, Any]) -> str:
        kind = node.get("type")
        children = node.get("children") or []
        attrs = node.get("attrs") or {}
        if kind in ("paragraph", "block_text"):
            return self.inline(children)
        if kind == "heading":
            level = attrs.get("level", 1) if isinstance(attrs, Mapping) else 1
            level = level if isinstance(level, int) and 1 <= level <= 6 else 1
            return "#" * level + " " + self.inline(children).replace("\n", " ")
        if kind == "block_code":
            code = str(node.get("raw", ""))
            info = str(attrs.get("info") or "") if isinstance(attrs, Mapping) else ""
            lang = re.sub(r"[^\w+.-]", "", info.split(" ")[0])[:20] if info else ""
            fence = _fence_for(code)
            return f"{fence}{lang}\n{code.removesuffix(chr(10))}\n{fence}"
        if kind == "block_quote":
            inner = "\n\n".join(self.blocks(children))
            return "\n".join("> " + ln if ln else ">" for ln in inner.split("\n"))
        if kind == "list":
            return self.list(node)
        if kind == "thematic_break":
            return "---"
        if kind == "block_html":
            lines = [escape_text(ln) for ln in str(node.get("raw", "")).strip("\n").split("\n")]
            return "\\\n".join(lines)
        if kind == "table":
            return self.table(node)
        if kind == "blank_line":
            return ""
        if children:
            return "\n\n".join(self.blocks(children))
        return escape_text(str(node.get("raw", "")))

    def list(self, node: Mapping[str, Any]) -> str:
        attrs = node.get("attrs") or {}
        ordered = isinstance(attrs, Mapping) and attrs.get("ordered") is True
        start = attrs.get("start", 1) if isinstance(attrs, Mapping) else 1
        n = start if isinstance(start, int) else 1
        tight = node.get("tight") is not False
        items: list[str] = []
        for item in node.get("children") or []:
            if not isinstance(item, Mapping):
                continue
            marker = f"{n}. " if ordered else "- "
            n += 1
            body = ("\n" if tight else "\n\n").join(self.blocks(item.get("children") or []))
            pad = " " * len(marker)
            lines = body.split("\n")
            items.append(
                "\n".join([marker + lines[0], *((pad + ln) if ln else "" for ln in lines[1:])])
            )
        return ("\n" if tight else "\n\n").join(items)

    def table(self, node: Mapping[str, Any]) -> str:
        rows: list[list[str]] = []
        for part in node.get("children") or []:
            if not isinstance(part, Mapping):
                continue
            part_rows = [part] if part.get("type") == "table_head" else part.get("children") or []
            for row in part_rows:
                if isinstance(row, Mapping):
                    cells = [
                        self.inline(cell.get("children") or []).replace("\n", " ")
                        for cell in row.get("children") or []
                        if isinstance(cell, Mapping)
                    ]
                    rows.append(cells)
        if not rows:
            return ""
        width = max(len(r) for r in rows)
        rows = [r + [""] * (width - len(r)) for r in rows]
        lines = ["| " + " | ".join(r) + " |" for r in rows]
        lines.insert(1, "|" + "---|" * width)
        return "\n".join(lines)


def markdown_to_markdown(source: str) -> str:
    """Model Markdown written back with no raw HTML, no image and no autolinked tag in
    it (see the module docstring); reads like the original in any Markdown viewer."""
    if _AST is None:  # pragma: no cover
        return escape_text(source)
    return "\n\n".join(_MdWriter().blocks(_AST(source)))
