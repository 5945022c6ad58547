"""The durable outbox: every accepted write is on local disk before the turn returns.

One SQLite file (WAL) in the state directory, shared by every process of the user (an agent,
its command hooks, the CLI). It holds:

- ``entries``: writes waiting for the server, in order: a batch of messages (a turn, a
  remembered fact) or a commit. Each carries its full identity (endpoint, account, user, peer,
  a fingerprint of the API key: never the key) and session; replay only ever happens through a
  client with that identity, so nobody's entries are sent with somebody else's credentials.
- ``sessions``: per identity and session: the turn watermark (the dedup guard: a replayed
  ``turn_end`` never enqueues twice), the server's running message total as last seen (what
  an uncertain send is reconciled against), the in-flight send (entries, base total, count),
  pending tokens for the commit threshold, and a lease so two processes never send the same
  session at once (renewed before every request; a lease whose holder died is taken over at
  once on the same host, otherwise when it expires).

Entries leave only when the server confirmed them (or reconciliation proved they landed) or
when the server rejected them for good, in which case they are *set aside* with the reason,
visible in status, never retried forever and never silently dropped.
"""

from __future__ import annotations

import enum
import hashlib
import json
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Enqueued", "Entry", "Identity", "Inflight", "Outbox", "OutboxStats", "SessionState"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    identity TEXT NOT NULL,
    session_id TEXT NOT NULL,
    kind TEXT NOT NULL,               -- 'messages' | 'commit'
    payload TEXT NOT NULL,            -- JSON: message dicts, or commit options
    n INTEGER NOT NULL DEFAULT 0,     -- messages in the entry
    state TEXT NOT NULL DEFAULT 'pending',   -- 'pending' | 'set_aside'
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at REAL NOT NULL DEFAULT 0,
    last_error TEXT,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_by_session ON entries (identity, session_id, state, id);
CREATE TABLE IF NOT EXISTS identities (
    identity TEXT PRIMARY KEY,
    endpoint TEXT NOT NULL, account TEXT NOT NULL, user TEXT NOT NULL, peer TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    identity TEXT NOT NULL,
    session_id TEXT NOT NULL,
    watermark INTEGER,                -- highest turn index accepted (captured or skipped)
    known_total INTEGER,              -- server's total_message_count after our last write
    inflight_ids TEXT,                -- JSON entry ids of a send whose outcome is unknown
    inflight_base INTEGER,            -- known_total when that send started
    inflight_n INTEGER,               -- messages in that send
    pending_tokens INTEGER NOT NULL DEFAULT 0,
    lease_owner TEXT,
    lease_until REAL,
    PRIMARY KEY (identity, session_id)
);
"""


class Enqueued(enum.IntEnum):
    """What an enqueue did; falsy only for a duplicate turn."""

    DUPLICATE = 0  # this turn index was already accepted: nothing written
    QUEUED = 1
    QUEUED_WITH_COMMIT = 2  # and the pending tokens reached the threshold: a commit follows


@dataclass(frozen=True)
class Identity:
    """Who a write belongs to. ``key_id`` is a fingerprint of the API key, not the key."""

    endpoint: str
    account: str = ""
    user: str = ""
    peer: str = ""
    key_id: str = ""

    @classmethod
    def of(cls, endpoint: str, account: str, user: str, peer: str, api_key: str) -> Identity:
        key_id = hashlib.sha256(api_key.encode()).hexdigest()[:16] if api_key else ""
        return cls(endpoint, account, user, peer, key_id)

    @property
    def key(self) -> str:
        return "|".join((self.endpoint, self.account, self.user, self.peer, self.key_id))


@dataclass(frozen=True)
class Entry:
    """One queued write."""

    id: int
    session_id: str
    kind: str
    payload: Any
    n: int
    attempts: int
    state: str
    last_error: str | None


@dataclass(frozen=True)
class Inflight:
    """A send whose outcome is not known yet (a timeout, or a crash mid-request)."""

    entry_ids: tuple[int, ...]
    base_total: int
    n: int


@dataclass(frozen=True)
class SessionState:
    watermark: int | None
    known_total: int | None
    inflight: Inflight | None
    pending_tokens: int


@dataclass(frozen=True)
class OutboxStats:
    pending: int
    set_aside: list[Entry]
    sessions_waiting: int


class Outbox:
    """The on-disk queue. All methods are short synchronous transactions (sub-millisecond)."""

    def __init__(self, path: Path, *, owner: str | None = None):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # host:pid:object, so a lease left by a process that died (killed mid-send) can be
        # taken over at once by another process on the same host instead of after it expires.
        self.owner = owner or f"{_HOST}:{os.getpid()}:{id(self):x}"
        fresh = not path.exists()
        self._db = sqlite3.connect(path, timeout=5.0, isolation_level=None, check_same_thread=False)
        if fresh:
            os.chmod(path, 0o600)  # turns may hold private text
        self._db.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode: a committed transaction survives a crash of the process (what
        # we promise); only an OS crash or power loss could lose the last ones.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self._lock = threading.RLock()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _touch_session(self, db: sqlite3.Connection, identity: Identity, session_id: str) -> None:
        db.execute(
            "INSERT OR IGNORE INTO identities VALUES (?, ?, ?, ?, ?)",
            (identity.key, identity.endpoint, identity.account, identity.user, identity.peer),
        )
        db.execute(
            "INSERT OR IGNORE INTO sessions (identity, session_id) VALUES (?, ?)",
            (identity.key, session_id),
        )

    # --- enqueueing (the hot path of turn_end) -------------------------------------------------

    def enqueue_turn(
        self,
        identity: Identity,
        session_id: str,
        turn_index: int,
        messages: Sequence[dict[str, Any]],
        tokens: int,
        *,
        commit_at: int = 0,
    ) -> Enqueued:
        """Queue a turn's messages unless this turn index was already accepted.

        The watermark moves in the same transaction, so a retried or replayed ``turn_end``
        (same index) is a no-op, even across processes and restarts. With ``commit_at``, a
        commit is queued behind the turn, in the same transaction, when the session's pending
        tokens reach it. Returns what happened (falsy for a duplicate).
        """
        with self._tx() as db:
            self._touch_session(db, identity, session_id)
            (watermark,) = db.execute(
                "SELECT watermark FROM sessions WHERE identity = ? AND session_id = ?",
                (identity.key, session_id),
            ).fetchone()
            if watermark is not None and turn_index <= watermark:
                return Enqueued.DUPLICATE
            db.execute(
                "UPDATE sessions SET watermark = ?, pending_tokens = pending_tokens + ? "
                "WHERE identity = ? AND session_id = ?",
                (turn_index, tokens if messages else 0, identity.key, session_id),
            )
            if not messages:
                return Enqueued.QUEUED
            self._insert(db, identity, session_id, "messages", list(messages), len(messages))
            return self._commit_if_due(db, identity, session_id, commit_at)

    def enqueue_messages(
        self,
        identity: Identity,
        session_id: str,
        messages: Sequence[dict[str, Any]],
        tokens: int,
        *,
        commit_at: int = 0,
    ) -> int:
        """Queue messages outside the turn sequence (a remembered fact); returns the entry id.
        ``commit_at`` as for :meth:`enqueue_turn`."""
        with self._tx() as db:
            self._touch_session(db, identity, session_id)
            db.execute(
                "UPDATE sessions SET pending_tokens = pending_tokens + ? "
                "WHERE identity = ? AND session_id = ?",
                (tokens, identity.key, session_id),
            )
            entry_id = self._insert(
                db, identity, session_id, "messages", list(messages), len(messages)
            )
            self._commit_if_due(db, identity, session_id, commit_at)
            return entry_id

    def _commit_if_due(
        self, db: sqlite3.Connection, identity: Identity, session_id: str, commit_at: int
    ) -> Enqueued:
        if commit_at <= 0:
            return Enqueued.QUEUED
        (pending,) = db.execute(
            "SELECT pending_tokens FROM sessions WHERE identity = ? AND session_id = ?",
            (identity.key, session_id),
        ).fetchone()
        if pending < commit_at:
            return Enqueued.QUEUED
        db.execute(
            "UPDATE sessions SET pending_tokens = 0 WHERE identity = ? AND session_id = ?",
            (identity.key, session_id),
        )
        self._insert(db, identity, session_id, "commit", {}, 0)
        return Enqueued.QUEUED_WITH_COMMIT

    def enqueue_commit(
        self, identity: Identity, session_id: str, options: dict[str, Any] | None = None
    ) -> int:
        """Queue a commit after everything already queued for the session; resets the
        pending-token count (the threshold has been acted on)."""
        with self._tx() as db:
            self._touch_session(db, identity, session_id)
            db.execute(
                "UPDATE sessions SET pending_tokens = 0 WHERE identity = ? AND session_id = ?",
                (identity.key, session_id),
            )
            return self._insert(db, identity, session_id, "commit", options or {}, 0)

    def _insert(
        self,
        db: sqlite3.Connection,
        identity: Identity,
        session_id: str,
        kind: str,
        payload: Any,
        n: int,
    ) -> int:
        cursor = db.execute(
            "INSERT INTO entries (identity, session_id, kind, payload, n, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (identity.key, session_id, kind, json.dumps(payload), n, time.time()),
        )
        return int(cursor.lastrowid or 0)

    # --- reading --------------------------------------------------------------------------------

    def session_state(self, identity: Identity, session_id: str) -> SessionState:
        with self._lock:
            row = self._db.execute(
                "SELECT watermark, known_total, inflight_ids, inflight_base, inflight_n, "
                "pending_tokens FROM sessions WHERE identity = ? AND session_id = ?",
                (identity.key, session_id),
            ).fetchone()
        if row is None:
            return SessionState(None, None, None, 0)
        watermark, known, ids, base, n, tokens = row
        inflight = Inflight(tuple(json.loads(ids)), int(base), int(n)) if ids else None
        return SessionState(watermark, known, inflight, int(tokens))

    def sessions_with_work(self, identity: Identity, *, due_only: bool = True) -> list[str]:
        """Sessions of this identity with pending entries, oldest first; with ``due_only``,
        only those whose next entry's retry backoff has passed."""
        query = (
            "SELECT e.session_id FROM entries e WHERE e.identity = ? AND e.state = 'pending' "
            "AND e.id = (SELECT MIN(id) FROM entries WHERE identity = e.identity "
            "AND session_id = e.session_id AND state = 'pending')"
        )
        args: tuple[Any, ...] = (identity.key,)
        if due_only:
            query += " AND e.next_attempt_at <= ?"
            args += (time.time(),)
        with self._lock:
            rows = self._db.execute(query + " ORDER BY e.id", args).fetchall()
        return [str(r[0]) for r in rows]

    def last_id(self) -> int:
        """The newest entry's id (0 if none): a flush sends entries up to it, so entries that
        arrive meanwhile wait for the next flush instead of keeping this one going."""
        with self._lock:
            (last,) = self._db.execute("SELECT COALESCE(MAX(id), 0) FROM entries").fetchone()
        return int(last)

    def head(
        self,
        identity: Identity,
        session_id: str,
        *,
        max_messages: int,
        upto: int | None = None,
    ) -> list[Entry]:
        """The next entries to send, in order: one commit, or consecutive message entries
        (with ``upto``, none newer than that id)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id, session_id, kind, payload, n, attempts, state, last_error "
                "FROM entries WHERE identity = ? AND session_id = ? AND state = 'pending' "
                "AND id <= ? ORDER BY id LIMIT 500",
                (identity.key, session_id, upto if upto is not None else 2**62),
            ).fetchall()
        entries = [_entry(r) for r in rows]
        if not entries or entries[0].kind == "commit":
            return entries[:1]
        batch: list[Entry] = []
        count = 0
        for entry in entries:
            if entry.kind != "messages" or (batch and count + entry.n > max_messages):
                break
            batch.append(entry)
            count += entry.n
        return batch

    def entries(self, entry_ids: Sequence[int]) -> list[Entry]:
        with self._lock:
            marks = ",".join("?" * len(entry_ids))
            rows = self._db.execute(
                f"SELECT id, session_id, kind, payload, n, attempts, state, last_error "
                f"FROM entries WHERE id IN ({marks}) ORDER BY id",
                tuple(entry_ids),
            ).fetchall()
        return [_entry(r) for r in rows]

    def stats(self, identity: Identity | None = None) -> OutboxStats:
        where, args = ("WHERE identity = ?", (identity.key,)) if identity else ("", ())
        with self._lock:
            pending = self._db.execute(
                f"SELECT COUNT(*) FROM entries {where}"
                + (" AND" if where else " WHERE")
                + " state = 'pending'",
                args,
            ).fetchone()[0]
            waiting = self._db.execute(
                f"SELECT COUNT(DISTINCT session_id) FROM entries {where}"
                + (" AND" if where else " WHERE")
                + " state = 'pending'",
                args,
            ).fetchone()[0]
            rows = self._db.execute(
                f"SELECT id, session_id, kind, payload, n, attempts, state, last_error "
                f"FROM entries {where}" + (" AND" if where else " WHERE") + " state = 'set_aside'"
                " ORDER BY id",
                args,
            ).fetchall()
        return OutboxStats(int(pending), [_entry(r) for r in rows], int(waiting))

    # --- the sender's bookkeeping -----------------------------------------------------------

    def claim(self, identity: Identity, session_id: str, *, seconds: float = 60.0) -> bool:
        """Take (or renew) the right to send this session; False if another process holds it.

        A lease is free when nobody holds it, when it expired, or when its holder was a
        process on this host that no longer exists (killed mid-send: its in-flight record is
        reconciled by whoever takes over, so nothing is lost or sent twice).
        """
        now = time.time()
        with self._tx() as db:
            self._touch_session(db, identity, session_id)
            holder, until = db.execute(
                "SELECT lease_owner, lease_until FROM sessions "
                "WHERE identity = ? AND session_id = ?",
                (identity.key, session_id),
            ).fetchone()
            held = holder and holder != self.owner and until is not None and until >= now
            if held and not _owner_is_gone(str(holder)):
                return False
            db.execute(
                "UPDATE sessions SET lease_owner = ?, lease_until = ? "
                "WHERE identity = ? AND session_id = ?",
                (self.owner, now + seconds, identity.key, session_id),
            )
            return True

    def release(self, identity: Identity, session_id: str) -> None:
        with self._tx() as db:
            db.execute(
                "UPDATE sessions SET lease_owner = NULL, lease_until = NULL "
                "WHERE identity = ? AND session_id = ? AND lease_owner = ?",
                (identity.key, session_id, self.owner),
            )

    def set_known_total(self, identity: Identity, session_id: str, total: int) -> None:
        with self._tx() as db:
            db.execute(
                "UPDATE sessions SET known_total = ? WHERE identity = ? AND session_id = ?",
                (total, identity.key, session_id),
            )

    def begin_send(
        self, identity: Identity, session_id: str, entry_ids: Sequence[int], base: int, n: int
    ) -> None:
        """Record, before the request leaves, what is being sent and from which total."""
        with self._tx() as db:
            db.execute(
                "UPDATE sessions SET inflight_ids = ?, inflight_base = ?, inflight_n = ? "
                "WHERE identity = ? AND session_id = ?",
                (json.dumps(list(entry_ids)), base, n, identity.key, session_id),
            )
            db.execute(
                f"UPDATE entries SET attempts = attempts + 1 WHERE id IN "
                f"({','.join('?' * len(entry_ids))})",
                tuple(entry_ids),
            )

    def complete(
        self, identity: Identity, session_id: str, entry_ids: Sequence[int], new_total: int | None
    ) -> None:
        """The server has these entries: remove them, clear the in-flight record."""
        with self._tx() as db:
            db.execute(
                f"DELETE FROM entries WHERE id IN ({','.join('?' * len(entry_ids))})",
                tuple(entry_ids),
            )
            db.execute(
                "UPDATE sessions SET inflight_ids = NULL, inflight_base = NULL, "
                "inflight_n = NULL, known_total = COALESCE(?, known_total) "
                "WHERE identity = ? AND session_id = ?",
                (new_total, identity.key, session_id),
            )

    def clear_inflight(self, identity: Identity, session_id: str) -> None:
        """The send certainly did not land (the server rejected it)."""
        with self._tx() as db:
            db.execute(
                "UPDATE sessions SET inflight_ids = NULL, inflight_base = NULL, inflight_n = NULL"
                " WHERE identity = ? AND session_id = ?",
                (identity.key, session_id),
            )

    def retry_later(
        self, entry_ids: Sequence[int], error: str, delay: float, *, count: bool = False
    ) -> None:
        """Not now: try these entries again after ``delay`` seconds (``count``: this failure
        is an attempt of its own, not one already counted by ``begin_send``)."""
        with self._tx() as db:
            db.execute(
                f"UPDATE entries SET last_error = ?, next_attempt_at = ?, "
                f"attempts = attempts + ? "
                f"WHERE id IN ({','.join('?' * len(entry_ids))})",
                (error, time.time() + delay, int(count), *entry_ids),
            )

    def count_attempt(self, entry_id: int) -> None:
        with self._tx() as db:
            db.execute("UPDATE entries SET attempts = attempts + 1 WHERE id = ?", (entry_id,))

    def trim_front(self, entry_id: int, count: int) -> None:
        """Drop the first ``count`` messages of an entry (they are on the server already)."""
        with self._tx() as db:
            _trim(db, entry_id, count)

    def confirm(
        self,
        identity: Identity,
        session_id: str,
        entry_ids: Sequence[int],
        count: int,
        total: int,
    ) -> None:
        """The first ``count`` messages of these entries (in order) are on the server, whose
        running total is now ``total``: drop them (whole entries, or the front of one), clear
        the in-flight record and remember the total, in one transaction, so a crash can never
        leave it half applied (and a later reconciliation drop the same messages twice)."""
        with self._tx() as db:
            marks = ",".join("?" * len(entry_ids))
            rows = db.execute(
                f"SELECT id, n FROM entries WHERE id IN ({marks}) ORDER BY id", tuple(entry_ids)
            ).fetchall()
            remaining = count
            for entry_id, n in rows:
                if n > remaining:
                    if remaining:
                        _trim(db, entry_id, remaining)
                    break
                db.execute("DELETE FROM entries WHERE id = ?", (entry_id,))  # (empty ones too)
                remaining -= n
            db.execute(
                "UPDATE sessions SET inflight_ids = NULL, inflight_base = NULL, "
                "inflight_n = NULL, known_total = ? WHERE identity = ? AND session_id = ?",
                (total, identity.key, session_id),
            )

    def reset_pending_tokens(self, identity: Identity, session_id: str) -> None:
        """A commit happened: the threshold counts from zero again."""
        with self._tx() as db:
            db.execute(
                "UPDATE sessions SET pending_tokens = 0 WHERE identity = ? AND session_id = ?",
                (identity.key, session_id),
            )

    def set_aside(self, entry_id: int, reason: str) -> None:
        """The server refused this entry for good: keep it, out of the way, with the reason."""
        with self._tx() as db:
            db.execute(
                "UPDATE entries SET state = 'set_aside', last_error = ? WHERE id = ?",
                (reason, entry_id),
            )


_HOST = socket.gethostname()


def _owner_is_gone(owner: str) -> bool:
    """Whether a lease holder (``host:pid:...``) was a process of this host that has exited."""
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != _HOST or not pid_text.isdigit():
        return False  # another machine, or an owner named by the caller: wait for expiry
    pid = int(pid_text)
    if pid == os.getpid():
        return False  # this process: another Outbox object of ours, still alive
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # exists, but not ours to signal
        return False
    return False


def _trim(db: sqlite3.Connection, entry_id: int, count: int) -> None:
    row = db.execute("SELECT payload FROM entries WHERE id = ?", (entry_id,)).fetchone()
    if row is None:
        return
    rest = json.loads(row[0])[count:]
    db.execute(
        "UPDATE entries SET payload = ?, n = ? WHERE id = ?",
        (json.dumps(rest), len(rest), entry_id),
    )


def _entry(row: Sequence[Any]) -> Entry:
    entry_id, session_id, kind, payload, n, attempts, state, last_error = row
    return Entry(
        int(entry_id),
        str(session_id),
        str(kind),
        json.loads(payload),
        int(n),
        int(attempts),
        str(state),
        last_error,
    )
