"""The side panel's comm (`phoenix.panel`, notebook/panel_comm.py) in a real kernel, driven as
labextension/src/panel.ts drives it: open the comm, say hello, send, approve, cancel.

Asserts what the other sides received: the fake Messages API's recorded requests, the file
the approved tool wrote on disk, and the comm messages the kernel published on IOPub.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from tests.notebook.kernel_harness import MIME, Kernel

pytestmark = pytest.mark.timeout(180)
TARGET = "phoenix.panel"


class PanelClient:
    """One panel's end of the comm, opened from the client like the labextension does."""

    def __init__(self, k: Kernel) -> None:
        self.k = k
        self.opened_at = time.monotonic()
        msg = k.client.session.msg(
            "comm_open",
            {"comm_id": f"panel-{time.monotonic_ns()}", "target_name": TARGET, "data": {}},
        )
        self.comm_id = msg["content"]["comm_id"]
        k.client.shell_channel.send(msg)

    def say(self, **data: Any) -> None:
        msg = self.k.client.session.msg("comm_msg", {"comm_id": self.comm_id, "data": data})
        self.k.client.shell_channel.send(msg)

    def received(self) -> list[dict[str, Any]]:
        return [
            m["content"]["data"]
            for _, m in self.k.iopub
            if m["msg_type"] == "comm_msg" and m["content"]["comm_id"] == self.comm_id
        ]

    def closed(self) -> bool:
        return self.comm_id in self.k.closed_comms()

    def records(self) -> list[dict[str, Any]]:
        return [d for d in self.received() if d.get("type") == "record"]

    def wait(self, what: str, predicate: Any, timeout: float = 60) -> None:
        self.k.wait_until(lambda: predicate(self), timeout, what)

    def wait_final(self, showing: str, timeout: float = 60) -> dict[str, Any]:
        def done(p: PanelClient) -> bool:
            finals = [r for r in p.records() if r["final"]]
            return bool(finals) and showing in json.dumps(finals[-1]["bundle"][MIME])

        self.wait(f"a final record showing {showing!r}", done, timeout)
        return [r for r in self.records() if r["final"]][-1]

    def status(self) -> dict[str, Any]:
        with_status = [d["status"] for d in self.received() if "status" in d]
        return with_status[-1] if with_status else {}

    def close(self) -> None:
        msg = self.k.client.session.msg("comm_close", {"comm_id": self.comm_id, "data": {}})
        self.k.client.shell_channel.send(msg)


def _user_texts(fake: FakeAnthropic) -> list[str]:
    texts = []
    for request in fake.requests:
        messages = request.body.get("messages", [])
        last = messages[-1] if messages else {}
        content = last.get("content")
        if last.get("role") == "user":
            blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
            texts += [str(b.get("text", "")) for b in blocks if b.get("type") == "text"]
    return texts


def test_a_kernel_without_phoenix_closes_the_panel_comm(
    fake: FakeAnthropic, tmp_path: Path
) -> None:
    """The labextension's load prompt rests on this: no target, the comm is closed at once."""
    k = Kernel(tmp_path, fake.base_url)
    try:
        k.ok("1 + 1")
        panel = PanelClient(k)
        panel.wait("the kernel to close the panel comm", lambda p: p.closed(), 30)
        assert panel.received() == []
        k.ok("%load_ext phoenix_nb")
        again = PanelClient(k)
        again.wait("the empty panel", lambda p: len(p.received()) >= 2, 60)
        assert not again.closed()
        assert again.received() == [
            {"type": "conversations", "items": [], "current": None},
            {"type": "empty", "status": again.status()},
        ]
        assert again.status()["slug"] is None
    finally:
        k.shutdown()


def test_panel_turn_streams_and_finishes_with_a_shareable_bundle(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    fake.script(Turn([text("Streaming from the panel. " * 40, chunk=12, delay=0.005)]))
    kern.ok("%phoenix new")
    panel = PanelClient(kern)
    panel.wait("the conversation's record", lambda p: bool(p.records()), 60)
    slug = panel.status()["slug"]
    assert slug
    panel.say(type="send", text="hello from the panel")
    final = panel.wait_final("Streaming from the panel.")
    assert "hello from the panel" in _user_texts(fake)
    assert any(d.get("type") == "delta" for d in panel.received()), "text streamed as deltas"
    assert final["status"]["rest"] and final["status"]["slug"] == slug
    # Records carry only the record; the fallbacks come when the panel keeps it in the notebook.
    assert all(set(r["bundle"]) == {MIME} for r in panel.records())
    panel.say(type="bundle")
    panel.wait("the bundle", lambda p: any(d.get("type") == "bundle" for d in p.received()))
    bundle = [d for d in panel.received() if d.get("type") == "bundle"][-1]["bundle"]
    assert {MIME, "text/html", "text/markdown", "text/plain"} <= set(bundle)
    assert "Streaming from the panel." in bundle["text/markdown"]
    assert "hello from the panel" in bundle["text/html"]
    panel.close()


def test_a_phoenix_cell_turn_is_followed_live_in_the_panel(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    fake.script(Turn([text("Answered in the cell. " * 30, chunk=10, delay=0.005)]))
    kern.ok("%phoenix new")
    panel = PanelClient(kern)
    panel.wait("the conversation's record", lambda p: bool(p.records()), 60)
    before = len(panel.received())
    cell = kern.ok("%%phoenix\nanswer in the cell", timeout=60)
    assert "Answered in the cell." in str(cell.last_bundle()[MIME])
    final = panel.wait_final("Answered in the cell.")
    during = panel.received()[before:]
    assert any(d.get("type") == "delta" for d in during), "the panel saw the stream live"
    assert "answer in the cell" in str(final["bundle"][MIME])
    panel.close()


def test_approve_from_the_panel_finishes_the_turn(kern: Kernel, fake: FakeAnthropic) -> None:
    target = kern.project / "panel_out.txt"
    target.write_text("a - b\n")
    ask = tool_use("request_mode_upgrade", {"reason": "I need to write panel_out.txt"})
    write = tool_use(
        "patch",
        {
            "path": "panel_out.txt",
            "patches": [{"operation": "replace", "oldText": "a - b", "newText": "a + b"}],
        },
    )
    fake.script(Turn([text("May I write?"), ask]), Turn([write]), Turn([text("Wrote it for you.")]))
    kern.ok("%phoenix new")
    panel = PanelClient(kern)
    panel.wait("the conversation's record", lambda p: bool(p.records()), 60)
    panel.say(type="send", text="write the file")
    panel.wait("the upgrade request", lambda p: p.status().get("paused") is True, 60)
    assert "panel_out.txt" in panel.status()["reason"]
    panel.say(type="approve")
    final = panel.wait_final("Wrote it for you.")
    assert target.read_text() == "a + b\n"
    assert final["status"]["mode"] == "unrestricted"
    panel.close()


def test_cancel_from_the_panel_and_busy_is_exclusive(kern: Kernel, fake: FakeAnthropic) -> None:
    fake.script(Turn([text("A long story. " * 2000, chunk=10, delay=0.02)]))
    kern.ok("%phoenix new")
    panel = PanelClient(kern)
    panel.wait("the conversation's record", lambda p: bool(p.records()), 60)
    panel.say(type="send", text="tell me a long story")
    panel.wait(
        "streamed text",
        lambda p: any(d.get("type") == "delta" for d in p.received()),
        60,
    )
    # A %%phoenix cell while the panel's turn runs is refused, as a second cell would be.
    busy = kern.run("%%phoenix\nanother message", timeout=60)
    assert "busy" in busy.text("stderr").lower(), busy.text()
    panel.say(type="send", text="and another")
    panel.wait(
        "the busy notice",
        lambda p: any(
            d.get("type") == "notice" and "busy" in d["text"].lower() for d in p.received()
        ),
        30,
    )
    panel.say(type="cancel")
    panel.wait("rest after cancel", lambda p: p.status().get("rest") is True, 60)
    assert panel.status()["state"] == "idle"
    assert "and another" not in _user_texts(fake)
    panel.close()


def test_a_panel_turn_is_followed_live_in_the_chat_cell(kern: Kernel, fake: FakeAnthropic) -> None:
    """Vice versa: the in-cell chat (`%phoenix chat`) shows a turn the panel started, as it
    streams, in the transcript output the notebook keeps."""
    fake.script(Turn([text("Sent from the panel. " * 60, chunk=8, delay=0.01)]))
    kern.ok("%phoenix new")
    since = time.monotonic()
    chat = kern.ok("%phoenix chat")
    transcript_ids = [
        o["content"]["transient"]["display_id"]
        for o in chat.outputs
        if o["msg_type"] == "display_data" and MIME in o["content"]["data"]
    ]
    assert len(transcript_ids) == 1
    shown = transcript_ids[0]

    def transcript() -> list[dict[str, Any]]:
        return [
            m["content"]["data"][MIME]
            for at, m in kern.iopub
            if at >= since
            and m["msg_type"] == "update_display_data"
            and m["content"].get("transient", {}).get("display_id") == shown
        ]

    panel = PanelClient(kern)
    panel.wait("the conversation's record", lambda p: bool(p.records()), 60)
    panel.say(type="send", text="from the panel to the chat")
    panel.wait_final("Sent from the panel.")
    kern.wait_until(
        lambda: any("Sent from the panel." in json.dumps(r) for r in transcript()),
        30,
        "the chat's transcript to show the panel's turn",
    )
    streaming = [r for r in transcript() if '"streaming": true' in json.dumps(r)]
    assert streaming, "the chat followed the panel's turn while it streamed"
    assert "from the panel to the chat" in json.dumps(transcript()[-1])
    panel.close()


def test_the_panel_follows_the_notebooks_conversation(kern: Kernel, fake: FakeAnthropic) -> None:
    """`%phoenix new` / `use` in a cell move the panel to that conversation."""
    kern.ok("%phoenix new")
    panel = PanelClient(kern)
    panel.wait("the conversation's record", lambda p: bool(p.records()), 60)
    first = panel.status()["slug"]
    kern.ok("%phoenix new")
    panel.wait("the new conversation", lambda p: p.status().get("slug") != first, 30)
    second = panel.status()["slug"]
    kern.ok(f"%phoenix use {first}")
    panel.wait("the first conversation again", lambda p: p.status().get("slug") == first, 30)
    assert second not in (None, first)
    # The panel's own switcher: `%phoenix list`'s conversations, and `use` from the panel.
    lists = [d for d in panel.received() if d.get("type") == "conversations"]
    assert lists[-1]["current"] == first
    assert {first, second} <= {item["slug"] for item in lists[-1]["items"]}
    panel.say(type="use", slug=second)
    panel.wait("the switch from the panel", lambda p: p.status().get("slug") == second, 30)
    assert kern.eval("__import__('phoenix_nb.notebook.session').notebook.session"
                     ".get_session().current") == second  # fmt: skip
    panel.say(type="use", slug="no-such-conversation")
    panel.wait("the refusal", lambda p: any(
        "no-such-conversation" in d.get("text", "") for d in p.received()
    ), 30)  # fmt: skip
    panel.close()


def test_channels_left_behind_are_bounded(kern: Kernel, fake: FakeAnthropic) -> None:
    """A page that vanished without closing its comm leaves a channel following; beyond
    MAX_CHANNELS (8) the kernel closes the oldest, so they cannot pile up turn after turn."""
    kern.ok("%phoenix new")
    panels = []
    for _ in range(9):
        panel = PanelClient(kern)
        panel.wait("the panel's record", lambda p: bool(p.records()), 60)
        panels.append(panel)
    panels[0].wait("the oldest channel to be closed", lambda p: p.closed(), 30)
    assert not any(p.closed() for p in panels[1:])
    for panel in panels[1:]:
        panel.close()


def test_revert_from_the_panel_restores_the_turns_file(kern: Kernel, fake: FakeAnthropic) -> None:
    """Revert (undo.revert, as `%phoenix revert` and the cell's button): the file on disk is
    back as it was before the turn's first write, and the agent's history says so."""
    target = kern.project / "panel_rev.txt"
    target.write_text("a - b\n")
    ask = tool_use("request_mode_upgrade", {"reason": "I need to write panel_rev.txt"})
    write = tool_use(
        "patch",
        {
            "path": "panel_rev.txt",
            "patches": [{"operation": "replace", "oldText": "a - b", "newText": "a + b"}],
        },
    )
    fake.script(Turn([text("May I write?"), ask]), Turn([write]), Turn([text("Wrote it.")]))
    kern.ok("%phoenix new")
    panel = PanelClient(kern)
    panel.wait("the conversation's record", lambda p: bool(p.records()), 60)
    panel.say(type="send", text="write the file")
    panel.wait("the upgrade request", lambda p: p.status().get("paused") is True, 60)
    panel.say(type="approve")
    panel.wait_final("Wrote it.")
    assert target.read_text() == "a + b\n"
    panel.say(type="revert")
    panel.wait(
        "the revert's report",
        lambda p: any("Reverted to checkpoint" in d.get("text", "") for d in p.received()),
        60,
    )
    assert target.read_text() == "a - b\n"
    fake.script(Turn([text("Noted.")]))
    panel.say(type="send", text="what changed?")
    panel.wait_final("Noted.")
    sent = json.dumps(fake.requests[-1].body["messages"])
    assert "panel_rev.txt" in sent and "revert" in sent.lower()
    panel.close()


def test_continue_from_the_panel_starts_a_seeded_conversation(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    """Continue (`%phoenix continue`'s Conversation.continue_in_new): the fake server is asked
    for a summary, the notebook and the panel move to the new conversation, and its first
    request carries the summary."""
    fake.script(
        Turn([text("Looked around.")]),
        Turn([text("SUMMARY: the panel looked at add().")]),
    )
    kern.ok("%phoenix new")
    panel = PanelClient(kern)
    panel.wait("the conversation's record", lambda p: bool(p.records()), 60)
    old = panel.status()["slug"]
    panel.say(type="send", text="look around")
    panel.wait_final("Looked around.")
    asked = len(fake.requests)
    panel.say(type="continue")
    panel.wait("the new conversation", lambda p: p.status().get("slug") not in (None, old), 60)
    assert len(fake.requests) == asked + 1, "one summary request"
    assert "look around" in json.dumps(fake.requests[-1].body["messages"])
    new = panel.status()["slug"]
    assert new in kern.ok("%phoenix status").text("stdout")
    fake.script(Turn([text("Going on.")]))
    panel.say(type="send", text="please go on")
    panel.wait_final("Going on.")
    first = fake.requests[-1].last_user_text
    assert "the panel looked at add()" in first and first.endswith("please go on")
    panel.close()


# -- what waits for a person: the panel's pending list (runtime/pending.py) -----------------


def _pending_lists(panel: PanelClient) -> list[list[dict[str, Any]]]:
    return [d["items"] for d in panel.received() if d.get("type") == "pending"]


def _listing(panel: PanelClient, what: str, predicate: Any, timeout: float = 60) -> list[Any]:
    """Wait for a pending list that satisfies `predicate`; returns it."""
    panel.wait(what, lambda p: any(predicate(items) for items in _pending_lists(p)), timeout)
    return next(items for items in reversed(_pending_lists(panel)) if predicate(items))


def _notices(panel: PanelClient) -> list[str]:
    return [d["text"] for d in panel.received() if d.get("type") == "notice"]


FAKE_SOURCE = '''
from phoenix_nb.notebook.session import get_session
from phoenix_nb.runtime.pending import PendingRequest

class FakeServers:
    """A kind of request the panel has never heard of, as the MCP approvals will be."""
    def __init__(self, conversation):
        self.conversation, self.waiting, self.answers = conversation, True, []
    def pending(self):
        if not self.waiting:
            return []
        return [PendingRequest(
            id=f"srv-{self.conversation or 'all'}", kind="mcp_server",
            conversation=self.conversation, reason="<b>run</b> me <script>x()</script>",
            answers=("approve", "deny"), detail={"server": "<img src=x onerror=y()>"},
        )]
    async def answer(self, request, answer):
        self.answers.append([request.id, answer])
        self.waiting = False
        get_session().phoenix.pending.changed()

whole_kernel, elsewhere = FakeServers(""), FakeServers("someone-else")
get_session().phoenix.pending.add_source(whole_kernel)
get_session().phoenix.pending.add_source(elsewhere)
'''


def test_the_pending_list_shows_any_kind_and_answers_by_id(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    """The generic path: a source added from a cell is listed (the whole kernel's, not another
    conversation's), its markup as plain strings, and answered by id from the panel."""
    kern.ok("%phoenix new")
    panel = PanelClient(kern)
    panel.wait("the conversation's record", lambda p: bool(p.records()), 60)
    kern.ok(FAKE_SOURCE)
    items = _listing(panel, "the fake server's request", lambda items: len(items) > 0)
    assert items == [
        {
            "id": "srv-all",
            "kind": "mcp_server",
            "conversation": "",
            "reason": "<b>run</b> me <script>x()</script>",
            "answers": ["approve", "deny"],
            "detail": {"server": "<img src=x onerror=y()>"},
        }
    ], "the whole kernel's request, not another conversation's"
    panel.say(type="answer", id="srv-all", answer="maybe")
    panel.wait("the refused answer", lambda p: any("not 'maybe'" in n for n in _notices(p)))
    panel.say(type="answer", id="srv-all", answer="approve")
    _listing(panel, "the list without it", lambda items: items == [])
    assert kern.eval("whole_kernel.answers") == [["srv-all", "approve"]]
    assert kern.eval("elsewhere.answers") == []
    panel.say(type="answer", id="srv-all", answer="approve")
    panel.wait("answered twice", lambda p: any("already answered" in n for n in _notices(p)))
    assert kern.eval("whole_kernel.answers") == [["srv-all", "approve"]]
    panel.close()


def test_a_mode_approval_is_listed_and_answered_from_the_list(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    target = kern.project / "listed_out.txt"
    target.write_text("old\n")
    ask = tool_use("request_mode_upgrade", {"reason": "I need to write listed_out.txt"})
    write = tool_use(
        "patch",
        {
            "path": "listed_out.txt",
            "patches": [{"operation": "replace", "oldText": "old", "newText": "new"}],
        },
    )
    fake.script(Turn([ask]), Turn([write]), Turn([text("Written from the list.")]))
    kern.ok("%phoenix new")
    panel = PanelClient(kern)
    panel.wait("the conversation's record", lambda p: bool(p.records()), 60)
    slug = panel.status()["slug"]
    panel.say(type="send", text="write it")
    items = _listing(
        panel, "the upgrade request", lambda items: any(i["id"] == ask.id for i in items)
    )
    request = next(i for i in items if i["id"] == ask.id)
    assert request["kind"] == "mode_approval" and request["conversation"] == slug
    assert request["reason"] == "I need to write listed_out.txt"
    assert request["answers"] == ["approve", "deny", "cancel"]
    panel.say(type="answer", id=ask.id, answer="approve")
    panel.wait_final("Written from the list.")
    assert target.read_text() == "new\n"
    _listing(panel, "the list without it", lambda items: all(i["id"] != ask.id for i in items))
    panel.close()


def test_a_proposed_cell_edit_is_listed_until_decided_on_its_cell(
    kern: Kernel, fake: FakeAnthropic
) -> None:
    from tests.notebook.test_kernel_cell_edits import answer, edit_comm, run_cell

    assert run_cell(kern, "y = 1", "listed-cell").status == "ok"
    edit = tool_use(
        "edit_cell",
        {"cell_id": "listed-cell", "new_source": "y = 2", "explanation": "<i>Two</i>, not one."},
    )
    fake.script(Turn([edit]), Turn([text("Proposed.")]))
    kern.ok("%phoenix new")
    panel = PanelClient(kern)
    panel.wait("the conversation's record", lambda p: bool(p.records()), 60)
    slug = panel.status()["slug"]
    panel.say(type="send", text="make y two")
    panel.wait_final("Proposed.")
    items = _listing(
        panel, "the cell edit", lambda items: any(i["kind"] == "cell_edit" for i in items)
    )
    listed = next(i for i in items if i["kind"] == "cell_edit")
    assert listed["conversation"] == slug
    assert listed["reason"] == "<i>Two</i>, not one."
    assert listed["answers"] == [], "decided on its cell, not in the list"
    assert listed["detail"]["cell_id"] == "listed-cell"
    panel.say(type="answer", id=listed["id"], answer="approve")
    refused = f"{listed['id']!r} is answered where it is shown"  # no answer here
    panel.wait("the refusal", lambda p: any(refused in n for n in _notices(p)))
    comm_id, _sent = edit_comm(kern)
    answer(kern, comm_id, {"type": "outcome", "id": listed["id"], "outcome": "accepted"})
    _listing(panel, "the list without it", lambda items: items == [])
    panel.close()


def _png(colour: tuple[int, int, int]) -> bytes:
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (8, 6), colour).save(buffer, format="PNG")
    return buffer.getvalue()


def test_images_and_cell_outputs_go_with_the_message(kern: Kernel, fake: FakeAnthropic) -> None:
    """What the model received: the pasted image as an image block, byte for byte (a small
    PNG is passed through as `%phoenix chat` passes it), and the output text after the
    message. A corrupt image is the notice, and nothing is sent."""
    import base64

    fake.script(Turn([text("I see a red image.")]))
    kern.ok("%phoenix new")
    panel = PanelClient(kern)
    panel.wait("the conversation's record", lambda p: bool(p.records()), 60)
    broken = base64.b64encode(b"not a picture at all").decode()
    panel.say(type="send", text="what is this?", images=[{"name": "paste.png", "data": broken}])
    panel.wait("the image notice", lambda p: any("paste.png" in n for n in _notices(p)))
    notice = next(n for n in _notices(panel) if "paste.png" in n)
    assert "cannot be sent" in notice and "still in the box" in notice, notice
    assert not fake.requests, "nothing was sent"
    assert not any(d.get("type") == "sent" for d in panel.received())

    red = base64.b64encode(_png((255, 0, 0))).decode()
    output = "Traceback\nZeroDivisionError: division by zero ```"
    panel.say(
        type="send",
        text="what is this?",
        images=[{"name": "paste.png", "data": red}],
        outputs=[{"label": "output of cell [3]", "text": output}],
    )
    panel.wait_final("I see a red image.")
    assert any(d.get("type") == "sent" for d in panel.received())
    content = fake.requests[-1].body["messages"][-1]["content"]
    images = [b for b in content if b.get("type") == "image"]
    assert images == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": red}}
    ]
    words = "\n".join(b["text"] for b in content if b.get("type") == "text")
    assert "what is this?" in words
    head = "Output of cell [3] (attached from the notebook):"
    assert f"{head}\n````\n{output}\n````" in words, "fenced longer than its own backticks"
    panel.close()
