"""Rule-based memory extraction: what the user said about themselves becomes memory files.

Only the user's own statements count (assistant text, tool output and quoted recall blocks
never do). Each sentence or clause is matched against four rule families, first match wins:

=============  =====================================================  ==========================
family         examples                                               file (under memories/)
=============  =====================================================  ==========================
entities       "Project Falcon uses PostgreSQL 16", "service Billing  ``entities/projects/
               runs on k8s", "the Heron repo is written in Go"        falcon.md``
profile        "my name is ...", "I live in ...", "I work at/for/as  ``profile.md``
               ...", "I am a ...", 我叫/我住在/我是一名
events         "we decided to ...", "I agreed to ...", 我们决定      ``events/yyyy/mm/dd/
                                                                      <name>.md``
preferences    "I prefer/like/love/enjoy/always use/hate/avoid ...",  ``preferences/<user>/
               "my favourite X is Y", "I'm a fan of", 我喜欢/偏好/习惯  <topic>.md``
=============  =====================================================  ==========================

Updating, never duplicating: a preference's *topic* names its file ("my favourite editor is"
-> ``editor``; "X over Y for Z" -> ``z``; "X over Y" -> ``x_vs_y`` in sorted order; else the
object's first words), and a new statement on the same topic replaces the old one. Profile
facts are keyed (name, location, employer, role): a new fact replaces the bullet with the same
key. Entity facts merge: a new distinct bullet is appended, a repeated one is not. Events are
keyed by day and name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from .search import STOPWORDS
from .util import slug

__all__ = ["MemoryOp", "extract", "merge", "profile_key", "user_statements"]

_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
_SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；;])\s*|\n+")
_CLAUSE = re.compile(r",?\s+and\s+(?=(?:i|we|my)\b)|，\s*(?=我)", re.IGNORECASE)
_RECALL_BLOCK = re.compile(
    r"<(memory-context|relevant-memories|openviking-context)\b[^>]*>.*?</\1>", re.S | re.I
)
_TOPIC_DROP = STOPWORDS | {"really", "always", "usually", "use", "using", "prefer", "like"}

_ENTITY_KINDS = r"project|repo|repository|service|app|application|library|package"
_RELATION = (
    r"uses|runs on|depends on|is written in|is built with|is built on|is deployed (?:to|on)|"
    r"is hosted on|talks to|stores (?:its )?data in"
)
ENTITY_RULES = (
    re.compile(
        rf"\b(?P<kind>{_ENTITY_KINDS})\s+(?P<name>[A-Za-z0-9][\w.-]*)\s+(?:{_RELATION})\s+\S",
        re.I,
    ),
    re.compile(
        rf"\b(?:the\s+)?(?P<name>[A-Z][\w.-]*)\s+(?P<kind>{_ENTITY_KINDS})\s+(?:{_RELATION})\s+\S"
    ),
    re.compile(r"(?P<kind>项目|服务|仓库)\s*(?P<name>[\w.-]+?)\s*(?:使用|用的是|基于|依赖|运行在)"),
)
PROFILE_RULES = (
    ("name", re.compile(r"\bmy name is\s+\S|\bcall me\s+\S|我叫|我的名字是", re.I)),
    ("location", re.compile(r"\bi live in\s+\S|\bi(?:'m| am) based in\s+\S|我住在", re.I)),
    ("employer", re.compile(r"\bi work (?:at|for)\s+\S|我在\S+工作", re.I)),
    (
        "role",
        re.compile(
            r"\bi work as\s+\S|\bi(?:'m| am) an?\s+(?!(?:\w+\s+)?fan\s+of\b)\S|我是一名|我是一个",
            re.I,
        ),
    ),
)
EVENT_RULES = (
    re.compile(
        r"\b(?:we|i)\s+(?:have\s+|just\s+)?(?:decided|agreed|chose|settled on|committed)\s+"
        r"(?:to\s+|on\s+|that\s+)?(?P<what>.+)",
        re.I,
    ),
    re.compile(r"我们?(?:决定|同意|商定)(?P<what>.+)"),
)
_FAVOURITE = re.compile(
    r"\bmy\s+(?:favou?rite|preferred)\s+(?P<topic>.+?)\s+(?:is|are)\s+(?P<what>.+)", re.I
)
PREFERENCE_RULES = (
    re.compile(
        r"\bi\s+(?:really\s+|strongly\s+|generally\s+|usually\s+|much\s+)?"
        r"(?P<verb>prefer|like|love|enjoy|always use|usually use|hate|dislike|avoid|never use|"
        r"can't stand)\s+(?P<what>.+)",
        re.I,
    ),
    re.compile(r"\bi(?:'m| am)\s+a\s+(?:big\s+|huge\s+)?fan\s+of\s+(?P<what>.+)", re.I),
    re.compile(
        r"我(?:更|很|最|比较|一直|总是|平时)?(?P<verb>喜欢|偏好|习惯|爱用|讨厌|不喜欢|爱)(?:用|使用)?"
        r"(?P<what>.+)"
    ),
)
_COMPARE = re.compile(r"\s+(?:over|to|instead of|rather than|than)\s+", re.I)
_DOMAIN = re.compile(r"\s+(?:for|in|when|as|with)\s+(?P<domain>.+)$", re.I)


@dataclass(frozen=True)
class MemoryOp:
    """One memory to write: where (relative to ``memories/``), what, and how to combine."""

    kind: str  # preferences | entities | events | profile
    rel_path: str
    bullet: str
    combine: str  # replace | merge | profile


def _clean(text: str) -> str:
    return text.strip().strip(" \t\"'“”").rstrip()


def _words(text: str) -> str:
    return slug(text, words=4, drop=_TOPIC_DROP)


def _preference_topic(what: str) -> str:
    """The file name of a preference ("" when the object says nothing: "I like it")."""
    what = what.strip().rstrip(".!。！")
    domain = _DOMAIN.search(what)
    if domain and _words(domain.group("domain")):
        return _words(domain.group("domain"))
    sides = _COMPARE.split(what, maxsplit=1)
    if len(sides) == 2 and _words(sides[0]) and _words(sides[1]):
        first, second = sorted((_words(sides[0]), _words(sides[1])))
        return f"{first}_vs_{second}"
    return _words(what)


def profile_key(sentence: str) -> str | None:
    """The profile fact a sentence states (``name``, ``location``...), if any."""
    for key, rule in PROFILE_RULES:
        if rule.search(sentence):
            return key
    return None


def _bullet(sentence: str) -> str:
    return "- " + sentence.strip()


def _day(created_at: str | None, fallback: datetime) -> datetime:
    if created_at:
        try:
            parsed = datetime.fromisoformat(created_at.replace("Z", "+00:00"))
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)
        except ValueError:
            pass
    return fallback


def _one(sentence: str, user: str, day: datetime) -> MemoryOp | None:
    if sentence.endswith(("?", "？")) or len(sentence) < 4:
        return None
    for rule in ENTITY_RULES:
        match = rule.search(sentence)
        if match:
            kind = match.group("kind").lower()
            category = "services" if kind in ("service", "服务") else "projects"
            name = slug(match.group("name"), words=3) or "entity"
            return MemoryOp(
                "entities", f"entities/{category}/{name}.md", _bullet(sentence), "merge"
            )
    if profile_key(sentence):
        return MemoryOp("profile", "profile.md", _bullet(sentence), "profile")
    for rule in EVENT_RULES:
        match = rule.search(sentence)
        if match:
            name = _words(match.group("what")) or slug(match.group("what"), words=3) or "event"
            folder = day.strftime("%Y/%m/%d")
            return MemoryOp("events", f"events/{folder}/{name}.md", _bullet(sentence), "replace")
    favourite = _FAVOURITE.search(sentence)
    if favourite:
        topic = _words(favourite.group("topic")) or "favourite"
        return MemoryOp(
            "preferences", f"preferences/{user}/{topic}.md", _bullet(sentence), "replace"
        )
    for rule in PREFERENCE_RULES:
        match = rule.search(sentence)
        if match:
            topic = _preference_topic(_clean(match.group("what")))
            if not topic:
                continue
            return MemoryOp(
                "preferences", f"preferences/{user}/{topic}.md", _bullet(sentence), "replace"
            )
    return None


def user_statements(messages: Iterable[dict[str, Any]]) -> list[tuple[str, str | None]]:
    """The user's own text from archived messages: ``(text, created_at)`` in order."""
    out: list[tuple[str, str | None]] = []
    for message in messages:
        if message.get("role") != "user":
            continue
        for part in message.get("parts") or []:
            if isinstance(part, dict) and part.get("type") == "text" and part.get("text"):
                text = _RECALL_BLOCK.sub(" ", str(part["text"]))
                out.append((text, message.get("created_at")))
    return out


def extract(messages: Iterable[dict[str, Any]], user: str, today: datetime) -> list[MemoryOp]:
    """Memory operations for a committed conversation, in the order they were said."""
    ops: list[MemoryOp] = []
    for text, created_at in user_statements(messages):
        day = _day(created_at, today)
        for sentence in _SENTENCE.split(text):
            for clause in _CLAUSE.split(sentence):
                clause = clause.strip()
                if clause:
                    op = _one(clause, user, day)
                    if op is not None:
                        ops.append(op)
    return ops


def _norm(bullet: str) -> str:
    return re.sub(r"[\s.!。！]+", " ", bullet.lower()).strip()


def merge(existing: str | None, op: MemoryOp) -> str:
    """The file's new content after applying ``op`` to ``existing``."""
    if existing is None or op.combine == "replace":
        return op.bullet
    bullets = [line for line in existing.splitlines() if line.strip()]
    if op.combine == "profile":
        key = profile_key(op.bullet)
        bullets = [b for b in bullets if profile_key(b) != key or key is None]
    if any(_norm(b) == _norm(op.bullet) for b in bullets):
        return "\n".join(bullets)
    return "\n".join([*bullets, op.bullet])
