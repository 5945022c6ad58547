"""Query profiling: what a prompt asks for, in English and CJK.

Recall gates its category boosts on intent (a preference memory is boosted only when the
prompt asks about preferences, an event only when it asks "when") and measures lexical
evidence with content tokens. Both sides (prompt and memory text) are tokenized the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "QueryProfile",
    "content_tokens",
    "evidence_tokens",
    "profile_query",
    "query_evidence",
]

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_WORD = re.compile(r"[a-z0-9][a-z0-9_+#.-]*[a-z0-9+#]|[a-z0-9]")

_STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers him his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours out over own
    same she should so some such than that the their theirs them then there these they this
    those through to too under until up very was we were what when where which while who whom
    why will with would you your yours yourself let lets let's please ok okay hi hello thanks
    thank yes yeah sure also again tell show give get got go going want wants would like""".split()
)
# Words that say what kind of answer is wanted, not what it is about: they make intent, never
# evidence that a memory is on topic ("what do I prefer" shares "prefer" with every preference).
# "work" is not one of them for memories ("I work at Nordwind Labs" is about work) but is for
# prompts, see _QUERY_GENERIC.
_INTENT_WORDS = frozenset(
    """prefer prefers preferred preference preferences favorite favourite favorites like likes
    liked love usually always never remember remembered recall know knew decide decided
    decision when yesterday today tomorrow recent recently ago last week month year earlier
    before use used using uses project projects thing things stuff something
    make made need needs help good best new remind explain describe summarize""".split()
)
_CJK_STOP = frozenset("的了是在我你他她它们这那有和与就都也还吗呢吧啊呀么什怎")
# The CJK counterparts of _INTENT_WORDS: they make intent (below), never evidence.
_CJK_INTENT = re.compile(
    "什么时候|喜欢|偏好|习惯|最爱|倾向|常用|时候|何时|昨天|上周|最近|之前|以前|刚才|记得|决定"
    "|好み|好き|いつ|昨日|선호|좋아|언제|어제|최근"
)

_PREFERENCE = re.compile(
    r"\b(prefer\w*|favou?rites?|like|likes|want|wants|usually|always|never|rather)\b"
    r"|喜欢|偏好|习惯|最爱|倾向|常用|好み|好き|선호|좋아",
    re.IGNORECASE,
)
_TEMPORAL = re.compile(
    r"\b(when|yesterday|today|last|recent|recently|ago|earlier|before|since|decided|date)\b"
    r"|什么时候|何时|昨天|上周|最近|之前|以前|刚才|いつ|昨日|最近|언제|어제|최근",
    re.IGNORECASE,
)


_SIBILANTS = ("s", "x", "z", "ch", "sh")


def _stem(word: str) -> str:
    """Light, predictable stemming: plurals, -ing/-ed/-er, a final -e, doubled consonants.

    Both forms of a word meet: file/files, database/databases, class/classes,
    package/packaging, run/running, serve/server. Only plain words are stemmed ("node.js",
    "c++", "python3" stay whole).
    """
    if not word.isalpha() or len(word) <= 3:
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif len(word) > 4 and word.endswith("es") and word[:-2].endswith(_SIBILANTS):
        word = word[:-2]  # classes, boxes, matches, wishes
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed", "er"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            if word[-1] == word[-2] and word[-1] not in "aeiouls":
                word = word[:-1]  # running -> run, stopped -> stop
            break
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]
    return word


def content_tokens(text: str) -> list[str]:
    """Content words (lowercased, stemmed, minus stopwords) and CJK character bigrams."""
    lowered = text.lower()
    tokens = [_stem(w) for w in _WORD.findall(lowered) if w not in _STOPWORDS and len(w) > 1]
    for run in _CJK_RUN.findall(lowered):
        chars = [c for c in run if c not in _CJK_STOP]
        if len(chars) == 1:
            tokens.append(chars[0])
        tokens.extend(chars[i] + chars[i + 1] for i in range(len(chars) - 1))
    return list(dict.fromkeys(tokens))  # unique, first occurrence order


_INTENT_STEMS = frozenset(_stem(w) for w in _INTENT_WORDS)


def evidence_tokens(text: str) -> set[str]:
    """Content tokens that can show a memory is on topic (intent words removed).

    CJK intent words are cut out of the text before the bigrams are made, so neither they
    ("喜欢") nor the bigrams straddling them ("欢用" in "喜欢用") count as evidence.
    """
    return {t for t in content_tokens(_CJK_INTENT.sub(" ", text)) if t not in _INTENT_STEMS}


@dataclass(frozen=True)
class QueryProfile:
    """What a prompt is about and what kind of memory it wants."""

    tokens: tuple[str, ...]
    evidence: frozenset[str]
    wants_preference: bool
    wants_temporal: bool


# In a prompt "work" is mostly mechanics ("explain how quicksort works"), not employment; a
# prompt about employment names it, and that name stands for the memory's word.
_QUERY_GENERIC = frozenset({"work"})
_QUERY_EXPANSIONS = {
    "company": "work",
    "employ": "work",  # employer, employed
    "job": "work",
    "workplace": "work",
    "city": "live",
    "hometown": "live",
}


def query_evidence(query: str) -> frozenset[str]:
    """A prompt's evidence tokens: generic prompt words out, employment/home words expanded."""
    tokens = evidence_tokens(query) - _QUERY_GENERIC
    return frozenset(tokens | {_QUERY_EXPANSIONS[t] for t in tokens if t in _QUERY_EXPANSIONS})


def profile_query(query: str) -> QueryProfile:
    """Profile a prompt for recall."""
    return QueryProfile(
        tokens=tuple(content_tokens(query)),
        evidence=query_evidence(query),
        wants_preference=bool(_PREFERENCE.search(query)),
        wants_temporal=bool(_TEMPORAL.search(query)),
    )
