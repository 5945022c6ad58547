"""Small shared helpers: the server's time formats, ids, slugs and the token estimate.

The real server writes timestamps in several shapes (one per subsystem); each helper here is
named after the place that uses it, so a response can match the real one field by field.
"""

from __future__ import annotations

import math
import re
import time
import uuid
from datetime import datetime, timezone

__all__ = [
    "estimate_tokens",
    "iso_compact",
    "iso_ms",
    "iso_seconds",
    "iso_us",
    "new_id",
    "now",
    "slug",
]

_WORD = re.compile(r"[^\W_]+")


def now() -> float:
    """Seconds since the epoch (one clock for the whole server)."""
    return time.time()


def _utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=timezone.utc)


def iso_ms(ts: float) -> str:
    """Session timestamps: ``2026-11-22T00:43:45.345Z``."""
    return _utc(ts).strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(ts * 1000) % 1000:03d}Z"


def iso_seconds(ts: float) -> str:
    """``fs/ls output=original`` and ``stat``: ``2026-11-22T00:44:14Z``."""
    return _utc(ts).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_compact(ts: float) -> str:
    """``fs/ls output=agent``: whole seconds with a ``.000Z`` tail."""
    return _utc(ts).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def iso_us(ts: float) -> str:
    """Message and task timestamps: ``2026-11-22T00:43:45.450773+00:00``."""
    return _utc(ts).isoformat(timespec="microseconds")


def new_id(prefix: str = "") -> str:
    """A random hex id, optionally prefixed (``msg_`` for messages)."""
    return prefix + uuid.uuid4().hex


def slug(text: str, *, words: int = 4, limit: int = 60, drop: frozenset[str] = frozenset()) -> str:
    """``"Python packaging!"`` -> ``"python_packaging"``: lowercase word characters joined by
    ``_``, CJK kept as is, at most ``words`` words and ``limit`` characters."""
    found = [w for w in _WORD.findall(text.lower()) if w not in drop]
    return "_".join(found[:words])[:limit].strip("_")


def estimate_tokens(text: str) -> int:
    """The OpenViking estimate: ``ceil(1.5 * wide + other / 4)``, wide = UTF-16 units >= U+3000.

    Measured on the real server: "abcd" -> 1, "abcde" -> 2, three CJK characters -> 5.
    """
    wide = other = 0
    for char in text:
        code = ord(char)
        if code > 0xFFFF:
            wide += 2  # a surrogate pair: two UTF-16 units, both >= U+3000
        elif code >= 0x3000:
            wide += 1
        else:
            other += 1
    return math.ceil(1.5 * wide + other / 4)
