"""SQLite storage: one database file under the data directory, WAL mode.

Every piece of state lives here, so a restart loses nothing: the viking:// tree (``nodes``:
files, directories and their summaries), sessions and their messages (live and archived),
archives, background tasks, accounts and user key hashes, temporary uploads. The search
index is derived data, rebuilt from ``nodes`` at start.

One connection, guarded by a re-entrant lock: the server calls the store from its event-loop
thread with short statements, and the lock keeps it safe if another thread (a test, the
``serve`` command's signal handling) touches it. ``transaction()`` nests: only the outermost
level begins and commits, so a service can compose smaller writes into one atomic change.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["DB_NAME", "SCHEMA_VERSION", "Store"]

DB_NAME = "ov-reference.sqlite3"
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS accounts (
    account_id TEXT PRIMARY KEY,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS users (
    account_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    role TEXT NOT NULL,
    key_hash TEXT UNIQUE,
    created_at REAL NOT NULL,
    PRIMARY KEY (account_id, user_id)
);
CREATE TABLE IF NOT EXISTS nodes (
    account TEXT NOT NULL,
    path TEXT NOT NULL,
    parent TEXT NOT NULL,
    name TEXT NOT NULL,
    is_dir INTEGER NOT NULL,
    content TEXT NOT NULL DEFAULT '',
    tags TEXT NOT NULL DEFAULT '[]',
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    id TEXT NOT NULL,
    PRIMARY KEY (account, path)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS nodes_by_parent ON nodes (account, parent, name);
CREATE TABLE IF NOT EXISTS sessions (
    account TEXT NOT NULL,
    user TEXT NOT NULL,
    session_id TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    commit_count INTEGER NOT NULL DEFAULT 0,
    total_message_count INTEGER NOT NULL DEFAULT 0,
    pending_tokens INTEGER NOT NULL DEFAULT 0,
    last_commit_at REAL,
    last_message_at REAL,
    archive_count INTEGER NOT NULL DEFAULT 0,
    next_seq INTEGER NOT NULL DEFAULT 0,
    keep_recent_count INTEGER NOT NULL DEFAULT 0,
    memories TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (account, user, session_id)
);
CREATE TABLE IF NOT EXISTS messages (
    account TEXT NOT NULL,
    user TEXT NOT NULL,
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    id TEXT NOT NULL,
    role TEXT NOT NULL,
    parts TEXT NOT NULL,
    created_at TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    archive INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (account, user, session_id, seq)
);
CREATE INDEX IF NOT EXISTS messages_by_archive
    ON messages (account, user, session_id, archive, seq);
CREATE TABLE IF NOT EXISTS archives (
    account TEXT NOT NULL,
    user TEXT NOT NULL,
    session_id TEXT NOT NULL,
    archive_no INTEGER NOT NULL,
    created_at REAL NOT NULL,
    task_id TEXT,
    working_memory INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (account, user, session_id, archive_no)
);
CREATE TABLE IF NOT EXISTS tasks (
    task_id TEXT PRIMARY KEY,
    account TEXT NOT NULL,
    user TEXT NOT NULL,
    task_type TEXT NOT NULL,
    status TEXT NOT NULL,
    stage TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    started_at REAL,
    resource_id TEXT,
    payload TEXT NOT NULL DEFAULT '{}',
    result TEXT,
    error TEXT
);
CREATE INDEX IF NOT EXISTS tasks_by_owner ON tasks (account, user, created_at);
CREATE INDEX IF NOT EXISTS tasks_by_status ON tasks (status);
CREATE TABLE IF NOT EXISTS uploads (
    temp_file_id TEXT PRIMARY KEY,
    account TEXT NOT NULL,
    user TEXT NOT NULL,
    filename TEXT NOT NULL,
    data BLOB NOT NULL,
    created_at REAL NOT NULL
);
"""


class Store:
    """The server's SQLite database (created on first use)."""

    def __init__(self, data_dir: Path):
        data_dir.mkdir(parents=True, exist_ok=True)
        self.path = data_dir / DB_NAME
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._conn.row_factory = sqlite3.Row
        self._lock = threading.RLock()
        self._depth = 0
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA busy_timeout=5000")
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise RuntimeError(
                    f"{self.path} was written by a newer server (schema {version} > "
                    f"{SCHEMA_VERSION})"
                )
            self._conn.executescript(_SCHEMA)
            self._conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic change; nested uses join the outermost transaction."""
        with self._lock:
            outermost = self._depth == 0
            if outermost:
                self._conn.execute("BEGIN IMMEDIATE")
            self._depth += 1
            try:
                yield self._conn
            except BaseException:
                self._depth -= 1
                if outermost:
                    self._conn.execute("ROLLBACK")
                raise
            self._depth -= 1
            if outermost:
                self._conn.execute("COMMIT")

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def one(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        with self._lock:
            row: sqlite3.Row | None = self._conn.execute(sql, params).fetchone()
            return row

    def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Execute one statement (inside the current transaction, if any); rows changed."""
        with self._lock:
            return self._conn.execute(sql, params).rowcount

    def close(self) -> None:
        with self._lock:
            self._conn.close()
