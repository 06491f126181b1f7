"""A long history read from the store is kept out of the garbage collector's full passes.

A full collection walks every tracked object in one pass with the GIL held, so with a
10,000-message history in memory each one stalled the kernel's event loop ~0.2 s (and
reading it set off several). Checked from outside: the objects a full collection would
walk (`gc.get_objects()`), after a fresh `Phoenix` (a restart) opened a stored
conversation for a turn; and that collection is left as the user had it.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from phoenix_nb.core.codec import to_json
from phoenix_nb.core.stored import MessageKind, StoredMessage
from phoenix_nb.core.values import TextBlock
from phoenix_nb.runtime import long_lived
from phoenix_nb.runtime.manager import Phoenix
from phoenix_nb.testing import FakeAnthropic
from tests.runtime.harness import phoenix_for

MESSAGES = 4_000  # reading them leaves more than long_lived.KEEP_AFTER objects


@pytest.fixture(autouse=True)
def _thawed() -> Iterator[None]:
    """The test process's collector as it was: nothing frozen, collection enabled."""
    gc.unfreeze()
    yield
    gc.unfreeze()
    gc.enable()


def _stored(phoenix: Phoenix, slug: str, n: int) -> None:
    conv = phoenix.create(slug=slug)
    messages = []
    for i in range(n // 2):
        messages.append(StoredMessage(MessageKind.USER, {"text": f"question {i}", "images": []}))
        answer = to_json((TextBlock(f"answer {i}"),))
        messages.append(
            StoredMessage(MessageKind.AGENT, {"blocks": answer, "stop_reason": "end_turn"})
        )
    phoenix.store.append_messages(conv.id, messages)


async def test_a_history_read_for_a_turn_is_out_of_full_collections(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    async with phoenix_for(fake_anthropic, tmp_path) as first:
        _stored(first, "long", MESSAGES)
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:  # a restart
        await phoenix.load("long")
        conv = phoenix.get("long")
        await conv.prepare()  # what the first turn does before its message
        history = conv.runtime.history
        assert len(history) == MESSAGES
        assert conv.payload()["cycles"], "the record is built from what was read"
        walked = {id(o) for o in gc.get_objects()}
        read = [m for m in history if id(m) in walked]
        assert read == [], f"{len(read)} of {MESSAGES} messages are walked by full collections"
        assert id(conv.runtime.projection()) not in walked
        assert gc.isenabled()


async def test_a_user_who_disabled_collection_keeps_it_disabled(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    async with phoenix_for(fake_anthropic, tmp_path) as first:
        _stored(first, "long", MESSAGES)
    gc.disable()
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        await phoenix.load("long")
        await phoenix.get("long").prepare()
    assert not gc.isenabled()


async def test_a_short_history_is_left_to_the_collector(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """A freeze keeps whatever is tracked at that moment: only a long read is worth it."""
    async with phoenix_for(fake_anthropic, tmp_path) as first:
        _stored(first, "short", 20)
    async with phoenix_for(fake_anthropic, tmp_path) as phoenix:
        await phoenix.load("short")
        assert gc.get_freeze_count() == 0
        assert gc.isenabled()


def test_readers_share_one_pause() -> None:
    with long_lived.reading():
        with long_lived.reading():
            assert not gc.isenabled()
        assert not gc.isenabled(), "the outer reader still reads"
    assert gc.isenabled()


def test_the_warm_ups_pause_and_a_history_read_on_another_thread_end_together() -> None:
    """The warm-up imports on its own thread while a history may be read on the loop's:
    one shared pause, so whichever ends first leaves collection off for the other, and
    the last one out turns it back on (neither restores a state the other set)."""
    entered, release = threading.Event(), threading.Event()

    def warm_up() -> None:
        with long_lived.reading(keep_all=True):
            entered.set()
            release.wait(60)

    thread = threading.Thread(target=warm_up)
    thread.start()
    assert entered.wait(60)
    with long_lived.reading():
        release.set()
        thread.join(60)
        assert not gc.isenabled(), "the warm-up ended; the history read still reads"
    assert gc.isenabled(), "both ended: collection is back as the user had it"
    assert gc.get_freeze_count() > 0, "the warm-up's imports are kept whatever their number"
