"""Background tasks (a commit's memory extraction) and the server's queue counters.

A task is a row in SQLite (so ``GET /api/v1/tasks/{id}`` survives a restart) plus, while it
runs, an ``asyncio.Task`` in the server's running event loop; nothing depends on ASGI lifespan
events, because ``httpx.ASGITransport`` never sends them. Status goes pending -> running ->
completed | failed. Tasks found pending or running when the server starts were interrupted by
a shutdown: they are **re-run** on the first request (or at lifespan startup under uvicorn);
their work is idempotent (memories are updated, not duplicated).
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from .auth import Identity
from .store import Store
from .util import iso_us, now

__all__ = ["QUEUES", "TaskManager", "TaskRow"]

logger = logging.getLogger(__name__)

QUEUES = (
    "Embedding",
    "Semantic",
    "ExternalParse",
    "AddResource",
    "Reindex",
    "ContentWrite",
    "SessionCommit",
    "ExternalTask",
    "UserDeletion",
)
_QUEUE_OF = {"session_commit": "SessionCommit", "add_resource": "AddResource"}


@dataclass(frozen=True)
class TaskRow:
    """What a runner gets: the task's id, owner and payload."""

    task_id: str
    account: str
    user: str
    payload: dict[str, Any]


Runner = Callable[[TaskRow], Awaitable[dict[str, Any]]]


def _task_json(row: Any) -> dict[str, Any]:
    status = row["status"]
    done = status in ("completed", "failed", "cancelled")
    started = row["started_at"]
    return {
        "task_id": row["task_id"],
        "task_type": row["task_type"],
        "status": status,
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
        "processing_seconds": (row["updated_at"] - started) if started is not None else None,
        "resource_id": row["resource_id"],
        "meta": {},
        "stage": status if done else None,
        "result": json.loads(row["result"]) if row["result"] else None,
        "error": row["error"],
        "created_at_iso": iso_us(row["created_at"]),
        "updated_at_iso": iso_us(row["updated_at"]),
    }


class TaskManager:
    """Creates, runs, resumes and reports tasks; counts what each queue processed."""

    def __init__(self, store: Store, stats: Counter[str]):
        self._store = store
        self.stats = stats
        self.errors: dict[str, list[str]] = {}
        self._runners: dict[str, Runner] = {}
        self._running: dict[str, asyncio.Task[None]] = {}
        self._resumed = False

    def register(self, task_type: str, runner: Runner) -> None:
        self._runners[task_type] = runner

    def create(
        self, identity: Identity, task_type: str, resource_id: str, payload: dict[str, Any]
    ) -> str:
        """A pending task (joins the caller's transaction); ``start`` runs it."""
        task_id = str(uuid.uuid4())
        stamp = now()
        self._store.run(
            "INSERT INTO tasks (task_id, account, user, task_type, status, created_at, "
            "updated_at, resource_id, payload) VALUES (?, ?, ?, ?, 'pending', ?, ?, ?, ?)",
            (
                task_id,
                identity.account,
                identity.user,
                task_type,
                stamp,
                stamp,
                resource_id,
                json.dumps(payload),
            ),
        )
        return task_id

    def record(
        self, identity: Identity, task_type: str, resource_id: str, result: dict[str, Any]
    ) -> str:
        """A task that is already done (work that completed inside the request)."""
        task_id = self.create(identity, task_type, resource_id, {})
        result["task_id"] = task_id
        stamp = now()
        self._store.run(
            "UPDATE tasks SET status = 'completed', stage = 'completed', started_at = ?, "
            "updated_at = ?, result = ? WHERE task_id = ?",
            (stamp, stamp, json.dumps(result), task_id),
        )
        queue = _QUEUE_OF.get(task_type)
        if queue:
            self.stats[queue] += 1
        return task_id

    def start(self, task_id: str) -> None:
        """Run a pending task in the current event loop."""
        if task_id in self._running:
            return
        task = asyncio.get_running_loop().create_task(self._run(task_id))
        self._running[task_id] = task
        task.add_done_callback(lambda _: self._running.pop(task_id, None))

    async def _run(self, task_id: str) -> None:
        row = self._store.one("SELECT * FROM tasks WHERE task_id = ?", (task_id,))
        if row is None:
            return
        queue = _QUEUE_OF.get(row["task_type"], "ExternalTask")
        stamp = now()
        self._store.run(
            "UPDATE tasks SET status = 'running', started_at = ?, updated_at = ? WHERE task_id = ?",
            (stamp, stamp, task_id),
        )
        runner = self._runners.get(row["task_type"])
        try:
            if runner is None:
                raise RuntimeError(f"no runner for task type {row['task_type']}")
            work = TaskRow(task_id, row["account"], row["user"], json.loads(row["payload"]))
            result = await runner(work)
        except asyncio.CancelledError:
            raise  # shutdown: the row stays 'running' and is re-run at the next start
        except Exception as exc:
            logger.exception("task %s (%s) failed", task_id, row["task_type"])
            message = f"{type(exc).__name__}: {exc}"
            self.errors.setdefault(queue, []).append(message)
            self._store.run(
                "UPDATE tasks SET status = 'failed', stage = 'failed', updated_at = ?, "
                "error = ? WHERE task_id = ?",
                (now(), message, task_id),
            )
            return
        self._store.run(
            "UPDATE tasks SET status = 'completed', stage = 'completed', updated_at = ?, "
            "result = ? WHERE task_id = ?",
            (now(), json.dumps(result), task_id),
        )
        self.stats[queue] += 1

    def resume(self) -> list[str]:
        """Re-run tasks a previous run of the server left unfinished (once per process)."""
        if self._resumed:
            return []
        self._resumed = True
        rows = self._store.all(
            "SELECT task_id FROM tasks WHERE status IN ('pending', 'running') ORDER BY created_at"
        )
        ids = [row["task_id"] for row in rows if row["task_id"] not in self._running]
        for task_id in ids:
            logger.info("re-running task %s interrupted by a restart", task_id)
            self.start(task_id)
        return ids

    def get(self, identity: Identity, task_id: str) -> dict[str, Any] | None:
        row = self._store.one(
            "SELECT * FROM tasks WHERE task_id = ? AND account = ? AND user = ?",
            (task_id, identity.account, identity.user),
        )
        return _task_json(row) if row else None

    def list_tasks(
        self,
        identity: Identity,
        *,
        task_type: str | None = None,
        status: str | None = None,
        resource_id: str | None = None,
        limit: int = 50,
    ) -> list[dict[str, Any]]:
        sql = "SELECT * FROM tasks WHERE account = ? AND user = ?"
        params: list[Any] = [identity.account, identity.user]
        for column, value in (
            ("task_type", task_type),
            ("status", status),
            ("resource_id", resource_id),
        ):
            if value is not None:
                sql += f" AND {column} = ?"
                params.append(value)
        sql += " ORDER BY created_at DESC LIMIT ?"
        params.append(max(1, limit))
        return [_task_json(row) for row in self._store.all(sql, params)]

    async def wait_idle(self, timeout: float | None) -> bool:
        """Wait until no task is running; False if ``timeout`` seconds passed first."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + max(0.0, timeout)
        while True:
            pending = [t for t in self._running.values() if not t.done()]
            if not pending:
                return True
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return False
            await asyncio.wait(pending, timeout=remaining)

    def queue_status(self) -> dict[str, dict[str, Any]]:
        return {
            queue: {
                "processed": self.stats[queue],
                "requeue_count": 0,
                "error_count": len(self.errors.get(queue, [])),
                "errors": self.errors.get(queue, [])[-10:],
            }
            for queue in QUEUES
        }

    async def shutdown(self) -> None:
        """Cancel running tasks (they are re-run at the next start)."""
        tasks = list(self._running.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
