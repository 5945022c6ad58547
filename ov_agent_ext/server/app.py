"""The reference server as an ASGI app: ``create_app(data_dir, root_api_key=None)``.

Usage::

    app = create_app(tmp_path / "ref-data")                   # dev mode
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://ref") as http:
        await http.get("/health")

or ``ov-agent-ext serve --data-dir DIR`` (uvicorn). Everything lives in SQLite under
``data_dir``; the search index is rebuilt from it at creation, so a new app on the same
directory continues where the last one stopped.
"""

from __future__ import annotations

import contextlib
import uuid
import weakref
from collections import Counter
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from . import api_content, api_sessions, api_system
from .auth import Authenticator
from .errors import error_body
from .extract import MemoryOp, extract
from .http import State
from .resources import Resources
from .search import SearchIndex
from .sessions import Extractor, Sessions
from .store import Store
from .tasks import TaskManager
from .vfs import Vfs

__all__ = ["SERVER_VERSION", "create_app"]

SERVER_VERSION = "0.5.2"  # the OpenViking release whose contract this server implements


class RequestIdMiddleware:
    """Every response carries a fresh ``X-Request-ID`` (uuid4), like the real server."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = str(uuid.uuid4()).encode()

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", []), (b"x-request-id", request_id)]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_id)


async def _router_error(request: Request, exc: Exception) -> Response:
    """The router's own 404 (no such route) and 405 (wrong method), in the short envelope."""
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    headers = exc.headers if isinstance(exc, HTTPException) else None
    if status == 404:
        body = error_body("NOT_FOUND", "Not Found", short=True)
    elif status == 405:
        body = error_body("UNKNOWN", "Method Not Allowed", short=True)
    else:
        detail = exc.detail if isinstance(exc, HTTPException) else "Internal Server Error"
        body = error_body("UNKNOWN", str(detail), short=True)
    return JSONResponse(body, status_code=status, headers=headers)


async def _rules(messages: list[dict[str, Any]], user: str, today: datetime) -> list[MemoryOp]:
    return extract(messages, user, today)


def create_app(
    data_dir: str | Path,
    *,
    root_api_key: str | None = None,
    allow_private_networks: bool = False,
    llm_base_url: str | None = None,
    llm_model: str | None = None,
    llm_api_key: str | None = None,
    http_transport: httpx.AsyncBaseTransport | None = None,
) -> Starlette:
    """A reference OpenViking 0.5.2 server storing its data under ``data_dir``.

    ``root_api_key`` switches from dev mode to api_key mode. ``allow_private_networks`` lets
    ``add_resource`` fetch loopback/private URLs (the real server refuses them by default).
    With ``llm_base_url`` and ``llm_model`` (an OpenAI-compatible endpoint), memory
    extraction asks that model first and falls back to the rules when it fails.
    ``http_transport`` replaces the network for resource fetches and LLM calls (tests).
    """
    store = Store(Path(data_dir))
    stats: Counter[str] = Counter()
    index = SearchIndex()
    vfs = Vfs(store, index, stats)
    vfs.load_index()
    stats.clear()
    tasks = TaskManager(store, stats)
    extractor: Extractor = _rules
    if llm_base_url and llm_model:
        from .llm import LlmExtractor

        extractor = LlmExtractor(
            llm_base_url, llm_model, llm_api_key, transport=http_transport, fallback=_rules
        )
    state = State(
        store=store,
        auth=Authenticator(store, root_api_key),
        index=index,
        vfs=vfs,
        tasks=tasks,
        sessions=Sessions(store, vfs, tasks, extractor),
        resources=Resources(
            store,
            vfs,
            tasks,
            allow_private_networks=allow_private_networks,
            transport=http_transport,
        ),
        version=SERVER_VERSION,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        tasks.resume()  # under uvicorn: re-run interrupted tasks at once, not at first request
        yield
        await tasks.shutdown()

    app = Starlette(
        routes=[
            *api_system.routes(state),
            *api_sessions.routes(state),
            *api_content.routes(state),
        ],
        middleware=[Middleware(RequestIdMiddleware)],
        exception_handlers={HTTPException: _router_error},
        lifespan=lifespan,
    )
    app.state.reference = state
    weakref.finalize(app, store.close)
    return app
