"""Recall: the memories relevant to the current prompt, as a ``<relevant-memories>`` block.

Runs once per prompt, on that prompt (never the previous turn's), within ``recallTimeout``:

1. skip prompts shorter than ``recallMinQueryLength`` once injected blocks are stripped;
2. search three scopes in parallel (the user's memories, the agent's memories, skills), each
   resolved to the caller's own space; a scope the server lacks is skipped; resources are
   never recalled automatically;
3. profile the query (content tokens, preference intent, temporal intent);
4. keep only relevant hits (see :func:`is_relevant`: the server's score scale puts unrelated
   items at 0.5, so a raw threshold alone filters nothing);
5. dedup (events/cases by URI, others by abstract), 6. rerank with the spec's boosts, directory
   summaries always after real memories, 7. resolve content, capped per item,
8. fit the token budget, degrading items past it to a URI hint (the first item always full),
9. format the block byte-identically for the same inputs (stable order, no timestamps).

A timeout or server failure gives no block and a ``FAILED``/``TIMED_OUT`` outcome, distinct
from ``NOTHING_RELEVANT``, so status can tell "memory is down" from "nothing to say".
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from .blocks import format_recall_block, has_recall_block, strip_injected
from .client import OVClient
from .config import OVConfig
from .errors import ClientError, NotFoundError, ServerError
from .models import SearchHit
from .query import QueryProfile, content_tokens, evidence_tokens, profile_query
from .tokens import Tokenizer, get_tokenizer

__all__ = [
    "RECALL_SCOPES",
    "RecallItem",
    "RecallManager",
    "RecallOutcome",
    "RecallResult",
    "is_relevant",
    "rank_hits",
]

logger = logging.getLogger(__name__)

# The spec's triple scope; short forms, resolved per caller by the client.
RECALL_SCOPES = ("viking://user/memories", "viking://agent/memories", "viking://agent/skills")

# Spec boosts (design spec, recall step 7).
LEAF_BOOST = 0.12
EVENT_BOOST = 0.10
PREFERENCE_BOOST = 0.08
LEXICAL_BOOST = 0.20
_EVENT_CATEGORIES = frozenset({"events", "cases"})
_WHITESPACE = re.compile(r"\s+")
_BULLET = re.compile(r"^\s*(?:[-*•]\s+)+")
_EPSILON = 1e-9  # float noise of the score -> cosine mapping


class RecallOutcome(str, enum.Enum):
    """What happened to one prompt's recall."""

    INJECTED = "injected"  # a block was produced
    NOTHING_RELEVANT = "nothing_relevant"  # the server answered; nothing passed relevance
    SKIPPED = "skipped"  # too short, or recall is off
    FAILED = "failed"  # the server could not be asked (down, error answers)
    TIMED_OUT = "timed_out"  # recallTimeout passed first


@dataclass(frozen=True)
class RecallItem:
    """One recalled hit after relevance, dedup and rerank."""

    uri: str
    context_type: str
    category: str
    level: int
    score: float  # the server's score
    rank: float  # score plus boosts: the order
    abstract: str
    is_summary: bool


@dataclass(frozen=True)
class RecallResult:
    """One prompt's recall: the block (maybe empty) and how it came about."""

    outcome: RecallOutcome
    query: str = ""
    block: str = ""
    items: tuple[RecallItem, ...] = ()
    degraded: int = 0  # items shown as URI hints because the budget ran out
    dropped: int = 0  # relevant items left out entirely: not even a hint fitted
    elapsed_ms: float = 0.0
    error: str | None = None
    tokens: int = 0


def _uri_words(uri: str) -> str:
    """A file's stem as words: preferences/alice/python_packaging.md -> 'python packaging'.

    Only the stem: the parent directory of a preference is the user's own name, which would
    make every prompt that mentions it "evidence" for all of their preferences.
    """
    name = uri.rstrip("/").rsplit("/", 1)[-1]
    if name.startswith("."):
        return ""
    return name.removesuffix(".md").replace("_", " ").replace("-", " ")


def relevance(score: float) -> float:
    """The server's score on a cosine scale: 0.5.x reports (1 + cosine) / 2."""
    return max(-1.0, min(1.0, 2.0 * score - 1.0))


def is_relevant(hit: SearchHit, profile: QueryProfile, threshold: float) -> bool:
    """Whether a hit is about the prompt.

    On 0.5.x an unrelated memory scores ~0.5 (cosine 0), so the score alone cannot decide. A
    hit passes with lexical evidence (a content word of the prompt, intent words excluded, in
    its text or file name) and a positive similarity, or with a similarity of at least
    ``threshold`` on the cosine scale (``recallScoreThreshold``), which an embedder that
    matches meaning without shared words reaches.
    """
    similarity = relevance(hit.score)
    if similarity <= _EPSILON:
        return False  # unrelated, whatever the threshold (even 0)
    if similarity >= threshold - _EPSILON:  # 2 * 0.6 - 1 is 0.19999999999999996
        return True
    return bool(profile.evidence & evidence_tokens(f"{hit.abstract} {_uri_words(hit.uri)}"))


def _dedup_key(hit: SearchHit) -> str:
    if hit.category in _EVENT_CATEGORIES:
        return hit.uri
    text = _WHITESPACE.sub(" ", hit.abstract).strip().lower()
    return text or hit.uri


def _rank(hit: SearchHit, profile: QueryProfile) -> float:
    rank = hit.score
    if not hit.is_summary:
        rank += LEAF_BOOST
    if profile.wants_temporal and hit.category in _EVENT_CATEGORIES:
        rank += EVENT_BOOST
    if profile.wants_preference and hit.category == "preferences":
        rank += PREFERENCE_BOOST
    # The spec's lexical boost, counted on evidence words: a generic word such as "use" or
    # "prefer" is shared by half the store and would reorder it for nothing.
    words = profile.evidence or frozenset(profile.tokens)
    if words:
        text = f"{hit.abstract} {_uri_words(hit.uri)}"
        found = evidence_tokens(text) if profile.evidence else set(content_tokens(text))
        overlap = len(words & found)
        rank += LEXICAL_BOOST * min(1.0, overlap / min(len(words), 4))
    return rank


def rank_hits(
    hits: Sequence[SearchHit], profile: QueryProfile, *, threshold: float, limit: int
) -> list[RecallItem]:
    """Relevance, dedup, rerank and limit, in a stable order (ties broken by URI)."""
    relevant = [h for h in hits if is_relevant(h, profile, threshold)]
    relevant.sort(key=lambda h: (-h.score, h.uri))
    seen: set[str] = set()
    seen_uris: set[str] = set()
    unique: list[SearchHit] = []
    for hit in relevant:
        key = _dedup_key(hit)
        if key not in seen and hit.uri not in seen_uris:  # one URI is one item, always
            seen.add(key)
            seen_uris.add(hit.uri)
            unique.append(hit)
    items = [
        RecallItem(
            uri=h.uri,
            context_type=h.context_type or "memory",
            category=h.category,
            level=h.level,
            score=h.score,
            rank=_rank(h, profile),
            abstract=h.abstract,
            is_summary=h.is_summary,
        )
        for h in unique
    ]
    # Directory summaries never outrank a real memory, whatever their score; and a summary of a
    # directory whose memory is already in the answer only repeats it.
    items.sort(key=lambda i: (i.is_summary, -round(i.rank, 6), i.uri))
    leaf_dirs = {_parent(i.uri) for i in items if not i.is_summary}
    items = [i for i in items if not (i.is_summary and _covered(_parent(i.uri), leaf_dirs))]
    return items[:limit]


def _parent(uri: str) -> str:
    return uri.rstrip("/").rsplit("/", 1)[0]


def _covered(directory: str, leaf_dirs: set[str]) -> bool:
    return any(d == directory or d.startswith(directory + "/") for d in leaf_dirs)


def _same_text(text: str) -> str:
    """Text compared by its words: hosts may re-wrap a prompt or split it into parts."""
    return _WHITESPACE.sub(" ", text).strip()


def _one_line(text: str, cap: int) -> str:
    lines = [_BULLET.sub("", line).strip() for line in text.splitlines()]
    flat = _WHITESPACE.sub(" ", " ".join(line for line in lines if line)).strip()
    return flat if len(flat) <= cap else flat[: max(0, cap - 1)].rstrip() + "…"


class RecallManager:
    """Recall for one agent session: ``recall(prompt)`` once per prompt, ``inject`` per call.

    >>> manager = RecallManager(client, config)              # doctest: +SKIP
    >>> result = await manager.recall("which db does Falcon use?")
    >>> messages = manager.inject(messages)                  # idempotent
    """

    def __init__(self, client: OVClient, config: OVConfig, tokenizer: Tokenizer | None = None):
        self._client = client
        self._config = config
        self._tokenizer = tokenizer or get_tokenizer(config.tokenizer)
        self._query = ""  # the (stripped) prompt the cached result answers
        self._cached: RecallResult | None = None
        self.last: RecallResult | None = None  # kept after invalidate(), for status

    def invalidate(self) -> None:
        """Forget the cached block (at agent end): the next prompt recalls afresh."""
        self._query, self._cached = "", None

    async def recall(self, prompt: str) -> RecallResult:
        """The recall block for this prompt; cached, so repeated calls cost nothing."""
        query = strip_injected(prompt)
        if self._cached is not None and self._query == query:
            return self._cached
        started = time.perf_counter()
        if not self._config.enabled:
            result = RecallResult(RecallOutcome.SKIPPED, query=query, error="disabled")
        elif len(query) < self._config.recall_min_query_length:
            result = RecallResult(RecallOutcome.SKIPPED, query=query)
        else:
            try:
                result = await asyncio.wait_for(
                    self._search_and_format(query), timeout=self._config.recall_timeout
                )
            except asyncio.TimeoutError:
                result = RecallResult(
                    RecallOutcome.TIMED_OUT,
                    query=query,
                    error=f"recall took longer than {self._config.recall_timeout:g}s",
                )
        elapsed_ms = round((time.perf_counter() - started) * 1000, 1)
        result = dataclasses.replace(result, elapsed_ms=elapsed_ms)
        if result.outcome in (RecallOutcome.FAILED, RecallOutcome.TIMED_OUT):
            logger.warning("recall %s: %s", result.outcome.value, result.error)
        self._query, self._cached, self.last = query, result, result
        return result

    def inject(self, messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Prepend the cached block to the current user message; a copy, idempotent.

        Only the user message the block was recalled for gets it: a block never lands on a
        different prompt than the one it answers.
        """
        out = [dict(m) for m in messages]
        result = self._cached
        if result is None or not result.block:
            return out
        for message in reversed(out):
            if message.get("role") != "user":
                continue
            content = message.get("content")
            if isinstance(content, str):
                text = content
            elif isinstance(content, list):
                text = " ".join(
                    str(p.get("text", "")) for p in content if isinstance(p, dict)
                ).strip()
            else:
                continue
            if not text.strip():
                continue  # tool results or images only (a "user" turn that is not a prompt)
            if has_recall_block(text):
                return out  # already injected: idempotent
            if _same_text(strip_injected(text)) != _same_text(self._query):
                return out  # another prompt than the one recalled for
            if isinstance(content, str):
                message["content"] = f"{result.block}\n\n{content}"
            else:
                message["content"] = [{"type": "text", "text": result.block}, *content]
            return out
        return out

    async def _search_and_format(self, query: str) -> RecallResult:
        profile = profile_query(query)
        per_source = max(self._config.recall_limit * 2, 8)
        outcomes = await asyncio.gather(
            *(self._search_scope(query, scope, per_source) for scope in RECALL_SCOPES),
            return_exceptions=True,
        )
        hits: list[SearchHit] = []
        errors: list[str] = []
        answered = 0
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                if not isinstance(outcome, ClientError):
                    raise outcome
                errors.append(str(outcome))
            elif outcome is not None:
                answered += 1
                hits.extend(outcome)
        if errors and not answered:
            # No scope answered (the others are missing): memory is down, not silent.
            return RecallResult(RecallOutcome.FAILED, query=query, error=errors[0])
        items = rank_hits(
            hits,
            profile,
            threshold=self._config.recall_score_threshold,
            limit=self._config.recall_limit,
        )
        if not items:
            return RecallResult(
                RecallOutcome.NOTHING_RELEVANT, query=query, error="; ".join(errors) or None
            )
        texts = await self._contents(items)
        block, shown, degraded, tokens = self._format(items, texts)
        return RecallResult(
            RecallOutcome.INJECTED,
            query=query,
            block=block,
            items=tuple(items[:shown]),
            degraded=degraded,
            dropped=len(items) - shown,
            tokens=tokens,
            # Some scopes failed while others answered: the block is partial, and says so.
            error="; ".join(errors) or None,
        )

    async def _search_scope(self, query: str, scope: str, limit: int) -> list[SearchHit] | None:
        """The scope's memories and skills; None when the server has no such scope."""
        try:
            # The client's own deadline fires just before recall's: a hanging server is then
            # recorded by the breaker on the first prompt, not merely cancelled from outside.
            deadline = max(0.1, self._config.recall_timeout - 0.2)
            found = await self._client.find(query, target_uri=scope, limit=limit, timeout=deadline)
        except NotFoundError:
            return None  # this server has no such scope for the caller
        except ValidationError as exc:  # an answer of the wrong shape is a server failure
            raise ServerError(
                f"malformed find answer for {scope}: {exc.errors()[0]['msg']}",
                code="INVALID_RESPONSE",
                status_code=200,
                method="POST",
                path="/api/v1/search/find",
            ) from exc
        # Resources are never recalled automatically, even if a scope's answer carries some.
        return [*found.memories, *found.skills]

    async def _contents(self, items: Sequence[RecallItem]) -> list[str]:
        cap = self._config.recall_max_content_chars
        if self._config.recall_prefer_abstract:
            return [_one_line(item.abstract, cap) for item in items]

        async def full(item: RecallItem) -> str:
            if item.level < 2 or item.is_summary:
                return item.abstract
            try:
                return await self._client.read(item.uri)
            except ClientError:
                return item.abstract  # the hit's own abstract is still worth showing

        texts = await asyncio.gather(*(full(item) for item in items))
        return [_one_line(text, cap) for text in texts]

    def _format(
        self, items: Sequence[RecallItem], texts: Sequence[str]
    ) -> tuple[str, int, int, int]:
        """The block within ``recallBudget`` tokens, its frame included: item lines in rank
        order, past the budget URI hints, the first item always complete. Returns the block,
        how many items it shows, how many of those are hints, and its size."""
        budget = self._config.recall_budget
        count = self._tokenizer.count
        lines: list[str] = []
        used = count(format_recall_block([]))
        degraded = 0
        for index, (item, text) in enumerate(zip(items, texts, strict=True)):
            label = f"[{item.context_type} {item.score:.2f}]"
            line = f"- {label} {text or item.uri}"
            cost = count(line)
            if index == 0 or used + cost <= budget:
                lines.append(line)
                used += cost
                continue
            hint = f"- {label} Use viking_read to expand: {item.uri}"
            hint_cost = count(hint)
            if used + hint_cost > budget:
                break  # not even a hint fits: the rest is left out (and counted as dropped)
            lines.append(hint)
            used += hint_cost
            degraded += 1
        block = format_recall_block(lines)
        return block, len(lines), degraded, count(block)
