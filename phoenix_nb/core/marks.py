"""Characters that hide or disguise text, shown as their codes (`<U+202E>`) instead.

One definition for every place phoenix shows text a model wrote or a tool read:
the record's renderers (`notebook._render.view.inert`, and `labextension/src/
record.ts` `inert`, which must match it), the cell-edit view in the front end
(`celledits.ts`, which reuses record.ts), and `%phoenix edits`. A character is
marked when it changes how *other* text looks, or is drawn as nothing:

* C0 and C1 controls other than tab, newline and carriage return (terminal
  escapes, backspace, form feed and vertical tab inside a line);
* bidirectional marks, embeddings, overrides and isolates (U+061C, U+200E/F,
  U+202A-U+202E, U+2066-U+2069), which reorder a line on screen, and the line and
  paragraph separators (U+2028/9) where text is not split into lines;
* zero-width and invisible characters: U+00AD, U+034F, U+115F/U+1160, U+17B4/5,
  U+180B-U+180F, U+200B-U+200D, U+2060-U+2064, U+206A-U+206F, U+3164, U+FEFF,
  U+FFA0, U+FFF9-U+FFFB, musical-symbol format controls, the tag characters
  (U+E0000-U+E007F, which carry hidden ASCII) and the supplementary variation
  selectors (U+E0100-U+E01EF). The emoji variation selectors U+FE00-U+FE0F are
  left alone: they follow a visible symbol and only choose its glyph.

Line breaks are a separate matter (`split_lines`): source code is split the way
Python's `str.splitlines` splits it — which is how IPython splits a cell before
running it — so a carriage return, a line or paragraph separator or a form feed
starts a new row where a reader sees it, never an invisible one inside a row.
"""

from __future__ import annotations

import re
from collections import Counter

__all__ = [
    "HIDING",
    "LINE_BREAKS",
    "hiding_characters",
    "mark",
    "marked_lines",
    "source_warning",
    "split_lines",
]

HIDING = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f"
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f"
    "\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f"
    "\u3164\ufeff\uffa0\ufff9-\ufffb"
    "\U0001d173-\U0001d17a\U000e0000-\U000e007f\U000e0100-\U000e01ef]"
)
# What str.splitlines splits on, besides "\n" and "\r\n" (which every editor shows).
LINE_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_ODD_BREAK = re.compile("\r(?!\n)|[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def mark(s: str) -> str:
    """`s` with every hiding character shown as its code (`<U+202E>`)."""
    return HIDING.sub(lambda m: f"<U+{ord(m.group(0)):04X}>", s)


def split_lines(source: str) -> list[str]:
    """The lines of `source` as Python (`str.splitlines`) and IPython split it."""
    return source.splitlines()


def marked_lines(source: str) -> list[str]:
    """`source`'s lines as Python splits them, each with its hiding characters marked."""
    return [mark(line) for line in split_lines(source)]


def hiding_characters(source: str) -> Counter[str]:
    """How often each hiding character and each unusual line break occurs in `source`
    (keyed by its ``U+XXXX`` code)."""
    found: Counter[str] = Counter()
    for m in HIDING.finditer(source):
        if m.group(0) not in LINE_BREAKS:  # counted once, as a line break, below
            found[f"U+{ord(m.group(0)):04X}"] += 1
    for m in _ODD_BREAK.finditer(source):
        found[f"U+{ord(m.group(0)[0]):04X}"] += 1
    return found


def source_warning(source: str) -> str:
    """One line saying that `source` holds characters a reader would not see, or ""."""
    found = hiding_characters(source)
    if not found:
        return ""
    codes = ", ".join(f"{code} ×{n}" if n > 1 else code for code, n in sorted(found.items()))
    return (
        f"⚠ This code contains characters that are invisible or change how it reads ({codes}): "
        "each is shown as <U+…>, and each line break other than a newline starts a new line "
        "here, as Python runs it."
    )
