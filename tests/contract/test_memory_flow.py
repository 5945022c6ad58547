"""Contract: a conversation becomes memories that find, read, ls, stat and delete can reach."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ov_agent_ext import Message, NotFoundError

from .conftest import Backend

pytestmark = pytest.mark.contract

EXTRACTION_DEADLINE = 90.0  # seconds; the real server's extraction task takes ~10 s here


async def test_commit_and_wait_then_find_read_stat_ls_delete(
    backend: Backend, session_id: Callable[[], str]
) -> None:
    client = backend.client()
    sid = session_id()
    await client.add_messages(
        sid,
        [
            Message(role="user", content="I prefer uv over pip for Python packaging."),
            Message(role="assistant", content="Noted: uv for packaging."),
            Message(role="user", content="Project Falcon uses PostgreSQL 16 in production."),
            Message(role="assistant", content="Got it, Falcon runs on PostgreSQL 16."),
        ],
    )
    result = await client.commit_and_wait(sid, timeout=EXTRACTION_DEADLINE, poll_interval=0.5)
    assert result.status == "accepted"
    assert not result.timed_out
    assert result.task is not None
    assert result.task.status == "completed"
    assert result.task.memories_extracted >= 2
    await client.wait_processed(timeout=EXTRACTION_DEADLINE)  # written is not yet indexed

    found = await client.find(
        "which tool for python packaging", target_uri="viking://user/memories", limit=10
    )
    assert all(0.0 <= hit.score <= 1.0 for hit in found.memories)
    leaves = [hit for hit in found.memories if not hit.is_summary]
    preference = next(hit for hit in leaves if "uv" in hit.abstract)
    assert preference.level == 2
    assert preference.category == "preferences"
    assert preference.uri.startswith(await client.spaces.resolve_uri("viking://user/memories/"))

    text = await client.read(preference.uri)
    assert "uv" in text
    entry = await client.stat(preference.uri)
    assert entry.is_dir is False
    assert entry.size > 0

    top = await client.ls("viking://user/memories")
    names = {e.basename for e in top}
    assert "preferences" in names
    assert any(e.is_dir for e in top)

    await client.delete(preference.uri)
    with pytest.raises(NotFoundError):
        await client.stat(preference.uri)


async def test_commit_and_wait_deadline_returns_running_task(
    backend: Backend, session_id: Callable[[], str]
) -> None:
    client = backend.client()
    sid = session_id()
    await client.add_message(sid, Message(role="user", content="I prefer dark mode in every IDE."))
    result = await client.commit_and_wait(sid, timeout=0.0)
    assert result.status == "accepted"
    assert result.timed_out is True
    assert result.task is not None
    assert not result.task.done


async def test_accounts_never_see_each_others_memories(
    backend: Backend, session_id: Callable[[], str]
) -> None:
    # Dev mode trusts the identity headers and, on the real server, separates accounts but
    # not users within one account (a user's unscoped find returns colleagues' memories).
    # api_key mode separates users too: see test_auth.py. Recall therefore always scopes its
    # searches to the caller's own space.
    suffix = session_id()[-8:]
    alice = backend.client(account=f"acct-a-{suffix}", user="alice")
    mallory = backend.client(account=f"acct-m-{suffix}", user="mallory")
    sid = session_id()
    await alice.add_message(
        sid, Message(role="user", content="I prefer the Zephyr keyboard layout for typing.")
    )
    result = await alice.commit_and_wait(sid, timeout=EXTRACTION_DEADLINE)
    assert result.task is not None
    assert result.task.status == "completed"
    await alice.wait_processed(timeout=EXTRACTION_DEADLINE)
    mine = await alice.find("keyboard layout", target_uri="viking://user/memories")
    assert any("Zephyr" in hit.abstract for hit in mine.memories)
    theirs = await mallory.find("keyboard layout Zephyr", limit=20)
    assert not any("Zephyr" in hit.abstract for hit in theirs.all_hits())
