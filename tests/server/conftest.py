"""Helpers for the reference server's own tests: apps on tmp_path, small HTTP callers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from ov_agent_ext.server import create_app
from ov_agent_ext.server.thread import ThreadedServer


class Api:
    """One caller of a reference server (an identity, or a key)."""

    def __init__(self, http: httpx.AsyncClient):
        self.http = http

    async def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return await self.http.request(method, path, **kwargs)

    async def ok(self, method: str, path: str, **kwargs: Any) -> Any:
        """The ``result`` of a successful call (fails the test otherwise)."""
        response = await self.call(method, path, **kwargs)
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["status"] == "ok", body
        return body["result"]

    async def error(self, method: str, path: str, status: int, **kwargs: Any) -> dict[str, Any]:
        """The ``error`` object of a failing call with HTTP ``status``."""
        response = await self.call(method, path, **kwargs)
        assert response.status_code == status, response.text
        error: dict[str, Any] = response.json()["error"]
        return error

    async def write(self, uri: str, content: str, mode: str = "replace") -> Any:
        return await self.ok(
            "POST", "/api/v1/content/write", json={"uri": uri, "content": content, "mode": mode}
        )

    async def read(self, uri: str) -> Any:
        return await self.ok("GET", "/api/v1/content/read", params={"uri": uri})

    async def find(self, query: str, **body: Any) -> Any:
        return await self.ok("POST", "/api/v1/search/find", json={"query": query, **body})

    async def say(self, session: str, *texts: str, role: str = "user") -> Any:
        messages = [{"role": role, "content": text} for text in texts]
        return await self.ok(
            "POST", f"/api/v1/sessions/{session}/messages/batch", json={"messages": messages}
        )

    async def commit(self, session: str, **body: Any) -> Any:
        """Commit and return the finished task (the rule-based task ends within the call)."""
        commit = await self.ok("POST", f"/api/v1/sessions/{session}/commit", json=body)
        assert commit["status"] == "accepted", commit
        await self.ok("POST", "/api/v1/system/wait", json={"timeout": 10})
        task = await self.ok("GET", f"/api/v1/tasks/{commit['task_id']}")
        assert task["status"] == "completed", task
        return task


@asynccontextmanager
async def connect(
    app: Starlette,
    *,
    account: str = "acme",
    user: str = "alice",
    key: str | None = None,
) -> AsyncIterator[Api]:
    """An in-process caller (dev-mode identity headers, or an API key)."""
    headers = (
        {"Authorization": f"Bearer {key}"}
        if key
        else {
            "X-OpenViking-Account": account,
            "X-OpenViking-User": user,
        }
    )
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://ref", headers=headers
    ) as http:
        yield Api(http)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "ref-data"


@pytest.fixture
def app(data_dir: Path) -> Starlette:
    """A dev-mode reference server on a fresh data directory."""
    return create_app(data_dir)


class Loopback:
    """A reference server under uvicorn on a free 127.0.0.1 port, in a thread."""

    def __init__(self, app: Starlette):
        self._server = ThreadedServer(app)
        self.url = self._server.url

    def stop(self) -> None:
        self._server.stop()


@pytest.fixture
def loopback(app: Starlette) -> Iterator[Loopback]:
    server = Loopback(app)
    try:
        yield server
    finally:
        server.stop()
