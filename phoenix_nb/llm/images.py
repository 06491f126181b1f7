"""Images made ready for the Messages API (REQ-BED-013), with Pillow.

The API takes JPEG, PNG, GIF and WebP up to 5 MB and downsizes anything with
a long edge over 1568 px itself, so sending more pixels only costs upload time
and tokens. Files already within limits are passed through byte for byte
(no generation loss); everything else is re-encoded. Problems are reported
before any request is sent, with what to do about them.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

from PIL import Image, ImageOps, UnidentifiedImageError

from phoenix_nb.core.values import ImageData
from phoenix_nb.errors import PhoenixError

API_FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}
DEFAULT_MAX_EDGE = 1568
DEFAULT_MAX_BYTES = 5 * 1024 * 1024
_ORIENTATION_TAG = 0x0112


class ImageError(PhoenixError, ValueError):
    """An image that cannot be sent; the message says what was wrong and what to do."""


def _load_source(source: Any) -> tuple[bytes | None, Image.Image | None, str]:
    """Bytes (or an already-open image) and a display name for any accepted source."""
    if isinstance(source, Image.Image):
        return None, source, "image"
    if isinstance(source, bytes | bytearray | memoryview):
        return bytes(source), None, "image"
    if isinstance(source, str | Path):
        path = Path(source).expanduser()
        try:
            return path.read_bytes(), None, path.name
        except FileNotFoundError:
            raise ImageError(f"Image file not found: {path}. Check the path.") from None
        except IsADirectoryError:
            raise ImageError(f"{path} is a directory, not an image file.") from None
        except OSError as exc:
            raise ImageError(f"Cannot read image file {path}: {exc.strerror}.") from None
    if hasattr(source, "savefig"):  # a matplotlib Figure, duck-typed to avoid importing it
        buffer = io.BytesIO()
        source.savefig(buffer, format="png", bbox_inches="tight")
        return buffer.getvalue(), None, "figure"
    raise ImageError(
        f"Cannot use a {type(source).__name__} as an image: pass a file path, bytes,"
        " a PIL image or a matplotlib figure."
    )


def _open(data: bytes, name: str) -> Image.Image:
    try:
        image = Image.open(io.BytesIO(data))
        image.load()  # decode now: a truncated file fails here, not in the API
    except UnidentifiedImageError:
        hint = " (it looks like text)" if _looks_like_text(data) else ""
        raise ImageError(
            f"{name} is not an image Pillow can read{hint}. Attach a PNG, JPEG, GIF or WebP file."
        ) from None
    except Image.DecompressionBombError:
        raise ImageError(
            f"{name} has too many pixels to open safely. Scale it down before attaching it."
        ) from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise ImageError(
            f"{name} is damaged or truncated and cannot be decoded ({exc}). Re-export or"
            " re-download the file."
        ) from None
    return image


def _looks_like_text(data: bytes) -> bool:
    sample = data[:512]
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _encode(image: Image.Image, fmt: str, quality: int = 90) -> bytes:
    buffer = io.BytesIO()
    if fmt == "JPEG":
        if image.mode not in ("RGB", "L"):
            image = _flatten(image)
        image.save(buffer, format="JPEG", quality=quality, optimize=True)
    else:
        if image.mode not in ("RGB", "RGBA", "L", "LA", "P", "1", "I", "I;16"):
            image = image.convert("RGBA" if "A" in image.getbands() else "RGB")
        image.save(buffer, format="PNG", optimize=False)
    return buffer.getvalue()


def _flatten(image: Image.Image) -> Image.Image:
    """RGB on white: JPEG has no alpha."""
    rgba = image.convert("RGBA")
    background = Image.new("RGB", rgba.size, (255, 255, 255))
    background.paste(rgba, mask=rgba.getchannel("A"))
    return background


def _scaled(image: Image.Image, max_edge: int) -> Image.Image:
    if max(image.size) <= max_edge:
        return image
    copy = image.copy()
    copy.thumbnail((max_edge, max_edge), Image.Resampling.LANCZOS)
    return copy


def prepare_image(
    source: str | Path | bytes | Image.Image | Any,
    *,
    max_edge: int = DEFAULT_MAX_EDGE,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> ImageData:
    """An ImageData the API accepts: upright, long edge <= max_edge, <= max_bytes, allowed type."""
    if max_edge < 1:
        raise ValueError("max_edge must be positive")
    data, image, name = _load_source(source)
    if image is None:
        assert data is not None
        image = _open(data, name)
    fmt = (image.format or "").upper()
    rotated = image.getexif().get(_ORIENTATION_TAG, 1) not in (1, None)
    needs_resize = max(image.size) > max_edge
    untouched = data is not None and fmt in API_FORMATS and not rotated and not needs_resize
    if untouched and data is not None and len(data) <= max_bytes:
        return ImageData(API_FORMATS[fmt], base64.b64encode(data).decode("ascii"), name)
    if getattr(image, "n_frames", 1) > 1:
        image.seek(0)  # an animation is sent as its first frame once it must be re-encoded
    upright = ImageOps.exif_transpose(image) if rotated else image
    out_fmt = "JPEG" if fmt == "JPEG" else "PNG"
    edge = max_edge
    current = _scaled(upright, edge)
    encoded = _encode(current, out_fmt)
    quality = 85
    while len(encoded) > max_bytes:
        # Too big: photographic JPEG first (lossy but small), then fewer pixels.
        if out_fmt == "PNG":
            out_fmt = "JPEG"
        elif quality > 60:
            quality -= 15
        else:
            edge = int(max(current.size) * 0.75)
            if edge < 16:
                raise ImageError(f"{name} cannot be made smaller than {max_bytes} bytes.")
            current = _scaled(upright, edge)
        encoded = _encode(current, out_fmt, quality)
    return ImageData(API_FORMATS[out_fmt], base64.b64encode(encoded).decode("ascii"), name)


def image_block(image: ImageData) -> dict[str, Any]:
    """The Messages API content block of a prepared image."""
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": image.media_type, "data": image.data},
    }
