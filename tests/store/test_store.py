"""The store's API: records, sequence ids, batches, slugs, schema, secrets, bad input."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import ClassVar

import pytest

from phoenix_nb.core.stored import MessageKind, StoredMessage
from phoenix_nb.core.values import Usage
from phoenix_nb.store import (
    REDACTED,
    ConversationDamaged,
    ConversationNotInStore,
    SlugTaken,
    Store,
    StoreError,
)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "store")
    yield s
    s.close()


def _tool(content: dict) -> StoredMessage:
    return StoredMessage(MessageKind.TOOL, content)


def _conv(store: Store, **kw: object) -> dict:
    args = {"cwd": "/work", "model": "claude-x", "mode": "restricted", "state": {"type": "idle"}}
    args.update(kw)
    return store.create_conversation(**args)


def test_records_follow_seed_001_tables(store: Store) -> None:
    c = _conv(store)
    assert set(c) >= {
        "id", "slug", "cwd", "parent_conversation_id", "user_initiated", "state", "state_data",
        "mode", "model", "archived", "created_at", "updated_at", "state_updated_at", "seeded_from",
    }  # fmt: skip
    m = store.append_message(c["id"], "agent", {"blocks": [], "stop_reason": "end_turn"},
                             usage_data={"input_tokens": 3, "output_tokens": 4})  # fmt: skip
    assert set(m) == {
        "id", "conversation_id", "sequence_id", "message_type", "actor_kind", "content",
        "display_data", "usage_data", "created_at",
    }  # fmt: skip
    assert (m["sequence_id"], m["actor_kind"]) == (1, "llm_agent")
    assert StoredMessage.parse(m).usage == Usage(input_tokens=3, output_tokens=4)


def test_sequence_ids_are_gap_free_and_survive_reopen(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with Store(root) as s:
        c = _conv(s)
        for i in range(5):
            assert s.append_message(c["id"], "user", {"text": str(i)})["sequence_id"] == i + 1
    with Store(root) as s:
        assert s.append_message(c["id"], "user", {"text": "5"})["sequence_id"] == 6
        assert [m["content"]["text"] for m in s.messages(c["id"], after_sequence=3)] == [
            "3",
            "4",
            "5",
        ]


def test_batch_is_all_or_nothing_on_bad_input(store: Store) -> None:
    """A synthetic-results batch with one bad item writes none of it (nothing lost either)."""
    c = _conv(store)
    store.append_message(c["id"], "user", {"text": "hi"})
    bad = [_tool({"tool_use_id": "a"}), _tool({"x": object()})]
    with pytest.raises(StoreError, match="message 1 content is not JSON"):
        store.append_messages(c["id"], bad)
    with pytest.raises(StoreError, match="message_type 'robot'"):
        robot = StoredMessage("robot", {})  # type: ignore[arg-type]
        store.append_messages(c["id"], [_tool({}), robot])
    assert len(store.messages(c["id"])) == 1
    ok = [m.row() for m in store.append_messages(c["id"], [_tool({"n": 1}), _tool({"n": 2})])]
    assert [m["sequence_id"] for m in ok] == [2, 3]
    lines = (store.root / "conversations" / f"{c['id']}.jsonl").read_bytes().splitlines()
    lines = [line for line in lines if b'"messages"' in line]  # not the conversation's record
    assert len(lines) == 2, "a batch is one journal line, so a crash keeps all or none of it"


def test_unknown_conversation_and_bad_ids_are_clear_errors(store: Store) -> None:
    with pytest.raises(ConversationNotInStore, match="no conversation 'nope'"):
        store.append_message("nope", "user", {"text": "x"})
    with pytest.raises(StoreError, match="conversation id"):
        _conv(store, id="../escape")
    with pytest.raises(StoreError, match="cannot update \\['cwd'\\]"):
        store.update_conversation(_conv(store)["id"], cwd="/elsewhere")  # REQ-BED-010


def test_slugs_unique_readable_and_lookup_by_slug(store: Store) -> None:
    a = _conv(store, slug="brave-otter")
    with pytest.raises(SlugTaken, match="brave-otter-2"):
        _conv(store, slug="brave-otter")
    assert store.unique_slug("Brave Otter!") == "brave-otter-2"
    auto = _conv(store)
    assert auto["slug"].count("-") >= 1 and auto["slug"] != a["slug"]
    assert store.get_conversation("brave-otter")["id"] == a["id"]
    assert store.get_conversation(a["id"])["slug"] == "brave-otter"
    assert store.get_conversation("missing") is None


def test_listing_children_archive_and_seeding(store: Store) -> None:
    """REQ-BED-009 sub-agents are hidden from the list; REQ-BED-021 seeded_from links."""
    parent = _conv(store)
    child = _conv(store, parent_id=parent["id"], user_initiated=False)
    seeded = _conv(store, seed_from=parent["id"])
    assert [c["id"] for c in store.list_conversations()] == [parent["id"], seeded["id"]]
    assert len(store.list_conversations(include_sub_agents=True)) == 3
    assert [c["id"] for c in store.children(parent["id"])] == [child["id"]]
    assert seeded["seeded_from"] == parent["id"]
    store.update_conversation(parent["id"], archived=True)
    assert [c["id"] for c in store.list_conversations()] == [seeded["id"]]
    assert len(store.list_conversations(include_archived=True)) == 2


def test_update_state_bumps_timestamps(store: Store) -> None:
    c = _conv(store)
    u = store.update_conversation(c["id"], state={"type": "llm_requesting"}, mode="unrestricted")
    assert u["state"] == {"type": "llm_requesting"} and u["mode"] == "unrestricted"
    assert u["state_updated_at"] > c["state_updated_at"]
    assert store.get_conversation(c["id"]) == u


def test_returned_records_are_copies(store: Store) -> None:
    c = _conv(store)
    store.append_message(c["id"], "user", {"text": "a"})
    store.messages(c["id"])[0]["content"]["text"] = "mutated"
    store.get_conversation(c["id"])["state"]["type"] = "mutated"
    assert store.messages(c["id"])[0]["content"]["text"] == "a"
    assert store.get_conversation(c["id"])["state"]["type"] == "idle"


def test_no_secret_is_ever_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-ant-test-0123456789abcdef"
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    root = tmp_path / "s"
    with Store(root) as s:
        c = _conv(s, state={"type": "idle", "auth_token": "tok-zzz"})
        s.append_message(
            c["id"],
            "tool",
            {"tool_use_id": "t", "content": f"env: ANTHROPIC_API_KEY={key}\n", "is_error": False},
            display_data={"headers": {"Authorization": "Bearer hunter2"}, "password": ["pw1"]},
            usage_data={"input_tokens": 7},
        )
        s.update_conversation(c["id"], state_data={"github_token": "ghp_secret"})
        m = s.messages(c["id"])[0]
        assert StoredMessage.parse(m).usage == Usage(input_tokens=7)  # counts are not secrets
        assert m["display_data"]["headers"]["Authorization"] == REDACTED
        assert REDACTED in m["content"]["content"]
    blob = b"".join(p.read_bytes() for p in root.rglob("*.jsonl"))
    for secret in (key, "tok-zzz", "hunter2", "pw1", "ghp_secret"):
        assert secret.encode() not in blob


def test_default_root_is_phoenix_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PHOENIX_HOME", str(tmp_path / "ph"))
    with Store() as s:
        assert s.root == tmp_path / "ph"
        _conv(s)
    assert (tmp_path / "ph" / "index.jsonl").exists()


class _V3Store(Store):
    SCHEMA_VERSION = 3
    MIGRATIONS: ClassVar[dict] = {}


def test_schema_version_and_migrations_run_once_in_order(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with Store(root) as s:
        assert s.schema_version == 1
        cid = _conv(s)["id"]
    ran: list[int] = []

    def to2(st: Store) -> None:
        ran.append(2)
        st.update_conversation(cid, state_data={"migrated": 2})

    _V3Store.MIGRATIONS = {2: to2, 3: lambda st: ran.append(3)}
    with _V3Store(root) as s:
        assert s.schema_version == 3
        assert s.get_conversation(cid)["state_data"] == {"migrated": 2}
    with _V3Store(root):
        pass
    assert ran == [2, 3]
    with pytest.raises(StoreError, match="newer than this phoenix_nb"):
        Store(root)


def test_fresh_store_runs_no_migration(tmp_path: Path) -> None:
    _V3Store.MIGRATIONS = {2: lambda st: pytest.fail("migration on an empty store")}
    with _V3Store(tmp_path / "s") as s:
        assert s.schema_version == 3


def test_two_store_objects_never_serve_stale_data(tmp_path: Path) -> None:
    """Another process's writes are seen at once (here: a second Store, its own caches)."""
    a, b = Store(tmp_path / "s"), Store(tmp_path / "s")
    c = _conv(a)
    assert b.get_conversation(c["id"]) is not None
    b.append_message(c["id"], "user", {"text": "from b"})
    assert [m["content"]["text"] for m in a.messages(c["id"])] == ["from b"]
    a.append_message(c["id"], "user", {"text": "from a"})
    assert b.messages(c["id"])[-1]["sequence_id"] == 2
    a.update_conversation(c["id"], state={"type": "error"})
    assert b.get_conversation(c["id"])["state"] == {"type": "error"}
    a.close()
    b.close()


def test_threads_share_one_store(store: Store) -> None:
    c = _conv(store)
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(15):
                store.append_message(c["id"], "user", {"text": f"{n}-{i}"})
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    msgs = store.messages(c["id"])
    assert [m["sequence_id"] for m in msgs] == list(range(1, 61))
    assert len({m["content"]["text"] for m in msgs}) == 60


def test_torn_last_line_is_ignored_then_truncated(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with Store(root) as s:
        cid = _conv(s)["id"]
        s.append_message(cid, "user", {"text": "kept"})
    path = root / "conversations" / f"{cid}.jsonl"
    with path.open("ab") as f:
        f.write(b'0badc0de {"ops":[["put","messages",2,{"half')  # a writer killed mid-line
    with Store(root) as s:
        assert [m["content"]["text"] for m in s.messages(cid)] == ["kept"]
        assert s.append_message(cid, "user", {"text": "next"})["sequence_id"] == 2
    with Store(root) as s:
        assert [m["content"]["text"] for m in s.messages(cid)] == ["kept", "next"]
    assert b"half" not in path.read_bytes()


def test_damaged_line_before_intact_ones_is_reported(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with Store(root) as s:
        cid = _conv(s)["id"]
        for t in "abc":
            s.append_message(cid, "user", {"text": t})
    path = root / "conversations" / f"{cid}.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2].replace(b'"b"', b'"B"')  # checksum no longer matches
    path.write_bytes(b"".join(lines))
    with Store(root) as s:  # contained, not guessed at: the rest reads, writes are refused
        assert [m["content"]["text"] for m in s.messages(cid)] == ["a", "c"]
        with pytest.raises(ConversationDamaged, match="repair"):
            s.append_message(cid, "user", {"text": "d"})


def test_compaction_keeps_everything_and_shrinks_the_file(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with Store(root) as s:
        cid = _conv(s)["id"]
        s.index_journal.compact_min_bytes = 2048  # this journal only: compact after ~2 KB dead
        for i in range(200):
            s.update_conversation(cid, state={"type": "idle", "n": i})
        size = (root / "index.jsonl").stat().st_size
        assert size < 8 * 1024, f"index not compacted ({size} bytes after 200 updates)"
    with Store(root) as s:
        assert s.get_conversation(cid)["state"] == {"type": "idle", "n": 199}
        first = json.loads((root / "index.jsonl").read_bytes().split(b" ", 1)[1].split(b"\n")[0])
        assert "snapshot" in first


@pytest.mark.parametrize(
    "variable",
    ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"],
)
def test_no_provider_key_is_written_in_any_spelling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    import base64
    import urllib.parse

    key = "k3y-Vb8nM3qW6eR1tY4uI7oP0aS2dF5gH9jK/+"
    monkeypatch.setenv(variable, key)
    data = key.encode()
    spellings = [
        key[::-1],
        data.hex(),
        urllib.parse.quote(key, safe=""),
        base64.b64encode(b"x" + data).decode(),
        base64.urlsafe_b64encode(b"xy" + data).decode(),
    ]
    root = tmp_path / "s"
    with Store(root) as s:
        c = _conv(s)
        s.append_message(c["id"], "agent", {"text": " | ".join(spellings)})
    blob = b"".join(p.read_bytes() for p in root.rglob("*.jsonl")).decode()
    assert REDACTED in blob
    for spelled in [key, *spellings]:
        assert spelled not in blob
