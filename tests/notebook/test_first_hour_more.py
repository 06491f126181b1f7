"""On a real kernel: what a user sees first after a restart, thumbnails
of stored images wherever the record shows the request, `%config Phoenix.env_allow` after
`%load_ext`, and `%phoenix status` of a conversation whose context is exhausted.

Each test starts its own kernel(s) with a fresh store (they restart kernels or count on
an empty one), against the module's fake Messages API; the fixtures are the shared ones of
conftest.py (`fake`, `notebook_kernel`, and `kernel_env` for this module's environment).
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from phoenix_nb.core.values import Usage
from phoenix_nb.notebook.thumbnails import RECORD_MAX_CHARS, THUMBNAIL_EDGE, THUMBNAIL_MAX_CHARS
from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.notebook.kernel_harness import MIME, Kernel, loaded_kernel

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def kernel_env() -> Mapping[str, str]:
    """A variable only `%config Phoenix.env_allow` lets through to the agent's commands."""
    return {"MYAPP_COLOUR": "teal-42"}


@pytest.fixture
def kernel(fake: FakeAnthropic, tmp_path: Path, kernel_env: Mapping[str, str]) -> Iterator[Kernel]:
    """One kernel per test (overrides the module-wide one in conftest.py)."""
    fake.clear()
    with loaded_kernel(tmp_path, fake.base_url, extra_env=kernel_env) as k:
        yield k


def _final_bundle(cell: Any) -> dict[str, Any]:
    [bundle] = [o["data"] for o in cell.final_outputs() if MIME in o.get("data", {})]
    return bundle


def _slug(kernel: Kernel) -> str:
    slug = kernel.eval(
        "__import__('phoenix_nb.notebook.session', fromlist=['s']).get_session().current"
    )
    assert isinstance(slug, str)
    return slug


# -- 1. "continuing SLUG" is the first thing the first output after a restart says -------


def test_continuing_comes_first_in_the_record_and_every_fallback(
    notebook_kernel: Kernel, fake: FakeAnthropic
) -> None:
    kernel = notebook_kernel
    fake.script(Turn([text("One.")]), Turn([text("Two.")]))
    kernel.ok("%%phoenix\nhello there")
    slug = _slug(kernel)
    kernel.restart()
    kernel.ok("%load_ext phoenix_nb")
    cell = kernel.ok("%%phoenix\nagain please")
    bundle = _final_bundle(cell)
    note = f"continuing {slug}"
    record = bundle[MIME]
    assert note in record["notes"][0]
    # Plain text: the note is the first line, above the header naming the conversation.
    plain = bundle["text/plain"]
    assert plain.splitlines()[0].startswith(note), plain[:300]
    # Markdown: the note is the first paragraph, above the header and the request.
    markdown = bundle["text/markdown"]
    assert markdown.lstrip("_").startswith(note), markdown[:300]
    assert markdown.index(note) < markdown.index("**phoenix**") < markdown.index("again please")
    # HTML: the note precedes the header and the request in the document.
    html = bundle["text/html"]
    assert html.index(note) < html.index('class="phx-head"') < html.index("again please")
    assert note not in kernel.ok("%phoenix status").text(), "said once"


# -- 2. thumbnails of stored images, wherever the record shows the request -------------


def test_stored_images_show_as_bounded_thumbnails_in_history_exports_and_chat(
    kernel: Kernel, fake: FakeAnthropic
) -> None:
    kernel.ok(
        "from PIL import Image\n"
        "big = Image.effect_noise((1600, 1200), 90).convert('RGB')\n"
        "small = Image.new('RGB', (40, 30), 'red')"
    )
    fake.script(Turn([text("A noisy picture and a red one.")]))
    kernel.ok("%%phoenix --name pics --image big --image small\nwhat do you see?")
    # A new kernel (no notebook path: nothing marks the cycle as shown), so `history`
    # shows the request whole, as a reader of another notebook would see it.
    kernel.restart()
    kernel.ok("%load_ext phoenix_nb")
    kernel.ok("%phoenix use pics")
    history = _final_bundle(kernel.ok("%phoenix history"))
    [user] = [s for c in history[MIME]["cycles"] for s in c.get("steps", []) if s["kind"] == "user"]
    thumbs = [img.get("thumbnail", "") for img in user["images"]]
    assert all(t.startswith("data:image/png;base64,") for t in thumbs), user["images"]
    for thumb in thumbs:
        assert len(thumb) <= THUMBNAIL_MAX_CHARS
        png = base64.b64decode(thumb.split(",", 1)[1])
        from PIL import Image

        with Image.open(io.BytesIO(png)) as img:
            assert max(img.size) <= THUMBNAIL_EDGE
    assert history["text/html"].count('class="phx-thumb"') == 2
    # Exports: HTML as images, Markdown as image links, JSON as the record's fields.
    for fmt in ("html", "md", "json"):
        kernel.ok(f"%phoenix export --format {fmt} --output out/pics.{fmt}")
    out = kernel.project / "out"
    assert (out / "pics.html").read_text().count('class="phx-thumb"') == 2
    assert (out / "pics.md").read_text().count("](data:image/png;base64,") == 2
    exported = json.loads((out / "pics.json").read_text())
    assert (
        sum(
            "thumbnail" in i
            for c in exported["cycles"]
            for s in c["steps"]
            for i in s.get("images", [])
        )
        == 2
    )
    # The chat panel draws the same record: its transcript (an ordinary output) carries them.
    chat = kernel.ok("%phoenix chat")
    transcripts = [o for o in chat.final_outputs() if MIME in o["data"]]
    assert transcripts, "the chat panel shows the record"
    assert transcripts[-1]["data"]["text/html"].count('class="phx-thumb"') == 2


def test_thumbnails_are_bounded_per_record(tmp_path: Path) -> None:
    """Twenty noisy images in one conversation: each thumbnail and all of them together
    stay under their caps, newest first (a saved notebook cannot grow by the pictures)."""
    from PIL import Image

    from phoenix_nb.notebook.thumbnails import ThumbnailCache, with_thumbnails

    history = []
    steps = []
    for n in range(20):
        out = io.BytesIO()
        Image.effect_noise((500, 400), 80 + n).convert("RGB").save(out, "PNG")
        data = base64.b64encode(out.getvalue()).decode()
        history.append(
            {
                "id": f"m-{n}",
                "message_type": "user",
                "content": {
                    "text": "look",
                    "images": [{"media_type": "image/png", "data": data, "source_name": "fig"}],
                },
            }
        )
        steps.append(
            {"kind": "user", "text": "look", "images": [{"media_type": "image/png", "name": "fig"}]}
        )
    record = {"cycles": [{"index": i, "steps": [s]} for i, s in enumerate(steps)]}
    shown = with_thumbnails(record, history, ThumbnailCache())
    thumbs = [c["steps"][0]["images"][0].get("thumbnail", "") for c in shown["cycles"]]
    assert all(len(t) <= THUMBNAIL_MAX_CHARS for t in thumbs)
    assert 0 < sum(map(len, thumbs)) <= RECORD_MAX_CHARS
    assert thumbs[-1] and not thumbs[0], "the newest images get the budget"


# -- 3. `%config Phoenix.env_allow` after `%load_ext` ----------------------------------


def _withheld(kernel: Kernel) -> int:
    status = kernel.ok("%phoenix status").text("stdout")
    [line] = [line for line in status.splitlines() if line.startswith("environment ")]
    return int(line.split()[1])


def test_config_env_allow_after_load_reaches_the_next_command(
    kernel: Kernel, fake: FakeAnthropic
) -> None:
    command = {"command": "echo colour=${MYAPP_COLOUR:-unset}"}
    fake.script(Turn([tool_use("bash", command)]), Turn([text("Looked.")]))
    kernel.ok("%%phoenix --name envs\nwhat colour?")
    before = json.dumps(fake.requests[-1].body["messages"][-1])
    assert "colour=unset" in before, before[:500]
    withheld = _withheld(kernel)
    kernel.ok("%config Phoenix.env_allow = ['MYAPP_COLOUR']")
    fake.script(Turn([tool_use("bash", command)]), Turn([text("Looked again.")]))
    kernel.ok("%%phoenix\nand now?")
    after = json.dumps(fake.requests[-1].body["messages"][-1])
    assert "colour=teal-42" in after, after[:500]
    assert _withheld(kernel) == withheld - 1, "status counts it as no longer withheld"


# -- 4. status of an exhausted conversation ------------------------------------------


def test_status_of_an_exhausted_conversation_says_read_only_and_what_to_do(
    kernel: Kernel, fake: FakeAnthropic
) -> None:
    fake.script(
        Turn([text("Big answer.")], usage=Usage(input_tokens=185_000, output_tokens=10)),
        Turn([text("SUMMARY: the bug is in add().")]),
    )
    kernel.ok("%%phoenix --name full\nlook at everything", timeout=60)
    status = kernel.ok("%phoenix status").text("stdout")
    [mode] = [line for line in status.splitlines() if line.startswith("mode ")]
    assert "read-only" in mode and "%phoenix continue" in mode, mode
    assert "restricted" not in mode.lower(), "no mode word for a conversation that can run nothing"
    listed = kernel.ok("%phoenix list").text("stdout")
    [row] = [line for line in listed.splitlines() if line[2:].startswith("full ")]
    assert "context full" in row and "read-only" in row, "the state, then read-only for its mode"
    assert " restricted " not in row and " unrestricted " not in row, row
    assert "full: its context is full — `%phoenix use full`, then `%phoenix continue`" in listed
