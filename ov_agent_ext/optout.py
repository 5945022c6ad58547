"""Opting out: sessions that must not reach OpenViking at all, or must not be remembered.

- ``bypassPatterns``: gitignore-style globs matched against the working directory and the
  session id. A bypassed session makes no OpenViking call at all (no recall, no capture), so
  throwaway experiments in ``/tmp/**`` never touch long-term memory.
- Incognito (``incognito`` / ``OV_AGENT_EXT_INCOGNITO=1``, or per session): recall still
  works, but nothing is captured and nothing is committed.
"""

from __future__ import annotations

import functools
from pathlib import PurePosixPath

import pathspec

from .config import OVConfig

__all__ = ["bypass_reason"]


@functools.lru_cache(maxsize=32)
def _spec(patterns: tuple[str, ...]) -> pathspec.GitIgnoreSpec:
    # GitIgnoreSpec, not the "gitwildmatch" factory that pathspec >= 1.0 deprecates.
    return pathspec.GitIgnoreSpec.from_lines(patterns)


def bypass_reason(config: OVConfig, *, cwd: str | None, session_id: str) -> str | None:
    """Why this session is bypassed (the matching subject), or None to go ahead."""
    if not config.bypass_patterns:
        return None
    spec = _spec(config.bypass_patterns)
    if cwd:
        # Match the absolute directory and each of its parents, so "/tmp/**" and "scratch/"
        # both catch /tmp/x/scratch/y.
        path = PurePosixPath(cwd)
        for candidate in (path, *path.parents):
            text = str(candidate).lstrip("/")
            if text and (spec.match_file(text) or spec.match_file(text + "/")):
                return f"working directory {cwd} matches bypassPatterns"
    if session_id and spec.match_file(session_id):
        return f"session {session_id} matches bypassPatterns"
    return None
