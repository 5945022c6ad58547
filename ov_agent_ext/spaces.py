"""URI space resolution: short forms such as ``viking://user/memories`` -> the caller's space.

OpenViking namespaces a user's data as ``viking://user/<space>/memories/...`` (0.5.2: the space
is the user id) while older servers and other layouts differ, e.g. ``viking://agent/skills``
sits directly under the scope on 0.5.2 but under ``viking://agent/<space>/skills`` before. So
the layout is discovered, not assumed: the scope root is listed once (``fs/ls``), the caller's
identity read once (``system/status``), and both cached for the client's lifetime.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from .errors import NotFoundError, ServerError

if TYPE_CHECKING:
    from .client import OVClient

__all__ = ["RESERVED_NAMES", "SpaceResolver", "split_uri"]

# Directory names that live *inside* a space, so a URI starting with one lacks its space.
RESERVED_NAMES = frozenset(
    {"memories", "skills", "instructions", "workspaces", "peers", "sessions", "resources"}
)
_SCOPES = ("user", "agent")


def split_uri(uri: str) -> tuple[str, list[str]] | None:
    """``viking://scope/a/b`` -> ``("scope", ["a", "b"])``; None for other URIs."""
    if not uri.startswith("viking://"):
        return None
    parts = [p for p in uri.removeprefix("viking://").split("/") if p]
    if not parts:
        return None
    return parts[0], parts[1:]


class SpaceResolver:
    """Discovers and caches the caller's space under ``viking://user`` and ``viking://agent``."""

    def __init__(self, client: OVClient):
        self._client = client
        self._roots: dict[str, frozenset[str]] = {}
        self._identity: str | None = None
        self._server_identity = False  # the identity came from the server, not from config
        self._lock = asyncio.Lock()

    def clear(self) -> None:
        """Forget what was discovered (after the identity or the server changed)."""
        self._roots.clear()
        self._identity = None
        self._server_identity = False

    async def identity(self) -> str:
        """The caller's user id as the server sees it (``system/status``), else configured."""
        if self._identity is None:
            user: Any = None
            try:
                status = await self._client.system_status()
                user = status.get("user")
            except ServerError:
                pass  # an older server without system/status: use what we were configured with
            if isinstance(user, dict):
                user = user.get("user_id") or user.get("id") or user.get("name")
            self._server_identity = bool(user)
            self._identity = str(user) if user else (self._client.config.user or "default")
        return self._identity

    async def _root_names(self, scope: str) -> frozenset[str]:
        if scope not in self._roots:
            try:
                body = await self._client._request(
                    "GET",
                    "/api/v1/fs/ls",
                    kind="read",
                    params={"uri": f"viking://{scope}", "output": "original"},
                )
            except NotFoundError:
                body = []
            names = set()
            for entry in body if isinstance(body, list) else []:
                if isinstance(entry, dict) and entry.get("isDir", True):
                    name = (
                        entry.get("name") or str(entry.get("uri", "")).rstrip("/").rsplit("/")[-1]
                    )
                    if name:
                        names.add(str(name))
            self._roots[scope] = frozenset(names)
        return self._roots[scope]

    async def scope_space(self, scope: str) -> str:
        """The space name under ``viking://<scope>`` that belongs to the caller."""
        async with self._lock:
            names = await self._root_names(scope)
            preferred = await self.identity()
        if scope == "user" and self._server_identity:
            # The server named the caller: that is the space, whatever else is listed (in dev
            # mode the user root lists every user of the account).
            return preferred
        if scope == "agent":
            preferred = self._client.config.agent_id or preferred
        candidates = sorted(n for n in names if not n.startswith("."))
        if preferred in candidates:
            return preferred
        if len(candidates) == 1:  # one space under the scope: it is ours (older servers)
            return candidates[0]
        return preferred

    async def resolve_uri(self, uri: str) -> str:
        """Insert the caller's space into a short user/agent URI; other URIs pass unchanged.

        >>> # viking://user/memories/x.md -> viking://user/alice/memories/x.md  (alice = space)
        """
        split = split_uri(uri)
        if split is None:
            return uri
        scope, rest = split
        if scope not in _SCOPES or not rest or rest[0] not in RESERVED_NAMES:
            return uri
        async with self._lock:
            names = await self._root_names(scope)
        if names & RESERVED_NAMES or (scope == "agent" and not names):
            # A flat layout (0.5.2's viking://agent/skills): nothing under this scope is
            # per-space, so the URI is already complete, whether or not it exists. An agent
            # root that does not exist yet (a new account on 0.5.2) is no evidence of spaces.
            # The user scope is always per-user, so an empty user root still gets the space.
            return uri
        space = await self.scope_space(scope)
        trailing = "/" if uri.endswith("/") else ""
        return f"viking://{scope}/{space}/" + "/".join(rest) + trailing
