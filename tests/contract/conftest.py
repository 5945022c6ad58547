"""Backends for the contract suite: the same tests run against every OpenViking server.

A backend is a server the suite can reach plus how to make identities on it. Today: the real
OpenViking 0.5.2 server started by ``../shared/realserver/start.sh`` (``.ci/run`` starts one in
dev mode and one in api_key mode and exports ``OV_REAL_URL`` / ``OV_REAL_APIKEY_URL`` /
``OV_REAL_ROOT_KEY``). Backends that are not running are skipped with the reason.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
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


def _dev_backends() -> list[Any]:
    url = os.environ.get("OV_REAL_URL")
    return [
        pytest.param(
            ("real", url),
            id="real",
            marks=[] if url else [pytest.mark.skip(reason=SKIP_REAL)],
        )
    ]


def _apikey_backends() -> list[Any]:
    url = os.environ.get("OV_REAL_APIKEY_URL")
    key = os.environ.get("OV_REAL_ROOT_KEY", "")
    reason = SKIP_REAL.replace("OV_REAL_URL", "OV_REAL_APIKEY_URL with OV_REAL_AUTH=api_key")
    return [
        pytest.param(
            ("real-api-key", url, key),
            id="real-api-key",
            marks=[] if url and key else [pytest.mark.skip(reason=reason)],
        )
    ]


@pytest.fixture(params=_dev_backends())
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    """A dev-mode server: identity from the account/user headers."""
    name, url = request.param
    server = Backend(name=name, url=url)
    try:
        yield server
    finally:
        await server.aclose()


@pytest.fixture(params=_apikey_backends())
async def apikey_backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    """An api_key-mode server and its root key."""
    name, url, key = request.param
    server = Backend(name=name, url=url, auth_mode="api_key", root_key=key)
    try:
        yield server
    finally:
        await server.aclose()


@pytest.fixture
def session_id() -> Callable[[], str]:
    """Unique session ids, so reruns never meet old state."""
    return lambda: f"contract-{uuid.uuid4().hex[:12]}"
