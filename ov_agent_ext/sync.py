"""Sync: turns into the server's session history, exactly once, in order, never in the way.

``accept_turn`` only writes to the durable outbox (sub-millisecond) and nudges the background
flusher; the agent's turn never waits on the network. The flusher sends each session's entries
in order, batched (one request per batch of up to the server's 100 messages; a larger entry
goes 100 at a time), and stops at the first one that cannot go: nothing later is sent while an
earlier entry is pending.

Exactly once. Before a request leaves, the outbox records which entries it holds and the
session's running message total (``total_message_count``, which commits do not reset); its
answer confirms it in one transaction. If the outcome is unknown (a timeout after sending, a
crash mid-request), the next attempt first asks the server for the total: the difference says
how many of the request's messages landed, and only the rest is sent. A rejection the server
will repeat (400, 403, 404...) is reconciled the same way, then the batch is split so that only
the entry the server refuses is set aside, with its reason; so is an entry that cannot be
encoded as JSON at all.

Commits: the threshold commit is queued after the turn that crossed ``commitTokenThreshold``
(pending tokens count tool parts, so tool-only turns count); ``commit_now`` (pre-compact,
shutdown, manual) flushes then commits and optionally waits for extraction, and if the server
is unreachable queues the commit durably to run when it is back, in this process or the next.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
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
from .outbox import Enqueued, Entry, Identity, Outbox, OutboxStats

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


@dataclass
class _Progress:
    """What one flush did so far."""

    sent: int = 0
    commits: int = 0
    set_aside: int = 0
    blocked: str | None = None  # why the last blocked session stopped


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

    # --- the hot path -------------------------------------------------------------------------

    def accept_turn(
        self, session_id: str, turn_index: int, messages: Sequence[Message], tokens: int
    ) -> bool:
        """Make a turn durable (or advance past a skipped one); never touches the network.

        Returns False when this turn index was already accepted (a retried ``turn_end``).
        """
        queued = self.outbox.enqueue_turn(
            self.identity,
            session_id,
            turn_index,
            [m.to_request() for m in messages],
            tokens,
            commit_at=self.config.commit_token_threshold,
        )
        if queued and messages:
            self._after_enqueue(commit_queued=queued is Enqueued.QUEUED_WITH_COMMIT)
        return bool(queued)

    def accept_messages(self, session_id: str, messages: Sequence[Message], tokens: int) -> int:
        """Queue messages outside the turn sequence (a remembered fact); returns the entry id."""
        entry_id = self.outbox.enqueue_messages(
            self.identity,
            session_id,
            [m.to_request() for m in messages],
            tokens,
            commit_at=self.config.commit_token_threshold,
        )
        self._after_enqueue(commit_queued=True)  # rare: just let the flusher look now
        return entry_id

    def _after_enqueue(self, *, commit_queued: bool) -> None:
        # The threshold commit, if due, was queued behind the turn in the same transaction;
        # it runs once that turn is on the server.
        self._queued_since_flush += 1
        if commit_queued or self._queued_since_flush >= self.config.write_queue_flush_threshold:
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
        """Stop the flusher and make one last flush, all within ``deadline`` seconds.

        A background send still waiting on the server when the deadline comes is cancelled:
        its entries stay queued with their in-flight record, reconciled by the next run.
        """
        started = time.monotonic()
        self._closing = True
        self._wake.set()
        if self._flusher is not None:
            flusher, self._flusher = self._flusher, None
            _, running = await asyncio.wait({flusher}, timeout=deadline)
            if running:
                flusher.cancel()
            await asyncio.gather(flusher, return_exceptions=True)
        return await self.flush(deadline=max(0.0, deadline - (time.monotonic() - started)))

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
        """Send what is queued, in order, within ``deadline`` seconds if given (waiting for a
        flush already running counts against it). The background flusher passes ``due_only``
        to respect each entry's retry backoff; an explicit flush (pre-compact, shutdown, a
        command) tries everything now."""
        progress = _Progress()
        error: str | None = None
        try:
            work = self._locked_drain(session_id, progress, due_only=due_only)
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
            sent_messages=progress.sent,
            commits=progress.commits,
            set_aside=progress.set_aside,
            pending=stats.pending,
            error=error or progress.blocked,
        )
        self.last_flush = report
        return report

    async def _locked_drain(self, only: str | None, progress: _Progress, *, due_only: bool) -> None:
        async with self._flush_lock:
            self._queued_since_flush = 0
            # What is queued now; later arrivals wait for the next flush, so a session fed
            # faster than it drains neither starves the others nor defeats batching.
            upto = self.outbox.last_id()
            if only is not None:
                sessions = [only]
            else:
                sessions = self.outbox.sessions_with_work(self.identity, due_only=due_only)
            for session_id in sessions:
                if not self._claim(session_id):
                    continue  # another process is sending this session
                try:
                    await self._drain(session_id, progress, upto)
                except _Blocked as blocked:
                    progress.blocked = str(blocked)
                finally:
                    self.outbox.release(self.identity, session_id)

    def _claim(self, session_id: str) -> bool:
        # Long enough for the slowest request the lease covers; renewed before each one.
        seconds = max(60.0, 2 * (self.config.write_timeout + self.config.read_timeout))
        return self.outbox.claim(self.identity, session_id, seconds=seconds)

    async def _drain(self, session_id: str, progress: _Progress, upto: int) -> None:
        state = self.outbox.session_state(self.identity, session_id)
        if state.inflight is not None:
            progress.sent += await self._reconcile(session_id)
        while True:
            if not self._claim(session_id):
                return  # our lease was taken over (we were too slow): stop here
            entries = self.outbox.head(
                self.identity, session_id, max_messages=BATCH_LIMIT, upto=upto
            )
            if not entries:
                return
            if entries[0].kind == "commit":
                await self._send_commit(session_id, entries[0], progress)
            else:
                await self._send_messages(session_id, entries, progress)

    async def _server_total(self, session_id: str) -> int:
        try:
            info = await self.client.get_session(session_id)
        except NotFoundError:
            return 0  # the first message will create it
        return info.total_message_count

    async def _reconcile(self, session_id: str) -> int:
        """An earlier send's outcome is unknown: ask the server how much of it landed, drop
        that from the queue (it is confirmed) and return how many; the rest is sent again."""
        inflight = self.outbox.session_state(self.identity, session_id).inflight
        if inflight is None:
            return 0
        try:
            total = await self._server_total(session_id)
        except ClientError as exc:
            entries = self.outbox.entries(inflight.entry_ids)
            attempts = max((e.attempts for e in entries), default=0) + 1
            self.outbox.retry_later(inflight.entry_ids, str(exc), _backoff(attempts), count=True)
            raise _Blocked(str(exc)) from exc
        landed = max(0, min(inflight.n, total - inflight.base_total))
        self.outbox.confirm(self.identity, session_id, inflight.entry_ids, landed, total)
        return landed

    def _set_aside_unsendable(self, entries: Sequence[Entry], progress: _Progress) -> bool:
        """Set aside entries that cannot even be encoded (a lone surrogate from undecodable
        tool output, a NaN in a tool input): no server would take them, and they must not
        hold their session back forever. Returns whether any was."""
        found = False
        for entry in entries:
            try:
                for message in entry.payload:
                    Message.model_validate(message)
                json.dumps(entry.payload, ensure_ascii=False, allow_nan=False).encode("utf-8")
            except ValueError as exc:  # also pydantic's ValidationError, UnicodeEncodeError
                reason = f"cannot be sent as JSON: {str(exc).splitlines()[0][:200]}"
                logger.error("queued messages set aside: %s", reason)
                self.outbox.set_aside(entry.id, reason)
                progress.set_aside += 1
                found = True
        return found

    async def _send_messages(
        self, session_id: str, entries: Sequence[Entry], progress: _Progress
    ) -> None:
        """Send one request's worth: these entries, or the first ``BATCH_LIMIT`` messages of
        a larger one (so every request is confirmed, or reconciled, on its own)."""
        if self._set_aside_unsendable(entries, progress):
            return  # the caller takes the head again
        ids = [e.id for e in entries]
        state = self.outbox.session_state(self.identity, session_id)
        try:
            base = state.known_total
            if base is None:
                base = await self._server_total(session_id)
        except ClientError as exc:
            attempts = max(e.attempts for e in entries) + 1
            self.outbox.retry_later(ids, str(exc), _backoff(attempts), count=True)
            raise _Blocked(str(exc)) from exc
        payload = [m for e in entries for m in e.payload][:BATCH_LIMIT]
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
            await self._refused(session_id, ids, exc, progress)
            return
        self.outbox.confirm(self.identity, session_id, ids, len(payload), base + len(payload))
        progress.sent += len(payload)

    async def _refused(
        self, session_id: str, ids: Sequence[int], exc: ClientError, progress: _Progress
    ) -> None:
        """The server refused a send for good. Part of it may have landed all the same (a
        server without the batch route takes messages one by one), so the server's total
        decides what is confirmed; then the rest is sent entry by entry, so that only the
        entry the server refuses is set aside."""
        landed = await self._reconcile(session_id)
        progress.sent += landed
        rest = [e for e in self.outbox.entries(ids) if e.state == "pending"]
        if len(rest) > 1 or (rest and landed):
            for entry in rest:
                await self._send_messages(session_id, [entry], progress)
                if any(e.state == "pending" for e in self.outbox.entries([entry.id])):
                    return  # only partly sent: the drain goes on from the head, in order
            return
        if rest:
            logger.error("server refused queued messages for good: %s", exc)
            self.outbox.set_aside(rest[0].id, str(exc))
            progress.set_aside += 1

    async def _send_commit(self, session_id: str, entry: Entry, progress: _Progress) -> None:
        options = entry.payload if isinstance(entry.payload, dict) else {}
        try:
            result = await self.client.commit(session_id, **options)
        except ClientError as exc:
            if exc.retryable:
                # Sending a commit twice is harmless: with nothing new it is "skipped".
                self.outbox.retry_later(
                    [entry.id], str(exc), _backoff(entry.attempts + 1), count=True
                )
                raise _Blocked(str(exc)) from exc
            self.outbox.set_aside(entry.id, str(exc))
            progress.set_aside += 1
            return
        self.outbox.complete(self.identity, session_id, [entry.id], None)
        progress.commits += 1
        status = "skipped" if result.status == "skipped" else "committed"
        self.last_commit = CommitReport(session_id, status, result)
        if self.on_commit is not None and status == "committed":
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
        upto = self.outbox.last_id()  # what the commit must follow
        flushed = await self.flush(session_id, deadline=timeout)
        left = self.outbox.head(self.identity, session_id, max_messages=BATCH_LIMIT, upto=upto)
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
