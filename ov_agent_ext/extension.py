"""The extension: recall, context, capture and commits wired to a host agent's events.

Usage (any host; the adapters in ``adapters/`` are thin translations of this)::

    ext = OpenVikingExtension(load_config())
    await ext.session_start("abc", cwd="/work/repo", reason="startup")
    system_addition = await ext.before_agent_start(prompt)     # recall + system prompt
    messages = await ext.context(messages)                     # <relevant-memories> injected
    await ext.turn_end(Turn(1, user=prompt, assistant=reply, tool_calls=[...]))
    ext.agent_end()
    await ext.before_compact()                                 # commit + rehydration
    await ext.session_shutdown()                               # flush + final commit

Every method fails open within its deadline: a bypassed session makes no OpenViking call at
all; a down or hanging server turns every operation into a fast no-op (the client's breaker)
and every tool into a clear "not reachable at <endpoint>" answer; nothing raises into the host.
``turn_end`` only writes to the local outbox: the agent's turn never waits on the network.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import httpx

from .capture import ToolCall, Turn, build_messages
from .client import OVClient
from .config import OVConfig
from .errors import ClientError
from .index import IndexBuilder
from .models import CommitResult, Message
from .optout import bypass_reason
from .outbox import Outbox
from .profile import ProfileBuilder, RehydrationBuilder, compose_system_prompt
from .recall import RecallManager, RecallOutcome, RecallResult
from .statusfile import write_status
from .sync import CommitReport, SyncManager
from .tokens import estimate_tokens, get_tokenizer
from .tools import TOOL_NAMES, ToolBox, ToolFormat

__all__ = ["OpenVikingExtension", "Status", "ToolCall", "Turn"]

logger = logging.getLogger("ov_agent_ext")
T = TypeVar("T")

StartReason = Literal["startup", "resume", "compact", "clear"]
TOOL_ADVERTISEMENT = "Tools: " + " | ".join(TOOL_NAMES)
HEALTH_GRACE = 0.25  # seconds the session-start health check may run past the client's deadline


@dataclass
class Status:
    """What the extension knows about itself, for ``ov-agent-ext status`` and hosts."""

    endpoint: str
    enabled: bool
    session_id: str | None = None
    bypassed: str | None = None
    incognito: bool = False
    connected: bool | None = None  # None until the first health check
    server_version: str = ""
    breaker: str = "closed"
    breaker_error: str = ""
    pending: int = 0
    set_aside: list[str] = field(default_factory=list)
    last_recall: str | None = None
    last_capture: str | None = None
    last_commit: str | None = None


class OpenVikingExtension:
    """Long-term memory for one agent session through OpenViking."""

    def __init__(
        self,
        config: OVConfig,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        outbox: Outbox | None = None,
    ):
        self.config = config
        logging.getLogger("ov_agent_ext").setLevel(
            {"silent": logging.CRITICAL + 1}.get(config.log_level, config.log_level.upper())
        )
        self.client = OVClient(config, transport=transport)
        self.tokenizer = get_tokenizer(config.tokenizer)
        self._outbox = outbox
        self.sync: SyncManager | None = None
        self.recall = RecallManager(self.client, config, self.tokenizer)
        self.index = IndexBuilder(self.client, config, self.tokenizer)
        self.profile = ProfileBuilder(self.client, config, self.tokenizer)
        self.rehydration = RehydrationBuilder(self.client, config, self.tokenizer)
        self.tools = self._toolbox(None)
        self.session_id: str | None = None
        self.cwd: str | None = None
        self._bypassed: str | None = None
        self._incognito = config.incognito
        self._connected: bool | None = None
        self._server_version = ""
        self._archive_overview = ""
        self._context_ready = False
        self._last_capture: str | None = None
        self._followers: set[asyncio.Task[None]] = set()  # extraction of unwaited commits
        self._recalled: RecallResult | None = None  # the current prompt's recall

    # --- helpers ----------------------------------------------------------------------------

    def _ov_session(self, host_session_id: str) -> str:
        """Host session ids get the agent's prefix, so hosts never collide (spec: ``pi-``)."""
        prefix = f"{self.config.agent_id}-" if self.config.agent_id else ""
        return host_session_id if host_session_id.startswith(prefix) else prefix + host_session_id

    @property
    def active(self) -> bool:
        """Whether OpenViking may be called for this session at all."""
        return self.config.enabled and self._bypassed is None and self.session_id is not None

    @property
    def capturing(self) -> bool:
        return self.active and self.config.sync_turns and not self._incognito

    def _toolbox(self, sync: SyncManager | None) -> ToolBox:
        return ToolBox(
            self.client,
            sync,
            session_id=lambda: self.session_id,
            available=self._tools_unavailable,
            # remember writes only where turns would go: nothing in incognito or without sync
            capture_session=lambda: self.session_id if self.capturing else None,
            cwd=lambda: self.cwd,
        )

    def _tools_unavailable(self) -> str | None:
        if not self.config.enabled:
            return "OpenViking memory is disabled (enabled: false)."
        if self._bypassed:
            return f"OpenViking is bypassed for this session: {self._bypassed}."
        if self.client.breaker.is_open:
            self.client.breaker.allow()  # let the background probe run if it is time
            return f"OpenViking server is not reachable at {self.client.endpoint}."
        return None

    async def _within(
        self,
        seconds: float,
        work: Awaitable[T],
        fallback: T,
        *,
        on_timeout: Callable[[], None] | None = None,
    ) -> T:
        """Run ``work`` under a deadline; on any failure return ``fallback`` (fail open)."""
        try:
            return await asyncio.wait_for(work, timeout=seconds)
        except asyncio.TimeoutError:
            logger.warning("OpenViking step took longer than %.1fs; continuing without it", seconds)
            if on_timeout is not None:
                on_timeout()
        except ClientError as exc:
            logger.warning("OpenViking step failed: %s", exc)
        except Exception:  # a bug here must never break the host's agent
            logger.exception("OpenViking step failed unexpectedly")
        return fallback

    # --- events -------------------------------------------------------------------------------

    async def session_start(
        self,
        session_id: str,
        *,
        cwd: str | None = None,
        reason: StartReason = "startup",
        parent_session_id: str | None = None,
        incognito: bool = False,
    ) -> None:
        """Guard (bypass, health), deliver what earlier runs left queued, build the context.

        A subagent (``parent_session_id``) gets its own session and never writes into the
        parent's; ``incognito`` captures and commits nothing for this session.
        """
        self.session_id = self._ov_session(session_id)
        self.cwd = cwd if cwd is not None else os.getcwd()
        self._incognito = self.config.incognito or incognito
        self._archive_overview = ""
        self._context_ready = False
        self._recalled = None
        if parent_session_id:
            logger.info("subagent session %s (parent %s)", self.session_id, parent_session_id)
        if not self.config.enabled:
            return
        # The id as the host knows it, or as OpenViking and ``status`` show it (prefixed).
        self._bypassed = bypass_reason(
            self.config, cwd=self.cwd, session_id=session_id
        ) or bypass_reason(self.config, cwd=None, session_id=self.session_id)
        if self._bypassed:
            logger.info("OpenViking bypassed: %s", self._bypassed)
            return
        if self.sync is None:
            try:
                outbox = self._outbox or Outbox(self.config.state_dir / "outbox.sqlite3")
            except (OSError, sqlite3.Error) as exc:
                # No durable queue (a read-only or broken stateDir): capture is off for this
                # session rather than an exception in the host; recall and tools still work.
                logger.error(
                    "capture is off: cannot open the outbox in %s: %s", self.config.state_dir, exc
                )
                self._last_capture = f"off: the outbox cannot be opened ({exc})"
            else:
                self.sync = SyncManager(self.client, self.config, outbox, on_commit=self._committed)
                self.tools = self._toolbox(self.sync)
        if self.sync is not None:
            self.sync.start()  # delivers entries left by earlier runs as soon as it can
        # The client enforces healthTimeout itself and opens the breaker when it passes; the
        # outer deadline is only a safety net, later, so it never cancels the request first
        # (a cancelled request records nothing, and a hanging server would stay "closed").
        seconds = self.config.health_timeout
        health = await self._within(
            seconds + HEALTH_GRACE,
            self.client.health(),
            None,
            on_timeout=lambda: self._no_answer(seconds, "health check"),
        )
        self._connected = health is not None
        if health is None:
            return  # the breaker is open: everything below is a fast no-op until it closes
        self._server_version = health.version
        await self._build_context(resume=reason in ("resume", "compact"))

    async def _build_context(self, *, resume: bool) -> None:
        assert self.session_id is not None
        budget = max(self.config.read_timeout, 5.0)
        jobs: list[Awaitable[Any]] = [
            self._within(budget, self.profile.build(), ""),
            self._within(budget, self.index.build(session_id=self.session_id), ""),
        ]
        if resume:
            jobs.append(
                self._within(budget, self.rehydration.archive_overview(self.session_id), "")
            )
        results = await asyncio.gather(*jobs)
        if resume:
            self._archive_overview = results[2]
        self._context_ready = True

    def system_prompt_addition(self) -> str:
        """Profile + archive overview + index + tool line, each only when it has content.

        "" until the context could be built: while the server has not answered since the
        session started, advertising tools that can only answer "not reachable" is noise."""
        if not self.active or not self._context_ready:
            return ""
        index = self.index.cached
        tools_line = "" if index else TOOL_ADVERTISEMENT
        return compose_system_prompt(self.profile.cached, self._archive_overview, index, tools_line)

    async def before_agent_start(self, prompt: str) -> str:
        """Recall for this prompt (cached for ``context``); returns the system-prompt addition."""
        if not self.active:
            return ""
        if not self._context_ready and not self.client.breaker.is_open:
            # The server was down at session start and is back: build what we could not.
            await self._within(self.config.recall_timeout, self._build_context(resume=False), None)
        seconds = self.config.recall_timeout
        result = await self._within(
            seconds + 1.0,
            self.recall.recall(prompt),
            None,
            on_timeout=lambda: self._no_answer(seconds, "recall"),
        )
        if result is not None and result.outcome is RecallOutcome.TIMED_OUT:
            # The recall's own deadline cancelled its requests before the client's could
            # record anything: tell the breaker, or a server that starts hanging mid-session
            # would cost recallTimeout on every prompt.
            self._no_answer(seconds, "recall")
        self._recalled = result
        self.save_status()
        return self.system_prompt_addition()

    def _no_answer(self, seconds: float, what: str) -> None:
        """A step got no answer in time: open the breaker (its probe decides when to close)."""
        if not self.client.breaker.is_open:
            self.client.breaker.record_failure(f"no answer within {seconds:g}s ({what})")

    @property
    def recall_block(self) -> str:
        """The ``<relevant-memories>`` block recalled for the current prompt ("" if none, and
        after ``agent_end``: never the block of an earlier prompt)."""
        result = self._recalled
        return result.block if result is not None and self.active else ""

    async def context(self, messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The messages with the cached recall block prepended to the current user message."""
        if not self.active:
            return [dict(m) for m in messages]
        return self.recall.inject(messages)

    async def turn_end(self, turn: Turn) -> None:
        """Capture a finished turn: strip, filter, redact, queue durably. No network."""
        if not self.capturing or self.sync is None or self.session_id is None:
            return
        try:
            captured = build_messages(turn, self.config)
            messages = captured.messages if captured.decision.capture else []
            queued = self.sync.accept_turn(
                self.session_id, turn.index, messages, captured.tokens if messages else 0
            )
            decision = captured.decision.reason
            self._last_capture = (
                f"turn {turn.index}: "
                + (f"queued ({decision})" if queued and messages else "")
                + (f"skipped ({decision})" if queued and not messages else "")
                + ("" if queued else "already captured")
            )
        except Exception:  # capture must never break the host's turn
            logger.exception("capturing turn %s failed", turn.index)
            self._last_capture = f"turn {turn.index}: failed (see log)"

    def agent_end(self) -> None:
        """The agent finished the prompt: the next prompt recalls afresh."""
        self.recall.invalidate()
        self._recalled = None

    async def before_compact(self) -> CommitReport | None:
        """Commit before the host rewrites the transcript, then cache the new archive overview
        for the next ``before_agent_start`` (post-compact rehydration)."""
        report = await self.commit(wait=True, enable_working_memory=True)
        if self.active and self.session_id is not None and not self.client.breaker.is_open:
            self.rehydration.invalidate()
            self._archive_overview = await self._within(
                self.config.read_timeout,
                self.rehydration.archive_overview(self.session_id),
                self._archive_overview,
            )
        return report

    async def session_shutdown(self) -> CommitReport | None:
        """Flush, mirror MEMORY.md, commit (and wait) within ``commitTimeout``; if the server
        is unreachable the commit is queued durably for the next start."""
        report: CommitReport | None = None
        if self.capturing and self.sync is not None and self.session_id is not None:
            if self.config.mirror_memory_writes:
                self._mirror_memory_file()
            if self.config.commit_on_shutdown:
                report = await self.commit(wait=True)
        if self.sync is not None:
            await self._within(self.config.commit_timeout, self.sync.aclose(deadline=2.0), None)
        self.save_status()
        return report

    def save_status(self) -> None:
        """Write this session's ``status()`` to ``<stateDir>/status/<session>.json`` (0600) for
        ``ov-agent-ext status`` in another process. Called after recall, commits and shutdown,
        never from ``turn_end``: the turn's hot path stays a single local transaction."""
        if self.session_id is None or self._bypassed:
            return
        try:
            write_status(self.config.state_dir, self.session_id, dataclasses.asdict(self.status()))
        except OSError as exc:  # status is a convenience: never break the host for it
            logger.debug("could not save status: %s", exc)

    async def commit(
        self, *, wait: bool = True, enable_working_memory: bool | None = None
    ) -> CommitReport | None:
        """Flush and commit the session now (manual commit, pre-compact, shutdown)."""
        if not self.capturing or self.sync is None or self.session_id is None:
            return None
        sync, session_id = self.sync, self.session_id
        timeout = self.config.commit_timeout
        fallback = CommitReport(session_id, "failed", error="commit did not finish in time")
        report = await self._within(
            timeout + 1.0,
            sync.commit_now(
                session_id, wait=wait, timeout=timeout, enable_working_memory=enable_working_memory
            ),
            fallback,
        )
        self.save_status()
        return report

    def _mirror_memory_file(self) -> None:
        if self.sync is None or self.session_id is None:
            return
        path = Path(self.config.memory_file).expanduser()
        if not path.is_absolute() and self.cwd:
            path = Path(self.cwd) / path
        try:
            # errors="replace": a stray non-UTF-8 byte must not fail the shutdown
            text = path.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            return  # no MEMORY.md here: nothing to mirror
        if text:
            content = f"[Memory mirror: {path.name}]\n{text}"
            self.sync.accept_messages(
                self.session_id, [Message(role="user", content=content)], estimate_tokens(content)
            )

    async def _committed(self, session_id: str, result: CommitResult) -> None:
        """After a commit the store changed: refresh profile and index when it extracted.

        A commit nobody waited for (the token threshold, a commit queued by an earlier run and
        delivered by the flusher) or whose wait ran out has no extraction outcome yet: it is
        followed in the background, so the flusher is not held up, and the refresh happens
        when it is done.
        """
        if result.task_id and (result.task is None or not result.task.done):
            follower = asyncio.get_running_loop().create_task(
                self._follow_extraction(session_id, result.task_id)
            )
            self._followers.add(follower)
            follower.add_done_callback(self._followers.discard)
            return
        await self._refresh_after_commit(result.task.memories_extracted if result.task else 0)

    async def _follow_extraction(self, session_id: str, task_id: str) -> None:
        try:
            task, _ = await self.client.wait_task(task_id, timeout=self.config.commit_timeout)
        except ClientError as exc:
            logger.warning("extraction of the commit of %s not followed: %s", session_id, exc)
            return
        await self._refresh_after_commit(task.memories_extracted)

    async def _refresh_after_commit(self, extracted: int) -> None:
        if not extracted:
            return
        await self._within(
            self.config.read_timeout, self.profile.refresh_after_commit(extracted), ""
        )
        # The index shows *this* session's archives, whichever session's commit changed the
        # store (a commit queued by an earlier run belongs to another session).
        await self._within(
            self.config.read_timeout,
            self.index.refresh_after_commit(extracted, self.session_id),
            "",
        )

    # --- tools and status ---------------------------------------------------------------------

    def tool_schemas(self, format: ToolFormat = "openai") -> list[dict[str, Any]]:
        return ToolBox.schemas(format)

    async def call_tool(self, name: str, arguments: dict[str, Any] | str | None) -> str:
        """Run a ``viking_*`` tool; always text, errors included."""
        return await self.tools.call(name, arguments)

    def status(self) -> Status:
        stats = self.sync.stats() if self.sync is not None else None
        last: RecallResult | None = self.recall.last
        commit = self.sync.last_commit if self.sync is not None else None
        return Status(
            endpoint=self.client.endpoint,
            enabled=self.config.enabled,
            session_id=self.session_id,
            bypassed=self._bypassed,
            incognito=self._incognito,
            connected=None if self._connected is None else not self.client.breaker.is_open,
            server_version=self._server_version,
            breaker=self.client.breaker.state.value,
            breaker_error=self.client.breaker.last_error,
            pending=stats.pending if stats else 0,
            set_aside=[f"#{e.id} {e.last_error}" for e in stats.set_aside] if stats else [],
            last_recall=(
                f"{last.outcome.value} ({len(last.items)} items, {last.elapsed_ms:.0f} ms)"
                + (f": {last.error}" if last.error else "")
                if last
                else None
            ),
            last_capture=self._last_capture,
            last_commit=(
                f"{commit.status} {commit.session_id}"
                + (f" ({commit.memories_extracted} memories)" if commit.result else "")
                + (f": {commit.error}" if commit.error else "")
                if commit
                else None
            ),
        )

    async def aclose(self) -> None:
        if self.sync is not None:
            await self.sync.aclose(deadline=1.0)
        for follower in list(self._followers):
            follower.cancel()
        await asyncio.gather(*self._followers, return_exceptions=True)
        await self.client.aclose()
