"""Sessions: messages, commits (archive inline, extraction as a task), archives and context.

A session belongs to one user of one account. Messages are rows numbered in arrival order;
a commit moves all but the last ``keep_recent_count`` live messages into the next archive
(``viking://user/<user>/sessions/<id>/history/archive_NNN``) in the same transaction and
queues a ``session_commit`` task, which extracts memories from the archived user statements
and writes the archive's L0/L1 summaries (and, with ``enable_working_memory``, the overview
``/context`` returns as ``latest_archive_overview``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from typing import Any

from .auth import Identity
from .errors import ApiError, already_exists, invalid_argument, not_found
from .extract import MemoryOp, merge
from .messages import message_json, message_tokens, normalize_parts, summary_line
from .paths import to_uri
from .schemas import AddMessageRequest, CommitRequest
from .store import Store
from .tasks import TaskManager, TaskRow
from .util import estimate_tokens, iso_ms, iso_us, new_id, now
from .vfs import Vfs

__all__ = ["Extractor", "Sessions"]

Extractor = Callable[[list[dict[str, Any]], str, datetime], Awaitable[list[MemoryOp]]]

_SESSION_ID = re.compile(r"^[^/\\\x00-\x1f.][^/\\\x00-\x1f]{0,255}$")  # one safe path segment
_ARCHIVE_ID = re.compile(r"^archive_(\d{3,})$")
_WM_LINES = 12  # the working-memory overview keeps the last lines of the archive


class Sessions:
    """Session operations for one server (all scoped to the caller's account and user)."""

    def __init__(self, store: Store, vfs: Vfs, tasks: TaskManager, extractor: Extractor):
        self._store = store
        self._vfs = vfs
        self._tasks = tasks
        self._extract = extractor
        tasks.register("session_commit", self._run_commit)

    # --- lookup -------------------------------------------------------------------------------

    @staticmethod
    def _check_id(session_id: str) -> None:
        if not _SESSION_ID.match(session_id):
            raise invalid_argument(f"Invalid session id: {session_id!r}")

    def _row(self, identity: Identity, session_id: str) -> Any:
        return self._store.one(
            "SELECT * FROM sessions WHERE account = ? AND user = ? AND session_id = ?",
            (identity.account, identity.user, session_id),
        )

    def _require(self, identity: Identity, session_id: str) -> Any:
        row = self._row(identity, session_id)
        if row is None:
            raise not_found(f"Session not found: {session_id}", "session", session_id)
        return row

    @staticmethod
    def _path(user: str, session_id: str) -> str:
        return f"user/{user}/sessions/{session_id}"

    def _live_count(self, identity: Identity, session_id: str) -> int:
        row = self._store.one(
            "SELECT COUNT(*) AS n FROM messages WHERE account = ? AND user = ? "
            "AND session_id = ? AND archive = 0",
            (identity.account, identity.user, session_id),
        )
        return int(row["n"]) if row else 0

    # --- create, read, delete -----------------------------------------------------------------

    def _insert(self, identity: Identity, session_id: str) -> None:
        stamp = now()
        self._vfs.ensure_user_space(identity.account, identity.user)
        self._store.run(
            "INSERT INTO sessions (account, user, session_id, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (identity.account, identity.user, session_id, stamp, stamp),
        )
        self._vfs.mkdir(identity.account, self._path(identity.user, session_id))

    def create(self, identity: Identity, session_id: str | None) -> dict[str, Any]:
        if session_id is None:
            stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
            session_id = f"{stamp}-{new_id()[:16]}"
        self._check_id(session_id)
        with self._store.transaction():
            if self._row(identity, session_id) is not None:
                message = f"Session '{session_id}' already exists"
                raise already_exists(f"Resource already exists: {message}", message, "resource")
            self._insert(identity, session_id)
        return {
            "session_id": session_id,
            "uri": to_uri(self._path(identity.user, session_id)),
            "user": {"account_id": identity.account, "user_id": identity.user},
            "auto_commit_policy": None,
            "memory_extraction_config": {"events": {"tags": []}},
        }

    def ensure(self, identity: Identity, session_id: str) -> None:
        """Create the session when it does not exist (``GET ...?auto_create=true``)."""
        self._check_id(session_id)
        with self._store.transaction():
            if self._row(identity, session_id) is None:
                self._insert(identity, session_id)

    def info(self, identity: Identity, session_id: str) -> dict[str, Any]:
        row = self._row(identity, session_id)
        if row is None:
            raise ApiError(404, "NOT_FOUND", f"Session {session_id} not found", short=True)
        memories = json.loads(row["memories"])
        return {
            "session_id": session_id,
            "created_at": iso_ms(row["created_at"]),
            "updated_at": iso_ms(row["updated_at"]),
            "created_by_account_id": identity.account,
            "created_by_user_id": identity.user,
            "message_count": self._live_count(identity, session_id),
            "commit_count": row["commit_count"],
            "memories_extracted": {"total": sum(memories.values()), **memories},
            "last_commit_at": iso_ms(row["last_commit_at"]) if row["last_commit_at"] else "",
            "llm_token_usage": {
                "prompt_tokens": 0,
                "completion_tokens": 0,
                "total_tokens": 0,
                "cached_tokens": 0,
                "reasoning_tokens": 0,
            },
            "embedding_token_usage": {"total_tokens": 0},
            "pending_tokens": row["pending_tokens"],
            "keep_recent_count": row["keep_recent_count"],
            "retention_mode": "",
            "keep_recent_turn_count": 0,
            "retained_message_token_budget": 0,
            "min_raw_tail_steps": 1,
            "memory_policy": None,
            "auto_commit_policy": None,
            "last_message_at": iso_ms(row["last_message_at"]) if row["last_message_at"] else "",
            "last_auto_commit_at": "",
            "last_idle_commit_accepted_at": "",
            "total_message_count": row["total_message_count"],
            "uri": to_uri(self._path(identity.user, session_id)),
            "user": {"account_id": identity.account, "user_id": identity.user},
            "memory_extraction_config": {"events": {"tags": []}},
        }

    def list_sessions(self, identity: Identity) -> list[dict[str, Any]]:
        rows = self._store.all(
            "SELECT session_id, updated_at FROM sessions WHERE account = ? AND user = ? "
            "ORDER BY updated_at DESC",
            (identity.account, identity.user),
        )
        return [
            {
                "session_id": row["session_id"],
                "uri": to_uri(self._path(identity.user, row["session_id"])),
                "is_dir": True,
                "mod_time": iso_ms(row["updated_at"])[:19] + "Z",
            }
            for row in rows
        ]

    def delete(self, identity: Identity, session_id: str) -> dict[str, Any]:
        key = (identity.account, identity.user, session_id)
        with self._store.transaction():
            self._require(identity, session_id)
            for table in ("messages", "archives", "sessions"):
                self._store.run(
                    f"DELETE FROM {table} WHERE account = ? AND user = ? AND session_id = ?", key
                )
            self._vfs.delete(
                identity.account, self._path(identity.user, session_id), recursive=True
            )
        return {"session_id": session_id}

    # --- messages -----------------------------------------------------------------------------

    def add(
        self, identity: Identity, session_id: str, messages: list[AddMessageRequest]
    ) -> dict[str, Any]:
        """Append messages in order (one transaction); creates the session if needed."""
        self._check_id(session_id)
        stamp = now()
        with self._store.transaction():
            row = self._row(identity, session_id)
            if row is None:
                self._insert(identity, session_id)
                row = self._row(identity, session_id)
            seq, tokens = row["next_seq"], 0
            for message in messages:
                parts = normalize_parts(message)
                count = message_tokens(parts)
                tokens += count
                self._store.run(
                    "INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0)",
                    (
                        identity.account,
                        identity.user,
                        session_id,
                        seq,
                        new_id("msg_"),
                        message.role,
                        json.dumps(parts, ensure_ascii=False),
                        message.created_at or iso_us(stamp),
                        count,
                    ),
                )
                seq += 1
            self._store.run(
                "UPDATE sessions SET next_seq = ?, total_message_count = total_message_count + ?, "
                "pending_tokens = pending_tokens + ?, last_message_at = ?, updated_at = ? "
                "WHERE account = ? AND user = ? AND session_id = ?",
                (
                    seq,
                    len(messages),
                    tokens,
                    stamp,
                    stamp,
                    identity.account,
                    identity.user,
                    session_id,
                ),
            )
            pending = row["pending_tokens"] + tokens
            count = self._live_count(identity, session_id)
        return {
            "session_id": session_id,
            "message_count": count,
            "added": len(messages),
            "pending_tokens": pending,
        }

    def _messages(self, identity: Identity, session_id: str, archive: int) -> list[dict[str, Any]]:
        rows = self._store.all(
            "SELECT id, role, parts, created_at FROM messages WHERE account = ? AND user = ? "
            "AND session_id = ? AND archive = ? ORDER BY seq",
            (identity.account, identity.user, session_id, archive),
        )
        return [message_json(row) for row in rows]

    # --- commit -------------------------------------------------------------------------------

    def commit(self, identity: Identity, session_id: str, request: CommitRequest) -> dict[str, Any]:
        """Archive the older live messages now; the extraction task is returned, not started."""
        working_memory = bool(request.enable_working_memory)
        answer: dict[str, Any] = {
            "session_id": session_id,
            "status": "skipped",
            "task_id": None,
            "archive_uri": None,
            "archived": False,
            "effective_enable_working_memory": False,
            "trace_id": "",
            "estimated_active_tokens": 0,
            "budget_exceeded": False,
        }
        key = (identity.account, identity.user, session_id)
        with self._store.transaction():
            row = self._require(identity, session_id)
            live = self._store.all(
                "SELECT seq FROM messages WHERE account = ? AND user = ? AND session_id = ? "
                "AND archive = 0 ORDER BY seq",
                key,
            )
            keep = request.keep_recent_count
            if not live:
                return {**answer, "reason": "no_messages"}
            if len(live) <= keep:
                return {**answer, "reason": "all_within_keep_window"}
            last = live[len(live) - keep - 1]["seq"]
            number = row["archive_count"] + 1
            self._store.run(
                "UPDATE messages SET archive = ? WHERE account = ? AND user = ? "
                "AND session_id = ? AND archive = 0 AND seq <= ?",
                (number, *key, last),
            )
            archive_path = f"{self._path(identity.user, session_id)}/history/archive_{number:03d}"
            archived = self._messages(identity, session_id, number)
            self._vfs.write(
                identity.account,
                f"{archive_path}/messages.jsonl",
                "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in archived),
            )
            task_id = self._tasks.create(
                identity,
                "session_commit",
                session_id,
                {"session_id": session_id, "archive": number, "working_memory": working_memory},
            )
            stamp = now()
            self._store.run(
                "INSERT INTO archives VALUES (?, ?, ?, ?, ?, ?, ?)",
                (*key, number, stamp, task_id, int(working_memory)),
            )
            self._store.run(
                "UPDATE sessions SET commit_count = commit_count + 1, archive_count = ?, "
                "pending_tokens = 0, last_commit_at = ?, keep_recent_count = ?, updated_at = ? "
                "WHERE account = ? AND user = ? AND session_id = ?",
                (number, stamp, keep, stamp, *key),
            )
        return {
            **answer,
            "status": "accepted",
            "task_id": task_id,
            "archive_uri": to_uri(archive_path),
            "archived": True,
            "effective_enable_working_memory": working_memory,
        }

    async def _run_commit(self, task: TaskRow) -> dict[str, Any]:
        """The commit task: extract memories, then write the archive's summaries."""
        identity = Identity(task.account, task.user, "user")
        session_id, number = task.payload["session_id"], int(task.payload["archive"])
        messages = self._messages(identity, session_id, number)
        ops = await self._extract(messages, identity.user, datetime.now(timezone.utc))
        counts = {"memory_write": 0, "memory_edit": 0}
        kinds: set[str] = set()
        by_file: dict[str, list[MemoryOp]] = {}
        for op in ops:  # one write per file, however many statements touch it
            by_file.setdefault(f"user/{identity.user}/memories/{op.rel_path}", []).append(op)
        for path, file_ops in by_file.items():
            before = self._vfs.read(identity.account, path)
            after = before
            for op in file_ops:
                after = merge(after, op)
            if after == before or after is None:
                continue
            self._vfs.write(identity.account, path, after, "replace")
            counts["memory_write" if before is None else "memory_edit"] += 1
            kinds.add(file_ops[0].kind)
        archive_path = f"{self._path(identity.user, session_id)}/history/archive_{number:03d}"
        lines = [summary_line(m) for m in messages]
        first_user = next((line[8:] for line in lines if line.startswith("- user: ")), "")
        abstract = f"Conversation of {len(messages)} messages. {first_user}".strip()[:256]
        overview = "# Working Memory\n\n## Session Summary\n" + (
            "\n".join(lines[-_WM_LINES:]) or "- (empty)"
        )
        self._vfs.set_summary(identity.account, archive_path, abstract, overview)
        extracted = {k: v for k, v in counts.items() if v or k == "memory_write"}
        with self._store.transaction():
            row = self._row(identity, session_id)
            if row is not None:
                totals = json.loads(row["memories"])
                for name, value in extracted.items():
                    totals[name] = totals.get(name, 0) + value
                stamp = now()
                self._store.run(
                    "UPDATE sessions SET memories = ?, last_commit_at = ?, updated_at = ? "
                    "WHERE account = ? AND user = ? AND session_id = ?",
                    (json.dumps(totals), stamp, stamp, task.account, task.user, session_id),
                )
        return {
            "session_id": session_id,
            "archive_uri": to_uri(archive_path),
            "memories_extracted": extracted,
            "effective_memory_types": sorted(kinds),
            "agent_evolution_enabled": False,
        }

    # --- archives and context -----------------------------------------------------------------

    def archive(self, identity: Identity, session_id: str, archive_id: str) -> dict[str, Any]:
        self._require(identity, session_id)
        match = _ARCHIVE_ID.match(archive_id)
        row = None
        if match:
            row = self._store.one(
                "SELECT archive_no FROM archives WHERE account = ? AND user = ? "
                "AND session_id = ? AND archive_no = ?",
                (identity.account, identity.user, session_id, int(match.group(1))),
            )
        if row is None:
            raise ApiError(404, "NOT_FOUND", f"Archive {archive_id} not found", short=True)
        number = row["archive_no"]
        path = f"{self._path(identity.user, session_id)}/history/archive_{number:03d}"
        return {
            "archive_id": archive_id,
            "abstract": self._vfs.read(identity.account, f"{path}/.abstract.md") or "",
            "overview": self._vfs.read(identity.account, f"{path}/.overview.md") or "",
            "messages": self._messages(identity, session_id, number),
        }

    def context(self, identity: Identity, session_id: str, token_budget: int) -> dict[str, Any]:
        row = self._require(identity, session_id)
        live = self._store.all(
            "SELECT id, role, parts, created_at, tokens FROM messages WHERE account = ? "
            "AND user = ? AND session_id = ? AND archive = 0 ORDER BY seq",
            (identity.account, identity.user, session_id),
        )
        active = sum(r["tokens"] for r in live)
        latest = self._store.one(
            "SELECT archive_no FROM archives WHERE account = ? AND user = ? AND session_id = ? "
            "AND working_memory = 1 ORDER BY archive_no DESC LIMIT 1",
            (identity.account, identity.user, session_id),
        )
        overview = ""
        if latest is not None:
            path = (
                f"{self._path(identity.user, session_id)}/history/"
                f"archive_{latest['archive_no']:03d}/.overview.md"
            )
            overview = self._vfs.read(identity.account, path) or ""
        archive_tokens = estimate_tokens(overview) if overview else 0
        if active + archive_tokens > token_budget:  # live messages first; the overview if it fits
            overview, archive_tokens = "", 0
        total = row["archive_count"]
        return {
            "latest_archive_overview": overview,
            "pre_archive_abstracts": [],
            "messages": [message_json(r) for r in live],
            "estimatedTokens": active + archive_tokens,
            "stats": {
                "totalArchives": total,
                "includedArchives": 0,
                "droppedArchives": total,
                "failedArchives": 0,
                "activeTokens": active,
                "archiveTokens": archive_tokens,
            },
        }
