"""Image preparation (REQ-BED-013): every case it must handle, images made with Pillow."""

from __future__ import annotations

import base64
import io
import random
from pathlib import Path

import pytest
from PIL import Image

from phoenix_nb.demo.validate import validate_messages_request
from phoenix_nb.llm.images import ImageError, image_block, prepare_image


def _encode(image: Image.Image, fmt: str, **params: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **params)
    return buffer.getvalue()


def _decode(data: str) -> Image.Image:
    image = Image.open(io.BytesIO(base64.b64decode(data)))
    image.load()
    return image


def _picture(size: tuple[int, int] = (64, 48)) -> Image.Image:
    image = Image.new("RGB", size, (10, 120, 200))
    image.paste((250, 30, 30), (0, 0, size[0] // 2, size[1] // 2))
    return image


def _assert_api_accepts(prepared) -> None:
    """The fake's API-like validation accepts the block."""
    validate_messages_request(
        {
            "model": "m",
            "max_tokens": 10,
            "messages": [{"role": "user", "content": [image_block(prepared)]}],
        }
    )


@pytest.mark.parametrize(
    ("fmt", "media_type"),
    [("PNG", "image/png"), ("JPEG", "image/jpeg"), ("WEBP", "image/webp"), ("GIF", "image/gif")],
)
def test_api_formats_within_limits_pass_through_unchanged(tmp_path: Path, fmt, media_type) -> None:
    raw = _encode(_picture(), fmt)
    path = tmp_path / f"pic.{fmt.lower()}"
    path.write_bytes(raw)
    prepared = prepare_image(path)
    assert prepared.media_type == media_type
    assert base64.b64decode(prepared.data) == raw
    assert prepared.source_name == path.name
    _assert_api_accepts(prepared)


@pytest.mark.parametrize("fmt", ["BMP", "TIFF"])
def test_unsupported_formats_become_png(fmt) -> None:
    prepared = prepare_image(_encode(_picture(), fmt))
    assert prepared.media_type == "image/png"
    decoded = _decode(prepared.data)
    assert decoded.format == "PNG" and decoded.size == (64, 48)
    assert decoded.getpixel((5, 5)) == (250, 30, 30)
    _assert_api_accepts(prepared)


def test_ten_thousand_pixel_image_is_downsized_to_max_edge() -> None:
    prepared = prepare_image(_encode(_picture((10_000, 600)), "PNG"))
    decoded = _decode(prepared.data)
    assert max(decoded.size) == 1568
    assert decoded.size[1] == round(600 * 1568 / 10_000)


def test_max_edge_is_configurable() -> None:
    decoded = _decode(prepare_image(_picture((800, 400)), max_edge=200).data)
    assert decoded.size == (200, 100)


def test_exif_rotated_photo_is_turned_upright() -> None:
    # Stored landscape 80x40 with "rotate 90 CW" (orientation 6): it displays as portrait 40x80.
    stored = _picture((80, 40))
    exif = Image.Exif()
    exif[0x0112] = 6
    prepared = prepare_image(_encode(stored, "JPEG", exif=exif.tobytes()))
    decoded = _decode(prepared.data)
    assert prepared.media_type == "image/jpeg"
    assert decoded.size == (40, 80)
    assert decoded.getexif().get(0x0112, 1) == 1
    # The red top-left quadrant of the stored image is now at the top right.
    r, g, b = decoded.convert("RGB").getpixel((35, 5))
    assert r > 200 and g < 80 and b < 80


def test_oversized_file_is_reencoded_under_max_bytes() -> None:
    rng = random.Random(7)
    noise = Image.frombytes(
        "RGB", (1200, 1200), bytes(rng.getrandbits(8) for _ in range(1200 * 1200 * 3))
    )
    raw = _encode(noise, "PNG")
    limit = 1_000_000
    assert len(raw) > limit
    prepared = prepare_image(raw, max_bytes=limit)
    assert len(base64.b64decode(prepared.data)) <= limit
    _assert_api_accepts(prepared)


def test_truncated_file_is_rejected_with_clear_error(tmp_path: Path) -> None:
    raw = _encode(_picture((400, 300)), "PNG")
    path = tmp_path / "cut.png"
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ImageError, match=r"cut\.png is damaged or truncated"):
        prepare_image(path)


def test_text_file_named_png_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "notes.png"
    path.write_text("just some notes, not a picture\n")
    with pytest.raises(ImageError, match=r"notes\.png is not an image.*looks like text.*PNG, JPEG"):
        prepare_image(path)


def test_missing_file_and_wrong_type_are_clear(tmp_path: Path) -> None:
    with pytest.raises(ImageError, match="not found"):
        prepare_image(tmp_path / "nope.png")
    with pytest.raises(ImageError, match="Cannot use a int"):
        prepare_image(42)  # type: ignore[arg-type]


def test_pil_image_and_figure_like_sources() -> None:
    assert _decode(prepare_image(_picture()).data).size == (64, 48)

    class FigureLike:
        """Stands in for a matplotlib Figure: anything with savefig(buffer, format=...)."""

        def savefig(self, buffer: io.BytesIO, format: str, **_: object) -> None:
            _picture((30, 20)).save(buffer, format=format)

    prepared = prepare_image(FigureLike())
    assert prepared.media_type == "image/png" and prepared.source_name == "figure"
    assert _decode(prepared.data).size == (30, 20)


def test_matplotlib_figure() -> None:
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 1), dpi=50)
    ax.plot([0, 1], [1, 0])
    try:
        prepared = prepare_image(fig)
    finally:
        plt.close(fig)
    assert prepared.media_type == "image/png"
    _assert_api_accepts(prepared)
