"""The durable outbox on its own: the dedup guard, batching at the head, identities kept
apart, the sender's bookkeeping (leases, in-flight records, confirmation), set-aside entries."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from ov_agent_ext.outbox import Identity, Outbox

ALICE = Identity.of("http://ov.test", "acme", "alice", "", "sk-alice-0123456789")
BOB = Identity.of("http://ov.test", "acme", "bob", "", "sk-bob-9876543210")


def msgs(*texts: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": t} for t in texts]


@pytest.fixture
def box(tmp_path: Path) -> Any:
    outbox = Outbox(tmp_path / "state" / "outbox.sqlite3")
    yield outbox
    outbox.close()


def contents(entries: Any) -> list[str]:
    return [m["content"] for e in entries for m in e.payload]


def test_file_is_private(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path / "state" / "outbox.sqlite3")
    outbox.close()
    assert stat.S_IMODE(os.stat(tmp_path / "state" / "outbox.sqlite3").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tmp_path / "state").st_mode) == 0o700


def test_identity_holds_a_fingerprint_not_the_key() -> None:
    assert "sk-alice" not in ALICE.key
    assert ALICE.key_id
    assert ALICE.key_id != BOB.key_id
    assert Identity.of("http://ov.test", "a", "u", "", "").key_id == ""


def test_turn_watermark_is_the_dedup_guard(box: Outbox) -> None:
    assert box.enqueue_turn(ALICE, "s", 0, msgs("a"), 5)
    assert not box.enqueue_turn(ALICE, "s", 0, msgs("a"), 5)
    assert box.enqueue_turn(ALICE, "s", 2, msgs("c"), 5)  # gaps are fine
    assert not box.enqueue_turn(ALICE, "s", 1, msgs("b"), 5)  # older than the guard
    assert box.enqueue_turn(ALICE, "s", 3, [], 9)  # skipped turn: guard moves, no entry
    assert not box.enqueue_turn(ALICE, "s", 3, msgs("d"), 5)
    state = box.session_state(ALICE, "s")
    assert (state.watermark, state.pending_tokens) == (3, 10)  # skipped turns add nothing
    assert contents(box.head(ALICE, "s", max_messages=100)) == ["a", "c"]
    assert box.enqueue_turn(BOB, "s", 0, msgs("x"), 1)  # per identity


def test_watermark_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "outbox.sqlite3"
    first = Outbox(path)
    first.enqueue_turn(ALICE, "s", 4, msgs("a"), 1)
    first.close()
    second = Outbox(path)
    try:
        assert not second.enqueue_turn(ALICE, "s", 4, msgs("a"), 1)
        assert second.enqueue_turn(ALICE, "s", 5, msgs("b"), 1)
        assert second.stats(ALICE).pending == 2
    finally:
        second.close()


def test_commit_resets_pending_tokens_and_heads_alone(box: Outbox) -> None:
    box.enqueue_turn(ALICE, "s", 0, msgs("a", "b"), 30)
    box.enqueue_messages(ALICE, "s", msgs("fact"), 7)
    assert box.session_state(ALICE, "s").pending_tokens == 37
    box.enqueue_commit(ALICE, "s", {"enable_working_memory": True})
    box.enqueue_turn(ALICE, "s", 1, msgs("c"), 4)
    assert box.session_state(ALICE, "s").pending_tokens == 4
    head = box.head(ALICE, "s", max_messages=100)
    assert [e.kind for e in head] == ["messages", "messages"]  # stops before the commit
    box.complete(ALICE, "s", [e.id for e in head], 3)
    (commit,) = box.head(ALICE, "s", max_messages=100)  # a commit goes alone
    assert (commit.kind, commit.payload) == ("commit", {"enable_working_memory": True})


def test_head_batches_up_to_the_limit_and_an_oversized_entry_alone(box: Outbox) -> None:
    for i in range(5):
        box.enqueue_turn(ALICE, "s", i, msgs(*[f"{i}.{j}" for j in range(40)]), 1)
    assert [e.n for e in box.head(ALICE, "s", max_messages=100)] == [40, 40]
    box.enqueue_turn(ALICE, "t", 0, msgs(*[str(j) for j in range(250)]), 1)
    box.enqueue_turn(ALICE, "t", 1, msgs("after"), 1)
    assert [e.n for e in box.head(ALICE, "t", max_messages=100)] == [250]


def test_identities_never_see_each_other(box: Outbox) -> None:
    box.enqueue_turn(ALICE, "s", 0, msgs("alice's"), 1)
    assert box.sessions_with_work(BOB) == []
    assert box.head(BOB, "s", max_messages=100) == []
    assert box.stats(BOB).pending == 0
    assert box.stats(ALICE).pending == 1
    assert box.stats().pending == 1  # all identities (status)
    assert box.sessions_with_work(ALICE) == ["s"]


def test_sessions_with_work_oldest_first_and_due_only(box: Outbox) -> None:
    box.enqueue_turn(ALICE, "b", 0, msgs("1"), 1)
    box.enqueue_turn(ALICE, "a", 0, msgs("2"), 1)
    assert box.sessions_with_work(ALICE) == ["b", "a"]
    (head,) = box.head(ALICE, "b", max_messages=100)
    box.retry_later([head.id], "503", 60.0)
    assert box.sessions_with_work(ALICE) == ["a"]
    assert box.sessions_with_work(ALICE, due_only=False) == ["b", "a"]


def test_retry_later_counts_only_when_asked(box: Outbox) -> None:
    box.enqueue_turn(ALICE, "s", 0, msgs("1"), 1)
    (entry,) = box.head(ALICE, "s", max_messages=100)
    box.begin_send(ALICE, "s", [entry.id], 0, 1)  # counts the attempt
    box.retry_later([entry.id], "timeout", 1.0)
    box.retry_later([entry.id], "503 on GET", 2.0, count=True)  # an attempt of its own
    (entry,) = box.head(ALICE, "s", max_messages=100)
    assert (entry.attempts, entry.last_error) == (2, "503 on GET")


def test_inflight_record_and_confirm(box: Outbox) -> None:
    box.enqueue_turn(ALICE, "s", 0, msgs("a", "b"), 1)
    box.enqueue_turn(ALICE, "s", 1, msgs("c", "d", "e"), 1)
    ids = [e.id for e in box.head(ALICE, "s", max_messages=100)]
    box.begin_send(ALICE, "s", ids, 10, 5)
    inflight = box.session_state(ALICE, "s").inflight
    assert inflight is not None
    assert (inflight.entry_ids, inflight.base_total, inflight.n) == (tuple(ids), 10, 5)
    # Three of five landed: the first entry goes, the second loses its first message.
    box.confirm(ALICE, "s", ids, 3, 13)
    state = box.session_state(ALICE, "s")
    assert (state.inflight, state.known_total) == (None, 13)
    assert contents(box.head(ALICE, "s", max_messages=100)) == ["d", "e"]
    box.confirm(ALICE, "s", ids, 0, 13)  # nothing landed: nothing dropped
    assert contents(box.head(ALICE, "s", max_messages=100)) == ["d", "e"]


def test_confirm_drops_empty_entries_in_its_way(box: Outbox) -> None:
    # An entry without messages (accept_messages with none) is confirmed by a send of zero
    # messages: it must leave, or the sender would take it as the head forever.
    box.enqueue_messages(ALICE, "s", [], 0)
    box.enqueue_turn(ALICE, "s", 0, msgs("a"), 1)
    ids = [e.id for e in box.head(ALICE, "s", max_messages=100)]
    box.confirm(ALICE, "s", ids[:1], 0, 0)
    assert contents(box.head(ALICE, "s", max_messages=100)) == ["a"]
    assert box.stats(ALICE).pending == 1


def test_set_aside_keeps_the_entry_and_its_reason(box: Outbox) -> None:
    box.enqueue_turn(ALICE, "s", 0, msgs("bad"), 1)
    box.enqueue_turn(ALICE, "s", 1, msgs("good"), 1)
    first = box.head(ALICE, "s", max_messages=1)[0]
    box.set_aside(first.id, "INVALID_ARGUMENT 400: bad")
    assert contents(box.head(ALICE, "s", max_messages=100)) == ["good"]
    stats = box.stats(ALICE)
    assert stats.pending == 1
    assert stats.sessions_waiting == 1
    (aside,) = stats.set_aside
    assert (aside.state, aside.last_error, aside.payload) == (
        "set_aside",
        "INVALID_ARGUMENT 400: bad",
        msgs("bad"),
    )


def test_lease_keeps_a_second_sender_out_until_released_or_expired(tmp_path: Path) -> None:
    path = tmp_path / "outbox.sqlite3"
    one, two = Outbox(path), Outbox(path)
    try:
        assert one.claim(ALICE, "s")
        assert one.claim(ALICE, "s")  # renewing
        assert not two.claim(ALICE, "s")  # same process, other sender: alive, so wait
        assert two.claim(BOB, "s")  # per identity
        one.release(ALICE, "s")
        assert two.claim(ALICE, "s")
        two.release(ALICE, "s")
        assert one.claim(ALICE, "s", seconds=-1)  # already expired
        assert two.claim(ALICE, "s")
    finally:
        one.close()
        two.close()


def test_lease_of_a_dead_process_is_taken_over_at_once(tmp_path: Path) -> None:
    path = tmp_path / "outbox.sqlite3"
    code = (
        "import sys; from ov_agent_ext.outbox import Identity, Outbox; "
        f"box = Outbox(__import__('pathlib').Path({str(path)!r})); "
        "me = Identity.of('http://ov.test', 'acme', 'alice', '', 'sk-alice-0123456789'); "
        "assert box.claim(me, 's', seconds=600); print(box.owner)"
    )
    owner = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()
    box = Outbox(path)
    try:
        with closing(sqlite3.connect(path)) as db:
            (holder, until) = db.execute("SELECT lease_owner, lease_until FROM sessions").fetchone()
        assert holder == owner
        assert until > time.time() + 500
        assert box.claim(ALICE, "s")  # but its process is gone
        # A holder on another host (or named by the caller) is waited for.
        with closing(sqlite3.connect(path)) as db, db:
            db.execute("UPDATE sessions SET lease_owner = 'elsewhere:1:ab'")
        assert not box.claim(ALICE, "s")
    finally:
        box.close()
