"""A circuit breaker for one server, designed for a server that hangs rather than refuses.

A refused connection is cheap to discover; a server that accepts and never answers costs a
whole deadline per call, which is what made existing integrations add seconds to every prompt.
So: the first call that finds the server unavailable opens the breaker; while it is open every
call fails at once (no network); when the backoff window passes, a *background* probe (a
health check) decides whether to close it. No user request is ever the probe, so a dead or
hanging server adds microseconds to a prompt or a turn, never a timeout.

    closed --failure--> open --window passes--> probing --health ok--> closed
                          ^                        |
                          +------health fails------+   (window doubles, up to max_delay)
"""

from __future__ import annotations

import asyncio
import enum
import logging
import random
import time
from collections.abc import Awaitable, Callable

__all__ = ["BreakerState", "CircuitBreaker"]

logger = logging.getLogger(__name__)


class BreakerState(str, enum.Enum):
    """Where the breaker is."""

    CLOSED = "closed"  # calls go to the server
    OPEN = "open"  # calls fail at once until the window passes
    PROBING = "probing"  # a background health check is deciding; calls still fail at once


class CircuitBreaker:
    """Fails calls fast while the server is known to be unavailable.

    ``probe`` is an async health check returning True when the server answers; the owner
    (``OVClient``) supplies it. ``clock`` is injectable for tests.
    """

    def __init__(
        self,
        *,
        base_delay: float = 1.0,
        max_delay: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._clock = clock
        self.state = BreakerState.CLOSED
        self.failures = 0  # consecutive
        self.retry_at = 0.0
        self.last_error = ""
        self._probe: Callable[[], Awaitable[bool]] | None = None
        self._probe_task: asyncio.Task[None] | None = None

    def set_probe(self, probe: Callable[[], Awaitable[bool]]) -> None:
        self._probe = probe

    @property
    def is_open(self) -> bool:
        return self.state is not BreakerState.CLOSED

    def allow(self) -> bool:
        """Whether a call may go to the server now; starts the probe when the window passed."""
        if self.state is BreakerState.CLOSED:
            return True
        if self.state is BreakerState.OPEN and self._clock() >= self.retry_at:
            self._start_probe()
        return False

    def record_success(self) -> None:
        if self.state is not BreakerState.CLOSED:
            logger.info("OpenViking server reachable again; circuit closed")
        self.state = BreakerState.CLOSED
        self.failures = 0
        self.last_error = ""

    def record_failure(self, error: str) -> None:
        self.failures += 1
        self.last_error = error
        # Exponential backoff with jitter, so many clients do not probe in lockstep.
        delay = min(self.max_delay, self.base_delay * 2 ** (self.failures - 1))
        self.retry_at = self._clock() + delay * random.uniform(0.8, 1.0)
        if self.state is BreakerState.CLOSED:
            logger.warning("OpenViking server unavailable (%s); circuit open", error)
        self.state = BreakerState.OPEN

    def _start_probe(self) -> None:
        if self._probe is None:
            # Nobody can probe: let the next call through as the probe (half-open).
            self.state = BreakerState.CLOSED
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # not in a loop: stay open until a caller in one comes by
        self.state = BreakerState.PROBING
        self._probe_task = loop.create_task(self._run_probe(self._probe))

    async def _run_probe(self, probe: Callable[[], Awaitable[bool]]) -> None:
        try:
            healthy = await probe()
        except Exception as exc:  # a probe must never raise into the loop
            healthy, self.last_error = False, str(exc)
        if healthy:
            self.record_success()
        else:
            self.record_failure(self.last_error or "health check failed")

    async def wait_probe(self) -> None:
        """Wait for a running probe (tests and shutdown)."""
        if self._probe_task is not None:
            await asyncio.gather(self._probe_task, return_exceptions=True)
