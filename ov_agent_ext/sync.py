"""Sync: turns into the server's session history, exactly once, in order, never in the way.

``accept_turn`` only writes to the durable outbox (sub-millisecond) and nudges the background
flusher; the agent's turn never waits on the network. The flusher sends each session's entries
in order, batched (one request per flush, up to the server's 100 messages), and stops at the
first one that cannot go: nothing later is sent while an earlier entry is pending.

Exactly once. Before a batch leaves, the outbox records which entries it holds and the
session's running message total (``total_message_count``, which commits do not reset). If the
outcome is unknown (a timeout after sending, a crash mid-request), the next attempt first asks
the server for the total: the difference says how many of the batch's messages landed, and
only the rest is sent. A rejection the server will repeat (400, 403, 404...) sets the entry
aside with its reason; a batch is split first so one bad entry cannot hold back the others.

Commits: the threshold commit is queued after the turn that crossed ``commitTokenThreshold``
(pending tokens count tool parts, so tool-only turns count); ``commit_now`` (pre-compact,
shutdown, manual) flushes then commits and optionally waits for extraction, and if the server
is unreachable queues the commit durably to run when it is back, in this process or the next.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .client import BATCH_LIMIT, OVClient
from .config import OVConfig
from .errors import ClientError, NotFoundError
from .models import CommitResult, Message
from .outbox import Entry, Identity, Outbox, OutboxStats

__all__ = ["CommitReport", "FlushReport", "SyncManager", "identity_of"]

logger = logging.getLogger(__name__)

MAX_BACKOFF = 60.0  # seconds between retries of one entry, at most


def identity_of(config: OVConfig) -> Identity:
    return Identity.of(
        config.endpoint,
        config.account,
        config.user,
        config.peer_id,
        config.api_key.get_secret_value(),
    )


@dataclass(frozen=True)
class FlushReport:
    """What one flush did."""

    sent_messages: int = 0
    commits: int = 0
    set_aside: int = 0
    pending: int = 0  # entries still waiting for this identity afterwards
    error: str | None = None


@dataclass(frozen=True)
class CommitReport:
    """What ``commit_now`` did: committed (and maybe waited), or queued for later."""

    session_id: str
    status: str  # "committed" | "skipped" | "queued" | "failed"
    result: CommitResult | None = None
    error: str | None = None

    @property
    def memories_extracted(self) -> int:
        task = self.result.task if self.result else None
        return task.memories_extracted if task else 0


class _Blocked(Exception):
    """The session's head entry cannot be sent now: stop draining it."""


def _backoff(attempts: int) -> float:
    """Exponential with jitter, so many clients do not retry in lockstep."""
    delay: float = min(MAX_BACKOFF, 0.5 * 2.0 ** max(0, attempts - 1))
    return delay * random.uniform(0.5, 1.0)


class SyncManager:
    """Delivers one identity's outbox to the server; owns the background flusher."""

    def __init__(
        self,
        client: OVClient,
        config: OVConfig,
        outbox: Outbox,
        *,
        on_commit: Callable[[str, CommitResult], Awaitable[None]] | None = None,
    ):
        self.client = client
        self.config = config
        self.outbox = outbox
        self.identity = identity_of(config)
        self.on_commit = on_commit
        self.last_flush: FlushReport | None = None
        self.last_commit: CommitReport | None = None
        self._queued_since_flush = 0
        self._wake = asyncio.Event()
        self._flusher: asyncio.Task[None] | None = None
        self._closing = False
        self._flush_lock = asyncio.Lock()
        self._last_block_error: str | None = None

    # --- the hot path -------------------------------------------------------------------------

    def accept_turn(
        self, session_id: str, turn_index: int, messages: Sequence[Message], tokens: int
    ) -> bool:
        """Make a turn durable (or advance past a skipped one); never touches the network.

        Returns False when this turn index was already accepted (a retried ``turn_end``).
        """
        queued = self.outbox.enqueue_turn(
            self.identity, session_id, turn_index, [m.to_request() for m in messages], tokens
        )
        if queued and messages:
            self._after_enqueue(session_id)
        return queued

    def accept_messages(self, session_id: str, messages: Sequence[Message], tokens: int) -> int:
        """Queue messages outside the turn sequence (a remembered fact); returns the entry id."""
        entry_id = self.outbox.enqueue_messages(
            self.identity, session_id, [m.to_request() for m in messages], tokens
        )
        self._after_enqueue(session_id)
        return entry_id

    def _after_enqueue(self, session_id: str) -> None:
        self._queued_since_flush += 1
        threshold = self.config.commit_token_threshold
        if threshold and self.outbox.session_state(self.identity, session_id).pending_tokens >= (
            threshold
        ):
            # Queued behind the turn that crossed it: runs once that turn is on the server.
            self.outbox.enqueue_commit(self.identity, session_id)
            self._wake.set()
        if self._queued_since_flush >= self.config.write_queue_flush_threshold:
            self._wake.set()

    # --- the background flusher -------------------------------------------------------------

    def start(self) -> None:
        """Start flushing in the background (every ``writeQueueFlushInterval`` ms, or sooner
        at the flush threshold). Pending entries from earlier runs go out first."""
        if self._flusher is None or self._flusher.done():
            self._closing = False
            self._flusher = asyncio.get_running_loop().create_task(self._run())
            self._wake.set()

    async def _run(self) -> None:
        interval = self.config.write_queue_flush_interval / 1000
        while not self._closing:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=interval)
            self._wake.clear()
            if self._closing:
                break
            if not self.client.breaker.allow():
                continue  # the server is down: the breaker's probe decides when to resume
            try:
                await self.flush(due_only=True)
            except Exception:  # the flusher must outlive any single failure
                logger.exception("background flush failed")

    async def aclose(self, *, deadline: float = 5.0) -> FlushReport:
        """Stop the flusher after one last flush within ``deadline`` seconds."""
        self._closing = True
        self._wake.set()
        if self._flusher is not None:
            await asyncio.gather(self._flusher, return_exceptions=True)
            self._flusher = None
        return await self.flush(deadline=deadline)

    def nudge(self) -> None:
        """Flush soon (after a server came back, or on request)."""
        self._wake.set()

    # --- flushing -------------------------------------------------------------------------------

    async def flush(
        self,
        session_id: str | None = None,
        *,
        deadline: float | None = None,
        due_only: bool = False,
    ) -> FlushReport:
        """Send what is queued, in order, within ``deadline`` seconds if given. The background
        flusher passes ``due_only`` to respect each entry's retry backoff; an explicit flush
        (pre-compact, shutdown, a command) tries everything now."""
        async with self._flush_lock:
            self._queued_since_flush = 0
            counts = {"sent": 0, "commits": 0, "set_aside": 0}
            error: str | None = None
            try:
                work = self._drain_all(session_id, counts, due_only=due_only)
                if deadline is None:
                    await work
                else:
                    await asyncio.wait_for(work, timeout=deadline)
            except asyncio.TimeoutError:
                error = f"flush did not finish within {deadline:g}s; the rest stays queued"
            except ClientError as exc:
                error = str(exc)
            stats = self.outbox.stats(self.identity)
            report = FlushReport(
                sent_messages=counts["sent"],
                commits=counts["commits"],
                set_aside=counts["set_aside"],
                pending=stats.pending,
                error=error or self._last_block_error,
            )
            self.last_flush = report
            return report

    async def _drain_all(self, only: str | None, counts: dict[str, int], *, due_only: bool) -> None:
        self._last_block_error = None
        if only is not None:
            sessions = [only]
        else:
            sessions = self.outbox.sessions_with_work(self.identity, due_only=due_only)
        for session_id in sessions:
            if not self.outbox.claim(self.identity, session_id):
                continue  # another process is sending this session
            try:
                await self._drain(session_id, counts)
            except _Blocked as blocked:
                self._last_block_error = str(blocked)
            finally:
                self.outbox.release(self.identity, session_id)

    async def _drain(self, session_id: str, counts: dict[str, int]) -> None:
        state = self.outbox.session_state(self.identity, session_id)
        if state.inflight is not None:
            counts["sent"] += await self._reconcile(session_id)
        while True:
            entries = self.outbox.head(self.identity, session_id, max_messages=BATCH_LIMIT)
            if not entries:
                return
            if entries[0].kind == "commit":
                await self._send_commit(session_id, entries[0], counts)
            else:
                await self._send_messages(session_id, entries, counts)

    async def _server_total(self, session_id: str) -> int:
        try:
            info = await self.client.get_session(session_id)
        except NotFoundError:
            return 0  # the first message will create it
        return info.total_message_count

    async def _reconcile(self, session_id: str) -> int:
        """An earlier send's outcome is unknown: ask the server how much of it landed (and
        return that many, now confirmed)."""
        inflight = self.outbox.session_state(self.identity, session_id).inflight
        if inflight is None:
            return 0
        try:
            total = await self._server_total(session_id)
        except ClientError as exc:
            raise _Blocked(str(exc)) from exc
        landed = max(0, min(inflight.n, total - inflight.base_total))
        entries = self.outbox.entries(inflight.entry_ids)
        if landed >= inflight.n:
            self.outbox.complete(self.identity, session_id, inflight.entry_ids, total)
            return landed
        # Drop what landed from the front of the batch; the rest is sent again.
        done: list[int] = []
        remaining = landed
        for entry in entries:
            if remaining <= 0:
                break
            if entry.n <= remaining:
                done.append(entry.id)
                remaining -= entry.n
            else:
                self.outbox.trim_front(entry.id, remaining)
                remaining = 0
        if done:
            self.outbox.complete(self.identity, session_id, done, total)
        self.outbox.clear_inflight(self.identity, session_id)
        self.outbox.set_known_total(self.identity, session_id, total)
        return landed

    async def _send_messages(
        self, session_id: str, entries: Sequence[Entry], counts: dict[str, int]
    ) -> None:
        state = self.outbox.session_state(self.identity, session_id)
        try:
            base = state.known_total
            if base is None:
                base = await self._server_total(session_id)
        except ClientError as exc:
            self.outbox.retry_later([e.id for e in entries], str(exc), _backoff(1))
            raise _Blocked(str(exc)) from exc
        payload = [m for e in entries for m in e.payload]
        ids = [e.id for e in entries]
        self.outbox.begin_send(self.identity, session_id, ids, base, len(payload))
        try:
            await self.client.add_messages(session_id, [Message.model_validate(m) for m in payload])
        except ClientError as exc:
            if exc.retryable:
                # Outcome unknown (or known not to have landed): the in-flight record stays,
                # and the next attempt reconciles before sending anything.
                attempts = max(e.attempts for e in entries) + 1
                self.outbox.retry_later(ids, str(exc), _backoff(attempts))
                raise _Blocked(str(exc)) from exc
            self.outbox.clear_inflight(self.identity, session_id)
            self.outbox.set_known_total(self.identity, session_id, base)
            if len(entries) > 1:  # find the one the server refuses; send the others
                for entry in entries:
                    await self._send_messages(session_id, [entry], counts)
                return
            logger.error("server refused queued messages for good: %s", exc)
            self.outbox.set_aside(entries[0].id, str(exc))
            counts["set_aside"] += 1
            return
        self.outbox.complete(self.identity, session_id, ids, base + len(payload))
        counts["sent"] += len(payload)

    async def _send_commit(self, session_id: str, entry: Entry, counts: dict[str, int]) -> None:
        options = entry.payload if isinstance(entry.payload, dict) else {}
        try:
            result = await self.client.commit(session_id, **options)
        except ClientError as exc:
            if exc.retryable:
                # Sending a commit twice is harmless: with nothing new it is "skipped".
                self.outbox.retry_later([entry.id], str(exc), _backoff(entry.attempts + 1))
                self.outbox.count_attempt(entry.id)
                raise _Blocked(str(exc)) from exc
            self.outbox.set_aside(entry.id, str(exc))
            counts["set_aside"] += 1
            return
        self.outbox.complete(self.identity, session_id, [entry.id], None)
        counts["commits"] += 1
        self.last_commit = CommitReport(session_id, "committed", result)
        if self.on_commit is not None:
            await self.on_commit(session_id, result)

    # --- commits on demand --------------------------------------------------------------------

    async def commit_now(
        self,
        session_id: str,
        *,
        wait: bool,
        timeout: float,
        enable_working_memory: bool | None = None,
    ) -> CommitReport:
        """Flush the session, then commit it (and wait for extraction when ``wait``), all
        within ``timeout`` seconds. If the server cannot be reached, or queued writes for the
        session are still waiting, the commit is queued behind them durably instead."""
        started = time.monotonic()
        flushed = await self.flush(session_id, deadline=timeout)
        left = self.outbox.head(self.identity, session_id, max_messages=BATCH_LIMIT)
        if left:
            self.outbox.enqueue_commit(self.identity, session_id, _options(enable_working_memory))
            report = CommitReport(session_id, "queued", error=flushed.error or "writes pending")
            self.last_commit = report
            return report
        remaining = max(0.1, timeout - (time.monotonic() - started))
        try:
            if wait:
                result = await self.client.commit_and_wait(
                    session_id, timeout=remaining, enable_working_memory=enable_working_memory
                )
            else:
                result = await self.client.commit(
                    session_id, enable_working_memory=enable_working_memory
                )
        except ClientError as exc:
            if exc.retryable:
                self.outbox.enqueue_commit(
                    self.identity, session_id, _options(enable_working_memory)
                )
                report = CommitReport(session_id, "queued", error=str(exc))
            else:
                report = CommitReport(session_id, "failed", error=str(exc))
            self.last_commit = report
            return report
        self.outbox.reset_pending_tokens(self.identity, session_id)
        status = "skipped" if result.status == "skipped" else "committed"
        report = CommitReport(session_id, status, result)
        self.last_commit = report
        if self.on_commit is not None and status == "committed":
            await self.on_commit(session_id, result)
        return report

    def stats(self) -> OutboxStats:
        return self.outbox.stats(self.identity)


def _options(enable_working_memory: bool | None) -> dict[str, Any]:
    return {} if enable_working_memory is None else {"enable_working_memory": enable_working_memory}
