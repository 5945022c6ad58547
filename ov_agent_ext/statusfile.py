"""Status snapshots on disk, so ``ov-agent-ext status`` can see a running agent's state.

An agent's ``OpenVikingExtension`` writes ``<stateDir>/status/<session>.json`` after recall,
commits and shutdown; the CLI, a separate process, reads the most recent ones. The files hold
no secrets (``Status`` has none) but are written 0600 like everything in the state directory.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

__all__ = ["read_statuses", "write_status"]

_KEEP = 50  # snapshots kept; older sessions' files are removed


def _directory(state_dir: Path) -> Path:
    return state_dir / "status"


def _file_name(session_id: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in session_id)
    return f"{safe[:120]}.json"


def write_status(state_dir: Path, session_id: str, status: dict[str, Any]) -> None:
    """Atomically replace this session's snapshot."""
    directory = _directory(state_dir)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    target = directory / _file_name(session_id)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({**status, "saved_at": time.time()}, fh, ensure_ascii=False)
    os.replace(tmp, target)
    files = sorted(directory.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in files[_KEEP:]:
        old.unlink(missing_ok=True)


def read_statuses(state_dir: Path, *, limit: int = 3) -> list[dict[str, Any]]:
    """The most recently saved snapshots, newest first; unreadable files are skipped."""
    directory = _directory(state_dir)
    if not directory.is_dir():
        return []
    files = sorted(directory.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    out: list[dict[str, Any]] = []
    for path in files[:limit]:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            out.append(data)
    return out
