"""Tokenizing, the in-memory inverted index, and ``find`` scoring.

**Score scale.** The real server embeds text as hashed bag-of-words vectors and reports
``(1 + cosine) / 2``: an item sharing no words with the query scores about 0.5, a strong match
0.8-0.9. This index computes the same quantity exactly: the cosine of the query's and the
document's term-count vectors (non-negative, so scores stay in [0.5, 1]) mapped through
``(1 + cos) / 2``. Like the real server, an answer with fewer matches than ``limit`` is filled
with the caller's other items at 0.5, and directory summaries (``.abstract.md`` level 0,
``.overview.md`` level 1) are hits beside real files (level 2), one per directory.

**Tokens.** Latin words lowercased, minus a small stopword list, lightly stemmed
("packaging"/"package" -> "packag"); CJK runs as overlapping character bigrams.

**Index.** One inverted index per account (token -> {path: count}), plus a sorted path list
for prefix scans, rebuilt from SQLite at start and updated on every write. A query touches
only the postings of its own tokens, so its cost grows with how many documents share a query
word, not with the size of the store.
"""

from __future__ import annotations

import bisect
import heapq
import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = [
    "NEUTRAL_SCORE",
    "STOPWORDS",
    "AccountIndex",
    "Doc",
    "Query",
    "SearchIndex",
    "tokenize",
]

NEUTRAL_SCORE = 0.5  # (1 + cos) / 2 for cos = 0: nothing in common with the query

STOPWORDS = frozenset(
    """
    a about above after again against all also am an and any are as at be because been before
    being below between both but by can could did do does doing down during each else few for
    from further had has have having he her here hers herself him himself his how i if in into
    is it its itself just let lets me more most my myself no nor not now of off ok okay on once
    only or other our ours ourselves out over own please same she should so some such than that
    the their theirs them themselves then there these they this those through to too under
    until up very was we were what when where which while who whom whose why will with would
    you your yours yourself yourselves every
    """.split()
)

_RUN = re.compile(r"[^\W_]+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+")


def _stem(word: str) -> str:
    """A light, predictable suffix stripper (plural, -ing, -ed, final -e)."""
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if word.endswith("ing") and len(word) > 5:
        word = word[:-3]
    elif word.endswith("ed") and len(word) > 4:
        word = word[:-2]
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]
    return word


def _latin(text: str, out: list[str]) -> None:
    if text and text not in STOPWORDS and (len(text) > 1 or text.isdigit()):
        out.append(_stem(text))


def tokenize(text: str) -> list[str]:
    """Search tokens of ``text`` (see the module docstring)."""
    out: list[str] = []
    for run in _RUN.findall(text.lower()):
        position = 0
        for match in _CJK.finditer(run):
            _latin(run[position : match.start()], out)
            cjk = match.group()
            if len(cjk) == 1:
                out.append(cjk)
            else:
                out.extend(cjk[i : i + 2] for i in range(len(cjk) - 1))
            position = match.end()
        _latin(run[position:], out)
    return out


@dataclass(slots=True)
class Doc:
    """One searchable item: a file (level 2) or a directory summary (level 0/1)."""

    path: str
    level: int
    context_type: str
    tags: tuple[str, ...]
    abstract: str
    created_at: float
    updated_at: float
    tf: dict[str, int] = field(default_factory=dict)
    norm: float = 0.0

    @property
    def group(self) -> str:
        """Summaries of one directory share a group (one hit per directory)."""
        return self.path.rsplit("/", 1)[0] if self.level < 2 else self.path


@dataclass
class Query:
    """What ``find`` asks, already resolved to paths and parsed filters."""

    text: str
    scopes: list[str]  # path prefixes; "" is the whole account
    limit: int = 10
    score_threshold: float | None = None
    context_types: frozenset[str] | None = None
    levels: frozenset[int] | None = None
    tags: tuple[str, ...] = ()
    since: float | None = None
    until: float | None = None
    time_field: str = "updated_at"
    exclude: frozenset[str] = frozenset()


class AccountIndex:
    """The inverted index of one account."""

    def __init__(self) -> None:
        self.docs: dict[str, Doc] = {}
        self.postings: dict[str, dict[str, int]] = {}
        self.norms: dict[str, float] = {}  # path -> norm of its term vector (> 0 when posted)
        self.paths: list[str] = []  # sorted, for prefix scans

    def __len__(self) -> int:
        return len(self.docs)

    def put(self, doc: Doc, text: str) -> None:
        """Add or replace the document at ``doc.path``, indexing ``text``."""
        old = self.docs.get(doc.path)
        if old is not None:
            self._unpost(old)
        else:
            bisect.insort(self.paths, doc.path)
        doc.tf = dict(Counter(tokenize(text)))
        doc.norm = math.sqrt(sum(c * c for c in doc.tf.values()))
        self.norms[doc.path] = doc.norm
        for token, count in doc.tf.items():
            self.postings.setdefault(token, {})[doc.path] = count
        self.docs[doc.path] = doc

    def remove(self, path: str) -> None:
        doc = self.docs.pop(path, None)
        if doc is None:
            return
        self.norms.pop(path, None)
        self._unpost(doc)
        at = bisect.bisect_left(self.paths, path)
        if at < len(self.paths) and self.paths[at] == path:
            del self.paths[at]

    def _unpost(self, doc: Doc) -> None:
        for token in doc.tf:
            posting = self.postings.get(token)
            if posting is not None:
                posting.pop(doc.path, None)
                if not posting:
                    del self.postings[token]

    def scan(self, prefix: str) -> Iterator[Doc]:
        """Documents at or under ``prefix``, in path order."""
        if not prefix:
            yield from (self.docs[p] for p in list(self.paths))
            return
        start = bisect.bisect_left(self.paths, prefix)
        for path in self.paths[start:]:
            if path != prefix and not path.startswith(prefix + "/"):
                if path > prefix + "/":
                    break
                continue
            doc = self.docs.get(path)
            if doc is not None:
                yield doc

    def _accept(self, doc: Doc, query: Query) -> bool:
        if doc.path in query.exclude:
            return False
        if query.context_types is not None and doc.context_type not in query.context_types:
            return False
        if query.levels is not None and doc.level not in query.levels:
            return False
        if query.tags and not all(tag in doc.tags for tag in query.tags):
            return False
        when = doc.created_at if query.time_field == "created_at" else doc.updated_at
        if query.since is not None and when < query.since:
            return False
        return query.until is None or when <= query.until

    def find(self, query: Query) -> list[tuple[Doc, float]]:
        """The best ``query.limit`` documents with their scores, best first."""
        counts = Counter(tokenize(query.text))
        query_norm = math.sqrt(sum(c * c for c in counts.values()))
        dots: dict[str, float] = {}
        get = dots.get
        for token, weight in counts.items():
            for path, count in self.postings.get(token, {}).items():
                dots[path] = get(path, 0.0) + weight * count
        exact = frozenset(s for s in query.scopes if s)
        prefixes = tuple(s + "/" for s in exact)
        everything = any(not s for s in query.scopes)
        norms = self.norms
        scale = NEUTRAL_SCORE / query_norm if query_norm else 0.0
        # (-score, path): the natural tuple order is best first, then by path.
        scored = [
            (-(NEUTRAL_SCORE + scale * dot / norms[path]), path)
            for path, dot in dots.items()
            if everything or path.startswith(prefixes) or path in exact
        ]
        wanted = query.limit * 4 + 16  # headroom for hits the filters drop
        partial = len(scored) > 4 * wanted
        hits, groups, exhausted = self._take(
            heapq.nsmallest(wanted, scored) if partial else sorted(scored), query
        )
        if exhausted and partial:  # the filters dropped too many: rank everything
            hits, groups, _ = self._take(sorted(scored), query)
        threshold = query.score_threshold
        if len(hits) < query.limit and (threshold is None or threshold <= NEUTRAL_SCORE):
            self._fill(query, hits, groups, dots)
        return hits

    def _take(
        self, ranked: list[tuple[float, str]], query: Query
    ) -> tuple[list[tuple[Doc, float]], set[str], bool]:
        """Hits from ``(-score, path)`` best first: (hits, their groups, ran out of input)."""
        threshold = query.score_threshold
        hits: list[tuple[Doc, float]] = []
        groups: set[str] = set()
        for negative, path in ranked:  # filters only for what may be returned
            score = min(-negative, 1.0)
            if len(hits) >= query.limit or (threshold is not None and score < threshold):
                return hits, groups, False
            doc = self.docs[path]
            if doc.group in groups or not self._accept(doc, query):
                continue
            groups.add(doc.group)
            hits.append((doc, score))
        return hits, groups, len(hits) < query.limit

    def _fill(
        self, query: Query, hits: list[tuple[Doc, float]], groups: set[str], dots: dict[str, float]
    ) -> None:
        """Top the answer up with unmatched in-scope items at the neutral score."""
        seen_scopes: list[str] = []
        for scope in sorted(set(query.scopes)):
            if any(not s or scope == s or scope.startswith(s + "/") for s in seen_scopes):
                continue  # already covered by a wider scope
            seen_scopes.append(scope)
            for doc in self.scan(scope):
                if len(hits) >= query.limit:
                    return
                if doc.path in dots or doc.group in groups or not self._accept(doc, query):
                    continue
                groups.add(doc.group)
                hits.append((doc, NEUTRAL_SCORE))


class SearchIndex:
    """Every account's index, created on first use."""

    def __init__(self) -> None:
        self._accounts: dict[str, AccountIndex] = {}

    def account(self, account: str) -> AccountIndex:
        index = self._accounts.get(account)
        if index is None:
            index = self._accounts[account] = AccountIndex()
        return index

    def put(self, account: str, doc: Doc, text: str) -> None:
        self.account(account).put(doc, text)

    def remove(self, account: str, path: str) -> None:
        index = self._accounts.get(account)
        if index is not None:
            index.remove(path)

    def __len__(self) -> int:
        return sum(len(index) for index in self._accounts.values())
