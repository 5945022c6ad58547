"""Routes: sessions, messages, commit, archives, context."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.routing import Route

from .auth import Identity
from .http import State, endpoint, ok, read_body, read_query
from .schemas import (
    AddMessageRequest,
    BatchAddRequest,
    CommitRequest,
    ContextQuery,
    CreateSessionRequest,
)

__all__ = ["routes"]


def routes(state: State) -> list[Route]:
    """The routes of this module, bound to ``state``."""
    sessions = state.sessions

    def sid(request: Request) -> str:
        return str(request.path_params["session_id"])

    async def create(request: Request, identity: Identity) -> Any:
        body = await read_body(request, CreateSessionRequest, required=False)
        return sessions.create(identity, body.session_id)

    async def list_sessions(request: Request, identity: Identity) -> Any:
        return sessions.list_sessions(identity)

    async def get(request: Request, identity: Identity) -> Any:
        if request.query_params.get("auto_create", "").lower() in ("true", "1", "yes"):
            sessions.ensure(identity, sid(request))
        return sessions.info(identity, sid(request))

    async def delete(request: Request, identity: Identity) -> Any:
        return sessions.delete(identity, sid(request))

    async def add_message(request: Request, identity: Identity) -> Any:
        message = await read_body(request, AddMessageRequest)
        result = sessions.add(identity, sid(request), [message])
        del result["added"]
        return result

    async def add_batch(request: Request, identity: Identity) -> Any:
        batch = await read_body(request, BatchAddRequest)
        return sessions.add(identity, sid(request), batch.messages)

    async def commit(request: Request, identity: Identity) -> Any:
        body = await read_body(request, CommitRequest, required=False)
        result = sessions.commit(identity, sid(request), body)
        if result["task_id"]:
            state.tasks.start(result["task_id"])
            # Let the task take its first step now: rule-based extraction finishes in it, so
            # a caller polling the task right away usually finds it done.
            await asyncio.sleep(0)
        return ok(result, short=True)

    async def context(request: Request, identity: Identity) -> Any:
        query = read_query(request, ContextQuery)
        return sessions.context(identity, sid(request), query.token_budget)

    async def archive(request: Request, identity: Identity) -> Any:
        return sessions.archive(identity, sid(request), str(request.path_params["archive_id"]))

    base = "/api/v1/sessions"
    one = f"{base}/{{session_id}}"
    return [
        Route(base, endpoint(state, "data", create), methods=["POST"]),
        Route(base, endpoint(state, "data", list_sessions), methods=["GET"]),
        Route(one, endpoint(state, "data", get), methods=["GET"]),
        Route(one, endpoint(state, "data", delete), methods=["DELETE"]),
        Route(f"{one}/messages", endpoint(state, "data", add_message), methods=["POST"]),
        Route(f"{one}/messages/batch", endpoint(state, "data", add_batch), methods=["POST"]),
        Route(f"{one}/commit", endpoint(state, "data", commit), methods=["POST"]),
        Route(f"{one}/context", endpoint(state, "data", context), methods=["GET"]),
        Route(f"{one}/archives/{{archive_id}}", endpoint(state, "data", archive), methods=["GET"]),
    ]
