"""viking:// URIs and what a path is: parsing, scopes, context and memory types.

Paths are stored without the ``viking://`` prefix (``user/alice/memories/profile.md``; the
account's root is ``""``). ``viking://~/...`` is the caller's own space.
"""

from __future__ import annotations

from .errors import invalid_uri, permission_denied

__all__ = [
    "ABSTRACT",
    "AGENT_SPACE",
    "MEMORY_TYPES",
    "OVERVIEW",
    "SCOPES",
    "USER_SPACE",
    "context_type",
    "in_sessions",
    "memory_type",
    "parent",
    "parse_uri",
    "to_uri",
]

SCOPES = ("agent", "resources", "system", "user")
ABSTRACT, OVERVIEW = ".abstract.md", ".overview.md"
USER_SPACE = ("memories", "peers", "privacy", "resources", "sessions", "skills")
AGENT_SPACE = ("endpoints", "payments", "skills", "tools")
MEMORY_TYPES = ("preferences", "entities", "events", "cases", "trajectories", "experiences")


def to_uri(path: str) -> str:
    return "viking://" + path


def parse_uri(uri: str, user: str) -> str:
    """``viking://user/alice/x.md`` -> ``user/alice/x.md``; ``viking://~`` is the caller."""
    if not uri.startswith("viking://"):
        raise invalid_uri(uri, "URI must start with 'viking://'")
    parts = [p for p in uri[len("viking://") :].split("/") if p]
    for part in parts:
        if part in (".", ".."):
            raise permission_denied(f"Unsafe URI traversal segment '{part}' in {uri}", uri)
    if parts and parts[0] == "~":
        parts = ["user", user, *parts[1:]]
    return "/".join(parts)


def parent(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


def in_sessions(parts: list[str]) -> bool:
    """Whether split path ``parts`` lie in a user's sessions (never indexed or summarized)."""
    return len(parts) >= 3 and parts[0] == "user" and parts[2] == "sessions"


def context_type(path: str) -> str:
    """``memory``, ``resource`` or ``skill``, from where the path lives."""
    parts = path.split("/")
    section = ""
    if parts[0] == "user" and len(parts) > 2:
        section = parts[2]
    elif parts[0] == "agent" and len(parts) > 1:
        section = parts[1]
    if section == "memories":
        return "memory"
    return "skill" if section == "skills" else "resource"


def memory_type(path: str) -> str | None:
    """The ``memory_type`` of a memory file (``preferences``, ``profile``...), else None."""
    parts = path.split("/")
    if len(parts) < 4 or parts[0] != "user" or parts[2] != "memories" or parts[-1][:1] == ".":
        return None
    if len(parts) >= 5:
        return parts[3] if parts[3] in MEMORY_TYPES else None
    return parts[3].removesuffix(".md") if parts[3].endswith(".md") else None
