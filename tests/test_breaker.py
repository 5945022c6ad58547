"""The circuit breaker: a down or hanging server costs one deadline, then microseconds."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from ov_agent_ext.breaker import BreakerState, CircuitBreaker
from ov_agent_ext.client import OVClient
from ov_agent_ext.config import OVConfig
from ov_agent_ext.errors import ServerUnavailable

OK_STATUS = {"status": "ok", "result": {"initialized": True, "user": "u"}}
HEALTH = {"status": "ok", "healthy": True, "version": "0.5.2", "auth_mode": "dev"}


class Switch:
    """A MockTransport handler whose server can be taken down and brought back."""

    def __init__(self) -> None:
        self.up = True
        self.requests: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request.url.path)
        if not self.up:
            raise httpx.ConnectError("connection refused", request=request)
        body = HEALTH if request.url.path == "/health" else OK_STATUS
        return httpx.Response(200, json=body)


def make(handler: Any, **breaker: Any) -> OVClient:
    return OVClient(
        OVConfig(endpoint="http://ov.test"),
        transport=httpx.MockTransport(handler),
        breaker=CircuitBreaker(**breaker),
    )


async def test_first_failure_opens_and_later_calls_fail_without_a_request() -> None:
    server = Switch()
    server.up = False
    async with make(server, base_delay=60) as client:
        with pytest.raises(ServerUnavailable) as first:
            await client.system_status()
        assert not first.value.circuit_open
        assert client.breaker.state is BreakerState.OPEN
        sent = len(server.requests)
        for _ in range(20):
            with pytest.raises(ServerUnavailable) as fast:
                await client.system_status()
            assert fast.value.circuit_open
        assert len(server.requests) == sent  # no request while open
        assert "connection refused" in str(fast.value)


async def test_background_probe_closes_the_circuit_when_the_server_returns() -> None:
    server = Switch()
    server.up = False
    async with make(server, base_delay=0.01) as client:
        with pytest.raises(ServerUnavailable):
            await client.system_status()
        server.up = True
        await asyncio.sleep(0.02)
        # The window passed: this call still fails fast, but starts the health probe...
        with pytest.raises(ServerUnavailable):
            await client.system_status()
        await client.breaker.wait_probe()
        assert server.requests[-1] == "/health"
        assert client.breaker.state is BreakerState.CLOSED
        assert (await client.system_status())["initialized"] is True


async def test_failed_probe_reopens_with_a_longer_window() -> None:
    server = Switch()
    server.up = False
    now = [1000.0]
    async with make(server, base_delay=1.0, clock=lambda: now[0]) as client:
        with pytest.raises(ServerUnavailable):
            await client.system_status()
        first_window = client.breaker.retry_at - now[0]
        now[0] = client.breaker.retry_at + 0.001
        with pytest.raises(ServerUnavailable):
            await client.system_status()
        await client.breaker.wait_probe()
        assert client.breaker.state is BreakerState.OPEN
        assert client.breaker.retry_at - now[0] > first_window
        assert client.breaker.failures == 2


async def test_an_error_answer_is_not_an_outage() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            500, json={"status": "error", "error": {"code": "INTERNAL", "message": "boom"}}
        )

    async with make(handler) as client:
        for _ in range(3):
            with pytest.raises(Exception, match="boom"):
                await client.system_status()
        assert client.breaker.state is BreakerState.CLOSED


@asynccontextmanager
async def hanging_server() -> AsyncIterator[int]:
    """Accepts connections and never answers: the expensive kind of outage."""
    release = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await release.wait()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        release.set()
        server.close()
        await server.wait_closed()


async def test_a_hanging_server_costs_one_deadline_then_almost_nothing() -> None:
    async with hanging_server() as port:
        config = OVConfig(endpoint=f"http://127.0.0.1:{port}", read_timeout=0.3)
        async with OVClient(config, breaker=CircuitBreaker(base_delay=30)) as client:
            started = time.perf_counter()
            with pytest.raises(ServerUnavailable):
                await client.system_status()
            first = time.perf_counter() - started
            started = time.perf_counter()
            for _ in range(100):
                with pytest.raises(ServerUnavailable):
                    await client.find("anything")
            per_call = (time.perf_counter() - started) / 100
    assert first >= 0.25
    assert per_call < 0.005  # fails at once: no connection, no timeout
