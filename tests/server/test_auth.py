"""Identity and isolation: dev-mode headers, api_key-mode keys and admin routes."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.applications import Starlette

from ov_agent_ext.server import create_app

from .conftest import Api, connect

ROOT = "root-key-for-tests"
SECRET = "viking://user/alice/memories/preferences/alice/theme.md"


async def test_dev_mode_identity_comes_from_the_headers(app: Starlette) -> None:
    async with connect(app, account="acme", user="bob") as bob:
        assert await bob.ok("GET", "/api/v1/system/status") == {"initialized": True, "user": "bob"}
    async with connect(app, account="", user="") as anonymous:
        assert (await anonymous.ok("GET", "/api/v1/system/status"))["user"] == "default"
    async with connect(app, user="a/b") as bad:
        error = await bad.error("GET", "/api/v1/system/status", 400)
        assert error["code"] == "INVALID_ARGUMENT"
    async with connect(app) as api:
        health = await api.ok("GET", "/api/v1/sessions")  # a data route works without a key
        assert health == []
        error = await api.error(
            "POST", "/api/v1/admin/accounts", 403, json={"account_id": "x", "admin_user_id": "y"}
        )
        assert error["code"] == "PERMISSION_DENIED"


@pytest.fixture
def keyed(data_dir: Path) -> Starlette:
    return create_app(data_dir, root_api_key=ROOT)


async def test_api_key_mode_admin_routes_create_accounts_and_users(keyed: Starlette) -> None:
    async with connect(keyed, key=ROOT) as root:
        assert (await root.ok("GET", "/api/v1/system/status"))["user"] == "default"
        error = await root.error("GET", "/api/v1/sessions/x", 403)
        assert error["code"] == "PERMISSION_DENIED"
        assert "ROOT API keys" in error["message"]
        acme = await root.ok(
            "POST", "/api/v1/admin/accounts", json={"account_id": "acme", "admin_user_id": "ann"}
        )
        assert set(acme) == {"account_id", "admin_user_id", "user_key"}
        error = await root.error(
            "POST", "/api/v1/admin/accounts", 409, json={"account_id": "acme", "admin_user_id": "x"}
        )
        assert error["code"] == "ALREADY_EXISTS"
        bob = await root.ok("POST", "/api/v1/admin/accounts/acme/users", json={"user_id": "bob"})
        assert (bob["account_id"], bob["user_id"]) == ("acme", "bob")
        await root.error("POST", "/api/v1/admin/accounts/nope/users", 404, json={"user_id": "x"})
        accounts = await root.ok("GET", "/api/v1/admin/accounts")
        assert accounts == [{"account_id": "acme", "user_count": 2}]
    async with connect(keyed, key=acme["user_key"]) as ann:  # an account admin
        assert (await ann.ok("GET", "/api/v1/system/status"))["user"] == "ann"
        cid = await ann.ok("POST", "/api/v1/admin/accounts/acme/users", json={"user_id": "cid"})
        await ann.error("POST", "/api/v1/admin/accounts/other/users", 403, json={"user_id": "x"})
        await ann.error(
            "POST", "/api/v1/admin/accounts", 403, json={"account_id": "x", "admin_user_id": "y"}
        )
        health = await ann.call("GET", "/health")
        assert health.json()["user_id"] == "ann"
        # a new account starts with the real server's layout
        root_dirs = await ann.ok(
            "GET", "/api/v1/fs/ls", params={"uri": "viking://", "output": "original"}
        )
        assert [e["name"] for e in root_dirs] == ["agent", "resources", "system", "user"]
        agent = await ann.ok(
            "GET", "/api/v1/fs/ls", params={"uri": "viking://agent", "output": "original"}
        )
        assert [e["name"] for e in agent] == ["endpoints", "payments", "skills", "tools"]
    async with connect(keyed, key=bob["user_key"]) as bob_api:
        await bob_api.error("POST", "/api/v1/admin/accounts/acme/users", 403, json={"user_id": "z"})
    async with connect(keyed, key=cid["user_key"]) as cid_api:
        assert (await cid_api.ok("GET", "/api/v1/system/status"))["user"] == "cid"


async def test_api_key_mode_rejects_missing_and_wrong_keys(keyed: Starlette) -> None:
    async with connect(keyed, account="acme", user="alice") as headers_only:
        error = await headers_only.error("GET", "/api/v1/system/status", 401)
        assert (error["code"], error["message"]) == (
            "UNAUTHENTICATED",
            "Missing API Key when resolving identity.",
        )
        health = await headers_only.call("GET", "/health")
        assert health.json()["auth_mode"] == "api_key"
    async with connect(keyed, key="not-a-key") as wrong:
        error = await wrong.error("GET", "/api/v1/sessions/x", 401)
        assert error["message"] == "Invalid API key"
        await wrong.error("GET", "/health", 401)


async def _isolation(alice: Api, eve: Api) -> None:
    await alice.write(SECRET, "Alice prefers the Quokka colour theme.")
    await alice.say("private", "My name is Alice Quokka.")
    await alice.commit("private")
    # read, stat, ls, write, delete of Alice's space: all refused to Eve
    for method, path, params in [
        ("GET", "/api/v1/content/read", {"uri": SECRET}),
        ("GET", "/api/v1/fs/stat", {"uri": SECRET}),
        ("GET", "/api/v1/fs/ls", {"uri": "viking://user/alice"}),
        ("DELETE", "/api/v1/fs", {"uri": SECRET}),
    ]:
        error = await eve.error(method, path, 403, params=params)
        assert error["code"] == "PERMISSION_DENIED"
    await eve.error(
        "POST", "/api/v1/content/write", 403, json={"uri": SECRET, "content": "overwritten"}
    )
    assert "Quokka" in await alice.read(SECRET)
    # the user root lists only the caller; finds never return another user's memories
    await eve.say("mine", "Hello.")
    users = await eve.ok("GET", "/api/v1/fs/ls", params={"uri": "viking://user"})
    assert [e["uri"] for e in users] == ["viking://user/eve"]
    unscoped = await eve.find("Quokka colour theme", limit=50)
    assert not any(
        "alice" in h["uri"] for k in ("memories", "resources", "skills") for h in unscoped[k]
    )
    targeted = await eve.find("Quokka", target_uri="viking://user/alice/memories")
    assert targeted["total"] == 0
    # sessions and tasks are per user too
    await eve.error("GET", "/api/v1/sessions/private", 404)
    tasks = await alice.ok("GET", "/api/v1/tasks")
    await eve.error("GET", f"/api/v1/tasks/{tasks[0]['task_id']}", 404)
    # shared scopes are shared within the account
    await alice.write("viking://resources/team/guide.md", "Team guide: deploy with Helm.")
    assert "Helm" in await eve.read("viking://resources/team/guide.md")


async def test_users_are_isolated_in_dev_mode(app: Starlette) -> None:
    async with connect(app, user="alice") as alice, connect(app, user="eve") as eve:
        await _isolation(alice, eve)


async def test_users_are_isolated_in_api_key_mode(keyed: Starlette) -> None:
    async with connect(keyed, key=ROOT) as root:
        acme = await root.ok(
            "POST", "/api/v1/admin/accounts", json={"account_id": "acme", "admin_user_id": "alice"}
        )
        eve = await root.ok("POST", "/api/v1/admin/accounts/acme/users", json={"user_id": "eve"})
    async with (
        connect(keyed, key=acme["user_key"]) as alice,
        connect(keyed, key=eve["user_key"]) as eve_api,
    ):
        await _isolation(alice, eve_api)


async def test_accounts_are_isolated(app: Starlette) -> None:
    async with (
        connect(app, account="a1", user="alice") as mine,
        connect(app, account="a2", user="alice") as theirs,
    ):
        await mine.write("viking://resources/secret/plan.md", "Secret launch plan for Kestrel.")
        await theirs.error(
            "GET", "/api/v1/content/read", 404, params={"uri": "viking://resources/secret/plan.md"}
        )
        found = await theirs.find("Kestrel launch plan", limit=20)
        assert found["total"] == 0
        assert (await mine.find("Kestrel launch plan"))["resources"]
