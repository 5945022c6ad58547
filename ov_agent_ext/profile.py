"""Session-start context: the user-profile block, the rehydration block, the system prompt.

- :class:`ProfileBuilder` reads ``profile.md`` and lists ``preferences/`` and ``entities/``
  into an ``<openviking-context>`` block within ``profile_budget`` tokens, eliding the middle
  of a long profile (identity at the top and recent facts at the bottom are kept).
- :class:`RehydrationBuilder` fetches the latest archive overview of a session (resume, and
  after the pre-compact commit) as a ``[Session History Summary]`` within
  ``resume_context_budget`` tokens.
- :func:`compose_system_prompt` puts them, the knowledge index and the tool advertisement
  under one ``## OpenViking Context`` header.

Like the index, both builders fail open: server trouble is a warning and "", never an error
in the host's session start.

Usage::

    profile = ProfileBuilder(client, config, tokenizer)
    history = RehydrationBuilder(client, config, tokenizer)
    prompt = compose_system_prompt(
        await profile.build(), await history.archive_overview("pi-123"), index.cached, TOOLS_AD
    )
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass

from .builder import DEFAULT_DEADLINE, CachedBuilder
from .client import OVClient
from .config import OVConfig
from .errors import NotFoundError
from .index import (
    archive_number,
    interleave,
    is_placeholder,
    list_or_empty,
    summary_lines,
    walk_files,
)
from .models import FsEntry
from .tokens import Tokenizer

__all__ = [
    "CONTEXT_HEADER",
    "HISTORY_HEADER",
    "ProfileBuilder",
    "RehydrationBuilder",
    "compose_system_prompt",
    "elide_profile",
    "truncate_to_tokens",
]

logger = logging.getLogger(__name__)

PROFILE_URI = "viking://user/memories/profile.md"
LISTED_CATEGORIES = ("preferences", "entities")  # what <available-memories> lists, in order
HEAD_LINES = 8  # the profile's identity block, always kept when eliding
LISTING_SHARE = 4  # the memory listing may take 1/4 of the budget before the profile is fitted
CONTEXT_HEADER = "## OpenViking Context"
HISTORY_HEADER = "[Session History Summary]"
ELLIPSIS = "…"

# Closing tags of the block: inside stored text they would end the block early.
_OWN_TAGS = ("</openviking-context", "</user-profile", "</available-memories")


# --- token-bounded text -----------------------------------------------------------------------


def truncate_to_tokens(text: str, budget: int, tokenizer: Tokenizer) -> str:
    """``text`` if it fits in ``budget`` tokens, else its longest prefix that fits with "…".

    "" when not even one character and the ellipsis fit.
    """
    if tokenizer.count(text) <= budget:
        return text
    low, high = 0, len(text)  # invariant: text[:low] + "…" fits (or low == 0)
    while low < high:
        middle = (low + high + 1) // 2
        if tokenizer.count(text[:middle].rstrip() + ELLIPSIS) <= budget:
            low = middle
        else:
            high = middle - 1
    prefix = text[:low].rstrip()
    return prefix + ELLIPSIS if prefix else ""


def _lines_within(lines: Sequence[str], budget: int, tokenizer: Tokenizer) -> list[str]:
    """The longest head of ``lines`` whose join fits; counted whole, so it really fits."""
    kept: list[str] = []
    used = 0
    for line in lines:
        cost = tokenizer.count(line + "\n")
        if used + cost > budget:
            break
        kept.append(line)
        used += cost
    while kept and tokenizer.count("\n".join(kept)) > budget:
        kept.pop()
    return kept


def _head_and_tail(lines: Sequence[str], budget: int, tokenizer: Tokenizer) -> str:
    """The first ``HEAD_LINES`` lines, a marker, and the most recent lines that fit; or ""."""
    head, rest = list(lines[:HEAD_LINES]), list(lines[HEAD_LINES:])
    widest_marker = f"[... {len(rest)} lines elided ...]"
    left = budget - tokenizer.count("\n".join([*head, widest_marker]) + "\n")
    tail = list(reversed(_lines_within(list(reversed(rest)), left, tokenizer)))

    def joined() -> str:
        return "\n".join([*head, f"[... {len(rest) - len(tail)} lines elided ...]", *tail])

    while tail and tokenizer.count(joined()) > budget:
        tail.pop(0)  # the oldest of the recent lines goes first
    # Without a tail there is nothing recent to keep: head-only truncation shows more.
    return joined() if tail and len(tail) < len(rest) else ""


def _head_only(lines: Sequence[str], budget: int, tokenizer: Tokenizer) -> str:
    """As many lines from the top as fit, then a marker; the first line cut if it alone is over."""
    widest_marker = f"[... {len(lines)} lines truncated ...]"
    kept = _lines_within(lines, budget - tokenizer.count(widest_marker + "\n"), tokenizer)

    def joined() -> str:
        return "\n".join([*kept, f"[... {len(lines) - len(kept)} lines truncated ...]"])

    while kept and tokenizer.count(joined()) > budget:
        kept.pop()
    if kept:
        return joined()
    return truncate_to_tokens(lines[0] if lines else "", budget, tokenizer)


def elide_profile(text: str, budget: int, tokenizer: Tokenizer) -> str:
    """``profile.md`` within ``budget`` tokens, as the spec's profile elision does.

    A profile that fits is unchanged. Otherwise keep the head (the first ``HEAD_LINES``
    lines: stable identity facts) and the tail (the most recent lines, as many as fit) with
    ``[... N lines elided ...]`` between, sacrificing the noisy middle. A file too short to
    elide (or whose head alone is over budget) is truncated from the top instead.
    """
    text = text.strip("\n")
    if tokenizer.count(text) <= budget:
        return text
    lines = text.split("\n")
    if len(lines) > HEAD_LINES + 1:
        elided = _head_and_tail(lines, budget, tokenizer)
        if elided:
            return elided
    return _head_only(lines, budget, tokenizer)


# --- the profile block ------------------------------------------------------------------------


def _neutralize(text: str) -> str:
    for tag in _OWN_TAGS:
        text = text.replace(tag, "&lt;" + tag[1:])
    return text


def _parent(uri: str) -> str:
    return uri.rsplit("/", 1)[0] + "/"


@dataclass(frozen=True)
class _Listed:
    """One ``<available-memories>`` line: its directory, file name and one-line summary."""

    directory: str
    name: str
    summary: str

    @property
    def rank(self) -> int:
        """Where its category comes in ``LISTED_CATEGORIES`` (preferences before entities)."""
        for rank, category in enumerate(LISTED_CATEGORIES):
            if f"/memories/{category}/" in self.directory:
                return rank
        return len(LISTED_CATEGORIES)

    def render(self) -> str:
        return f"    - {self.name} — {self.summary}" if self.summary else f"    - {self.name}"


def _render_block(profile_uri: str, profile: str, listed: Sequence[_Listed], more: int) -> str:
    lines = ['<openviking-context source="session-start">']
    if profile:
        lines += [f'<user-profile uri="{profile_uri}">', profile, "</user-profile>"]
    if listed or more:
        lines.append("<available-memories>")
        directory = None
        for item in sorted(listed, key=lambda i: (i.rank, i.directory, i.name)):
            if item.directory != directory:
                directory = item.directory
                lines.append(f"  {directory}")
            lines.append(item.render())
        if more:
            lines.append(f"  ({more} more — use viking_browse to explore)")
        lines.append("</available-memories>")
    lines.append("</openviking-context>")
    return "\n".join(lines)


class ProfileBuilder(CachedBuilder):
    """Builds, caches and refreshes the ``<openviking-context>`` user-profile block.

    Never raises for server trouble: a failed or slow build logs a warning, returns "" and
    leaves the previous block in :attr:`cached`.
    """

    def __init__(
        self,
        client: OVClient,
        config: OVConfig,
        tokenizer: Tokenizer | None = None,
        *,
        deadline: float = DEFAULT_DEADLINE,
    ):
        super().__init__(client, config, config.profile_budget, tokenizer, deadline=deadline)

    async def build(self) -> str:
        """Read the profile and list the memories; cache and return the block."""
        return await self._guarded(self._build, "profile block")

    async def refresh_after_commit(self, memories_extracted: int) -> str:
        """Rebuild only when the commit extracted memories (the profile may have changed)."""
        if memories_extracted > 0:
            await self.build()
        return self._cached

    async def _build(self) -> str:
        profile_uri = await self._client.spaces.resolve_uri(PROFILE_URI)
        memories_root = profile_uri.rsplit("/", 1)[0]
        try:
            profile = _neutralize(await self._client.read(profile_uri)).strip("\n")
        except NotFoundError:
            profile = ""
        if not profile.strip():
            profile = ""
        groups = [
            sorted(await walk_files(self._client, f"{memories_root}/{category}"), key=_sort_key)
            for category in LISTED_CATEGORIES
        ]
        files = interleave(groups)  # both categories get lines before a budget cut
        if not profile and not files:
            return ""
        return await self._fit(profile_uri, profile, files)

    async def _fit(self, profile_uri: str, profile: str, files: Sequence[FsEntry]) -> str:
        """The block within budget: the listing's share first, the profile, then more listing.

        The listing may take up to ``1 / LISTING_SHARE`` of the budget before the profile is
        fitted, so a long profile cannot crowd the map of memories out entirely; whatever the
        profile leaves goes to further listing lines.
        """
        count, budget = self._tokenizer.count, self._budget

        def render(text: str, listing: _Listing) -> str:
            return _render_block(profile_uri, text, listing.items, listing.more)

        async with aclosing(_candidates(self._client, files)) as candidates:
            listing = _Listing(len(files), candidates, self._tokenizer)
            share = budget // LISTING_SHARE if profile else budget
            await listing.extend(share - count(render("", listing)))
            if profile:
                profile = self._fit_profile(profile, lambda text: count(render(text, listing)))
            await listing.extend(budget - count(render(profile, listing)))
        text = render(profile, listing)
        while listing.items and count(text) > budget:
            listing.items.pop()
            text = render(profile, listing)
        return text if count(text) <= budget else ""

    def _fit_profile(self, profile: str, block_cost: Callable[[str], int]) -> str:
        """The profile elided to what the block leaves; retried when the whole still overshoots.

        Counting the profile apart from the block around it is an estimate (tokens can merge
        across the seam), so a whole that comes out over budget is elided again, tighter.
        """
        room = self._budget - block_cost(" ")  # " ": the block with the tags and no text
        fitted = elide_profile(profile, room, self._tokenizer)
        for _ in range(3):
            over = block_cost(fitted) - self._budget
            if over <= 0:
                break
            room -= over
            fitted = elide_profile(profile, room, self._tokenizer)
        return fitted


class _Listing:
    """The ``<available-memories>`` lines chosen so far, added while they fit."""

    def __init__(self, total: int, candidates: AsyncIterator[_Listed], tokenizer: Tokenizer):
        self.items: list[_Listed] = []
        self._total = total
        self._candidates = candidates
        self._tokenizer = tokenizer
        self._waiting: _Listed | None = None  # read, but it did not fit last time

    @property
    def more(self) -> int:
        return self._total - len(self.items)

    async def _next(self) -> _Listed | None:
        if self._waiting is not None:
            item, self._waiting = self._waiting, None
            return item
        return await anext(self._candidates, None)

    async def extend(self, room: int) -> None:
        """Add lines (and their directory headers) while their cost fits in ``room`` tokens."""
        directories = {item.directory for item in self.items}
        while room > 0:
            item = await self._next()
            if item is None:
                return
            cost = self._tokenizer.count(item.render() + "\n")
            if item.directory not in directories:
                cost += self._tokenizer.count(f"  {item.directory}\n")
            if cost > room:
                self._waiting = item
                return
            self.items.append(item)
            directories.add(item.directory)
            room -= cost


async def _candidates(client: OVClient, files: Sequence[FsEntry]) -> AsyncGenerator[_Listed, None]:
    """Each file as a listing line, summaries read only as lines are taken."""
    async with aclosing(summary_lines(client, files)) as summaries:
        position = 0
        async for summary in summaries:
            entry = files[position]
            position += 1
            yield _Listed(_parent(entry.uri), entry.basename, summary)


def _sort_key(entry: FsEntry) -> tuple[str, str]:
    return _parent(entry.uri), entry.basename


# --- the rehydration block --------------------------------------------------------------------


def _history_within(overview: str, budget: int, tokenizer: Tokenizer) -> str:
    """``[Session History Summary]`` + the overview, cut at a line boundary with "…"."""
    text = f"{HISTORY_HEADER}\n{overview}"
    if tokenizer.count(text) <= budget:
        return text
    lines = overview.split("\n")
    room = budget - tokenizer.count(f"{HISTORY_HEADER}\n{ELLIPSIS}\n")
    kept = _lines_within(lines, room, tokenizer)
    while kept and tokenizer.count("\n".join([HISTORY_HEADER, *kept, ELLIPSIS])) > budget:
        kept.pop()
    if kept:
        return "\n".join([HISTORY_HEADER, *kept, ELLIPSIS])
    first = truncate_to_tokens(lines[0], budget - tokenizer.count(HISTORY_HEADER + "\n"), tokenizer)
    return f"{HISTORY_HEADER}\n{first}" if first else ""


class RehydrationBuilder(CachedBuilder):
    """Fetches a session's latest archive overview as the ``[Session History Summary]`` block.

    Used on resume (what happened in the previous run) and after the pre-compact commit (what
    happened before compaction). Fails open like the other builders.
    """

    def __init__(
        self,
        client: OVClient,
        config: OVConfig,
        tokenizer: Tokenizer | None = None,
        *,
        deadline: float = DEFAULT_DEADLINE,
    ):
        super().__init__(client, config, config.resume_context_budget, tokenizer, deadline=deadline)

    async def archive_overview(self, session_id: str) -> str:
        """The session's latest archive overview within budget, cached; "" when none."""
        if not session_id:
            return ""

        async def summary() -> str:
            overview = await self._latest_overview(session_id)
            return _history_within(overview, self._budget, self._tokenizer) if overview else ""

        return await self._guarded(summary, f"session history of {session_id}")

    async def _latest_overview(self, session_id: str) -> str:
        try:
            # No token_budget: the server drops the overview when live messages fill it.
            context = await self._client.session_context(session_id)
        except NotFoundError:
            return ""
        overview = context.latest_archive_overview.strip()
        if overview and not is_placeholder(overview):
            return overview
        # The context has an overview only for commits with working memory on; otherwise the
        # highest archive_NNN in the session's history has one.
        listed = await list_or_empty(self._client, f"viking://user/sessions/{session_id}/history")
        archives = [e for e in listed if archive_number(e) >= 0]
        if not archives:
            return ""
        latest = max(archives, key=archive_number)
        try:
            archive = await self._client.get_archive(session_id, latest.basename)
        except NotFoundError:  # the real server: not readable until its commit task is done
            return ""
        for text in (archive.overview.strip(), archive.abstract.strip()):
            if text and not is_placeholder(text):
                return text
        return ""


# --- the system prompt ------------------------------------------------------------------------


def compose_system_prompt(
    profile: str, archive_overview: str, index: str, tool_advertisement: str
) -> str:
    """The spec's system-prompt block: the header, then each non-empty part, blank-line separated.

    Pure: the same inputs give byte-identical output, so the host's prompt cache holds while
    nothing changed. All parts empty gives "" (no header alone).

    >>> compose_system_prompt("", "", "## Index", "Use the tools.")
    '## OpenViking Context\\n## Index\\n\\nUse the tools.'
    """
    parts = [part.strip() for part in (profile, archive_overview, index, tool_advertisement)]
    present = [part for part in parts if part]
    if not present:
        return ""
    return CONTEXT_HEADER + "\n" + "\n\n".join(present)
