"""Store faults at the store's own level: real files, real damage, a real full disk.

Damage is contained to what is damaged (intact lines before and after read,
the original kept beside it, appends refused until the journal is rewritten);
the index is derivable from the conversation journals; a write that fails
leaves the journal and memory as they were and says so in one line.
"""

from __future__ import annotations

import errno
import json
import os
import zlib
from pathlib import Path

import pytest

from phoenix_nb.core.stored import StoredMessage
from phoenix_nb.errors import PhoenixError
from phoenix_nb.store import (
    ConversationDamaged,
    Store,
    StoreError,
    StoreWriteError,
    store_problem,
    write_failure,
)
from tests.small_disk import run_on_small_tmpfs


def _conv(store: Store, slug: str) -> str:
    record = store.create_conversation(
        slug=slug, cwd="/work", model="claude-x", mode="restricted", state={"type": "idle"}
    )
    return str(record["id"])


def _filled(root: Path) -> tuple[str, str, Path]:
    """alpha: five messages a..e and a state update; beta: one message."""
    with Store(root) as s:
        alpha, beta = _conv(s, "alpha"), _conv(s, "beta")
        for t in "abcde":
            s.append_message(alpha, "user", {"text": t})
        s.update_conversation(alpha, state={"type": "idle", "n": 1})
        s.append_message(beta, "user", {"text": "beta"})
    return alpha, beta, root / "conversations" / f"{alpha}.jsonl"


def _texts(store: Store, cid: str) -> list[str]:
    return [m["content"]["text"] for m in store.messages(cid)]


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def _index_of(path: Path, needle: bytes) -> int:
    return next(i for i, line in enumerate(_lines(path)) if needle in line)


def _rewrite(path: Path, n: int, line: bytes) -> bytes:
    lines = _lines(path)
    lines[n] = line
    data = b"".join(lines)
    path.write_bytes(data)
    return data


def _flip(line: bytes) -> bytes:
    b = bytearray(line)
    b[len(b) // 2] ^= 0x01
    return bytes(b)


def test_a_damaged_line_is_contained_and_quarantined(tmp_path: Path) -> None:
    alpha, beta, path = _filled(tmp_path)
    n = _index_of(path, b'"text":"c"')
    damaged = _rewrite(path, n, _flip(_lines(path)[n]))
    with Store(tmp_path) as s:
        assert _texts(s, alpha) == ["a", "b", "d", "e"], "before and after the damage"
        found = s.damage(alpha)
        assert found is not None
        assert found.lines == (n + 1,) and found.lost_messages == (3,)
        assert found.summary == f"line {n + 1} unreadable; message #3 lost"
        assert found.original == path.with_name(path.name + ".damaged")
        assert found.original.read_bytes() == damaged and path.read_bytes() == damaged
        assert [r.get("damaged") for r in s.list_conversations()] == [found.summary, None]
        with pytest.raises(ConversationDamaged, match=r"repair alpha"):
            s.append_message(alpha, "user", {"text": "f"})
        with pytest.raises(ConversationDamaged):
            s.update_conversation(alpha, state={"type": "idle", "n": 2})
        assert path.read_bytes() == damaged, "nothing written on top of the damage"
        s.append_message(beta, "user", {"text": "beta 2"})  # the others work
        assert _texts(s, beta) == ["beta", "beta 2"]
        history = s.replace_messages(
            alpha,
            [StoredMessage(m.kind, m.content) for m in s.stored_messages(alpha)],
            state_fields={"state": {"type": "idle", "n": 3}},
        )
        assert [m["sequence_id"] for m in history] == [1, 2, 3, 4]
        assert s.damage(alpha) is None
        assert s.append_message(alpha, "user", {"text": "f"})["sequence_id"] == 5
    with Store(tmp_path) as s:  # and it stays repaired
        assert _texts(s, alpha) == ["a", "b", "d", "e", "f"]
        record = s.get_conversation(alpha)
        assert record is not None and record["state"] == {"type": "idle", "n": 3}
        assert record.get("damaged") is None
    assert path.with_name(path.name + ".damaged").read_bytes() == damaged


def test_a_damaged_last_line_is_damage_not_a_torn_tail(tmp_path: Path) -> None:
    """A complete last line (newline written) that fails its checksum is not what a crash
    leaves; it must not be truncated away silently by the next append."""
    alpha, _, path = _filled(tmp_path)
    with Store(tmp_path) as s:
        s.append_message(alpha, "user", {"text": "last"})
    last = len(_lines(path)) - 1
    damaged = _rewrite(path, last, _flip(_lines(path)[last]))
    with Store(tmp_path) as s:
        assert _texts(s, alpha) == list("abcde")
        found = s.damage(alpha)
        assert found is not None and found.lost_messages == (6,)
        with pytest.raises(ConversationDamaged):
            s.append_message(alpha, "user", {"text": "next"})
    assert path.read_bytes() == damaged


def test_valid_json_with_a_wrong_checksum_is_never_applied(tmp_path: Path) -> None:
    alpha, _, path = _filled(tmp_path)
    n = _index_of(path, b'"text":"b"')
    _rewrite(path, n, _lines(path)[n].replace(b'"text":"b"', b'"text":"B"'))
    with Store(tmp_path) as s:
        assert _texts(s, alpha) == ["a", "c", "d", "e"]
        assert s.damage(alpha) is not None


def test_a_checked_line_with_malformed_operations_is_damage(tmp_path: Path) -> None:
    """A line whose checksum holds (recomputed by a tool) but whose ops are nonsense is
    skipped whole, never half-applied, and loading goes on."""
    alpha, _, path = _filled(tmp_path)
    body = json.dumps({"ops": [["put", "messages", 9, {"x": 1}], ["explode", "messages"]]})
    line = b"%08x " % zlib.crc32(body.encode()) + body.encode() + b"\n"
    lines = _lines(path)
    path.write_bytes(b"".join([*lines[:3], line, *lines[3:]]))
    with Store(tmp_path) as s:
        assert _texts(s, alpha) == list("abcde")
        found = s.damage(alpha)
        assert found is not None and found.lines == (4,)


def test_a_directory_in_place_of_a_journal(tmp_path: Path) -> None:
    alpha, beta, path = _filled(tmp_path)
    path.unlink()
    path.mkdir()
    (path / "keep.txt").write_text("mine")
    with Store(tmp_path) as s:
        assert s.messages(alpha) == []
        found = s.damage(alpha)
        assert found is not None and "a directory stands" in found.summary
        with pytest.raises(ConversationDamaged):
            s.append_message(alpha, "user", {"text": "x"})
        assert _texts(s, beta) == ["beta"]
        s.replace_messages(alpha, [], state_fields={})
        assert s.append_message(alpha, "user", {"text": "x"})["sequence_id"] == 1
    assert (path.with_name(path.name + ".damaged") / "keep.txt").read_text() == "mine"


@pytest.mark.parametrize("how", ["damaged", "missing"])
def test_the_index_is_rebuilt_from_the_journals(tmp_path: Path, how: str) -> None:
    alpha, beta, _ = _filled(tmp_path)
    index = tmp_path / "index.jsonl"
    if how == "damaged":
        lines = _lines(index)
        damaged = _rewrite(index, 1, _flip(lines[1]))  # alpha's create
    else:
        index.unlink()
    with Store(tmp_path) as s:
        note = s.take_rebuild_note()
        assert note is not None and note.startswith(f"index.jsonl was {how}")
        assert s.take_rebuild_note() is None
        rows = s.list_conversations()
        assert [r["slug"] for r in rows] == ["alpha", "beta"]
        assert rows[0]["state"] == {"type": "idle", "n": 1}, "the latest update, from its journal"
        assert _texts(s, alpha) == list("abcde")
        s.append_message(beta, "user", {"text": "again"})
    if how == "damaged":
        assert (tmp_path / "index.jsonl.damaged").read_bytes() == damaged
    with Store(tmp_path) as s:
        assert s.take_rebuild_note() is None, "rebuilt once"
        assert _texts(s, beta) == ["beta", "again"]


def test_write_failures_are_one_line_naming_what_where_and_what_to_do(tmp_path: Path) -> None:
    cases = {
        errno.ENOSPC: "the disk is full",
        errno.EROFS: "read-only file system",
        errno.EACCES: "permission denied",
        errno.EIO: "I/O error",
    }
    for code, why in cases.items():
        error = write_failure(OSError(code, os.strerror(code)), tmp_path, "the message")
        assert isinstance(error, StoreWriteError) and isinstance(error, PhoenixError)
        text = str(error)
        assert "\n" not in text
        assert text.startswith(f"Could not save the message in the store {tmp_path} (PHOENIX_HOME)")
        assert why in text and "Nothing unsaved was sent" in text


def test_store_problem_names_a_store_that_cannot_exist(tmp_path: Path) -> None:
    assert store_problem(tmp_path / "new" / "store") is None, "creatable: no problem"
    blocker = tmp_path / "file"
    blocker.write_text("")
    problem = store_problem(blocker / "store")
    assert problem is not None and "does not exist and cannot be created" in problem
    assert "\n" not in problem


CHILD = r"""
import json, os, sys
from pathlib import Path
from phoenix_nb.store import Store, StoreWriteError
from tests.small_disk import fill
root = Path(sys.argv[1])
out = {}
with Store(root) as s:
    cid = s.create_conversation(slug="full", cwd="/", model="m", mode="restricted",
                                state={"type": "idle"})["id"]
    s.append_message(cid, "user", {"text": "saved"})
    path = root / "conversations" / f"{cid}.jsonl"
    before = path.read_bytes()
    fill(root)
    try:
        s.append_message(cid, "user", {"text": "y" * 20000})
    except StoreWriteError as e:
        out["error"] = str(e)
    out["unchanged"] = path.read_bytes() == before
    out["after_failure"] = [m["content"]["text"][:5] for m in s.messages(cid)]
    os.remove(root / "filler")
    out["next_seq"] = s.append_message(cid, "user", {"text": "next"})["sequence_id"]
with Store(root) as s:
    out["reread"] = [m["content"]["text"][:5] for m in s.messages(cid)]
print(json.dumps(out))
"""


def test_a_full_disk_leaves_the_journal_and_memory_as_they_were(tmp_path: Path) -> None:
    """A real full filesystem: a tmpfs in a private mount namespace (CI runs as root)."""
    root = tmp_path / "store"
    result = run_on_small_tmpfs(root, "128k", ["-c", CHILD, str(root)], timeout=120)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["error"].startswith("Could not save the message in the store")
    assert "the disk is full" in out["error"]
    assert out["unchanged"], "the failed line was truncated away"
    assert out["after_failure"] == ["saved"]
    assert out["next_seq"] == 2, "no gap, no duplicate"
    assert out["reread"] == ["saved", "next"]


def test_every_store_error_is_a_phoenix_error() -> None:
    for cls in (StoreError, StoreWriteError, ConversationDamaged):
        assert issubclass(cls, PhoenixError)


def test_an_old_journal_gets_its_record_on_first_use(tmp_path: Path) -> None:
    """Stores written before journals held their record: the record is added when the
    conversation is first used, and from then on the index can be rebuilt with it."""
    alpha, _, path = _filled(tmp_path)
    lines = [x for x in _lines(path) if b'"conversation"' not in x]
    path.write_bytes(b"".join(lines))  # as an older phoenix_nb wrote it
    with Store(tmp_path) as s:
        assert _texts(s, alpha) == list("abcde")
    assert any(b'"conversation"' in x for x in _lines(path))
    (tmp_path / "index.jsonl").unlink()
    with Store(tmp_path) as s:
        record = s.get_conversation("alpha")
        assert record is not None and record["state"] == {"type": "idle", "n": 1}
