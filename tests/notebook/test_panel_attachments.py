"""A panel message's attachments as the kernel takes them from the wire (panel_comm.py):
images made ready as `%phoenix chat`'s are, named when they cannot be sent; cell outputs
fenced after the message so their own backticks cannot end the fence, long ones cut."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from phoenix_nb.llm.images import ImageError
from phoenix_nb.notebook.panel_comm import MAX_OUTPUT_CHARS, _images, _outputs_text


def _png() -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (4, 4), (1, 2, 3)).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def test_images_pass_through_and_bad_ones_are_named() -> None:
    png = _png()
    [image] = _images([{"name": "a.png", "data": png}, "junk", {"name": "no data"}])
    assert (image.media_type, image.data) == ("image/png", png)
    with pytest.raises(ImageError, match=r"'b\.png' did not arrive whole.*still in the box"):
        _images([{"name": "b.png", "data": "not base64!"}])
    text = base64.b64encode(b"hello, I am text").decode()
    with pytest.raises(ImageError, match=r"cannot be sent: 'c\.png' is not an image"):
        _images([{"name": "c.png", "data": text}])
    assert _images(None) == [] and _images({"data": png}) == []


def test_outputs_are_fenced_after_the_message_and_long_ones_cut() -> None:
    said = _outputs_text([{"label": "output of cell [2]", "text": "a ``` b ````` c"}])
    assert said == (
        "\n\nOutput of cell [2] (attached from the notebook):\n``````\na ``` b ````` c\n``````"
    )
    long = "x" * (MAX_OUTPUT_CHARS + 1000)
    cut = _outputs_text([{"label": "output of cell [3]", "text": long}])
    assert "[… 1000 characters cut …]" in cut
    assert len(cut) < MAX_OUTPUT_CHARS + 200
    assert _outputs_text([{"label": "x"}, 3]) == "" and _outputs_text("text") == ""
