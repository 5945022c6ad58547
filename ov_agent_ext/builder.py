"""What the system-prompt context builders share: a budget, a deadline, a cache, fail-open.

The index, the profile block and the session-history summary are each built from several
server calls under one deadline; a build that fails or runs out of time logs a warning,
returns "" and leaves the previous text cached, so a down server never costs a session start
more than the deadline and never blanks a block that was built before.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from .client import OVClient
from .config import OVConfig
from .errors import ClientError
from .tokens import Tokenizer, get_tokenizer

__all__ = ["DEFAULT_DEADLINE", "CachedBuilder"]

logger = logging.getLogger(__name__)

DEFAULT_DEADLINE = 5.0  # seconds for a whole build: context is not worth a slow session start


class CachedBuilder:
    """Base of the context builders: ``cached``, ``invalidate()`` and a guarded build."""

    def __init__(
        self,
        client: OVClient,
        config: OVConfig,
        budget: int,
        tokenizer: Tokenizer | None = None,
        *,
        deadline: float = DEFAULT_DEADLINE,
    ):
        self._client = client
        self._budget = budget
        self._tokenizer = tokenizer or get_tokenizer(config.tokenizer)
        self._deadline = deadline
        self._cached = ""
        self._lock = asyncio.Lock()  # a refresh and a session start must not interleave

    @property
    def cached(self) -> str:
        """The last text built; "" if none was, or the server was down every time."""
        return self._cached

    def invalidate(self) -> None:
        """Forget the cached text (``cached`` is "" until the next build)."""
        self._cached = ""

    async def _guarded(self, work: Callable[[], Awaitable[str]], what: str) -> str:
        """Run one build under the deadline; cache and return its text, or "" on failure."""
        if self._budget <= 0:  # a zero budget: the user turned this block off
            return ""
        async with self._lock:
            try:
                text = await asyncio.wait_for(work(), self._deadline)
            except (ClientError, asyncio.TimeoutError, ValueError) as exc:
                # ValueError: a response that does not parse (pydantic's ValidationError).
                reason = "timed out" if isinstance(exc, asyncio.TimeoutError) else str(exc)
                logger.warning("%s not built, keeping the previous one: %s", what, reason)
                return ""
            self._cached = text
            return text
