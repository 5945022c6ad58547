"""OVClient against mocked OpenViking 0.5.2 answers (httpx.MockTransport) and tiny real
TCP servers on 127.0.0.1 for refused connections and servers that never answer."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import httpx
import pytest

from ov_agent_ext._version import __version__
from ov_agent_ext.client import BATCH_LIMIT, OVClient
from ov_agent_ext.config import OVConfig
from ov_agent_ext.errors import NotFoundError, ServerError, ServerUnavailable
from ov_agent_ext.models import Message, TextPart, ToolPart

ENDPOINT = "http://ov.test:1933"
API_KEY = "sk-TOPSECRET-0123456789"

Handler = Callable[[httpx.Request], "httpx.Response | Awaitable[httpx.Response]"]


# --- answers shaped like OpenViking 0.5.2 ------------------------------------------------------


def ok(result: Any, *, short: bool = False, rid: str = "rid-ok", **top: Any) -> httpx.Response:
    """An ``ok`` envelope; ``short`` omits the null keys like the commit route does."""
    body: dict[str, Any] = {"status": "ok", "result": result}
    if not short:
        body.update(error=None, telemetry=None, profile=None)
    body.update(top)
    return httpx.Response(200, json=body, headers={"x-request-id": rid})


def err(
    status: int,
    code: str,
    message: str,
    details: dict[str, Any] | None = None,
    *,
    short: bool = True,
    rid: str = "rid-err",
) -> httpx.Response:
    error: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        error["details"] = details
    body: dict[str, Any] = {"status": "error", "error": error}
    if not short:
        body.update(result=None, telemetry=None, profile=None)
    return httpx.Response(status, json=body, headers={"x-request-id": rid})


def unknown_route() -> httpx.Response:
    return err(404, "NOT_FOUND", "Not Found")


def method_not_allowed() -> httpx.Response:
    return err(405, "UNKNOWN", "Method Not Allowed")


def body_of(request: httpx.Request) -> Any:
    return json.loads(request.content)


class FakeServer:
    """Routes (method, path) to handlers, records requests, answers the space discovery
    (0.5.2 layout: ``viking://user/default``, flat ``viking://agent``) unless overridden."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Handler] = {}
        self.requests: list[httpx.Request] = []
        self.user_root: list[dict[str, Any]] = [
            {"name": "default", "uri": "viking://user/default", "isDir": True, "size": 0}
        ]
        self.agent_root: list[dict[str, Any]] = [
            {"name": n, "uri": f"viking://agent/{n}", "isDir": True, "size": 0}
            for n in ("skills", "tools", "endpoints", "payments")
        ]

    def on(self, method: str, path: str, handler: Handler) -> None:
        self.routes[(method, path)] = handler

    def reply(self, method: str, path: str, *responses: httpx.Response) -> None:
        """Answer with these responses in turn; the last one repeats."""
        queue = list(responses)

        def handler(request: httpx.Request) -> httpx.Response:
            return queue.pop(0) if len(queue) > 1 else queue[0]

        self.on(method, path, handler)

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/api/v1/fs/ls" and request.url.params.get("output") == "original":
            scope = request.url.params["uri"].removeprefix("viking://")
            self.requests.append(request)
            return ok(self.user_root if scope == "user" else self.agent_root)
        if path == "/api/v1/system/status" and (request.method, path) not in self.routes:
            self.requests.append(request)
            return ok({"initialized": True, "user": "default"})
        self.requests.append(request)
        handler = self.routes.get((request.method, path))
        if handler is None:
            return unknown_route()
        response = handler(request)
        if not isinstance(response, httpx.Response):
            response = await response
        return response

    def to(self, method: str, path: str) -> list[httpx.Request]:
        return [r for r in self.requests if r.method == method and r.url.path == path]

    def api_requests(self) -> list[httpx.Request]:
        """Requests other than the space discovery."""
        return [
            r
            for r in self.requests
            if r.url.path != "/api/v1/system/status"
            and not (r.url.path == "/api/v1/fs/ls" and r.url.params.get("output") == "original")
        ]


def make_client(handler: Handler, **config: Any) -> OVClient:
    config.setdefault("endpoint", ENDPOINT)
    return OVClient(OVConfig(**config), transport=httpx.MockTransport(cast(Any, handler)))


@pytest.fixture
def server() -> FakeServer:
    return FakeServer()


# --- real sockets ----------------------------------------------------------------------------


def closed_port() -> int:
    """A loopback port nobody listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@asynccontextmanager
async def silent_server() -> AsyncIterator[int]:
    """A TCP server on 127.0.0.1 that accepts connections and never writes a byte."""
    release = asyncio.Event()
    handlers: list[asyncio.Task[Any]] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.append(task)
        try:
            await release.wait()
        finally:
            writer.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield srv.sockets[0].getsockname()[1]
    finally:
        release.set()
        await asyncio.gather(*handlers, return_exceptions=True)
        srv.close()
        await srv.wait_closed()


@asynccontextmanager
async def answering_server(body: dict[str, Any]) -> AsyncIterator[tuple[int, list[bytes]]]:
    """A minimal HTTP/1.1 server answering every request with ``body``; yields the port and
    the raw request heads it received."""
    heads: list[bytes] = []
    payload = json.dumps(body).encode()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            heads.append(await reader.readuntil(b"\r\n\r\n"))
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"x-request-id: wire-1\r\nConnection: close\r\n"
                + f"Content-Length: {len(payload)}\r\n\r\n".encode()
                + payload
            )
            await writer.drain()
        finally:
            writer.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield srv.sockets[0].getsockname()[1], heads
    finally:
        srv.close()
        await srv.wait_closed()


# ================================================================================================
# Headers and configuration


async def test_headers_with_key_account_user_peer(server: FakeServer) -> None:
    server.reply("GET", "/api/v1/system/status", ok({"initialized": True, "user": "u"}))
    async with make_client(
        server, api_key=API_KEY, account="acme", user="alice", peer_id="peer-7"
    ) as client:
        await client.system_status()
    headers = server.requests[0].headers
    assert headers["authorization"] == f"Bearer {API_KEY}"
    assert headers["x-openviking-account"] == "acme"
    assert headers["x-openviking-user"] == "alice"
    assert headers["x-openviking-actor-peer"] == "peer-7"
    assert headers["user-agent"] == f"ov-agent-ext/{__version__}"
    assert headers["accept"] == "application/json"


async def test_headers_absent_without_config(server: FakeServer) -> None:
    server.reply("GET", "/api/v1/system/status", ok({"initialized": True, "user": "u"}))
    async with make_client(server) as client:
        await client.system_status()
    headers = server.requests[0].headers
    for name in (
        "authorization",
        "x-openviking-account",
        "x-openviking-user",
        "x-openviking-actor-peer",
    ):
        assert name not in headers
    assert headers["user-agent"] == f"ov-agent-ext/{__version__}"


async def test_only_the_set_identity_headers_are_sent(server: FakeServer) -> None:
    server.reply("GET", "/health", httpx.Response(200, json={"status": "ok", "healthy": True}))
    async with make_client(server, user="alice") as client:
        await client.health()
    headers = server.requests[0].headers
    assert headers["x-openviking-user"] == "alice"
    assert "x-openviking-account" not in headers
    assert "x-openviking-actor-peer" not in headers
    assert "authorization" not in headers


async def test_endpoint_path_prefix_is_kept(server: FakeServer) -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(200, json={"status": "ok", "healthy": True})

    async with make_client(handler, endpoint="http://ov.test:1933/prefix/") as client:
        await client.health()
    assert seen == ["http://ov.test:1933/prefix/health"]


async def test_headers_on_the_wire_and_environment_proxy_ignored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # trust_env=False: a proxy from the environment must not be used (it would see the key).
    dead_proxy = f"http://127.0.0.1:{closed_port()}"
    for var in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(var, dead_proxy)
    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(var, raising=False)
    health = {"status": "ok", "healthy": True, "version": "0.5.2", "auth_mode": "api_key"}
    async with answering_server(health) as (port, heads):
        config = OVConfig(endpoint=f"http://127.0.0.1:{port}", api_key=API_KEY, user="alice")
        async with OVClient(config) as client:
            info = await client.health()
    assert info.version == "0.5.2"
    head = heads[0].decode().lower()
    assert head.startswith("get /health http/1.1")
    assert f"authorization: bearer {API_KEY.lower()}" in head
    assert "x-openviking-user: alice" in head


def test_endpoint_credentials_redacted() -> None:
    client = OVClient(OVConfig(endpoint="http://bob:hunter2@ov.test:1933"))
    assert client.endpoint == "http://ov.test:1933"
    assert "hunter2" not in client.endpoint


async def test_endpoint_credentials_become_basic_auth_and_stay_out_of_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return ok({"initialized": True, "user": "bob"})

    caplog.set_level(logging.DEBUG)
    async with make_client(handler, endpoint="http://bob:hunter2@ov.test:1933") as client:
        await client.system_status()
    assert seen[0].headers["authorization"].startswith("Basic ")
    assert "hunter2" not in str(seen[0].url)
    assert "hunter2" not in caplog.text  # httpx logs the request URL at INFO


async def test_api_key_wins_over_endpoint_credentials() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return ok({"initialized": True, "user": "bob"})

    async with make_client(
        handler, endpoint="http://bob:hunter2@ov.test:1933", api_key=API_KEY
    ) as client:
        await client.system_status()
    assert seen[0].headers["authorization"] == f"Bearer {API_KEY}"


async def test_ids_are_one_path_segment(server: FakeServer) -> None:
    server.reply("GET", "/api/v1/sessions/a?b#c", ok({"session_id": "a?b#c"}))
    async with make_client(server) as client:
        info = await client.get_session("a?b#c")
    assert info.session_id == "a?b#c"
    assert server.requests[-1].url.raw_path == b"/api/v1/sessions/a%3Fb%23c"


# ================================================================================================
# Envelope parsing


async def test_full_envelope_returns_result(server: FakeServer) -> None:
    server.reply("GET", "/api/v1/system/status", ok({"initialized": True, "user": "default"}))
    async with make_client(server) as client:
        assert await client.system_status() == {"initialized": True, "user": "default"}


async def test_short_envelope_returns_result(server: FakeServer) -> None:
    server.reply(
        "POST",
        "/api/v1/sessions/s1/commit",
        ok({"session_id": "s1", "status": "skipped", "reason": "no_messages"}, short=True),
    )
    async with make_client(server) as client:
        result = await client.commit("s1")
    assert result.status == "skipped"
    assert result.reason == "no_messages"


async def test_envelope_with_null_result(server: FakeServer) -> None:
    server.reply("DELETE", "/api/v1/sessions/s1", ok(None))
    server.reply("GET", "/api/v1/content/read", ok(None))
    async with make_client(server) as client:
        await client.delete_session("s1")
        assert await client.read("viking://resources/a.md") == ""
    assert [r.method for r in server.requests] == ["DELETE", "GET"]


async def test_bare_health_body(server: FakeServer) -> None:
    server.reply(
        "GET",
        "/health",
        httpx.Response(
            200,
            json={"status": "ok", "healthy": True, "version": "0.5.2", "auth_mode": "dev"},
            headers={"x-request-id": "h1"},
        ),
    )
    async with make_client(server) as client:
        info = await client.health()
    assert info.healthy is True
    assert info.version == "0.5.2"
    assert info.auth_mode == "dev"


async def test_unhealthy_server_raises(server: FakeServer) -> None:
    server.reply(
        "GET", "/health", httpx.Response(200, json={"status": "degraded", "healthy": False})
    )
    async with make_client(server) as client:
        with pytest.raises(ServerError) as info:
            await client.health()
    assert info.value.code == "UNAVAILABLE"
    assert info.value.retryable


async def test_non_json_success_body(server: FakeServer) -> None:
    server.reply(
        "GET",
        "/health",
        httpx.Response(200, text="<html>hello</html>", headers={"x-request-id": "r-html"}),
    )
    async with make_client(server) as client:
        with pytest.raises(ServerError) as info:
            await client.health()
    assert type(info.value) is ServerError
    assert info.value.code == "INVALID_RESPONSE"
    assert info.value.request_id == "r-html"
    assert "<html>" in str(info.value)


async def test_empty_success_body(server: FakeServer) -> None:
    server.reply("DELETE", "/api/v1/fs", httpx.Response(200))
    server.reply("GET", "/api/v1/content/abstract", httpx.Response(204))
    async with make_client(server) as client:
        await client.delete("viking://resources/x.md")
        assert await client.abstract("viking://resources") == ""
    assert [r.method for r in server.requests] == ["DELETE", "GET"]


async def test_result_of_wrong_type_is_invalid_response(server: FakeServer) -> None:
    server.reply("GET", "/api/v1/system/status", ok(["not", "an", "object"]))
    async with make_client(server) as client:
        with pytest.raises(ServerError) as info:
            await client.system_status()
    assert info.value.code == "INVALID_RESPONSE"


async def test_error_envelope_with_http_200_still_raises(server: FakeServer) -> None:
    server.reply(
        "GET",
        "/api/v1/system/status",
        httpx.Response(
            200, json={"status": "error", "error": {"code": "INTERNAL", "message": "broken"}}
        ),
    )
    async with make_client(server) as client:
        with pytest.raises(ServerError) as info:
            await client.system_status()
    assert info.value.code == "INTERNAL"
    assert "broken" in str(info.value)


async def test_error_envelope_with_http_200_gets_the_codes_status(server: FakeServer) -> None:
    server.reply(
        "GET",
        "/api/v1/system/status",
        httpx.Response(
            200, json={"status": "error", "error": {"code": "NOT_FOUND", "message": "gone"}}
        ),
    )
    async with make_client(server) as client:
        with pytest.raises(NotFoundError) as info:
            await client.system_status()
    assert (info.value.status_code, info.value.retryable) == (404, False)


# ================================================================================================
# Error mapping

_FILE = "viking://user/default/memories/x.md"


@pytest.mark.parametrize(
    ("response", "cls", "code", "status", "retryable", "message"),
    [
        (
            err(
                404,
                "NOT_FOUND",
                f"File not found: {_FILE}",
                {"type": "file", "resource": _FILE},
                short=False,
            ),
            NotFoundError,
            "NOT_FOUND",
            404,
            False,
            f"File not found: {_FILE}",
        ),
        (
            err(404, "NOT_FOUND", "Session nope not found"),
            NotFoundError,
            "NOT_FOUND",
            404,
            False,
            "Session nope not found",
        ),
        (unknown_route(), NotFoundError, "NOT_FOUND", 404, False, "Not Found"),
        (method_not_allowed(), ServerError, "UNKNOWN", 405, False, "Method Not Allowed"),
        (
            err(
                400,
                "INVALID_ARGUMENT",
                "Invalid request parameters: body.top_k: Extra inputs are not permitted",
                {"validation_errors": [{"loc": ["body", "top_k"], "type": "extra_forbidden"}]},
            ),
            ServerError,
            "INVALID_ARGUMENT",
            400,
            False,
            "body.top_k: Extra inputs are not permitted",
        ),
        (
            err(401, "UNAUTHENTICATED", "Invalid API key"),
            ServerError,
            "UNAUTHENTICATED",
            401,
            False,
            "Invalid API key",
        ),
        (
            err(403, "PERMISSION_DENIED", "host paths are not allowed"),
            ServerError,
            "PERMISSION_DENIED",
            403,
            False,
            "host paths are not allowed",
        ),
        (
            err(408, "DEADLINE_EXCEEDED", "slow"),
            ServerError,
            "DEADLINE_EXCEEDED",
            408,
            True,
            "slow",
        ),
        (err(409, "CONFLICT", "busy"), ServerError, "CONFLICT", 409, False, "busy"),
        (
            err(409, "CONFLICT", "locked", {"retryable": True}),
            ServerError,
            "CONFLICT",
            409,
            True,
            "locked",
        ),
        (
            err(409, "CONFLICT", "exists", {"retryable": False}),
            ServerError,
            "CONFLICT",
            409,
            False,
            "exists",
        ),
        (
            err(429, "RESOURCE_EXHAUSTED", "rate limited"),
            ServerError,
            "RESOURCE_EXHAUSTED",
            429,
            True,
            "rate limited",
        ),
        (err(500, "INTERNAL", "boom"), ServerError, "INTERNAL", 500, True, "boom"),
        (err(503, "UNAVAILABLE", "starting"), ServerError, "UNAVAILABLE", 503, True, "starting"),
        # bodies without an OpenViking envelope: the code comes from the HTTP status
        (
            httpx.Response(502, text="Bad Gateway", headers={"x-request-id": "rid-err"}),
            ServerError,
            "UNAVAILABLE",
            502,
            True,
            "Bad Gateway",
        ),
        (
            httpx.Response(503, headers={"x-request-id": "rid-err"}),
            ServerError,
            "UNAVAILABLE",
            503,
            True,
            "HTTP 503",
        ),
        (
            httpx.Response(404, json={"detail": "Not Found"}, headers={"x-request-id": "rid-err"}),
            NotFoundError,
            "NOT_FOUND",
            404,
            False,
            "Not Found",
        ),
        (
            httpx.Response(418, text="", headers={"x-request-id": "rid-err"}),
            ServerError,
            "HTTP_418",
            418,
            False,
            "HTTP 418",
        ),
    ],
)
async def test_error_mapping(
    server: FakeServer,
    response: httpx.Response,
    cls: type[ServerError],
    code: str,
    status: int,
    retryable: bool,
    message: str,
) -> None:
    server.reply("GET", "/api/v1/fs/stat", response)
    async with make_client(server) as client:
        with pytest.raises(ServerError) as info:
            await client.stat(_FILE)
    exc = info.value
    assert type(exc) is cls
    assert exc.code == code
    assert exc.status_code == status
    assert exc.retryable is retryable
    assert exc.request_id == "rid-err"
    assert exc.method == "GET"
    assert exc.path == "/api/v1/fs/stat"
    assert message in exc.args[0]
    text = str(exc)
    assert text.startswith(f"{code} {status} (GET /api/v1/fs/stat): ")
    assert message in text
    assert text.endswith("[request rid-err]")


async def test_error_details_carried(server: FakeServer) -> None:
    details = {"type": "file", "resource": _FILE}
    server.reply("GET", "/api/v1/fs/stat", err(404, "NOT_FOUND", "File not found", details))
    async with make_client(server) as client:
        with pytest.raises(NotFoundError) as info:
            await client.stat(_FILE)
    assert info.value.details == details


async def test_error_details_null_becomes_empty(server: FakeServer) -> None:
    server.reply(
        "GET",
        "/api/v1/fs/stat",
        httpx.Response(
            500, json={"status": "error", "error": {"code": "INTERNAL", "details": None}}
        ),
    )
    async with make_client(server) as client:
        with pytest.raises(ServerError) as info:
            await client.stat(_FILE)
    assert info.value.details == {}
    assert info.value.request_id is None
    assert str(info.value) == "INTERNAL 500 (GET /api/v1/fs/stat): HTTP 500"


# ================================================================================================
# Transport failures


async def test_connection_refused_is_unavailable_quickly() -> None:
    port = closed_port()
    config = OVConfig(endpoint=f"http://127.0.0.1:{port}", api_key=API_KEY)
    started = time.perf_counter()
    async with OVClient(config) as client:
        with pytest.raises(ServerUnavailable) as info:
            await client.health()
    assert time.perf_counter() - started < 2
    exc = info.value
    assert exc.timed_out is False
    assert exc.retryable is True
    assert exc.endpoint == f"http://127.0.0.1:{port}"
    assert f"127.0.0.1:{port}" in str(exc)
    assert "ConnectError" in str(exc)
    assert isinstance(exc.__cause__, httpx.ConnectError)


async def _call_of_kind(client: OVClient, kind: str) -> object:
    """One call of each class: health, read, write."""
    if kind == "health":
        return await client.health()
    if kind == "read":
        return await client.system_status()
    return await client.add_message("s1", Message(role="user", content="x"))


@pytest.mark.parametrize("kind", ["health", "read", "write"])
async def test_server_that_never_answers_times_out(kind: str) -> None:
    timeouts = {"health_timeout": 3.0, "read_timeout": 3.0, "write_timeout": 3.0}
    timeouts[f"{kind}_timeout"] = 0.3
    async with silent_server() as port:
        config = OVConfig(endpoint=f"http://127.0.0.1:{port}", **timeouts)
        async with OVClient(config) as client:
            started = time.perf_counter()
            with pytest.raises(ServerUnavailable) as info:
                await _call_of_kind(client, kind)
            elapsed = time.perf_counter() - started
    assert 0.25 <= elapsed < 2
    assert info.value.timed_out is True
    assert info.value.retryable is True
    assert "within 0.3s" in str(info.value)


@pytest.mark.parametrize("kind", ["health", "read", "write"])
async def test_overall_deadline_enforced_per_call_class(kind: str) -> None:
    """The asyncio deadline holds even where httpx's own timeouts do not apply."""

    async def hang(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(30)
        return ok({})

    timeouts = {"health_timeout": 3.0, "read_timeout": 3.0, "write_timeout": 3.0}
    timeouts[f"{kind}_timeout"] = 0.2
    async with make_client(hang, **timeouts) as client:
        started = time.perf_counter()
        with pytest.raises(ServerUnavailable) as info:
            await _call_of_kind(client, kind)
    assert time.perf_counter() - started < 1.5
    assert info.value.timed_out is True


async def test_explicit_timeout_overrides_call_class() -> None:
    async def hang(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(30)
        return ok({})

    async with make_client(hang, read_timeout=30.0) as client:
        started = time.perf_counter()
        with pytest.raises(ServerUnavailable) as info:
            await client.find("q", timeout=0.2)
    assert time.perf_counter() - started < 1.5
    assert info.value.timed_out is True


@pytest.mark.parametrize(
    ("exc_type", "timed_out"),
    [
        (httpx.ReadTimeout, True),
        (httpx.ConnectTimeout, True),
        (httpx.PoolTimeout, True),
        (httpx.ConnectError, False),
        (httpx.ReadError, False),
        (httpx.RemoteProtocolError, False),
    ],
)
async def test_httpx_errors_become_unavailable(
    exc_type: type[httpx.TransportError], timed_out: bool
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc_type("simulated", request=request)

    async with make_client(handler) as client:
        with pytest.raises(ServerUnavailable) as info:
            await client.system_status()
    assert info.value.timed_out is timed_out
    assert isinstance(info.value.__cause__, exc_type)
    assert info.value.endpoint == ENDPOINT


async def test_undecodable_body_is_unavailable_not_httpx_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-encoding": "gzip"}, content=b"not gzip")

    async with make_client(handler) as client:
        with pytest.raises(ServerUnavailable) as info:
            await client.system_status()
    assert "DecodingError" in str(info.value)


# ================================================================================================
# The API key never leaks


async def test_api_key_never_in_errors_or_logs(
    server: FakeServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    raised: list[BaseException] = []
    server.reply("GET", "/api/v1/system/status", ok({"initialized": True, "user": "u"}))
    server.reply("GET", "/api/v1/fs/stat", err(401, "UNAUTHENTICATED", "Invalid API key"))
    server.reply("POST", "/api/v1/search/find", httpx.Response(500, text="Internal Server Error"))
    async with make_client(server, api_key=API_KEY) as client:
        await client.system_status()
        for call in (lambda: client.stat("viking://resources/x"), lambda: client.find("q")):
            with pytest.raises(ServerError) as info:
                await call()
            raised.append(info.value)
    # real sockets: refused, and accepted but never answered (httpcore logs at DEBUG too)
    async with OVClient(
        OVConfig(endpoint=f"http://127.0.0.1:{closed_port()}", api_key=API_KEY)
    ) as client:
        with pytest.raises(ServerUnavailable) as refused:
            await client.health()
        raised.append(refused.value)
    async with silent_server() as port:
        config = OVConfig(
            endpoint=f"http://user:pw-{API_KEY}@127.0.0.1:{port}",
            api_key=API_KEY,
            read_timeout=0.2,
        )
        async with OVClient(config) as client:
            with pytest.raises(ServerUnavailable) as hung:
                await client.system_status()
        raised.append(hung.value)

    assert any("/api/v1/system/status -> 200" in r.getMessage() for r in caplog.records)
    assert len(raised) == 4
    for exc in raised:
        assert API_KEY not in str(exc)
        assert API_KEY not in repr(exc)
        assert API_KEY not in repr(exc.args)
        if exc.__cause__ is not None:
            assert API_KEY not in str(exc.__cause__)
    for record in caplog.records:
        assert API_KEY not in record.getMessage()
        assert API_KEY not in repr(record.args)


# ================================================================================================
# Sessions


async def test_create_get_delete_session(server: FakeServer) -> None:
    server.reply("POST", "/api/v1/sessions", ok({"session_id": "s1", "uri": "viking://session/s1"}))
    server.reply(
        "GET",
        "/api/v1/sessions/s1",
        ok(
            {
                "session_id": "s1",
                "message_count": 0,
                "commit_count": 1,
                "pending_tokens": 0,
                "total_message_count": 2,
                "last_commit_at": "2025-06-01T10:00:00Z",
                "memories_extracted": {"total": 0},
                "user": {"account_id": "default", "user_id": "default"},
            }
        ),
    )
    server.reply("DELETE", "/api/v1/sessions/s1", ok({"session_id": "s1", "deleted": True}))
    async with make_client(server) as client:
        created = await client.create_session("s1")
        info = await client.get_session("s1")
        await client.delete_session("s1")
    assert created.session_id == "s1"
    assert body_of(server.to("POST", "/api/v1/sessions")[0]) == {"session_id": "s1"}
    assert info.total_message_count == 2
    assert info.commit_count == 1
    assert info.message_count == 0
    assert len(server.to("DELETE", "/api/v1/sessions/s1")) == 1


async def test_get_missing_session(server: FakeServer) -> None:
    server.reply("GET", "/api/v1/sessions/nope", err(404, "NOT_FOUND", "Session nope not found"))
    async with make_client(server) as client:
        with pytest.raises(NotFoundError) as info:
            await client.get_session("nope")
    assert "Session nope not found" in str(info.value)


async def test_add_message_single(server: FakeServer) -> None:
    server.reply(
        "POST",
        "/api/v1/sessions/s1/messages",
        ok({"session_id": "s1", "message_count": 1, "pending_tokens": 9}),
    )
    async with make_client(server) as client:
        result = await client.add_message("s1", Message(role="user", content="I prefer uv"))
    assert body_of(server.requests[0]) == {"role": "user", "content": "I prefer uv"}
    assert result.added == 1
    assert result.message_count == 1
    assert result.pending_tokens == 9


async def test_session_context_and_archive(server: FakeServer) -> None:
    server.reply(
        "GET",
        "/api/v1/sessions/s1/context",
        ok(
            {
                "latest_archive_overview": "",
                "pre_archive_abstracts": [],
                "messages": [],
                "estimatedTokens": 0,
                "stats": {"totalArchives": 1},
            }
        ),
    )
    server.reply(
        "GET",
        "/api/v1/sessions/s1/archives/archive_001",
        ok(
            {
                "archive_id": "archive_001",
                "abstract": "uv",
                "overview": "# uv",
                "messages": [
                    {
                        "id": "m1",
                        "role": "user",
                        "parts": [{"type": "text", "text": "I prefer uv"}],
                        "created_at": "2025-06-01T10:00:00Z",
                    }
                ],
            }
        ),
    )
    async with make_client(server) as client:
        ctx = await client.session_context("s1", token_budget=500)
        plain = await client.session_context("s1")
        archive = await client.get_archive("s1", "archive_001")
    reqs = server.to("GET", "/api/v1/sessions/s1/context")
    assert dict(reqs[0].url.params) == {"token_budget": "500"}
    assert dict(reqs[1].url.params) == {}
    assert ctx.stats["totalArchives"] == 1
    assert plain.estimated_tokens == 0
    assert archive.archive_id == "archive_001"
    assert archive.messages[0]["parts"][0]["text"] == "I prefer uv"


# ================================================================================================
# add_messages: batching and fallback

_BATCH = "/api/v1/sessions/s1/messages/batch"
_SINGLE = "/api/v1/sessions/s1/messages"


def _messages(n: int) -> list[Message]:
    return [Message(role="user" if i % 2 == 0 else "assistant", content=f"m{i}") for i in range(n)]


def _counting_batch() -> Callable[[httpx.Request], httpx.Response]:
    count = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal count
        n = len(body_of(request)["messages"])
        count += n
        return ok(
            {"session_id": "s1", "message_count": count, "added": n, "pending_tokens": 10 * count}
        )

    return handler


def _counting_single() -> Callable[[httpx.Request], httpx.Response]:
    count = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal count
        count += 1
        return ok({"session_id": "s1", "message_count": count, "pending_tokens": 7 * count})

    return handler


async def test_add_messages_chunks_in_order(server: FakeServer) -> None:
    server.on("POST", _BATCH, _counting_batch())
    messages = _messages(250)
    async with make_client(server) as client:
        result = await client.add_messages("s1", messages)
    batches = server.to("POST", _BATCH)
    assert BATCH_LIMIT == 100
    assert [len(body_of(r)["messages"]) for r in batches] == [100, 100, 50]
    sent = [m for r in batches for m in body_of(r)["messages"]]
    assert sent == [m.to_request() for m in messages]
    assert result.added == 250
    assert result.message_count == 250
    assert result.pending_tokens == 2500
    assert result.session_id == "s1"
    assert server.to("POST", _SINGLE) == []


async def test_add_messages_exact_limit_is_one_request(server: FakeServer) -> None:
    server.on("POST", _BATCH, _counting_batch())
    async with make_client(server) as client:
        result = await client.add_messages("s1", _messages(100))
    assert len(server.to("POST", _BATCH)) == 1
    assert result.added == 100


async def test_add_messages_counts_chunk_when_added_missing(server: FakeServer) -> None:
    server.reply("POST", _BATCH, ok({"session_id": "s1", "message_count": 3}))
    async with make_client(server) as client:
        result = await client.add_messages("s1", _messages(3))
    assert result.added == 3


async def test_add_messages_empty_sends_nothing(server: FakeServer) -> None:
    async with make_client(server) as client:
        result = await client.add_messages("s1", [])
    assert server.requests == []
    assert result.added == 0


async def test_add_messages_serialises_parts(server: FakeServer) -> None:
    server.on("POST", _BATCH, _counting_batch())
    message = Message(
        role="assistant",
        parts=[TextPart(text="done"), ToolPart(tool_id="t1", tool_name="bash")],
    )
    async with make_client(server) as client:
        await client.add_messages("s1", [message])
    sent = body_of(server.to("POST", _BATCH)[0])
    assert sent == {"messages": [message.to_request()]}
    assert sent["messages"][0]["parts"][1]["tool_name"] == "bash"
    assert "content" not in sent["messages"][0]


@pytest.mark.parametrize(
    "missing",
    [
        method_not_allowed(),
        unknown_route(),
        httpx.Response(404, json={"detail": "Not Found"}),
        httpx.Response(404),
    ],
    ids=["405", "404-envelope", "404-fastapi", "404-empty"],
)
async def test_add_messages_falls_back_to_single_messages(
    server: FakeServer, missing: httpx.Response
) -> None:
    server.reply("POST", _BATCH, missing)
    server.on("POST", _SINGLE, _counting_single())
    messages = _messages(5)
    async with make_client(server) as client:
        result = await client.add_messages("s1", messages)
    assert len(server.to("POST", _BATCH)) == 1
    singles = server.to("POST", _SINGLE)
    assert [body_of(r) for r in singles] == [m.to_request() for m in messages]
    assert result.added == 5
    assert result.message_count == 5
    assert result.pending_tokens == 35


async def test_add_messages_fallback_sends_every_message_even_past_a_chunk(
    server: FakeServer,
) -> None:
    server.reply("POST", _BATCH, method_not_allowed())
    server.on("POST", _SINGLE, _counting_single())
    async with make_client(server) as client:
        result = await client.add_messages("s1", _messages(130))
    assert len(server.to("POST", _BATCH)) == 1
    assert len(server.to("POST", _SINGLE)) == 130
    assert result.added == 130


@pytest.mark.parametrize(
    "failure",
    [
        err(500, "INTERNAL", "boom"),
        err(400, "INVALID_ARGUMENT", "Invalid request parameters: body.messages"),
        err(400, "INVALID_ARGUMENT", "Not Found"),  # the message alone is no missing route
        err(404, "NOT_FOUND", "Session s1 not found"),
        err(404, "NOT_FOUND", "Not Found", {"type": "session"}),
        err(401, "UNAUTHENTICATED", "Invalid API key"),
        err(503, "UNAVAILABLE", "Not Found"),
    ],
    ids=["500", "400", "400-not-found-text", "404-session", "404-details", "401", "503"],
)
async def test_add_messages_no_fallback_on_other_errors(
    server: FakeServer, failure: httpx.Response
) -> None:
    server.reply("POST", _BATCH, failure)
    server.on("POST", _SINGLE, _counting_single())
    async with make_client(server) as client:
        with pytest.raises(ServerError) as info:
            await client.add_messages("s1", _messages(3))
    assert info.value.status_code == failure.status_code
    assert server.to("POST", _SINGLE) == []
    assert len(server.to("POST", _BATCH)) == 1


async def test_add_messages_no_fallback_on_a_later_chunk(server: FakeServer) -> None:
    good = _counting_batch()
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return good(request) if calls == 1 else method_not_allowed()

    server.on("POST", _BATCH, handler)
    server.on("POST", _SINGLE, _counting_single())
    async with make_client(server) as client:
        with pytest.raises(ServerError) as info:
            await client.add_messages("s1", _messages(150))
    assert info.value.status_code == 405
    assert len(server.to("POST", _BATCH)) == 2
    assert server.to("POST", _SINGLE) == []


async def test_add_messages_unavailable_propagates() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    async with make_client(handler) as client:
        with pytest.raises(ServerUnavailable):
            await client.add_messages("s1", _messages(2))


# ================================================================================================
# commit and commit_and_wait

_COMMIT = "/api/v1/sessions/s1/commit"
_TASK_ID = "5f0c3a52-8f6e-4c1d-9d2e-0a7b3c4d5e6f"
_TASK = f"/api/v1/tasks/{_TASK_ID}"
_ARCHIVE = "viking://user/default/sessions/s1/history/archive_001"


def _accepted() -> httpx.Response:
    return ok(
        {
            "session_id": "s1",
            "status": "accepted",
            "task_id": _TASK_ID,
            "archive_uri": _ARCHIVE,
            "archived": True,
        },
        short=True,
    )


def _task(status: str, result: dict[str, Any] | None = None) -> httpx.Response:
    return ok(
        {
            "task_id": _TASK_ID,
            "task_type": "session_commit",
            "status": status,
            "result": result,
            "error": None,
        }
    )


async def test_commit_sends_empty_object_and_parses(server: FakeServer) -> None:
    server.reply("POST", _COMMIT, _accepted())
    async with make_client(server) as client:
        result = await client.commit("s1")
    assert body_of(server.requests[0]) == {}
    assert result.task_id == _TASK_ID
    assert result.archive_id == "archive_001"
    assert result.archived is True
    assert result.task is None


async def test_commit_options_in_payload(server: FakeServer) -> None:
    server.reply("POST", _COMMIT, _accepted())
    async with make_client(server) as client:
        await client.commit("s1", keep_recent_count=4, enable_working_memory=False)
    assert body_of(server.requests[0]) == {"keep_recent_count": 4, "enable_working_memory": False}


async def test_commit_fills_missing_session_id(server: FakeServer) -> None:
    server.reply("POST", _COMMIT, ok({"status": "skipped", "reason": "no_messages"}, short=True))
    async with make_client(server) as client:
        result = await client.commit("s1")
    assert result.session_id == "s1"


async def test_commit_and_wait_polls_until_completed(server: FakeServer) -> None:
    server.reply("POST", _COMMIT, _accepted())
    server.reply(
        "GET",
        _TASK,
        _task("pending"),
        _task("running"),
        _task(
            "completed",
            {"memories_extracted": {"memory_write": 3}, "archive_uri": _ARCHIVE},
        ),
    )
    async with make_client(server) as client:
        result = await client.commit_and_wait("s1", timeout=5, poll_interval=0.01)
    assert result.timed_out is False
    assert result.task is not None
    assert result.task.status == "completed"
    assert result.task.memories_extracted == 3
    assert len(server.to("GET", _TASK)) == 3
    assert [r.url.path for r in server.requests] == [_COMMIT, _TASK, _TASK, _TASK]


async def test_commit_and_wait_failed_task_is_done(server: FakeServer) -> None:
    server.reply("POST", _COMMIT, _accepted())
    server.reply("GET", _TASK, _task("running"), ok({"status": "failed", "error": "llm down"}))
    async with make_client(server) as client:
        result = await client.commit_and_wait("s1", timeout=5, poll_interval=0.01)
    assert result.timed_out is False
    assert result.task is not None
    assert result.task.status == "failed"
    assert result.task.task_id == _TASK_ID  # filled in when the result omits it
    assert result.task.error == "llm down"


async def test_commit_and_wait_stops_at_deadline(server: FakeServer) -> None:
    server.reply("POST", _COMMIT, _accepted())
    server.reply("GET", _TASK, _task("running"))
    async with make_client(server) as client:
        started = time.perf_counter()
        result = await client.commit_and_wait("s1", timeout=0.3, poll_interval=0.02)
        elapsed = time.perf_counter() - started
    assert result.timed_out is True
    assert result.task is not None
    assert result.task.status == "running"
    assert 0.25 <= elapsed < 1.5
    assert len(server.to("GET", _TASK)) >= 3


async def test_commit_and_wait_slow_poll_at_deadline_is_a_timeout(server: FakeServer) -> None:
    """A poll still in flight when the wait's deadline passes ends the wait, not the call."""
    polls = 0

    async def task_handler(request: httpx.Request) -> httpx.Response:
        nonlocal polls
        polls += 1
        if polls > 1:
            await asyncio.sleep(30)
        return _task("running")

    server.reply("POST", _COMMIT, _accepted())
    server.on("GET", _TASK, task_handler)
    async with make_client(server) as client:
        started = time.perf_counter()
        result = await client.commit_and_wait("s1", timeout=0.4, poll_interval=0.01)
        elapsed = time.perf_counter() - started
    assert elapsed < 1.5
    assert result.timed_out is True
    assert result.task_id == _TASK_ID
    assert result.task is not None
    assert result.task.status == "running"


async def test_commit_and_wait_keeps_the_commit_when_polling_fails(server: FakeServer) -> None:
    server.reply("POST", _COMMIT, _accepted())
    server.reply("GET", _TASK, err(404, "NOT_FOUND", "Task not found or expired"))
    async with make_client(server) as client:
        result = await client.commit_and_wait("s1", timeout=5, poll_interval=0.01)
    assert result.status == "accepted"
    assert result.task_id == _TASK_ID
    assert result.task is None
    assert result.wait_error is not None
    assert "Task not found" in result.wait_error
    assert len(server.to("POST", _COMMIT)) == 1


async def test_commit_and_wait_skipped_makes_no_task_request(server: FakeServer) -> None:
    server.reply(
        "POST",
        _COMMIT,
        ok(
            {"session_id": "s1", "status": "skipped", "reason": "no_messages", "task_id": None},
            short=True,
        ),
    )
    async with make_client(server) as client:
        result = await client.commit_and_wait("s1", timeout=5, poll_interval=0.01)
    assert result.status == "skipped"
    assert result.task is None
    assert result.timed_out is False
    assert [r.url.path for r in server.requests] == [_COMMIT]


async def test_wait_task_zero_timeout_makes_no_request(server: FakeServer) -> None:
    async with make_client(server) as client:
        task, timed_out = await client.wait_task(_TASK_ID, timeout=0)
    assert timed_out is True
    assert task.task_id == _TASK_ID
    assert server.requests == []


async def test_get_task_and_unknown_task(server: FakeServer) -> None:
    server.reply("GET", _TASK, _task("completed", {"memories_extracted": {"a": 1, "b": 2}}))
    server.reply("GET", "/api/v1/tasks/gone", err(404, "NOT_FOUND", "Task not found or expired"))
    async with make_client(server) as client:
        task = await client.get_task(_TASK_ID)
        with pytest.raises(NotFoundError) as info:
            await client.get_task("gone")
    assert task.memories_extracted == 3
    assert task.done
    assert "Task not found or expired" in str(info.value)


# ================================================================================================
# find and search

_FIND = "/api/v1/search/find"
_FIND_RESULT = {
    "memories": [
        {
            "context_type": "memory",
            "uri": "viking://user/default/memories/preferences/user/uv_over_pip.md",
            "level": 2,
            "score": 0.588,
            "abstract": "- I prefer uv...",
            "tags": ["memory_type=preferences"],
        },
        {
            "context_type": "memory",
            "uri": "viking://user/default/memories/.overview.md",
            "level": 1,
            "score": 0.41,
            "abstract": "overview",
            "tags": [],
        },
        {
            "context_type": "memory",
            "uri": "viking://user/default/memories/tools/ruff.md",
            "level": 2,
            "score": 0.5,
            "abstract": "ruff",
            "tags": [],
        },
    ],
    "resources": [],
    "skills": [],
    "total": 4,
}


async def test_find_sends_exactly_query_limit_and_resolved_target(server: FakeServer) -> None:
    server.reply("POST", _FIND, ok(_FIND_RESULT))
    async with make_client(server) as client:
        result = await client.find("package manager", target_uri="viking://user/memories")
    (request,) = server.to("POST", _FIND)
    assert body_of(request) == {
        "query": "package manager",
        "limit": 10,
        "target_uri": "viking://user/default/memories",
    }
    assert result.total == 4
    hits = result.memories
    assert [h.category for h in hits] == ["preferences", "memory", "tools"]
    assert [h.is_summary for h in hits] == [False, True, False]
    assert hits[0].abstract == "- I prefer uv..."
    assert [h.score for h in result.all_hits()] == [0.588, 0.5, 0.41]


async def test_find_without_target_does_no_discovery(server: FakeServer) -> None:
    server.reply("POST", _FIND, ok(_FIND_RESULT))
    async with make_client(server) as client:
        await client.find("q", limit=3)
    assert [r.url.path for r in server.requests] == [_FIND]
    assert body_of(server.requests[0]) == {"query": "q", "limit": 3}


async def test_find_all_options(server: FakeServer) -> None:
    server.reply("POST", _FIND, ok(_FIND_RESULT))
    async with make_client(server) as client:
        await client.find(
            "q",
            target_uri=["viking://user/memories/", "viking://agent/skills", "viking://resources"],
            context_type=("memory", "skill"),
            limit=5,
            score_threshold=0.35,
            tags=("memory_type=preferences",),
            level=(1, 2),
        )
        await client.find("q", context_type="memory", level=2)
    first, second = (body_of(r) for r in server.to("POST", _FIND))
    assert first == {
        "query": "q",
        "limit": 5,
        "target_uri": [
            "viking://user/default/memories/",
            "viking://agent/skills",
            "viking://resources",
        ],
        "context_type": ["memory", "skill"],
        "score_threshold": 0.35,
        "tags": ["memory_type=preferences"],
        "level": [1, 2],
    }
    assert second == {"query": "q", "limit": 10, "context_type": "memory", "level": 2}
    for body in (first, second):
        assert "top_k" not in body


async def test_find_space_discovery_is_cached(server: FakeServer) -> None:
    server.reply("POST", _FIND, ok(_FIND_RESULT))
    async with make_client(server) as client:
        for _ in range(5):
            await client.find("q", target_uri="viking://user/memories")
    assert len(server.to("GET", "/api/v1/fs/ls")) == 1
    assert len(server.to("GET", "/api/v1/system/status")) == 1
    assert len(server.to("POST", _FIND)) == 5


async def test_find_rejected_field_is_a_server_error(server: FakeServer) -> None:
    server.reply(
        "POST",
        _FIND,
        err(
            400,
            "INVALID_ARGUMENT",
            "Invalid request parameters: body.top_k: Extra inputs are not permitted",
            {"validation_errors": []},
        ),
    )
    async with make_client(server) as client:
        with pytest.raises(ServerError) as info:
            await client.find("q")
    assert info.value.code == "INVALID_ARGUMENT"
    assert not info.value.retryable


async def test_search_payload(server: FakeServer) -> None:
    server.reply("POST", "/api/v1/search/search", ok(_FIND_RESULT))
    async with make_client(server) as client:
        result = await client.search(
            "q", session_id="s1", target_uri="viking://user/memories", score_threshold=0.2
        )
        await client.search("q")
    first, second = (body_of(r) for r in server.to("POST", "/api/v1/search/search"))
    assert first == {
        "query": "q",
        "limit": 10,
        "session_id": "s1",
        "target_uri": "viking://user/default/memories",
        "score_threshold": 0.2,
    }
    assert second == {"query": "q", "limit": 10}
    assert len(result.memories) == 3


# ================================================================================================
# Content and filesystem

_MEM = "viking://user/memories/preferences/uv.md"
_MEM_RESOLVED = "viking://user/default/memories/preferences/uv.md"


@pytest.mark.parametrize("method", ["read", "abstract", "overview"])
async def test_text_reads(server: FakeServer, method: str) -> None:
    path = f"/api/v1/content/{method}"
    server.reply("GET", path, ok(f"{method} text"))
    async with make_client(server) as client:
        text = await getattr(client, method)(_MEM)
    assert text == f"{method} text"
    (request,) = server.to("GET", path)
    assert dict(request.url.params) == {"uri": _MEM_RESOLVED}


async def test_read_non_string_result_is_stringified(server: FakeServer) -> None:
    server.reply("GET", "/api/v1/content/read", ok(42))
    async with make_client(server) as client:
        assert await client.read("viking://resources/a") == "42"


async def test_read_missing_file(server: FakeServer) -> None:
    server.reply(
        "GET",
        "/api/v1/content/read",
        err(404, "NOT_FOUND", f"File not found: {_MEM_RESOLVED}", {"type": "file"}),
    )
    async with make_client(server) as client:
        with pytest.raises(NotFoundError):
            await client.read(_MEM)


async def test_write(server: FakeServer) -> None:
    server.reply("POST", "/api/v1/content/write", ok({"uri": _MEM_RESOLVED, "written": 5}))
    async with make_client(server) as client:
        result = await client.write(_MEM, "hello")
        await client.write(_MEM, "more", mode="append")
    first, second = (body_of(r) for r in server.to("POST", "/api/v1/content/write"))
    assert first == {"uri": _MEM_RESOLVED, "content": "hello", "mode": "replace"}
    assert second["mode"] == "append"
    assert result == {"uri": _MEM_RESOLVED, "written": 5}


async def test_write_non_dict_result_is_wrapped(server: FakeServer) -> None:
    server.reply("POST", "/api/v1/content/write", ok("done"))
    async with make_client(server) as client:
        assert await client.write("viking://resources/a.md", "x") == {"result": "done"}


async def test_ls(server: FakeServer) -> None:
    entries = [
        {
            "uri": "viking://user/default/memories/preferences",
            "size": 0,
            "isDir": True,
            "modTime": "2025-06-01T10:00:00Z",
            "abstract": "preferences",
        },
        {
            "uri": "viking://user/default/memories/profile.md",
            "size": 120,
            "isDir": False,
            "modTime": "2025-06-01T10:00:00Z",
            "abstract": "profile",
        },
    ]
    server.reply("GET", "/api/v1/fs/ls", ok(entries, has_more=False))
    async with make_client(server) as client:
        listed = await client.ls("viking://user/memories")
        await client.ls("viking://resources", recursive=True, limit=5)
    agent_ls = [r for r in server.api_requests() if r.url.path == "/api/v1/fs/ls"]
    assert [dict(r.url.params) for r in agent_ls] == [
        {"uri": "viking://user/default/memories", "recursive": "false", "output": "agent"},
        {"uri": "viking://resources", "recursive": "true", "output": "agent", "limit": "5"},
    ]
    assert [e.basename for e in listed] == ["preferences", "profile.md"]
    assert [e.is_dir for e in listed] == [True, False]
    assert listed[1].size == 120
    assert listed[1].abstract == "profile"


async def test_ls_wrapped_and_garbage_results(server: FakeServer) -> None:
    server.reply(
        "GET",
        "/api/v1/fs/ls",
        ok({"entries": [{"uri": "viking://resources/a", "isDir": False}, "junk"]}),
        ok("nothing"),
    )
    async with make_client(server) as client:
        wrapped = await client.ls("viking://resources")
        garbage = await client.ls("viking://resources")
    assert [e.uri for e in wrapped] == ["viking://resources/a"]
    assert garbage == []


async def test_tree(server: FakeServer) -> None:
    server.reply("GET", "/api/v1/fs/tree", ok([{"uri": "viking://resources/docs", "isDir": True}]))
    async with make_client(server) as client:
        tree = await client.tree("viking://resources", level_limit=2)
    (request,) = server.to("GET", "/api/v1/fs/tree")
    assert dict(request.url.params) == {
        "uri": "viking://resources",
        "output": "agent",
        "level_limit": "2",
    }
    assert tree[0].is_dir


async def test_stat(server: FakeServer) -> None:
    server.reply(
        "GET",
        "/api/v1/fs/stat",
        ok(
            {
                "name": "uv.md",
                "size": 42,
                "mode": 420,
                "modTime": "2025-06-01T10:00:00Z",
                "isDir": False,
                "uri": _MEM_RESOLVED,
                "isLocked": False,
                "id": "abc",
            }
        ),
        ok({"size": 1, "isDir": False}),
    )
    async with make_client(server) as client:
        entry = await client.stat(_MEM)
        bare = await client.stat("viking://resources/b.md")
    first = server.to("GET", "/api/v1/fs/stat")[0]
    assert dict(first.url.params) == {"uri": _MEM_RESOLVED}
    assert entry.name == "uv.md"
    assert entry.size == 42
    assert entry.is_dir is False
    assert entry.mod_time == "2025-06-01T10:00:00Z"
    assert bare.uri == "viking://resources/b.md"  # filled from the request


async def test_delete(server: FakeServer) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.params["recursive"] == "false" and request.url.params["uri"].endswith("/"):
            return err(400, "INVALID_ARGUMENT", "is a directory; use recursive")
        return ok({"uri": request.url.params["uri"]})

    server.on("DELETE", "/api/v1/fs", handler)
    async with make_client(server) as client:
        await client.delete(_MEM)
        await client.delete("viking://user/memories/preferences/", recursive=True)
        with pytest.raises(ServerError) as info:
            await client.delete("viking://resources/dir/")
    assert [dict(r.url.params) for r in server.to("DELETE", "/api/v1/fs")] == [
        {"uri": _MEM_RESOLVED, "recursive": "false"},
        {"uri": "viking://user/default/memories/preferences/", "recursive": "true"},
        {"uri": "viking://resources/dir/", "recursive": "false"},
    ]
    assert info.value.code == "INVALID_ARGUMENT"
    assert info.value.status_code == 400
    assert info.value.method == "DELETE"


# ================================================================================================
# Resources

_UPLOAD = "/api/v1/resources/temp_upload"
_RESOURCES = "/api/v1/resources"


async def test_add_resource_url(server: FakeServer) -> None:
    server.reply("POST", _RESOURCES, ok({"root_uri": "viking://resources/page"}))
    async with make_client(server) as client:
        result = await client.add_resource("https://example.com/page.md", reason="docs")
    assert [r.url.path for r in server.requests] == [_RESOURCES]
    assert body_of(server.requests[0]) == {
        "reason": "docs",
        "wait": False,
        "path": "https://example.com/page.md",
    }
    assert result == {"root_uri": "viking://resources/page"}


async def test_add_resource_local_file_uploads_first(server: FakeServer, tmp_path: Path) -> None:
    source = tmp_path / "notes.md"
    source.write_text("# Notes\nuse uv\n", encoding="utf-8")
    server.reply("POST", _UPLOAD, ok({"temp_file_id": "upload_0123abcd.md"}))
    server.reply("POST", _RESOURCES, ok({"root_uri": "viking://resources/notes"}))
    async with make_client(server) as client:
        result = await client.add_resource(source, to="viking://resources/notes", wait=True)
    upload, create = server.api_requests()
    assert upload.url.path == _UPLOAD
    assert upload.headers["content-type"].startswith("multipart/form-data; boundary=")
    content = upload.content
    assert b'name="file"; filename="notes.md"' in content
    assert b"Content-Type: text/markdown" in content
    assert b"# Notes\nuse uv\n" in content
    assert create.url.path == _RESOURCES
    assert body_of(create) == {
        "reason": "",
        "wait": True,
        "to": "viking://resources/notes",
        "temp_file_id": "upload_0123abcd.md",
    }
    assert result["root_uri"] == "viking://resources/notes"


async def test_add_resource_local_path_as_string_never_sends_path(
    server: FakeServer, tmp_path: Path
) -> None:
    source = tmp_path / "data.bin"
    source.write_bytes(b"\x00\x01")
    server.reply("POST", _UPLOAD, ok({"temp_file_id": "upload_ff.bin"}))
    server.reply("POST", _RESOURCES, ok({}))
    async with make_client(server) as client:
        await client.add_resource(str(source))
    upload, create = server.requests
    assert b"Content-Type: application/octet-stream" in upload.content
    assert "path" not in body_of(create)
    assert body_of(create)["temp_file_id"] == "upload_ff.bin"


async def test_add_resource_to_is_resolved(server: FakeServer) -> None:
    server.reply("POST", _RESOURCES, ok({}))
    async with make_client(server) as client:
        await client.add_resource("http://example.com/a", to="viking://user/resources/a")
    (create,) = server.to("POST", _RESOURCES)
    assert body_of(create)["to"] == "viking://user/default/resources/a"


@pytest.mark.parametrize("to", [None, "viking://user/resources/x"])
async def test_add_resource_missing_file_is_value_error_without_requests(
    server: FakeServer, tmp_path: Path, to: str | None
) -> None:
    async with make_client(server) as client:
        with pytest.raises(ValueError, match=r"cannot read .*missing\.md"):
            await client.add_resource(tmp_path / "missing.md", to=to)
        with pytest.raises(ValueError, match="cannot read"):
            await client.add_resource(tmp_path)  # a directory
        with pytest.raises(ValueError, match="cannot read"):
            await client.upload_temp_file(tmp_path / "missing.md")
    assert server.requests == []


async def test_add_resource_host_path_refused(server: FakeServer, tmp_path: Path) -> None:
    source = tmp_path / "a.md"
    source.write_text("a")
    server.reply("POST", _UPLOAD, ok({"temp_file_id": "upload_1.md"}))
    server.reply("POST", _RESOURCES, err(403, "PERMISSION_DENIED", "local paths are not allowed"))
    async with make_client(server) as client:
        with pytest.raises(ServerError) as info:
            await client.add_resource(source)
    assert info.value.code == "PERMISSION_DENIED"
    assert info.value.status_code == 403
    assert not info.value.retryable


async def test_upload_without_temp_file_id_is_invalid(server: FakeServer, tmp_path: Path) -> None:
    source = tmp_path / "a.md"
    source.write_text("a")
    server.reply("POST", _UPLOAD, ok({"something": "else"}))
    async with make_client(server) as client:
        with pytest.raises(ServerError) as info:
            await client.upload_temp_file(source)
    assert info.value.code == "INVALID_RESPONSE"
    assert server.to("POST", _RESOURCES) == []


async def test_upload_temp_file_returns_id(server: FakeServer, tmp_path: Path) -> None:
    source = tmp_path / "a.md"
    source.write_text("a")
    server.reply("POST", _UPLOAD, ok({"temp_file_id": "upload_9.md"}))
    async with make_client(server) as client:
        assert await client.upload_temp_file(source) == "upload_9.md"


async def test_wait_processed_sends_timeout_and_waits_longer_than_it(server: FakeServer) -> None:
    server.reply("POST", "/api/v1/system/wait", ok({"Embedding": {"processed": 3}}))
    async with make_client(server, write_timeout=1.0) as client:
        status = await client.wait_processed(timeout=45.0)
    assert status == {"Embedding": {"processed": 3}}
    request = server.to("POST", "/api/v1/system/wait")[0]
    assert body_of(request) == {"timeout": 45.0}
    # The HTTP deadline covers the server's own wait, not the 1 s write class.
    assert request.extensions["timeout"]["read"] >= 45.0
