"""Typed shapes of what the client sends and receives (OpenViking 0.5.2).

Response models ignore fields they do not name but keep them (``extra="allow"``): the server
adds fields between releases, and a new field must never break a hook.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "AddMessagesResult",
    "Archive",
    "CommitResult",
    "ContextPart",
    "FindResult",
    "FsEntry",
    "HealthInfo",
    "Message",
    "SearchHit",
    "SessionContext",
    "SessionInfo",
    "TaskInfo",
    "TextPart",
    "ToolPart",
]


class _Response(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


# --- requests --------------------------------------------------------------------------------


class TextPart(BaseModel):
    """Plain text inside a message."""

    type: Literal["text"] = "text"
    text: str


class ContextPart(BaseModel):
    """A reference to a viking:// URI the turn used."""

    type: Literal["context"] = "context"
    uri: str
    context_type: str = "memory"
    abstract: str = ""


class ToolPart(BaseModel):
    """One tool call: its input always, its output only when captured."""

    type: Literal["tool"] = "tool"
    tool_id: str
    tool_name: str
    tool_input: dict[str, Any] = Field(default_factory=dict)
    tool_output: str = ""
    tool_status: Literal["completed", "error", "running"] = "completed"


Part = TextPart | ContextPart | ToolPart


class Message(BaseModel):
    """A session message: plain ``content`` or structured ``parts``."""

    model_config = ConfigDict(frozen=True)

    role: Literal["user", "assistant"]
    content: str | None = None
    parts: list[Part] | None = None
    peer_id: str | None = None
    created_at: str | None = None

    @model_validator(mode="after")
    def _has_content(self) -> Message:
        if self.content is None and not self.parts:
            raise ValueError("a message needs content or parts")
        return self

    def to_request(self) -> dict[str, Any]:
        """The JSON body the server accepts (unset fields left out: it rejects nulls nowhere,
        but smaller bodies are cheaper to queue)."""
        return self.model_dump(exclude_none=True)


# --- responses -------------------------------------------------------------------------------


class HealthInfo(_Response):
    """``GET /health`` (not enveloped)."""

    status: str = "ok"
    healthy: bool = True
    version: str = ""
    auth_mode: str = ""


class SessionInfo(_Response):
    """``GET /api/v1/sessions/{id}`` and ``POST /api/v1/sessions``."""

    session_id: str
    uri: str = ""
    message_count: int = 0
    commit_count: int = 0
    pending_tokens: int = 0
    total_message_count: int = 0
    last_commit_at: str | None = None


class AddMessagesResult(_Response):
    """What adding one message or a batch returns."""

    session_id: str
    message_count: int = 0
    added: int = 0
    pending_tokens: int = 0


class TaskInfo(_Response):
    """A background task (memory extraction after a commit)."""

    task_id: str
    status: str = "pending"  # pending | running | completed | failed | cancelled
    result: dict[str, Any] | None = None
    error: Any = None

    @property
    def done(self) -> bool:
        return self.status in ("completed", "failed", "cancelled")

    @property
    def memories_extracted(self) -> int:
        """Total memories the task wrote (``result.memories_extracted`` is a dict of counts)."""
        counts = (self.result or {}).get("memories_extracted") or {}
        if isinstance(counts, dict):
            return sum(v for v in counts.values() if isinstance(v, int))
        return counts if isinstance(counts, int) else 0


class CommitResult(_Response):
    """``POST /sessions/{id}/commit``; ``task`` is filled by ``commit_and_wait``."""

    session_id: str = ""
    status: str = "accepted"  # accepted | skipped
    task_id: str | None = None
    archive_uri: str | None = None
    archived: bool = False
    reason: str | None = None
    task: TaskInfo | None = None
    timed_out: bool = False
    wait_error: str | None = None

    @property
    def archive_id(self) -> str | None:
        """``archive_NNN`` from the archive URI, for ``get_archive``."""
        if not self.archive_uri:
            return None
        return self.archive_uri.rstrip("/").rsplit("/", 1)[-1]


_MEMORY_TYPE_TAG = re.compile(r"^memory_type=(.+)$")


class SearchHit(_Response):
    """One ``find``/``search`` hit. Level 0/1 are directory summaries, 2 a real file."""

    uri: str
    context_type: str = ""
    level: int = 2
    score: float = 0.0
    abstract: str = ""
    overview: str | None = None
    tags: list[str] = Field(default_factory=list)

    @property
    def category(self) -> str:
        """The memory type: the ``memory_type=`` tag, else derived from the URI path."""
        for tag in self.tags:
            match = _MEMORY_TYPE_TAG.match(tag)
            if match:
                return match.group(1)
        parts = self.uri.removeprefix("viking://").split("/")
        if "memories" in parts:
            rest = parts[parts.index("memories") + 1 :]
            if len(rest) > 1:
                return rest[0]
            if rest and rest[0].endswith(".md") and not rest[0].startswith("."):
                return rest[0].removesuffix(".md")
        return self.context_type

    @property
    def is_summary(self) -> bool:
        """A directory summary (``.abstract.md``/``.overview.md``), not a memory itself."""
        name = self.uri.rstrip("/").rsplit("/", 1)[-1]
        return self.level < 2 or name in (".abstract.md", ".overview.md")


class FindResult(_Response):
    """``POST /api/v1/search/find``: hits grouped by context type."""

    memories: list[SearchHit] = Field(default_factory=list)
    resources: list[SearchHit] = Field(default_factory=list)
    skills: list[SearchHit] = Field(default_factory=list)
    total: int = 0

    def all_hits(self) -> list[SearchHit]:
        """Every hit, best score first."""
        hits = [*self.memories, *self.resources, *self.skills]
        return sorted(hits, key=lambda h: h.score, reverse=True)


class FsEntry(_Response):
    """A ``fs/ls`` or ``fs/stat`` entry."""

    uri: str = ""
    name: str = ""
    size: int = 0
    is_dir: bool = Field(False, alias="isDir")
    mod_time: str | None = Field(None, alias="modTime")
    abstract: str = ""

    @property
    def basename(self) -> str:
        return self.name or self.uri.rstrip("/").rsplit("/", 1)[-1]


class SessionContext(_Response):
    """``GET /sessions/{id}/context``: the archive overview plus the live messages."""

    latest_archive_overview: str = ""
    pre_archive_abstracts: list[Any] = Field(default_factory=list)
    messages: list[dict[str, Any]] = Field(default_factory=list)
    estimated_tokens: int = Field(0, alias="estimatedTokens")
    stats: dict[str, Any] = Field(default_factory=dict)


class Archive(_Response):
    """``GET /sessions/{id}/archives/{archive_id}``: an archive expanded to raw messages."""

    archive_id: str
    abstract: str = ""
    overview: str = ""
    messages: list[dict[str, Any]] = Field(default_factory=list)
