"""The viking:// filesystem: files, directories, access rules and directory summaries.

One tree per account (paths as in :mod:`.paths`), so accounts can never see each other.
Scopes:

- ``user/<user>/...``: private to that user, in dev mode as in api_key mode;
- ``resources/...`` and ``agent/...``: shared by the users of the account;
- ``system/...``: read-only.

Every directory outside sessions gets an L0 ``.abstract.md`` (1-2 sentences, <= 256 chars) and
an L1 ``.overview.md`` (its children, with links), regenerated when its children change; both
are indexed for search (levels 0 and 1) beside the files themselves (level 2).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .auth import Identity
from .errors import ApiError, invalid_argument, invalid_uri, not_found, permission_denied
from .paths import (
    ABSTRACT,
    AGENT_SPACE,
    OVERVIEW,
    SCOPES,
    USER_SPACE,
    context_type,
    in_sessions,
    memory_type,
    parent,
    parse_uri,
    to_uri,
)
from .search import Doc, SearchIndex
from .store import Store
from .summaries import (
    ABSTRACT_LIMIT,
    OVERVIEW_ENTRIES,
    OVERVIEW_LIMIT,
    describe,
    document_title,
    shorten,
)
from .util import iso_compact, iso_seconds, new_id, now

__all__ = ["Node", "Vfs"]


@dataclass
class Node:
    """A file or directory."""

    path: str
    name: str
    is_dir: bool
    size: int
    created_at: float
    updated_at: float
    id: str
    tags: list[str] = field(default_factory=list)

    @property
    def uri(self) -> str:
        return to_uri(self.path)

    def agent_entry(self, abstract: str = "") -> dict[str, Any]:
        """An ``fs/ls output=agent`` entry."""
        return {
            "uri": self.uri,
            "size": 0 if self.is_dir else self.size,
            "isDir": self.is_dir,
            "modTime": iso_compact(self.updated_at),
            "abstract": abstract,
        }

    def original_entry(self) -> dict[str, Any]:
        """An ``fs/ls output=original`` entry."""
        return {
            "name": self.name,
            "size": 4096 if self.is_dir else self.size,
            "mode": 493 if self.is_dir else 420,
            "modTime": iso_seconds(self.updated_at),
            "isDir": self.is_dir,
            "uri": self.uri,
        }


_COLUMNS = (
    "path, name, is_dir, length(CAST(content AS BLOB)) AS size, tags, created_at, updated_at, id"
)


def _node(row: Any) -> Node:
    return Node(
        path=row["path"],
        name=row["name"],
        is_dir=bool(row["is_dir"]),
        size=row["size"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        id=row["id"],
        tags=json.loads(row["tags"]),
    )


class Vfs:
    """The viking:// tree of every account, kept in step with the search index."""

    def __init__(self, store: Store, index: SearchIndex, stats: Counter[str]):
        self.store = store
        self.index = index
        self.stats = stats
        self._spaces: set[tuple[str, str]] = set()

    # --- access -------------------------------------------------------------------------------

    def resolve(self, identity: Identity, uri: str, perm: str = "read") -> str:
        """The path of ``uri`` if ``identity`` may ``perm`` (read|write|manage) it."""
        path = parse_uri(uri, identity.user)
        parts = path.split("/") if path else []
        if parts and parts[0] == "user" and len(parts) >= 2 and parts[1] != identity.user:
            raise permission_denied(f"Access denied for {uri}: {perm} permission required", uri)
        if perm != "read":
            if not parts or parts[0] not in SCOPES:
                raise invalid_uri(uri, "not inside a writable scope (user, agent, resources)")
            if parts[0] == "system" or len(parts) == 1:
                raise permission_denied(f"Access denied for {uri}: {perm} permission required", uri)
        return path

    # --- reads --------------------------------------------------------------------------------

    def get(self, account: str, path: str) -> Node | None:
        if not path:
            row = self.store.one(
                "SELECT MIN(created_at) AS c, MAX(updated_at) AS u FROM nodes WHERE account = ?",
                (account,),
            )
            if row is None or row["c"] is None:
                return None
            return Node("", account, True, 0, row["c"], row["u"], account)
        row = self.store.one(
            f"SELECT {_COLUMNS} FROM nodes WHERE account = ? AND path = ?", (account, path)
        )
        return _node(row) if row else None

    def read(self, account: str, path: str) -> str | None:
        row = self.store.one(
            "SELECT content FROM nodes WHERE account = ? AND path = ? AND is_dir = 0",
            (account, path),
        )
        return None if row is None else str(row["content"])

    def require_dir(self, account: str, path: str) -> Node:
        node = self.get(account, path)
        uri = to_uri(path)
        if node is None:
            raise not_found(f"Directory not found: {uri}", "directory", uri)
        if not node.is_dir:
            raise invalid_argument(f"not a directory: {uri}", {"resource": uri})
        return node

    def children(self, account: str, path: str, *, hidden: bool = False) -> list[Node]:
        rows = self.store.all(
            f"SELECT {_COLUMNS} FROM nodes WHERE account = ? AND parent = ? "
            "ORDER BY name COLLATE BINARY",
            (account, path),
        )
        return [n for n in map(_node, rows) if hidden or not n.name.startswith(".")]

    def visible_children(
        self, identity: Identity, path: str, *, hidden: bool = False
    ) -> list[Node]:
        """Children as ``identity`` may see them: ``viking://user`` lists only their own."""
        nodes = self.children(identity.account, path, hidden=hidden)
        if path == "user":
            nodes = [n for n in nodes if n.name == identity.user]
        return nodes

    def walk(
        self, identity: Identity, path: str, *, depth: int, hidden: bool = False
    ) -> list[tuple[Node, str]]:
        """Descendants in depth-first name order with their relative paths, ``depth`` levels."""
        out: list[tuple[Node, str]] = []

        def visit(current: str, rel: str, level: int) -> None:
            for node in self.visible_children(identity, current, hidden=hidden):
                child_rel = f"{rel}/{node.name}" if rel else node.name
                out.append((node, child_rel))
                if node.is_dir and (depth <= 0 or level < depth):
                    visit(node.path, child_rel, level + 1)

        visit(path, "", 1)
        return out

    def abstract_of(self, account: str, path: str) -> str:
        """A directory's L0 abstract ("" when it has none yet)."""
        text = self.read(account, f"{path}/{ABSTRACT}" if path else ABSTRACT)
        return text or ""

    # --- writes -------------------------------------------------------------------------------

    def write(
        self,
        account: str,
        path: str,
        content: str,
        mode: str = "replace",
        *,
        tags: list[str] | None = None,
        tag_mode: str = "replace",
    ) -> bool:
        """Write a file (creating parent directories); True when the file is new."""
        if mode not in ("replace", "append", "create"):
            raise invalid_argument(f"unsupported write mode: {mode}")
        uri = to_uri(path)
        with self.store.transaction():
            node = self.get(account, path)
            if node is not None and node.is_dir:
                raise invalid_argument(f"write only supports existing files, got directory: {uri}")
            created_dirs = self._makedirs(account, parent(path))
            old = (self.read(account, path) or "") if node is not None else ""
            text = old + content if mode == "append" else content
            new_tags = self._tags(path, node, tags, tag_mode)
            self._put(account, path, text, new_tags, node)
            self.stats["ContentWrite"] += 1
            self._refresh(account, [parent(path), *(parent(d) for d in created_dirs)])
        return node is None

    def _tags(
        self, path: str, node: Node | None, tags: list[str] | None, tag_mode: str
    ) -> list[str]:
        current = node.tags if node is not None else []
        if tag_mode == "clear":
            return []
        if tags is None:
            if current:
                return current
            kind = memory_type(path)
            return [f"memory_type={kind}"] if kind else []
        return list(dict.fromkeys([*current, *tags])) if tag_mode == "append" else list(tags)

    def _put(self, account: str, path: str, text: str, tags: list[str], node: Node | None) -> None:
        """Store a file's text and index it (no summary refresh)."""
        stamp = now()
        if node is None:
            self.store.run(
                "INSERT INTO nodes VALUES (?, ?, ?, ?, 0, ?, ?, ?, ?, ?)",
                (
                    account,
                    path,
                    parent(path),
                    path.rsplit("/", 1)[-1],
                    text,
                    json.dumps(tags),
                    stamp,
                    stamp,
                    new_id(),
                ),
            )
            created = stamp
        else:
            self.store.run(
                "UPDATE nodes SET content = ?, tags = ?, updated_at = ? "
                "WHERE account = ? AND path = ?",
                (text, json.dumps(tags), stamp, account, path),
            )
            created = node.created_at
        self._index(account, path, text, tags, created, stamp)

    def _makedirs(self, account: str, path: str) -> list[str]:
        """Create ``path`` and its missing ancestors; the directories created, top first."""
        if not path:
            return []
        missing: list[str] = []
        current = path
        while current:
            node = self.get(account, current)
            if node is not None:
                if not node.is_dir:
                    raise ApiError(
                        409,
                        "CONFLICT",
                        f"not a directory: {to_uri(current)}",
                        {"resource": to_uri(current)},
                    )
                break
            missing.append(current)
            current = parent(current)
        stamp = now()
        for directory in reversed(missing):
            self.store.run(
                "INSERT INTO nodes VALUES (?, ?, ?, ?, 1, '', '[]', ?, ?, ?)",
                (
                    account,
                    directory,
                    parent(directory),
                    directory.rsplit("/", 1)[-1],
                    stamp,
                    stamp,
                    new_id(),
                ),
            )
        return list(reversed(missing))

    def mkdir(self, account: str, path: str) -> bool:
        """Create a directory (and parents); False when it already existed."""
        with self.store.transaction():
            created = self._makedirs(account, path)
            self._refresh(account, [*created, *(parent(d) for d in created)])
        return bool(created)

    def delete(self, account: str, path: str, *, recursive: bool) -> int:
        """Remove a file, or a directory tree with ``recursive``; the number of files gone."""
        uri = to_uri(path)
        node = self.get(account, path)
        if node is None:
            return 0
        if node.is_dir and not recursive:
            raise invalid_argument(
                f"Cannot remove directory without --recursive: {uri}",
                {"resource": uri, "expected_flag": "recursive"},
            )
        with self.store.transaction():
            rows = self.store.all(
                "SELECT path, is_dir FROM nodes WHERE account = ? AND "
                "(path = ? OR (path > ? AND path < ?))",
                (account, path, path + "/", path + "0"),
            )
            self.store.run(
                "DELETE FROM nodes WHERE account = ? AND (path = ? OR (path > ? AND path < ?))",
                (account, path, path + "/", path + "0"),
            )
            for row in rows:
                self.index.remove(account, row["path"])
            self._refresh(account, [parent(path)])
        return sum(
            1
            for row in rows
            if not row["is_dir"] and not row["path"].endswith((f"/{ABSTRACT}", f"/{OVERVIEW}"))
        )

    def ensure_user_space(self, account: str, user: str) -> None:
        """Create ``viking://user/<user>`` and its standard directories on first use."""
        if (account, user) in self._spaces:
            return
        base = f"user/{user}"
        if self.get(account, f"{base}/sessions") is None:
            with self.store.transaction():
                created = self._makedirs(account, base)
                for name in USER_SPACE:
                    created += self._makedirs(account, f"{base}/{name}")
                self._refresh(account, [*created, *(parent(d) for d in created)])
        self._spaces.add((account, user))

    def init_account(self, account: str, admin: str) -> None:
        """What a new api_key-mode account starts with (the real server's layout)."""
        with self.store.transaction():
            created: list[str] = []
            for name in AGENT_SPACE:
                created += self._makedirs(account, f"agent/{name}")
            created += self._makedirs(account, "resources")
            created += self._makedirs(account, "system")
            self._refresh(account, created)
        self.ensure_user_space(account, admin)

    def set_summary(self, account: str, path: str, abstract: str, overview: str) -> None:
        """Write a directory's L0/L1 explicitly (archives do; others are generated)."""
        with self.store.transaction():
            for name, text in ((ABSTRACT, abstract), (OVERVIEW, overview)):
                target = f"{path}/{name}"
                self._put(account, target, text, [], self.get(account, target))

    # --- summaries ----------------------------------------------------------------------------

    def _summarized(self, path: str) -> bool:
        parts = path.split("/") if path else []
        if not parts or path == "user" or parts[0] == "system" or in_sessions(parts):
            return False
        return not any(p.startswith(".") for p in parts)

    def _refresh(self, account: str, paths: Iterable[str]) -> None:
        for path in dict.fromkeys(paths):
            if not self._summarized(path):
                continue
            node = self.get(account, path)
            if node is None or not node.is_dir:
                continue
            described = self._describe(account, path)
            for name, text in zip((ABSTRACT, OVERVIEW), described or ("", ""), strict=True):
                target = f"{path}/{name}"
                current = self.get(account, target)
                if described is None:  # an empty directory has nothing to summarize
                    if current is not None:
                        self.store.run(
                            "DELETE FROM nodes WHERE account = ? AND path = ?", (account, target)
                        )
                        self.index.remove(account, target)
                elif current is None or self.read(account, target) != text:
                    self._put(account, target, text, [], current)
            self.store.run(
                "UPDATE nodes SET updated_at = ? WHERE account = ? AND path = ?",
                (now(), account, path),
            )
            self.stats["Semantic"] += 1

    def _describe(self, account: str, path: str) -> tuple[str, str] | None:
        """(abstract, overview) of a directory (see :mod:`.summaries`)."""
        rows = self.store.all(
            "SELECT name, is_dir FROM nodes WHERE account = ? AND parent = ? "
            "AND name NOT LIKE '.%' ORDER BY name LIMIT ?",
            (account, path, OVERVIEW_ENTRIES + 1),
        )
        total = self.store.one(
            "SELECT COUNT(*) AS n FROM nodes WHERE account = ? AND parent = ? "
            "AND name NOT LIKE '.%'",
            (account, path),
        )
        title = ""
        if path.startswith("resources/"):
            first = self.store.one(
                "SELECT substr(content, 1, 400) AS head FROM nodes WHERE account = ? "
                "AND parent = ? AND is_dir = 0 AND name NOT LIKE '.%' ORDER BY name LIMIT 1",
                (account, path),
            )
            title = document_title(str(first["head"])) if first else ""
        children = [(str(row["name"]), bool(row["is_dir"])) for row in rows]
        return describe(path, children, int(total["n"]) if total else 0, title)

    # --- the search index ---------------------------------------------------------------------

    @staticmethod
    def indexed(path: str) -> bool:
        parts = path.split("/")
        return parts[0] != "system" and not in_sessions(parts)

    def _index(
        self, account: str, path: str, text: str, tags: list[str], created: float, updated: float
    ) -> None:
        if not self.indexed(path):
            return
        name = path.rsplit("/", 1)[-1]
        level = 0 if name == ABSTRACT else 1 if name == OVERVIEW else 2
        abstract = shorten(text, ABSTRACT_LIMIT if level == 2 else OVERVIEW_LIMIT)
        words = "" if level < 2 else name.removesuffix(".md").replace("_", " ") + "\n"
        doc = Doc(path, level, context_type(path), tuple(tags), abstract, created, updated)
        self.index.put(account, doc, words + text)
        self.stats["Embedding"] += 1

    def load_index(self) -> int:
        """Rebuild the search index from the database (at start); documents indexed."""
        rows = self.store.all(
            "SELECT account, path, content, tags, created_at, updated_at FROM nodes "
            "WHERE is_dir = 0"
        )
        for row in rows:
            self._index(
                row["account"],
                row["path"],
                row["content"],
                json.loads(row["tags"]),
                row["created_at"],
                row["updated_at"],
            )
        return len(self.index)
