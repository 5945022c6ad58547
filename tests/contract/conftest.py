"""Backends for the contract suite: the same tests run against every OpenViking server.

A backend is a server the suite can reach plus how to make identities on it:

- ``ref-inprocess``: the reference server (``ov_agent_ext.server``) through
  ``httpx.ASGITransport``, a fresh data directory per test;
- ``ref-loopback``: the reference server under uvicorn on a 127.0.0.1 port, one per run;
- ``real``: the real OpenViking 0.5.2 server started by ``scripts/realserver start``
  (``.ci/run`` does this and exports ``OV_REAL_URL`` / ``OV_REAL_APIKEY_URL`` /
  ``OV_REAL_ROOT_KEY``).

Each runs in dev mode (identity from the account/user headers) and api_key mode. A backend
that is not available is skipped with the reason.
"""

from __future__ import annotations

import os
import secrets
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from ov_agent_ext import OVClient, OVConfig

SKIP_REAL = (
    "real OpenViking server not running: start it with "
    '`eval "$(../shared/realserver/start.sh)"` (sets OV_REAL_URL); .ci/run does this'
)


@dataclass
class Backend:
    """One server under contract test."""

    name: str
    url: str
    auth_mode: str = "dev"
    root_key: str = ""
    transport: httpx.AsyncBaseTransport | None = None
    clients: list[OVClient] = field(default_factory=list)

    def client(self, **settings: Any) -> OVClient:
        """A client for a fresh, unique identity unless account/user/api_key are given."""
        if self.auth_mode == "dev":
            settings.setdefault("account", "contract")
            settings.setdefault("user", f"u{uuid.uuid4().hex[:10]}")
        config = OVConfig(endpoint=self.url, **settings)
        client = OVClient(config, transport=self.transport)
        self.clients.append(client)
        return client

    async def create_user_key(self, account: str, user: str) -> str:
        """api_key mode: create an account with ``user`` as its admin; return the user key."""
        async with httpx.AsyncClient(
            base_url=self.url, transport=self.transport, trust_env=False
        ) as http:
            response = await http.post(
                "/api/v1/admin/accounts",
                headers={"Authorization": f"Bearer {self.root_key}"},
                json={"account_id": account, "admin_user_id": user},
            )
            response.raise_for_status()
            return str(response.json()["result"]["user_key"])

    async def add_user_key(self, account: str, user: str) -> str:
        """api_key mode: register another user in an existing account; return its key."""
        async with httpx.AsyncClient(
            base_url=self.url, transport=self.transport, trust_env=False
        ) as http:
            response = await http.post(
                f"/api/v1/admin/accounts/{account}/users",
                headers={"Authorization": f"Bearer {self.root_key}"},
                json={"user_id": user},
            )
            response.raise_for_status()
            return str(response.json()["result"]["user_key"])

    async def aclose(self) -> None:
        for client in self.clients:
            await client.aclose()


def _real(url_var: str, mode: str) -> Any:
    url = os.environ.get(url_var)
    key = os.environ.get("OV_REAL_ROOT_KEY", "") if mode == "api_key" else ""
    available = bool(url) and (mode == "dev" or bool(key))
    reason = SKIP_REAL if mode == "dev" else SKIP_REAL.replace("OV_REAL_URL", url_var)
    return pytest.param(
        ("real", url, key),
        id="real" if mode == "dev" else "real-api-key",
        marks=[] if available else [pytest.mark.skip(reason=reason)],
    )


def _reference(kind: str, mode: str) -> Any:
    suffix = "" if mode == "dev" else "-api-key"
    return pytest.param((kind, None, ""), id=f"{kind}{suffix}")


def _params(mode: str) -> list[Any]:
    url_var = "OV_REAL_URL" if mode == "dev" else "OV_REAL_APIKEY_URL"
    return [
        _reference("ref-inprocess", mode),
        _reference("ref-loopback", mode),
        _real(url_var, mode),
    ]


class _Loopback:
    """The reference server under uvicorn in a thread, on a free 127.0.0.1 port."""

    def __init__(self, data_dir: Path, root_key: str | None):
        from ov_agent_ext.server import create_app
        from ov_agent_ext.server.thread import ThreadedServer

        self._server = ThreadedServer(create_app(data_dir, root_api_key=root_key))
        self.url = self._server.url

    def stop(self) -> None:
        self._server.stop()


@pytest.fixture(scope="session")
def loopback_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One loopback reference server per auth mode, started on first use."""
    started: dict[str, Any] = {}

    def get(mode: str) -> tuple[str, str]:
        if mode not in started:
            key = f"root-{secrets.token_hex(8)}" if mode == "api_key" else None
            started[mode] = (_Loopback(tmp_path_factory.mktemp(f"ref-{mode}"), key), key or "")
        server, key = started[mode]
        return server.url, key

    yield {"get": get}
    for server, _ in started.values():
        server.stop()


async def _backend(
    request: pytest.FixtureRequest, mode: str, tmp_path: Path, loopback: dict[str, Any]
) -> AsyncIterator[Backend]:
    kind, url, key = request.param
    transport: httpx.AsyncBaseTransport | None = None
    if kind == "ref-inprocess":
        from ov_agent_ext.server import create_app

        key = f"root-{secrets.token_hex(8)}" if mode == "api_key" else ""
        app = create_app(tmp_path / "ref-data", root_api_key=key or None)
        transport = httpx.ASGITransport(app=app)
        url = "http://ref.inprocess"
    elif kind == "ref-loopback":
        url, key = loopback["get"](mode)
    server = Backend(name=kind, url=url, auth_mode=mode, root_key=key, transport=transport)
    try:
        yield server
    finally:
        await server.aclose()


@pytest.fixture(params=_params("dev"))
async def backend(
    request: pytest.FixtureRequest, tmp_path: Path, loopback_servers: dict[str, Any]
) -> AsyncIterator[Backend]:
    """A dev-mode server: identity from the account/user headers."""
    async for server in _backend(request, "dev", tmp_path, loopback_servers):
        yield server


@pytest.fixture(params=_params("api_key"))
async def apikey_backend(
    request: pytest.FixtureRequest, tmp_path: Path, loopback_servers: dict[str, Any]
) -> AsyncIterator[Backend]:
    """An api_key-mode server and its root key."""
    async for server in _backend(request, "api_key", tmp_path, loopback_servers):
        yield server


@pytest.fixture
def session_id() -> Callable[[], str]:
    """Unique session ids, so reruns never meet old state."""
    return lambda: f"contract-{uuid.uuid4().hex[:12]}"
