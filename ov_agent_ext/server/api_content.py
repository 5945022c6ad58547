"""Routes: content (read/abstract/overview/write), fs (ls/tree/stat/mkdir/rm), search, resources."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.routing import Route

from .auth import Identity
from .errors import ApiError, invalid_argument, not_found
from .http import State, endpoint, ok, read_body, read_query
from .paths import ABSTRACT, OVERVIEW, context_type, parse_uri, to_uri
from .schemas import (
    AddResourceRequest,
    DeleteQuery,
    FindRequest,
    LsQuery,
    MkdirRequest,
    ReadQuery,
    SearchRequest,
    TreeQuery,
    UriQuery,
    WriteRequest,
)
from .search import Doc, Query
from .util import now
from .vfs import Node

__all__ = ["parse_time", "routes"]

_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_KINDS = {
    "memory": "memory",
    "memories": "memory",
    "resource": "resource",
    "resources": "resource",
    "skill": "skill",
    "skills": "skill",
}
_BUCKETS = {"memory": "memories", "resource": "resources", "skill": "skills"}
_LISTS = frozenset({"tags", "extra_fields"})


def parse_time(value: str) -> float:
    """``7d`` / ``24h`` / ``30m`` ago, or an ISO date or datetime (UTC when naive)."""
    relative = _RELATIVE.match(value.strip())
    if relative:
        return now() - float(relative.group(1)) * _UNITS[relative.group(2)]
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise invalid_argument(f"Invalid isoformat string: {value!r}") from None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)).timestamp()


def _levels(value: int | str | list[int] | None) -> frozenset[int] | None:
    if value is None:
        return None
    if isinstance(value, int):
        return frozenset({value})
    if isinstance(value, list):
        return frozenset(value)
    try:
        return frozenset(int(v) for v in value.split(",") if v.strip())
    except ValueError:
        raise invalid_argument(f"Invalid level: {value!r}") from None


def _kinds(value: str | list[str] | None) -> frozenset[str] | None:
    if value is None:
        return None
    values = [value] if isinstance(value, str) else value
    return frozenset(_KINDS.get(v.lower(), v.lower()) for v in values)


def routes(state: State) -> list[Route]:
    """The routes of this module, bound to ``state``."""
    vfs = state.vfs

    def node_or_404(identity: Identity, uri: str, path: str) -> Node:
        node = vfs.get(identity.account, path)
        if node is None:
            raise not_found(f"File not found: {uri}", "file", uri)
        return node

    # --- content ------------------------------------------------------------------------------

    async def read(request: Request, identity: Identity) -> Any:
        query = read_query(request, ReadQuery)
        path = vfs.resolve(identity, query.uri)
        node = node_or_404(identity, query.uri, path)
        if node.is_dir:
            raise invalid_argument(
                f"Directory URI is not readable as a file: {query.uri}. List it first, then "
                "read a file URI.",
                {"resource": query.uri, "expected": "file", "actual": "directory"},
            )
        text = vfs.read(identity.account, path) or ""
        if query.offset or query.limit >= 0:
            lines = text.splitlines(keepends=True)
            end = None if query.limit < 0 else query.offset + query.limit
            text = "".join(lines[query.offset : end])
        return text

    def summary(name: str, placeholder: str) -> Any:
        async def handler(request: Request, identity: Identity) -> Any:
            uri = read_query(request, UriQuery).uri
            path = vfs.resolve(identity, uri)
            node = vfs.get(identity.account, path)
            if node is None:
                raise not_found(f"Resource not found: {uri}", "resource", uri)
            directory = path if node.is_dir else path.rsplit("/", 1)[0]
            text = vfs.read(identity.account, f"{directory}/{name}" if directory else name)
            return text if text is not None else placeholder.format(uri=to_uri(directory))

        handler.__name__ = name.strip(".").replace(".", "_")
        return handler

    async def write(request: Request, identity: Identity) -> Any:
        body = await read_body(request, WriteRequest)
        path = vfs.resolve(identity, body.uri, "write")
        if path.startswith("user/"):
            vfs.ensure_user_space(identity.account, identity.user)
        vfs.write(
            identity.account, path, body.content, body.mode, tags=body.tags, tag_mode=body.tag_mode
        )
        uri = to_uri(path)
        result = {
            "uri": uri,
            "root_uri": to_uri(path.rsplit("/", 1)[0]),
            "context_type": context_type(path),
            "mode": body.mode,
            "written_bytes": len(body.content.encode()),
            "content_updated": True,
            "semantic_status": "completed",
            "vector_status": "completed",
            "queue_status": None,
        }
        result["task_id"] = state.tasks.record(identity, "content_write", uri, dict(result))
        return ok(result, short=True)

    # --- fs -----------------------------------------------------------------------------------

    def entry(identity: Identity, node: Node, query: LsQuery, rel: str | None) -> Any:
        if query.simple:
            return node.uri
        if query.output == "original":
            data = node.original_entry()
        else:
            abstract = vfs.abstract_of(identity.account, node.path) if node.is_dir else ""
            data = node.agent_entry(abstract[: max(0, query.abs_limit)])
        if rel is not None:
            data["rel_path"] = rel
        if query.include_tags:
            data["tags"] = node.tags
        return data

    def listing(identity: Identity, query: LsQuery, items: list[tuple[Node, str | None]]) -> Any:
        if query.sort_by == "mtime":
            items.sort(key=lambda item: item[0].updated_at)
        if query.sort_order == "desc":
            items.reverse()
        limit = query.limit or query.node_limit
        page = items[query.offset : query.offset + limit]
        has_more = query.offset + limit < len(items)
        return ok([entry(identity, n, query, rel) for n, rel in page], has_more=has_more)

    async def ls(request: Request, identity: Identity) -> Any:
        query = read_query(request, LsQuery, _LISTS)
        path = vfs.resolve(identity, query.uri)
        vfs.require_dir(identity.account, path)
        hidden = query.show_all_hidden
        items: list[tuple[Node, str | None]]
        if query.recursive:
            items = [(n, r) for n, r in vfs.walk(identity, path, depth=0, hidden=hidden)]
        else:
            items = [(n, None) for n in vfs.visible_children(identity, path, hidden=hidden)]
        return listing(identity, query, items)

    async def tree(request: Request, identity: Identity) -> Any:
        query = read_query(request, TreeQuery, _LISTS)
        path = vfs.resolve(identity, query.uri)
        vfs.require_dir(identity.account, path)
        walked = vfs.walk(identity, path, depth=query.level_limit, hidden=query.show_all_hidden)
        items: list[tuple[Node, str | None]] = [
            (n, r) for n, r in walked if n.is_dir or not query.directories_only
        ]
        return listing(identity, query, items)

    async def stat(request: Request, identity: Identity) -> Any:
        uri = read_query(request, UriQuery).uri
        path = vfs.resolve(identity, uri)
        node = node_or_404(identity, uri, path)
        data = node.original_entry()
        data.update(uri=uri if not path else node.uri, isLocked=False)
        if node.is_dir:
            data["count"] = len(vfs.visible_children(identity, path))
        else:
            data["id"] = node.id
        return data

    async def mkdir(request: Request, identity: Identity) -> Any:
        body = await read_body(request, MkdirRequest)
        path = vfs.resolve(identity, body.uri, "write")
        if not vfs.mkdir(identity.account, path):
            uri = to_uri(path)
            raise ApiError(409, "CONFLICT", f"already exists: {uri}", {"resource": uri})
        return {"uri": to_uri(path)}

    async def remove(request: Request, identity: Identity) -> Any:
        query = read_query(request, DeleteQuery)
        path = vfs.resolve(identity, query.uri, "manage")
        count = vfs.delete(identity.account, path, recursive=query.recursive)
        uri = to_uri(path)
        result = {"uri": uri, "estimated_deleted_count": count}
        result["task_id"] = state.tasks.record(identity, "fs_delete", uri, dict(result))
        return result

    # --- search -------------------------------------------------------------------------------

    def scopes(identity: Identity, target: str | list[str]) -> list[str]:
        mine = f"user/{identity.user}"
        everything = [mine, "resources", "agent"]
        targets = [target] if isinstance(target, str) else target
        targets = [t for t in targets if t]
        if not targets:
            return everything
        out: list[str] = []
        for uri in targets:
            path = parse_uri(uri, identity.user)
            parts = path.split("/") if path else []
            if not parts:
                out += everything
            elif path == "user":
                out.append(mine)
            elif parts[0] != "user" or parts[1] == identity.user:
                out.append(path)
            # another user's space: nothing of it is visible, so nothing is added
        return out

    def hit(identity: Identity, doc: Doc, score: float, read_content: bool) -> dict[str, Any]:
        data: dict[str, Any] = {
            "context_type": doc.context_type,
            "uri": to_uri(doc.path),
            "level": doc.level,
            "score": score,
            "abstract": doc.abstract,
            "tags": list(doc.tags),
        }
        if read_content and doc.level == 2:
            data["content"] = vfs.read(identity.account, doc.path) or ""
        return data

    def run_find(identity: Identity, body: FindRequest, exclude: list[str]) -> dict[str, Any]:
        query = Query(
            text=body.query,
            scopes=scopes(identity, body.target_uri),
            limit=max(0, body.node_limit or body.limit),
            score_threshold=body.score_threshold,
            context_types=_kinds(body.context_type),
            levels=_levels(body.level),
            tags=tuple(body.tags or ()),
            since=parse_time(body.since) if body.since else None,
            until=parse_time(body.until) if body.until else None,
            time_field=body.time_field or "updated_at",
            exclude=frozenset(parse_uri(u, identity.user) for u in exclude),
        )
        found = state.index.account(identity.account).find(query) if query.scopes else []
        result: dict[str, Any] = {"memories": [], "resources": [], "skills": []}
        for doc, score in found:
            bucket = _BUCKETS.get(doc.context_type, "resources")
            result[bucket].append(hit(identity, doc, score, body.read_content))
        result["total"] = len(found)
        return result

    async def find(request: Request, identity: Identity) -> Any:
        body = await read_body(request, FindRequest)
        return ok(run_find(identity, body, []), short=True)

    async def search(request: Request, identity: Identity) -> Any:
        body = await read_body(request, SearchRequest)
        result = run_find(identity, body, body.exclude_uris)
        if body.mode == "list":
            return ok(result, short=True)
        hits = sorted(
            (h for bucket in ("memories", "resources", "skills") for h in result[bucket]),
            key=lambda h: -h["score"],
        )
        entries = [
            {
                "uri": h["uri"],
                "category": h["tags"][0].split("=", 1)[1] if h["tags"] else h["context_type"],
                "score": h["score"],
                "detail": "abstract",
                "text": h["abstract"],
                "origin": "self",
            }
            for h in hits
        ]
        rendered = "\n".join(
            f'<memory uri="{e["uri"]}" type="{e["category"]}" score="{e["score"]:.2f}" '
            f'detail="abstract">\n{e["text"]}\n</memory>'
            for e in entries
        )
        stats = {"candidates": len(hits), "returned": len(entries), "max_tokens": body.max_tokens}
        return ok(
            {"entries": entries, "rendered": rendered, "digest": "", "stats": stats}, short=True
        )

    # --- resources ----------------------------------------------------------------------------

    async def temp_upload(request: Request, identity: Identity) -> Any:
        async with request.form() as form:
            upload = form.get("file")
            if not isinstance(upload, UploadFile):
                raise ApiError(
                    400,
                    "INVALID_ARGUMENT",
                    "Invalid request parameters: body.file: Field required",
                    {
                        "validation_errors": [
                            {
                                "loc": ["body", "file"],
                                "message": "Field required",
                                "type": "missing",
                            }
                        ]
                    },
                    short=True,
                )
            data = await upload.read()
            name = upload.filename or "upload"
        temp_id = state.resources.save_upload(identity, name, data)
        return ok({"temp_file_id": temp_id}, short=True)

    async def add_resource(request: Request, identity: Identity) -> Any:
        body = await read_body(request, AddResourceRequest)
        return ok(await state.resources.add(identity, body), short=True)

    abstract = summary(ABSTRACT, "# {uri} [Directory abstract is not ready]")
    overview = summary(OVERVIEW, "# {uri}\n\n[Directory overview is not ready]")
    return [
        Route("/api/v1/content/read", endpoint(state, "data", read), methods=["GET"]),
        Route("/api/v1/content/abstract", endpoint(state, "data", abstract), methods=["GET"]),
        Route("/api/v1/content/overview", endpoint(state, "data", overview), methods=["GET"]),
        Route("/api/v1/content/write", endpoint(state, "data", write), methods=["POST"]),
        Route("/api/v1/fs/ls", endpoint(state, "data", ls), methods=["GET"]),
        Route("/api/v1/fs/tree", endpoint(state, "data", tree), methods=["GET"]),
        Route("/api/v1/fs/stat", endpoint(state, "data", stat), methods=["GET"]),
        Route("/api/v1/fs/mkdir", endpoint(state, "data", mkdir), methods=["POST"]),
        Route("/api/v1/fs", endpoint(state, "data", remove), methods=["DELETE"]),
        Route("/api/v1/search/find", endpoint(state, "data", find), methods=["POST"]),
        Route("/api/v1/search/search", endpoint(state, "data", search), methods=["POST"]),
        Route(
            "/api/v1/resources/temp_upload", endpoint(state, "data", temp_upload), methods=["POST"]
        ),
        Route("/api/v1/resources", endpoint(state, "data", add_resource), methods=["POST"]),
    ]
