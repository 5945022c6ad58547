"""Contract-style: the system-prompt context (profile, index, rehydration) on every backend."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ov_agent_ext import Message
from ov_agent_ext.index import IndexBuilder
from ov_agent_ext.profile import ProfileBuilder, RehydrationBuilder, compose_system_prompt

from .conftest import Backend

pytestmark = pytest.mark.contract


async def test_profile_index_and_rehydration_from_a_committed_session(
    backend: Backend, session_id: Callable[[], str]
) -> None:
    client = backend.client()
    sid = session_id()
    statements = [
        "My name is Dana Kovacs.",
        "I prefer tabs over spaces in Go code.",
        "Project Osprey uses MongoDB 7.",
        "We decided to freeze the public API on Friday.",
    ]
    messages: list[Message] = []
    for statement in statements:
        messages += [
            Message(role="user", content=statement),
            Message(role="assistant", content="OK."),
        ]
    await client.add_messages(sid, messages)
    commit = await client.commit_and_wait(sid, timeout=90, enable_working_memory=True)
    assert commit.task is not None
    assert commit.task.status == "completed"
    assert commit.task.memories_extracted >= 3
    await client.wait_processed(timeout=90)

    memories = await client.spaces.resolve_uri("viking://user/memories")
    profile = await ProfileBuilder(client, client.config).build()
    assert profile.startswith('<openviking-context source="session-start">')
    assert f'<user-profile uri="{memories}/profile.md">' in profile
    assert "Dana" in profile
    assert f"{memories}/preferences/" in profile
    assert f"{memories}/entities/" in profile

    index_builder = IndexBuilder(client, client.config)
    index = await index_builder.build(session_id=sid)
    assert index.startswith("## OpenViking Knowledge Index")
    assert "### viking://user/memories/ (" in index
    assert "tabs over spaces" in index
    assert "Osprey" in index
    assert "archive_001" in index  # this session's archive is listed for viking_archive_expand
    assert index.rstrip().endswith("viking_archive_expand")
    assert index_builder.cached == index

    overview = await RehydrationBuilder(client, client.config).archive_overview(sid)
    assert overview.startswith("[Session History Summary]")

    prompt = compose_system_prompt(profile, overview, index, "")
    assert prompt.index(profile) < prompt.index(overview) < prompt.index(index)
    # Same store, same bytes: the system prompt is cache-stable.
    assert await IndexBuilder(client, client.config).build(session_id=sid) == index
