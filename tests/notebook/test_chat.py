"""`%phoenix chat` on a real kernel: every flow the cell has, followed until the conversation
rests, and outputs a saved notebook can show without widget state.

Clicks and typing are the comm messages a widget manager sends; the transcript is read
from the display messages the kernel publishes for the chat's own display id (what the
labextension applies to the saved output), the footer and buttons from the widget
state the kernel last sent — what a front end would show.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from phoenix_nb.core.values import Usage
from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.notebook.kernel_harness import MIME, Kernel, state_name

pytestmark = pytest.mark.timeout(180)

CONTROLS = "application/vnd.phoenix.controls+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
UPGRADE = "I need to write hello.txt"


@dataclass
class Chat:
    """One `%phoenix chat` panel as a front end sees it."""

    kern: Kernel
    since: float
    transcript_id: str
    controls_id: str
    outputs: list[dict[str, Any]]

    # -- what is shown ------------------------------------------------------------------
    def bundles(self, display_id: str) -> list[dict[str, Any]]:
        """Every bundle shown under `display_id`, in order (first display, then updates)."""
        return [
            msg["content"]["data"]
            for at, msg in self.kern.iopub
            if at >= self.since
            and msg["msg_type"] in ("display_data", "update_display_data")
            and msg["content"].get("transient", {}).get("display_id") == display_id
        ]

    def transcript(self) -> dict[str, Any]:
        return self.bundles(self.transcript_id)[-1]

    def record(self) -> dict[str, Any]:
        return dict(self.transcript()[MIME])

    def hint(self) -> str:
        return str(self.bundles(self.controls_id)[-1][CONTROLS]["hint"])

    def _models(self, name: str) -> list[tuple[str, dict[str, Any]]]:
        return [
            (mid, s) for mid, s in self.kern.widgets(self.since) if s.get("_model_name") == name
        ]

    def _current(self, model_id: str, key: str) -> Any:
        state = dict(next(s for mid, s in self.kern.widgets(self.since) if mid == model_id))
        for update in self.kern.widget_updates(model_id, self.since):
            state.update(update)
        return state.get(key)

    def button(self, description: str) -> str:
        return self.kern.button(description, self.since)

    def visible(self, description: str) -> bool:
        layout = str(self._current(self.button(description), "layout")).removeprefix("IPY_MODEL_")
        return self._current(layout, "display") != "none"

    def enabled(self, description: str) -> bool:
        return not self._current(self.button(description), "disabled")

    def footer(self) -> str:
        [(status, _)] = [
            (mid, s)
            for mid, s in self._models("HTMLModel")
            if "jp-Phoenix-chatStatus" in (self._current(mid, "_dom_classes") or ())
        ]
        return str(self._current(status, "value"))

    # -- gestures -----------------------------------------------------------------------
    def send(self, message: str) -> None:
        [(textarea, _)] = self._models("TextareaModel")
        update = self.kern.client.session.msg(
            "comm_msg",
            {"comm_id": textarea, "data": {"method": "update", "state": {"value": message}}},
        )
        self.kern.client.shell_channel.send(update)
        self.kern.click(self.button("Send"))

    def attach_image(self, name: str, content: bytes) -> None:
        """Choose a file in the image upload, as the widget manager sends it (a buffer)."""
        [(upload, _)] = self._models("FileUploadModel")
        value = [{"name": name, "type": "image/png", "size": len(content), "last_modified": 0}]
        msg = self.kern.client.session.msg(
            "comm_msg",
            {
                "comm_id": upload,
                "data": {
                    "method": "update",
                    "state": {"value": value},
                    "buffer_paths": [["value", 0, "content"]],
                },
            },
        )
        self.kern.client.session.send(self.kern.client.shell_channel.socket, msg, buffers=[content])

    def click(self, description: str) -> None:
        self.kern.click(self.button(description))

    def wait(self, predicate: Any, what: str, timeout: float = 60) -> None:
        self.kern.wait_until(lambda: bool(predicate()), timeout, what)

    def wait_rest(self, showing: str = "") -> None:
        """The conversation rests and the panel says so: footer, Send, transcript (`showing`)."""
        self.wait(
            lambda: (
                showing in self.transcript().get("text/markdown", "")
                and "data-phoenix-state='idle'" in self.footer()
                and self.enabled("Send")
                and state_name(self.record()) == "idle"
                and "text/html" in self.transcript()
            ),
            "the chat to rest",
        )


def open_chat(kern: Kernel) -> Chat:
    since = time.monotonic()
    kern.ok("%phoenix new")
    cell = kern.ok("%phoenix chat")
    kept = cell.final_outputs()
    [transcript] = [o for o in kept if MIME in o["data"]]
    [controls] = [o for o in kept if CONTROLS in o["data"]]
    return Chat(kern, since, transcript["display_id"], controls["display_id"], kept)


def _script_upgrade(fake: FakeAnthropic, *, after: list[Turn]) -> None:
    fake.script(
        Turn([text("I will ask."), tool_use("request_mode_upgrade", {"reason": UPGRADE})]),
        *after,
    )


def test_approve_in_the_chat_runs_the_turn_to_its_end(kern: Kernel, fake: FakeAnthropic) -> None:
    """Approve resumes the turn; the chat follows it through the pause to rest (issue: it hung
    at 'thinking · unrestricted' with Send disabled)."""
    _script_upgrade(
        fake,
        after=[
            Turn([tool_use("bash", {"command": "echo hi > hello.txt"})]),
            Turn([text("Wrote hello.txt for you.")]),
        ],
    )
    chat = open_chat(kern)
    chat.send("please write hello.txt")
    chat.wait(
        lambda: (
            state_name(chat.record()) == "awaiting_mode_approval"
            and "waiting for your approval" in chat.footer()
        ),
        "the request shown",
    )
    assert chat.visible("Approve") and chat.visible("Deny")
    assert not chat.visible("Cancel") and not chat.enabled("Send")
    chat.click("Approve")
    chat.wait_rest()
    assert (kern.project / "hello.txt").read_text() == "hi\n"
    assert "idle" in chat.footer() and "unrestricted" in chat.footer()
    assert not chat.visible("Approve") and not chat.visible("Cancel")
    bundle = chat.transcript()
    assert "Wrote hello.txt for you." in bundle["text/markdown"]
    assert "Wrote hello.txt for you." in bundle["text/html"]
    # Unrestricted now: Restrict shows, and takes the conversation back to read-only.
    assert chat.visible("Restrict")
    chat.click("Restrict")
    chat.wait(
        lambda: not chat.visible("Restrict") and "· restricted" in chat.footer(),
        "Restrict to hide once Restricted",
    )


def test_deny_in_the_chat_and_the_agent_goes_on(kern: Kernel, fake: FakeAnthropic) -> None:
    _script_upgrade(fake, after=[Turn([text("Understood, staying read-only.")])])
    chat = open_chat(kern)
    chat.send("please write hello-denied.txt")
    chat.wait(lambda: chat.visible("Deny"), "the Deny button")
    chat.click("Deny")
    chat.wait_rest()
    assert "Understood, staying read-only." in chat.transcript()["text/markdown"]
    assert "restricted" in chat.footer() and not chat.visible("Restrict")
    steps = [s for c in chat.record()["cycles"] for s in c["steps"] if s["kind"] == "approval"]
    assert steps and steps[-1]["decision"] == "denied"


def test_cancel_mid_stream_in_the_chat(kern: Kernel, fake: FakeAnthropic) -> None:
    answer = "A long answer that streams slowly. " * 200
    fake.script(Turn([text(answer, chunk=20, delay=0.02)]), Turn([text("Fresh start.")]))
    chat = open_chat(kern)
    chat.send("tell me a long story")
    chat.wait(
        lambda: any(s.get("streaming") for c in chat.record()["cycles"] for s in c["steps"]),
        "the answer to stream into the transcript",
    )
    assert chat.visible("Cancel") and not chat.enabled("Send")
    chat.click("Cancel")
    chat.wait_rest()
    assert answer not in chat.transcript()["text/markdown"], "the stream was cut"
    # The chat goes on after a cancel.
    chat.send("and now?")
    chat.wait_rest("Fresh start.")


def test_a_turn_answered_from_another_cell_is_followed_too(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    """The panel follows the conversation, not its own clicks: `%phoenix approve` elsewhere."""
    _script_upgrade(fake, after=[Turn([text("Approved from a cell.")])])
    chat = open_chat(kern)
    chat.send("ask me first")
    chat.wait(lambda: chat.visible("Approve"), "the Approve button")
    kern.ok("%phoenix approve")
    chat.wait_rest()
    assert "Approved from a cell." in chat.transcript()["text/markdown"]


def test_revert_in_the_chat_and_its_hint(kern: Kernel, fake: FakeAnthropic) -> None:
    (kern.project / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    patch = {
        "path": "calc.py",
        "patches": [{"operation": "replace", "oldText": "a - b", "newText": "a + b"}],
    }
    _script_upgrade(fake, after=[Turn([tool_use("patch", patch)]), Turn([text("Fixed add().")])])
    chat = open_chat(kern)
    chat.send("fix add")
    chat.wait(lambda: chat.visible("Approve"), "the Approve button")
    chat.click("Approve")
    chat.wait_rest()
    assert "a + b" in (kern.project / "calc.py").read_text()
    chat.wait(lambda: "%phoenix revert" in chat.hint(), "the revert hint in the controls")
    assert "changed 1 file" in chat.hint()
    chat.click("Revert")
    chat.wait(
        lambda: "Reverted to checkpoint" in chat.hint(),
        "the Revert control's saved hint to say what happened and the way back",
    )
    assert "a - b" in (kern.project / "calc.py").read_text()
    assert "%phoenix revert" in chat.hint()


def test_chat_outputs_are_ordinary_outputs_with_fallbacks(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    """What a saved notebook keeps: the record bundle and a hint, never a widget's repr alone."""
    fake.script(Turn([text("Saved answer.")]))
    chat = open_chat(kern)
    chat.send("hello")
    chat.wait_rest("Saved answer.")
    transcript = chat.transcript()
    assert set(transcript) >= {MIME, "text/html", "text/markdown", "text/plain"}
    assert WIDGET_VIEW not in transcript
    for output in chat.outputs:
        data: Mapping[str, Any] = output["data"]
        assert "text/html" in data and "Box(" not in str(data.get("text/plain", "")), data.keys()
    [controls] = [o["data"] for o in chat.outputs if CONTROLS in o["data"]]
    assert "%phoenix chat" in controls["text/markdown"] and WIDGET_VIEW in controls
    assert "<code>%phoenix chat</code>" in controls["text/html"]
    assert "Saved answer." in transcript["text/html"]


def test_restrict_is_not_offered_in_restricted_mode(kern: Kernel, fake: FakeAnthropic) -> None:
    """A %%phoenix cell's controls show Restrict only while the conversation is Unrestricted."""
    fake.script(Turn([text("Read-only hello.")]))
    since = time.monotonic()
    cell = kern.run("%%phoenix --new\nhello")
    assert cell.status == "ok"
    restrict = kern.button("Restrict", since)
    [state] = [s for mid, s in kern.widgets(since) if mid == restrict]
    layout = str(state["layout"]).removeprefix("IPY_MODEL_")
    displays = [u["display"] for u in kern.widget_updates(layout, since) if "display" in u] or [
        next(s for mid, s in kern.widgets(since) if mid == layout).get("display")
    ]
    assert displays[-1] == "none"


def test_kernel_reads_busy_again_after_other_traffic_during_a_cell(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    """JupyterLab takes every IOPub status as the kernel's: a control request answered while a
    cell awaits must be followed by busy for that cell, and the cell's idle comes last."""
    release = kern.root / "release-busy-cell"
    cell = kern.submit(
        "import asyncio, pathlib\n"
        f"while not pathlib.Path({str(release)!r}).exists():\n"
        "    await asyncio.sleep(0.01)\n"
    )
    kern.wait_until(
        lambda: any(
            m["msg_type"] == "status"
            and m["parent_header"].get("msg_id") == cell.msg_id
            and m["content"]["execution_state"] == "busy"
            for _, m in kern.iopub
        ),
        30,
        "the cell to start",
    )
    request = kern.client.session.msg("kernel_info_request", {})
    kern.client.control_channel.send(request)
    rid = request["header"]["msg_id"]

    def statuses() -> list[tuple[str, str]]:
        return [
            (m["parent_header"].get("msg_id", ""), m["content"]["execution_state"])
            for _, m in kern.iopub
            if m["msg_type"] == "status"
        ]

    kern.wait_until(lambda: (rid, "idle") in statuses(), 30, "the control request's idle")
    kern.wait_until(
        lambda: statuses()[statuses().index((rid, "idle")) + 1 :][:1] == [(cell.msg_id, "busy")],
        30,
        "busy again for the running cell",
    )
    release.write_text("go")
    kern.finish(cell)
    assert statuses()[-1] == (cell.msg_id, "idle")


def test_a_new_chat_panel_closes_the_old_ones_controls(kern: Kernel, fake: FakeAnthropic) -> None:
    """Only the newest panel follows; the older one's widgets close, so its output shows the
    hint to run `%phoenix chat` rather than buttons nobody listens to."""
    first = open_chat(kern)
    old_send = first.button("Send")
    fake.script(Turn([text("Only the new panel shows this.")]))
    second = open_chat(kern)
    kern.wait_until(lambda: old_send in kern.closed_comms(), 30, "the old panel's widgets to close")
    assert second.button("Send") not in kern.closed_comms()
    second.send("hello")
    second.wait_rest("Only the new panel shows this.")
    assert all(
        "Only the new panel" not in str(b.get(MIME, "")) for b in first.bundles(first.transcript_id)
    )


def test_a_cells_revert_button_leaves_a_hint_saying_what_to_run(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    """The Revert control of a `%%phoenix` cell is saved as its hint too, and after a click the
    hint says what was done and how to go back."""
    (kern.project / "cellcalc.py").write_text("def add(a, b):\n    return a - b\n")
    patch = {
        "path": "cellcalc.py",
        "patches": [{"operation": "replace", "oldText": "a - b", "newText": "a + b"}],
    }
    _script_upgrade(fake, after=[Turn([tool_use("patch", patch)]), Turn([text("Patched.")])])
    since = time.monotonic()
    cell = kern.ok("%%phoenix --new --on-upgrade approve\nfix add")
    assert "a + b" in (kern.project / "cellcalc.py").read_text()
    [control] = [o for o in cell.final_outputs() if CONTROLS in o["data"]]
    data = control["data"]
    assert WIDGET_VIEW in data and "text/plain" in data and "Box(" not in data["text/plain"]
    assert "`%phoenix revert " in data["text/markdown"], data["text/markdown"]
    assert "<code>%phoenix revert " in data["text/html"]
    kern.click(kern.button("Revert", since))
    kern.wait_until(
        lambda: any(
            m["msg_type"] == "update_display_data"
            and m["content"]["transient"].get("display_id") == control["display_id"]
            and "Reverted to checkpoint" in m["content"]["data"][CONTROLS]["hint"]
            for at, m in kern.iopub
            if at >= since
        ),
        30,
        "the hint to say the revert was done",
    )
    assert "a - b" in (kern.project / "cellcalc.py").read_text()


def _png() -> bytes:
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (40, 30), (200, 30, 30)).save(out, "PNG")
    return out.getvalue()


def test_an_image_chosen_in_the_chat_reaches_the_model(kern: Kernel, fake: FakeAnthropic) -> None:
    fake.script(Turn([text("A red rectangle.")]))
    chat = open_chat(kern)
    chat.attach_image("red.png", _png())
    chat.send("what is in this picture?")
    chat.wait_rest("A red rectangle.")
    [last] = [m for m in fake.requests[-1].body["messages"] if m["role"] == "user"][-1:]
    kinds = [block["type"] for block in last["content"]]
    assert "image" in kinds and "text" in kinds, kinds
    assert any(
        i.get("thumbnail")
        for c in chat.record()["cycles"]
        for s in c["steps"]
        for i in s.get("images", [])
    ), "the transcript shows the picture"


def test_continue_in_a_new_conversation_from_the_chat(kern: Kernel, fake: FakeAnthropic) -> None:
    """A full context: Send is off, Continue starts a seeded conversation the chat then follows."""
    fake.script(
        Turn([text("Big answer.")], usage=Usage(input_tokens=185_000, output_tokens=10)),
        Turn([text("SUMMARY: the chat found the bug in add().")]),
    )
    chat = open_chat(kern)
    old_slug = chat.record()["conversation"]["slug"]
    chat.send("look at everything")
    chat.wait(
        lambda: (
            "context_exhausted" in chat.footer() and chat.visible("Continue in a new conversation")
        ),
        "the context to fill and Continue to show",
    )
    assert not chat.enabled("Send") and "read-only" in chat.footer()
    chat.click("Continue in a new conversation")
    chat.wait(
        lambda: "data-phoenix-state='idle'" in chat.footer() and old_slug not in chat.footer(),
        "the chat to follow the new conversation",
    )
    fake.script(Turn([text("Continuing from the summary.")]))
    chat.send("please go on")
    chat.wait_rest("Continuing from the summary.")
    first = fake.requests[-1].last_user_text
    assert "the chat found the bug in add()" in first and first.endswith("please go on")
    assert chat.record()["conversation"]["slug"] != old_slug
