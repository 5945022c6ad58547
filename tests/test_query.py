"""Query profiling: content tokens, evidence tokens and intent, in English and CJK."""

from __future__ import annotations

import pytest

from ov_agent_ext.query import content_tokens, evidence_tokens, profile_query

# --- content_tokens ------------------------------------------------------------------------------


def test_content_tokens_drop_stopwords_and_single_letters() -> None:
    assert content_tokens("How do I center a div in CSS?") == ["cent", "div", "css"]
    assert content_tokens("what is it and why would you do that") == []
    assert content_tokens("x y z") == []


def test_content_tokens_lowercase_and_keep_technical_words_whole() -> None:
    assert content_tokens("Node.js vs C++ and Python3 on k8s") == [
        "node.js",
        "vs",
        "c++",
        "python3",
        "k8s",
    ]
    assert content_tokens("PostgreSQL.") == ["postgresql"]


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("file", "files"),
        ("database", "databases"),
        ("class", "classes"),
        ("box", "boxes"),
        ("match", "matches"),
        ("dependency", "dependencies"),
        ("package", "packaging"),
        ("package", "packages"),
        ("run", "running"),
        ("stop", "stopped"),
        ("test", "testing"),
        ("test", "tester"),
        ("serve", "server"),
        ("servers", "served"),
        ("manage", "manager"),
        ("deploy", "deployed"),
        ("use", "uses"),
        ("user", "users"),
    ],
)
def test_content_tokens_stem_both_forms_alike(a: str, b: str) -> None:
    assert content_tokens(a) == content_tokens(b)
    assert len(content_tokens(a)) == 1


@pytest.mark.parametrize("word", ["status", "analysis", "class", "bus", "css", "redis"])
def test_content_tokens_do_not_strip_s_from_singulars(word: str) -> None:
    assert content_tokens(word) == [word]


def test_content_tokens_cjk_bigrams() -> None:
    assert content_tokens("数据库迁移") == ["数据", "据库", "库迁", "迁移"]
    assert content_tokens("猫") == ["猫"]  # a lone character is its own token
    assert content_tokens("我的猫") == ["猫"]  # function characters removed first
    assert content_tokens("東京") == ["東京"]
    assert content_tokens("데이터베이스") == ["데이", "이터", "터베", "베이", "이스"]


def test_content_tokens_mixed_latin_and_cjk() -> None:
    assert content_tokens("Falcon用PostgreSQL数据库") == [
        "falcon",
        "postgresql",
        "用",
        "数据",
        "据库",
    ]


def test_content_tokens_unique_in_first_occurrence_order() -> None:
    assert content_tokens("uv pip UV python pip uv") == ["uv", "pip", "python"]
    assert content_tokens("files file FILES") == ["file"]
    assert content_tokens("数据数据") == ["数据", "据数"]


# --- evidence_tokens -----------------------------------------------------------------------------


def test_evidence_tokens_drop_intent_words() -> None:
    assert evidence_tokens("I prefer uv, usually") == {"uv"}
    assert evidence_tokens("what do I like?") == set()
    assert evidence_tokens("Which editor do I prefer?") == {"editor"}
    assert evidence_tokens("when did we decide, last week?") == set()
    assert evidence_tokens("favourite preferences recently remembered") == set()


def test_evidence_tokens_are_content_tokens_minus_intent() -> None:
    text = "We decided to use PostgreSQL for the Falcon project last month"
    assert evidence_tokens(text) == {"postgresql", "falcon"}
    assert evidence_tokens(text) <= set(content_tokens(text))


def test_evidence_tokens_drop_cjk_intent_words_and_their_straddling_bigrams() -> None:
    assert evidence_tokens("我喜欢什么编辑器") == {"编辑", "辑器"}
    assert evidence_tokens("我喜欢吃苹果") == {"吃苹", "苹果"}
    assert evidence_tokens("我最近决定了") == set()
    assert evidence_tokens("我们什么时候上线") == {"上线"}
    assert "喜欢" in content_tokens("我喜欢什么编辑器")  # still a content token


# --- intent --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "prompt",
    [
        "which editor do I prefer?",
        "my preferred shell",
        "what's my favorite color",
        "my favourite font",
        "do I like tabs?",
        "what do I usually deploy with",
        "I always use ruff, right?",
        "would I rather use poetry",
        "我喜欢什么编辑器？",
        "我的偏好是什么",
        "我习惯用哪个终端",
        "好きな言語は？",
        "선호하는 편집기",
    ],
)
def test_wants_preference(prompt: str) -> None:
    assert profile_query(prompt).wants_preference


@pytest.mark.parametrize(
    "prompt",
    [
        "fix the failing test",
        "explain quicksort",
        "how do I center a div in CSS",
        "数据库迁移失败了",
        "Falcon uses PostgreSQL",
        "the alike function",
    ],
)
def test_wants_preference_false(prompt: str) -> None:
    assert not profile_query(prompt).wants_preference


@pytest.mark.parametrize(
    "prompt",
    [
        "when did we ship v2?",
        "what did I do yesterday",
        "the last deploy",
        "recent changes to falcon",
        "what happened recently",
        "two days ago",
        "what have we decided about the schema",
        "我们什么时候决定的",
        "最近在做什么",
        "昨天的会议",
        "上周的发布",
        "いつリリースした？",
        "언제 배포했어?",
    ],
)
def test_wants_temporal(prompt: str) -> None:
    assert profile_query(prompt).wants_temporal


@pytest.mark.parametrize(
    "prompt", ["explain quicksort", "which editor do I prefer", "我喜欢什么编辑器", "whenever"]
)
def test_wants_temporal_false(prompt: str) -> None:
    assert not profile_query(prompt).wants_temporal


def test_profile_query_combines_tokens_evidence_and_intent() -> None:
    profile = profile_query("When did I start to prefer uv over pip?")
    assert profile.tokens == ("start", "pref", "uv", "pip")
    assert profile.evidence == frozenset({"start", "uv", "pip"})
    assert profile.wants_preference
    assert profile.wants_temporal
    empty = profile_query("")
    assert empty.tokens == ()
    assert empty.evidence == frozenset()
    assert not empty.wants_preference
    assert not empty.wants_temporal
