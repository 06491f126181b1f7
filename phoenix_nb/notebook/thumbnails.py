"""Small, bounded thumbnails of a conversation's stored images, for the record.

The runtime's record names a request's images (type and name) but does not carry
them: an attached figure may weigh megabytes, and the record is re-sent on every
streaming update and saved in the notebook. The notebook layer adds a thumbnail
to each image wherever the record shows that request (the cell that sent it,
`%phoenix history`, exports, the chat panel), made from the image the store kept
with the user's message, and bounded twice so a saved notebook stays small:

* one thumbnail: at most THUMBNAIL_EDGE px on its longer edge and at most
  THUMBNAIL_MAX_CHARS characters of data URI (PNG, reduced to a palette and then
  to smaller edges until it fits; dropped if even the smallest does not);
* one record: at most RECORD_MAX_CHARS characters of thumbnails in all (later
  images show by name only).

A thumbnail is made once per stored image (cached by message id, `cell.THUMBNAILS`):
the record is decorated on every streaming update.
"""

from __future__ import annotations

import base64
import io
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from typing import Any

from phoenix_nb.core.codec import CodecError
from phoenix_nb.core.messages import images as message_images
from phoenix_nb.core.stored import MessageKind, MessageLike, as_stored
from phoenix_nb.core.values import ImageData

THUMBNAIL_EDGE = 96  # pixels: enough to recognise a plot, small in a saved notebook
THUMBNAIL_MAX_CHARS = 8_000  # one thumbnail's data URI (~5.9 KB of PNG)
RECORD_MAX_CHARS = 65_536  # every thumbnail of one displayed record together
_EDGES = (THUMBNAIL_EDGE, 64, 48, 32)
_PREFIX = "data:image/png;base64,"
_CACHE_SIZE = 256

_Key = tuple[str, tuple[tuple[str, str], ...]]  # (text, ((media type, name), …))


def thumbnail(image: ImageData) -> str:
    """A PNG data URI of at most THUMBNAIL_EDGE px and THUMBNAIL_MAX_CHARS characters
    ('' if the image cannot be read or no bounded form fits)."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(base64.b64decode(image.data))) as img:
            img.load()
            rgb = img.convert("RGBA" if img.mode in ("RGBA", "LA", "P") else "RGB")
    except (OSError, ValueError):
        return ""
    for edge in _EDGES:
        small = rgb.copy()
        small.thumbnail((edge, edge))
        for candidate in (small, small.quantize(colors=64)):
            out = io.BytesIO()
            candidate.save(out, "PNG", optimize=True)
            uri = _PREFIX + base64.b64encode(out.getvalue()).decode("ascii")
            if len(uri) <= THUMBNAIL_MAX_CHARS:
                return uri
    return ""


class ThumbnailCache:
    """Thumbnails of stored images by (message id, image index), least recently used out."""

    def __init__(self, size: int = _CACHE_SIZE) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, int], str] = OrderedDict()

    def get(self, message_id: str, index: int, image: ImageData) -> str:
        key = (message_id, index)
        if key in self._items:
            self._items.move_to_end(key)
            return self._items[key]
        made = thumbnail(image)
        if message_id:  # an unsaved message has no stable key: not cached
            self._items[key] = made
            if len(self._items) > self.size:
                self._items.popitem(last=False)
        return made


def _key(text: str, images: Sequence[tuple[str, str]]) -> _Key:
    return (text, tuple(images))


def _stored(
    history: Sequence[MessageLike],
) -> dict[_Key, deque[tuple[str, tuple[ImageData, ...]]]]:
    """The user messages that carry images, by what the record shows of them, in order."""
    found: dict[_Key, deque[tuple[str, tuple[ImageData, ...]]]] = {}
    for item in history:
        try:
            message = as_stored(item)
        except CodecError:
            continue  # an unreadable row shows no thumbnail; the record says what it can
        content = message.content
        if message.kind is not MessageKind.USER or not content.get("images"):
            continue
        try:
            imgs = message_images(content)
        except (KeyError, TypeError, ValueError):
            continue  # a malformed stored image: the record shows its name only
        key = _key(str(content.get("text") or ""), [(i.media_type, i.source_name) for i in imgs])
        found.setdefault(key, deque()).append((message.id, imgs))
    return found


def with_thumbnails(
    record: Mapping[str, Any], history: Sequence[MessageLike], cache: ThumbnailCache
) -> dict[str, Any]:
    """`record` with a `thumbnail` on each image of the requests it shows, made from
    the images stored in `history`, within RECORD_MAX_CHARS in all.

    A record may show only the newest requests (a cell shows its own turn, history
    folds what is above), so requests are matched from the newest back: two requests
    with the same words and image names get their own images, and the budget goes
    to the newest images first.
    """
    stored = _stored(history)
    if not stored:
        return dict(record)
    cycles = [dict(c) if isinstance(c, Mapping) else c for c in record.get("cycles") or []]
    wanted: list[tuple[int, int]] = []  # (cycle, step) of every request showing images
    for ci, cycle in enumerate(cycles):
        if not isinstance(cycle, dict) or cycle.get("folded"):
            continue
        cycle["steps"] = list(cycle.get("steps") or [])
        for si, step in enumerate(cycle["steps"]):
            if isinstance(step, Mapping) and step.get("kind") == "user" and step.get("images"):
                wanted.append((ci, si))
    budget = RECORD_MAX_CHARS
    for ci, si in reversed(wanted):
        step = cycles[ci]["steps"][si]
        shown = step["images"]
        if not isinstance(shown, list) or not all(isinstance(i, Mapping) for i in shown):
            continue
        names = [(str(i.get("media_type") or ""), str(i.get("name") or "")) for i in shown]
        queue = stored.get(_key(str(step.get("text") or ""), names))
        if not queue:
            continue
        message_id, imgs = queue.pop()
        out = []
        for index, (img, data) in enumerate(zip(shown, imgs, strict=False)):
            thumb = cache.get(message_id, index, data)
            if thumb and len(thumb) <= budget:
                budget -= len(thumb)
                out.append({**img, "thumbnail": thumb})
            else:
                out.append(dict(img))
        cycles[ci]["steps"][si] = {**step, "images": out}
    return {**record, "cycles": cycles}
