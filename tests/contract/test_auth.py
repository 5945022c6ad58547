"""Contract: api_key mode."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest

from ov_agent_ext import Message, ServerError

from .conftest import Backend

pytestmark = pytest.mark.contract


async def test_wrong_key_is_unauthenticated(apikey_backend: Backend) -> None:
    client = apikey_backend.client(api_key="not-a-real-key")
    with pytest.raises(ServerError) as caught:
        await client.get_session("anything")
    error = caught.value
    assert (error.code, error.status_code, error.retryable) == ("UNAUTHENTICATED", 401, False)
    assert "not-a-real-key" not in str(error)


async def test_missing_key_is_unauthenticated(apikey_backend: Backend) -> None:
    with pytest.raises(ServerError) as caught:
        await apikey_backend.client().get_session("anything")
    assert caught.value.status_code == 401


async def test_user_key_reaches_its_own_data(
    apikey_backend: Backend, session_id: Callable[[], str]
) -> None:
    account = f"acct{uuid.uuid4().hex[:8]}"
    key = await apikey_backend.create_user_key(account, "carol")
    client = apikey_backend.client(api_key=key)
    sid = session_id()
    await client.add_message(sid, Message(role="user", content="I prefer short commit messages."))
    assert (await client.get_session(sid)).message_count == 1
    assert (await client.system_status())["user"] == "carol"
    assert await client.spaces.resolve_uri("viking://user/memories") == (
        "viking://user/carol/memories"
    )


async def test_root_key_cannot_read_tenant_data(apikey_backend: Backend) -> None:
    client = apikey_backend.client(api_key=apikey_backend.root_key)
    with pytest.raises(ServerError) as caught:
        await client.get_session("anything")
    assert (caught.value.code, caught.value.status_code) == ("PERMISSION_DENIED", 403)


async def test_users_of_one_account_are_isolated(apikey_backend: Backend) -> None:
    account = f"acct{uuid.uuid4().hex[:8]}"
    alice = apikey_backend.client(api_key=await apikey_backend.create_user_key(account, "alice"))
    eve = apikey_backend.client(api_key=await apikey_backend.add_user_key(account, "eve"))
    uri = "viking://user/memories/preferences/user/theme.md"
    written = await alice.write(uri, "Alice prefers the Quokka colour theme.", mode="create")
    await alice.wait_processed(timeout=60)
    with pytest.raises(ServerError) as caught:
        await eve.read(written["uri"])
    assert (caught.value.code, caught.value.status_code) == ("PERMISSION_DENIED", 403)
    found = await eve.find("Quokka colour theme", limit=20)
    assert not any("Quokka" in hit.abstract for hit in found.all_hits())
