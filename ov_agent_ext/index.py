"""The knowledge index: a budgeted table of contents of what the server knows about the user.

The index is the map (recall is the flashlight): one line per memory, resource and archive of
the current session, under headers that say how many there are, so the model knows what to
search for. It goes into the system prompt, so it is built rarely (session start, and after a
commit that extracted memories) and cached::

    index = IndexBuilder(client, config, tokenizer)
    text = await index.build(session_id="pi-123")   # "" when the server is down
    ...
    await index.refresh_after_commit(result.task.memories_extracted, "pi-123")
    prompt_part = index.cached

The memory tree is walked one directory level at a time (``fs/ls`` per directory), because
the real server's recursive listing misses files four levels down (``events/yyyy/mm/dd/``).
The helpers that walk the tree and summarise a file in one line are public: the profile block
(:mod:`ov_agent_ext.profile`) uses them too.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from .builder import DEFAULT_DEADLINE, CachedBuilder
from .client import OVClient
from .config import OVConfig
from .errors import NotFoundError, ServerError
from .models import FsEntry
from .tokens import Tokenizer

__all__ = [
    "CORE_FILES",
    "DEFAULT_DEADLINE",
    "IndexBuilder",
    "archive_number",
    "clip",
    "first_meaningful_line",
    "interleave",
    "is_placeholder",
    "list_or_empty",
    "newest_first",
    "order_memories",
    "summary_lines",
    "usable_abstract",
    "walk_files",
]

logger = logging.getLogger(__name__)

READ_CONCURRENCY = 8  # requests in flight while walking directories or reading files
MAX_LINE_CHARS = 120  # one index line; longer summaries end in "…"
MAX_DEPTH = 8  # directory levels walked below a root (events/yyyy/mm/dd needs 4)
LS_LIMIT = 10_000  # entries per directory listing; the real server stops at 1000 by default
FIRST_PASS_LINES = 3  # every section gets this many lines before memories take the rest

# Files at the top of the memories tree that describe the user (profile.md) or the agent
# (identity.md, soul.md are templates on the real server) rather than a single fact.
CORE_FILES = ("profile.md", "identity.md", "soul.md")
# Categories listed first, in this order; other directories follow alphabetically.
CATEGORY_ORDER = ("preferences", "entities", "events")

TITLE = "## OpenViking Knowledge Index"
SUBTITLE = "[Showing what's in your long-term memory]"
TOOLS_LINE = (
    "Tools: viking_search | viking_read | viking_browse | viking_remember | viking_forget"
    " | viking_add_resource | viking_archive_expand"
)
MEMORIES_URI = "viking://user/memories"
RESOURCES_URI = "viking://resources"

# The real server answers "# <uri> [Directory abstract is not ready]" until its queue runs.
_PLACEHOLDER = re.compile(r"\[[^\]]*\bnot ready\]", re.IGNORECASE)
_ARCHIVE_NAME = re.compile(r"^archive_(\d+)$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")
_FRONT_MATTER = re.compile(r"\A---\n.*?\n---[ \t]*(?:\n|\Z)", re.DOTALL)
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_MARKERS = re.compile(r"^(?:#{1,6}\s+|>\s*|[-*+]\s+|\d{1,3}[.)]\s+|\[[ xX]\]\s+)+")
_RULE = re.compile(r"^(?:[-*_=`~]{3,}.*|#+)$")

T = TypeVar("T")


# --- one-line summaries -----------------------------------------------------------------------


def clip(text: str, max_chars: int = MAX_LINE_CHARS) -> str:
    """Whitespace collapsed, at most ``max_chars`` characters ("…" marks a cut)."""
    text = " ".join(text.split())
    if len(text) <= max_chars:
        return text
    return text[: max_chars - 1].rstrip() + "…"


def first_meaningful_line(text: str) -> str:
    """The first line that says something, markup stripped; "" when there is none.

    Front matter, HTML comments, rules and blank lines are skipped; bullet, quote, checkbox
    and heading markers are stripped. A heading counts only when nothing else follows: the
    real server's event files open with a generic ``# Summary``.

    >>> first_meaningful_line("<!-- meta -->\\n\\n# Summary\\n- prefers uv")
    'prefers uv'
    >>> first_meaningful_line("- [x] ships on Friday")
    'ships on Friday'
    """
    text = _COMMENT.sub("", _FRONT_MATTER.sub("", text.replace("\r\n", "\n")))
    first_heading = ""
    for raw in text.split("\n"):
        line = raw.strip()
        if not line or _RULE.match(line):
            continue
        is_heading = line.startswith("#")
        line = _MARKERS.sub("", line).strip()
        if line and not is_heading:
            return clip(line)
        first_heading = first_heading or line
    return clip(first_heading)


def is_placeholder(text: str) -> bool:
    """Whether the server sent its "[... is not ready]" stand-in instead of a summary."""
    return bool(_PLACEHOLDER.search(text))


def usable_abstract(abstract: str) -> str:
    """An ``fs/ls`` abstract as one line, or "" when absent or a "not ready" placeholder."""
    if not abstract or is_placeholder(abstract):
        return ""
    return first_meaningful_line(abstract)


def _name_as_text(entry: FsEntry) -> str:
    """``dark_mode.md`` -> ``dark mode``: the last resort for a file with nothing readable."""
    stem = entry.basename.removesuffix(".md")
    return clip(stem.replace("_", " ").replace("-", " ")) or entry.basename


async def _read_summary(client: OVClient, entry: FsEntry) -> str:
    try:
        text = await client.read(entry.uri)
    except ServerError as exc:  # gone since listed, unreadable: say what it is called
        logger.debug("reading %s for its summary failed: %s", entry.uri, exc)
        return ""
    return first_meaningful_line(text)


async def summary_lines(client: OVClient, entries: Sequence[FsEntry]) -> AsyncGenerator[str, None]:
    """One line per file, in order: its abstract, else its first meaningful line, else its name.

    Files are read only as the caller consumes lines, ``READ_CONCURRENCY`` at a time, so a
    budget that stops after 40 lines costs about 40 reads, not one per file in the store.
    A failed read of one file (404, 500) falls back to the name; a server that is down
    (:class:`~ov_agent_ext.errors.ServerUnavailable`) raises.
    """
    for start in range(0, len(entries), READ_CONCURRENCY):
        chunk = entries[start : start + READ_CONCURRENCY]
        reads = [_summary_of(client, entry) for entry in chunk]
        for entry, text in zip(chunk, await asyncio.gather(*reads), strict=True):
            yield text or _name_as_text(entry)


async def _summary_of(client: OVClient, entry: FsEntry) -> str:
    return usable_abstract(entry.abstract) or await _read_summary(client, entry)


# --- walking the tree -------------------------------------------------------------------------


def _hidden(entry: FsEntry) -> bool:
    # .abstract.md / .overview.md are the directory's own summaries, not memories.
    return entry.basename.startswith(".")


async def list_or_empty(client: OVClient, uri: str) -> list[FsEntry]:
    """``ls(uri)``, or [] when it does not exist; other errors raise."""
    try:
        return await client.ls(uri, limit=LS_LIMIT)
    except NotFoundError:  # a scope that does not exist yet, or removed while walking
        return []


async def _bounded_gather(calls: Iterable[Callable[[], Awaitable[T]]], limit: int) -> list[T]:
    gate = asyncio.Semaphore(limit)

    async def run(call: Callable[[], Awaitable[T]]) -> T:
        async with gate:
            return await call()

    return list(await asyncio.gather(*(run(call) for call in calls)))


async def walk_files(client: OVClient, root_uri: str) -> list[FsEntry]:
    """Every non-hidden file under ``root_uri``, listing one directory level at a time.

    A missing root is an empty list. Directories of one level are listed concurrently
    (``READ_CONCURRENCY`` at a time); the walk stops ``MAX_DEPTH`` levels down.
    """
    files: list[FsEntry] = []
    level = [root_uri]
    for _ in range(MAX_DEPTH + 1):
        if not level:
            break
        listings = await _bounded_gather(
            [functools.partial(list_or_empty, client, uri) for uri in level], READ_CONCURRENCY
        )
        entries = [e for listing in listings for e in listing if not _hidden(e)]
        files.extend(e for e in entries if not e.is_dir)
        level = sorted(e.uri for e in entries if e.is_dir)
    return files


def newest_first(entries: Iterable[FsEntry]) -> list[FsEntry]:
    """Newest modification first; equal times by URI, so the same store gives the same order."""
    by_uri = sorted(entries, key=lambda e: e.uri)
    return sorted(by_uri, key=lambda e: e.mod_time or "", reverse=True)  # stable: URI ties


# --- sections ---------------------------------------------------------------------------------


@dataclass
class _Item:
    """One line of a section and how many stored things it stands for."""

    text: str
    weight: int = 1


@dataclass
class _Section:
    """A ``###`` block: header, the lines that fit, and a "(N more — ...)" line for the rest."""

    uri: str
    nouns: tuple[str, str]  # singular, plural
    total: int
    hint: str
    items: AsyncGenerator[_Item, None]
    shown: list[_Item] = field(default_factory=list)
    exhausted: bool = False

    def render(self) -> list[str]:
        noun = self.nouns[0] if self.total == 1 else self.nouns[1]
        lines = [f"### {self.uri} ({self.total} {noun})"]
        lines += [f"- {item.text}" for item in self.shown]
        more = self.total - sum(item.weight for item in self.shown)
        if more > 0:
            lines.append(f"- ({more} more — {self.hint})")
        return lines

    async def next_item(self) -> _Item | None:
        if self.exhausted:
            return None
        item = await anext(self.items, None)
        if item is None:
            self.exhausted = True
        return item


def _render(sections: Sequence[_Section]) -> str:
    blocks = [TITLE + "\n" + SUBTITLE]
    blocks += ["\n".join(section.render()) for section in sections]
    blocks.append(TOOLS_LINE)
    return "\n\n".join(blocks)


async def _fill(sections: list[_Section], budget: int, tokenizer: Tokenizer) -> str:
    """The index with as many lines as ``budget`` tokens allow; "" if not even the frame fits.

    Sections that do not fit even empty are dropped from the end (archives, then resources).
    Then every section gets up to ``FIRST_PASS_LINES`` lines, so a store with 500 memories
    still shows its resources and archives, and the rest of the budget goes to sections in
    order. A line that does not fit ends its section: the order is the priority.
    """
    while sections and tokenizer.count(_render(sections)) > budget:
        sections = sections[:-1]
    used = tokenizer.count(_render(sections))
    if used > budget:
        return ""
    added: list[_Section] = []  # in the order lines were added, to undo the last ones
    for quota in (FIRST_PASS_LINES, None):
        for section in sections:
            while quota is None or len(section.shown) < quota:
                item = await section.next_item()
                if item is None:
                    break
                cost = tokenizer.count(f"- {item.text}\n")
                if used + cost > budget:
                    section.exhausted = True
                    break
                section.shown.append(item)
                added.append(section)
                used += cost
    text = _render(sections)
    # Summing line counts approximates the count of the whole; the whole is what must fit.
    while added and tokenizer.count(text) > budget:
        added.pop().shown.pop()
        text = _render(sections)
    return text


async def _items(lines: Iterable[str]) -> AsyncGenerator[_Item, None]:
    for line in lines:
        yield _Item(line)


async def _memory_items(
    client: OVClient, core: Sequence[FsEntry], ordered: Sequence[FsEntry]
) -> AsyncGenerator[_Item, None]:
    if core:
        # One line for the core files: profile.md is shown in full by the profile block,
        # identity.md and soul.md describe the agent; their names are enough here.
        names = ", ".join(e.basename for e in core)
        yield _Item(f"{names} (core files: use viking_read)", weight=len(core))
    async for line in summary_lines(client, ordered):
        yield _Item(line)


def _category(relative: str) -> str:
    """``events/2026/05/01/x.md`` -> ``events``; a file at the top -> ``""``."""
    head, sep, _ = relative.partition("/")
    return head if sep else ""


def interleave(groups: Sequence[Sequence[FsEntry]]) -> list[FsEntry]:
    """Round-robin over the groups: the index shows a little of every kind of memory."""
    out: list[FsEntry] = []
    for depth in range(max((len(g) for g in groups), default=0)):
        out.extend(g[depth] for g in groups if depth < len(g))
    return out


def order_memories(root_uri: str, files: Sequence[FsEntry]) -> tuple[list[FsEntry], list[FsEntry]]:
    """``(core files, the rest)``: the rest interleaved by category, newest first in each.

    Categories are the first directory under the memories root: preferences, entities and
    events first, other directories alphabetically, files at the top (other than the core
    files) last.
    """
    prefix = root_uri.rstrip("/") + "/"
    core: list[FsEntry] = []
    groups: dict[str, list[FsEntry]] = {}
    for entry in files:
        relative = entry.uri.removeprefix(prefix)
        if relative in CORE_FILES:
            core.append(entry)
        else:
            groups.setdefault(_category(relative), []).append(entry)
    core.sort(key=lambda e: CORE_FILES.index(e.basename))
    others = sorted(name for name in groups if name and name not in CATEGORY_ORDER)
    order = [*(c for c in CATEGORY_ORDER if c in groups), *others, *([""] if "" in groups else [])]
    return core, interleave([newest_first(groups[name]) for name in order])


def archive_number(entry: FsEntry) -> int:
    """``archive_012`` -> 12; -1 for anything else in a session's history directory."""
    match = _ARCHIVE_NAME.match(entry.basename)
    return int(match.group(1)) if match else -1


def _archive_line(entry: FsEntry) -> str:
    date = entry.mod_time[:10] if entry.mod_time and _DATE.match(entry.mod_time) else ""
    label = f"Archive {date} ({entry.basename})" if date else f"Archive {entry.basename}"
    abstract = usable_abstract(entry.abstract)
    return clip(f"{label}: {abstract}") if abstract else label


# --- the builder ------------------------------------------------------------------------------


class IndexBuilder(CachedBuilder):
    """Builds, caches and refreshes the "OpenViking Knowledge Index" system-prompt block.

    Never raises for server trouble: a build that fails or passes ``deadline`` seconds logs
    a warning, returns "" and leaves the previous index in :attr:`cached`.
    """

    def __init__(
        self,
        client: OVClient,
        config: OVConfig,
        tokenizer: Tokenizer | None = None,
        *,
        deadline: float = DEFAULT_DEADLINE,
    ):
        super().__init__(client, config, config.index_budget, tokenizer, deadline=deadline)

    async def build(self, session_id: str | None = None) -> str:
        """Build the index (with ``session_id``'s archives when given) and cache it."""
        return await self._guarded(lambda: self._build(session_id), "memory index")

    async def refresh_after_commit(self, memories_extracted: int, session_id: str | None) -> str:
        """Rebuild only when the commit extracted memories; return the (possibly old) index."""
        if memories_extracted > 0:
            await self.build(session_id)
        return self._cached

    async def _build(self, session_id: str | None) -> str:
        sections = [await self._memories_section()]
        sections += await self._resources_section()
        if session_id:
            sections += await self._archives_section(session_id)
        try:
            return await _fill(sections, self._budget, self._tokenizer)
        finally:
            for section in sections:  # lines not needed: stop their pending reads now
                await section.items.aclose()

    async def _memories_section(self) -> _Section:
        root = await self._client.spaces.resolve_uri(MEMORIES_URI)
        files = await walk_files(self._client, root)
        core, ordered = order_memories(root, files)
        return _Section(
            uri=MEMORIES_URI + "/",  # the short form: what the tools accept
            nouns=("memory", "memories"),
            total=len(files),
            hint="use viking_search to find specific memories",
            items=_memory_items(self._client, core, ordered),
        )

    async def _resources_section(self) -> list[_Section]:
        entries = [e for e in await list_or_empty(self._client, RESOURCES_URI) if not _hidden(e)]
        if not entries:
            return []
        lines = [
            f"{usable_abstract(e.abstract) or e.basename} ({e.uri.rstrip('/')})"
            for e in newest_first(entries)
        ]
        return [
            _Section(
                uri=RESOURCES_URI + "/",
                nouns=("resource", "resources"),
                total=len(entries),
                hint="use viking_browse to explore",
                items=_items(lines),
            )
        ]

    async def _archives_section(self, session_id: str) -> list[_Section]:
        history = f"viking://user/sessions/{session_id}/history"
        listed = await list_or_empty(self._client, history)
        archives = sorted(
            (e for e in listed if archive_number(e) >= 0), key=archive_number, reverse=True
        )
        if not archives:
            return []
        return [
            _Section(
                uri=history + "/",
                nouns=("archive", "archives"),
                total=len(archives),
                hint="use viking_archive_expand for detail",
                items=_items([_archive_line(e) for e in archives]),
            )
        ]
