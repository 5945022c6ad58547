"""SpaceResolver: short viking:// URIs -> the caller's space, layout discovered and cached."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from ov_agent_ext.client import OVClient
from ov_agent_ext.config import OVConfig
from ov_agent_ext.errors import ServerUnavailable
from ov_agent_ext.spaces import RESERVED_NAMES, split_uri

ENDPOINT = "http://ov.test:1933"


def _ok(result: Any) -> httpx.Response:
    body = {"status": "ok", "result": result, "error": None, "telemetry": None, "profile": None}
    return httpx.Response(200, json=body, headers={"x-request-id": "rid"})


def _not_found(message: str = "Not Found") -> httpx.Response:
    return httpx.Response(
        404,
        json={"status": "error", "error": {"code": "NOT_FOUND", "message": message}},
        headers={"x-request-id": "rid"},
    )


def _dir(scope: str, name: str, *, with_name: bool = True) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "uri": f"viking://{scope}/{name}",
        "size": 4096,
        "isDir": True,
        "modTime": "2025-06-01T10:00:00Z",
    }
    if with_name:
        entry["name"] = name
    return entry


def _file(scope: str, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "uri": f"viking://{scope}/{name}",
        "size": 10,
        "isDir": False,
        "modTime": "2025-06-01T10:00:00Z",
    }


class FakeServer:
    """Answers fs/ls on the scope roots and system/status; records every request."""

    def __init__(
        self,
        roots: dict[str, list[dict[str, Any]] | None],
        status: Callable[[], httpx.Response] | None = None,
    ) -> None:
        self.roots = roots  # None -> 404 for that scope root
        self.status = status or (lambda: _ok({"initialized": True, "user": "default"}))
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = request.url.path
        if path == "/api/v1/system/status" and request.method == "GET":
            return self.status()
        if path == "/api/v1/fs/ls" and request.method == "GET":
            uri = request.url.params["uri"]
            assert request.url.params["output"] == "original"
            scope = uri.removeprefix("viking://")
            entries = self.roots.get(scope)
            if entries is None:
                return _not_found(f"File not found: {uri}")
            return _ok(entries)
        return _not_found()

    def count(self, path: str) -> int:
        return sum(1 for r in self.requests if r.url.path == path)

    def ls_uris(self) -> list[str]:
        return [r.url.params["uri"] for r in self.requests if r.url.path == "/api/v1/fs/ls"]


V052_ROOTS: dict[str, list[dict[str, Any]] | None] = {
    "user": [_dir("user", "default"), _file("user", ".abstract.md")],
    "agent": [
        _dir("agent", "skills"),
        _dir("agent", "tools"),
        _dir("agent", "endpoints"),
        _dir("agent", "payments"),
    ],
}


def _client(server: FakeServer, **config: Any) -> OVClient:
    return OVClient(OVConfig(endpoint=ENDPOINT, **config), transport=httpx.MockTransport(server))


# --- split_uri -----------------------------------------------------------------------------------


def test_split_uri() -> None:
    assert split_uri("viking://user/memories/x.md") == ("user", ["memories", "x.md"])
    assert split_uri("viking://user//memories/") == ("user", ["memories"])
    assert split_uri("viking://") is None
    assert split_uri("https://example.com/a") is None
    assert "memories" in RESERVED_NAMES


# --- 0.5.2 layout --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("viking://user/memories", "viking://user/default/memories"),
        ("viking://user/memories/", "viking://user/default/memories/"),
        (
            "viking://user/memories/preferences/x.md",
            "viking://user/default/memories/preferences/x.md",
        ),
        ("viking://user/skills", "viking://user/default/skills"),
        # already has its space, or not a reserved name: unchanged
        ("viking://user/default/memories", "viking://user/default/memories"),
        ("viking://user/other/memories/x.md", "viking://user/other/memories/x.md"),
        ("viking://user", "viking://user"),
        ("viking://user/", "viking://user/"),
        # the agent root is flat on 0.5.2 (skills directly under it): unchanged
        ("viking://agent/skills", "viking://agent/skills"),
        ("viking://agent/memories", "viking://agent/memories"),
        ("viking://agent/skills/", "viking://agent/skills/"),
        # other scopes and schemes
        ("viking://resources/docs/a.md", "viking://resources/docs/a.md"),
        ("viking://resources", "viking://resources"),
        ("viking://session/s1", "viking://session/s1"),
        ("https://example.com/memories", "https://example.com/memories"),
        ("/tmp/memories/x.md", "/tmp/memories/x.md"),
        ("", ""),
    ],
)
async def test_resolve_0_5_2_layout(uri: str, expected: str) -> None:
    server = FakeServer(V052_ROOTS)
    async with _client(server) as client:
        assert await client.spaces.resolve_uri(uri) == expected


async def test_unchanged_uris_cost_no_requests() -> None:
    server = FakeServer(V052_ROOTS)
    async with _client(server) as client:
        for uri in (
            "viking://resources/docs/a.md",
            "https://example.com/x",
            "viking://user/default/memories",
            "viking://user",
        ):
            await client.spaces.resolve_uri(uri)
    assert server.requests == []


async def test_root_listed_with_output_original() -> None:
    server = FakeServer(V052_ROOTS)
    async with _client(server) as client:
        await client.spaces.resolve_uri("viking://user/memories")
    ls = [r for r in server.requests if r.url.path == "/api/v1/fs/ls"]
    assert len(ls) == 1
    assert dict(ls[0].url.params) == {"uri": "viking://user", "output": "original"}


async def test_entries_without_name_use_uri_basename() -> None:
    roots: dict[str, list[dict[str, Any]] | None] = {
        "user": [_dir("user", "abc123", with_name=False)]
    }
    # no identity from the server and none configured: the only space listed is ours
    server = FakeServer(roots, status=lambda: _not_found())
    async with _client(server) as client:
        assert await client.spaces.resolve_uri("viking://user/memories") == (
            "viking://user/abc123/memories"
        )


async def test_server_identity_wins_over_listed_user_spaces() -> None:
    # dev mode lists every user of the account; the server-named caller is the space
    server = FakeServer(
        {"user": [_dir("user", "default")]},
        status=lambda: _ok({"initialized": True, "user": "alice"}),
    )
    async with _client(server) as client:
        assert await client.spaces.resolve_uri("viking://user/memories") == (
            "viking://user/alice/memories"
        )


async def test_single_listed_space_beats_configured_user_without_server_identity() -> None:
    server = FakeServer({"user": [_dir("user", "abc123")]}, status=lambda: _not_found())
    async with _client(server, user="bob") as client:
        assert await client.spaces.resolve_uri("viking://user/memories/x") == (
            "viking://user/abc123/memories/x"
        )


# --- older layout --------------------------------------------------------------------------------

OLD_ROOTS: dict[str, list[dict[str, Any]] | None] = {
    "user": [_dir("user", "alice"), _dir("user", "bob")],
    "agent": [_dir("agent", "abc123"), _dir("agent", ".hidden")],
}


async def test_older_layout_user_space_is_identity() -> None:
    server = FakeServer(OLD_ROOTS, status=lambda: _ok({"initialized": True, "user": "alice"}))
    async with _client(server) as client:
        assert await client.spaces.resolve_uri("viking://user/memories/x.md") == (
            "viking://user/alice/memories/x.md"
        )
        assert await client.spaces.identity() == "alice"


async def test_older_layout_single_agent_space_is_ours() -> None:
    server = FakeServer(OLD_ROOTS, status=lambda: _ok({"initialized": True, "user": "alice"}))
    async with _client(server) as client:
        assert await client.spaces.resolve_uri("viking://agent/memories") == (
            "viking://agent/abc123/memories"
        )
        assert await client.spaces.resolve_uri("viking://agent/skills/") == (
            "viking://agent/abc123/skills/"
        )


async def test_agent_id_preferred_among_several_agent_spaces() -> None:
    roots: dict[str, list[dict[str, Any]] | None] = {
        "agent": [_dir("agent", "abc123"), _dir("agent", "pi-agent")]
    }
    server = FakeServer(roots)
    async with _client(server, agent_id="pi-agent") as client:
        assert await client.spaces.resolve_uri("viking://agent/memories") == (
            "viking://agent/pi-agent/memories"
        )


async def test_several_spaces_none_matching_uses_identity() -> None:
    server = FakeServer(OLD_ROOTS, status=lambda: _ok({"initialized": True, "user": "carol"}))
    async with _client(server) as client:
        assert await client.spaces.resolve_uri("viking://user/memories") == (
            "viking://user/carol/memories"
        )


@pytest.mark.parametrize("user_root", [[], None])
async def test_empty_or_missing_user_root_uses_identity(
    user_root: list[dict[str, Any]] | None,
) -> None:
    server = FakeServer({"user": user_root})
    async with _client(server) as client:
        assert await client.spaces.resolve_uri("viking://user/memories") == (
            "viking://user/default/memories"
        )


@pytest.mark.parametrize("agent_root", [[], None])
async def test_empty_or_missing_agent_root_is_no_evidence_of_spaces(
    agent_root: list[dict[str, Any]] | None,
) -> None:
    server = FakeServer({"agent": agent_root})
    async with _client(server, agent_id="myagent") as client:
        assert await client.spaces.resolve_uri("viking://agent/skills/x") == (
            "viking://agent/skills/x"
        )
    assert server.count("/api/v1/system/status") == 0


# --- identity ------------------------------------------------------------------------------------


async def test_identity_from_system_status_wins_over_configured_user() -> None:
    server = FakeServer({"user": []}, status=lambda: _ok({"initialized": True, "user": "alice"}))
    async with _client(server, user="configured") as client:
        assert await client.spaces.identity() == "alice"
        assert await client.spaces.resolve_uri("viking://user/memories") == (
            "viking://user/alice/memories"
        )


async def test_identity_from_status_user_object() -> None:
    server = FakeServer(
        {"user": []},
        status=lambda: _ok({"initialized": True, "user": {"account_id": "a", "user_id": "u7"}}),
    )
    async with _client(server) as client:
        assert await client.spaces.identity() == "u7"


async def test_identity_falls_back_to_configured_user_when_status_fails() -> None:
    server = FakeServer({"user": []}, status=lambda: _not_found())
    async with _client(server, user="bob") as client:
        assert await client.spaces.identity() == "bob"
        assert await client.spaces.resolve_uri("viking://user/memories") == (
            "viking://user/bob/memories"
        )


async def test_identity_falls_back_to_default_without_user() -> None:
    server = FakeServer(
        {"user": []},
        status=lambda: httpx.Response(500, json={"status": "error", "error": {"code": "INTERNAL"}}),
    )
    async with _client(server) as client:
        assert await client.spaces.identity() == "default"


async def test_identity_without_user_in_status_uses_configured() -> None:
    server = FakeServer({"user": []}, status=lambda: _ok({"initialized": True}))
    async with _client(server, user="zed") as client:
        assert await client.spaces.identity() == "zed"


async def test_unreachable_server_propagates() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    async with OVClient(
        OVConfig(endpoint=ENDPOINT), transport=httpx.MockTransport(handler)
    ) as client:
        with pytest.raises(ServerUnavailable):
            await client.spaces.resolve_uri("viking://user/memories")


# --- caching -------------------------------------------------------------------------------------


async def test_root_and_identity_read_once_across_many_resolutions() -> None:
    server = FakeServer(V052_ROOTS)
    async with _client(server) as client:
        for i in range(20):
            assert await client.spaces.resolve_uri(f"viking://user/memories/{i}.md") == (
                f"viking://user/default/memories/{i}.md"
            )
            await client.spaces.resolve_uri("viking://agent/skills")
    assert server.ls_uris() == ["viking://user", "viking://agent"]
    assert server.count("/api/v1/system/status") == 1


async def test_concurrent_resolutions_list_the_root_once() -> None:
    server = FakeServer(OLD_ROOTS, status=lambda: _ok({"initialized": True, "user": "alice"}))
    async with _client(server) as client:
        results = await asyncio.gather(
            *(client.spaces.resolve_uri(f"viking://user/memories/{i}") for i in range(25))
        )
    assert results == [f"viking://user/alice/memories/{i}" for i in range(25)]
    assert server.ls_uris() == ["viking://user"]
    assert server.count("/api/v1/system/status") == 1


async def test_failed_status_is_cached_too() -> None:
    server = FakeServer({"user": []}, status=lambda: _not_found())
    async with _client(server, user="bob") as client:
        for _ in range(5):
            await client.spaces.resolve_uri("viking://user/memories")
    assert server.count("/api/v1/system/status") == 1


async def test_clear_forgets_the_layout() -> None:
    server = FakeServer(V052_ROOTS)
    async with _client(server) as client:
        await client.spaces.resolve_uri("viking://user/memories")
        client.spaces.clear()
        await client.spaces.resolve_uri("viking://user/memories")
    assert server.ls_uris() == ["viking://user", "viking://user"]
    assert server.count("/api/v1/system/status") == 2
