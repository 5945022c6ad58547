"""Contract: find and search over extracted memories (scopes, filters, levels, tags)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ov_agent_ext import Message, OVClient

from .conftest import Backend

pytestmark = pytest.mark.contract


async def _memories(backend: Backend, sid: str, *statements: str) -> OVClient:
    client = backend.client()
    await client.add_messages(sid, [Message(role="user", content=s) for s in statements])
    result = await client.commit_and_wait(sid, timeout=90)
    assert result.task is not None
    assert result.task.status == "completed"
    await client.wait_processed(timeout=90)
    return client


async def test_find_scopes_filters_and_levels(
    backend: Backend, session_id: Callable[[], str]
) -> None:
    sid = session_id()
    client = await _memories(
        backend,
        sid,
        "I prefer pytest over unittest for testing.",
        "Project Heron uses Redis for caching.",
    )
    memories = await client.spaces.resolve_uri("viking://user/memories")

    # A list of scopes: only hits under them come back.
    scoped = await client.find(
        "pytest testing",
        target_uri=["viking://user/memories/preferences", "viking://user/memories/entities"],
        limit=10,
    )
    assert scoped.memories
    assert all(
        h.uri.startswith((f"{memories}/preferences", f"{memories}/entities"))
        for h in scoped.memories
    )
    best = scoped.memories[0]
    assert (best.level, best.category, best.context_type) == (2, "preferences", "memory")
    assert "memory_type=preferences" in best.tags
    assert "pytest" in best.abstract

    # Directory summaries are hits too (level 0/1), and they carry no memory_type tag.
    everything = await client.find("pytest testing", target_uri=memories, limit=20)
    summaries = [h for h in everything.memories if h.is_summary]
    assert summaries
    assert all(h.level in (0, 1) for h in summaries)

    # score_threshold and limit are applied by the server.
    strict = await client.find("pytest testing", target_uri=memories, score_threshold=0.6)
    assert strict.memories
    assert all(h.score >= 0.6 for h in strict.memories)
    assert len((await client.find("pytest", target_uri=memories, limit=1)).memories) == 1

    # Another scope, or one that does not exist, gives empty lists (not an error).
    entity = await client.find("which cache does Heron use", target_uri=f"{memories}/entities")
    assert any("Redis" in h.abstract for h in entity.memories)
    nowhere = await client.find("pytest", target_uri="viking://user/memories/nonexistent-dir")
    assert (nowhere.memories, nowhere.resources, nowhere.skills) == ([], [], [])


async def test_unrelated_query_scores_near_the_middle(
    backend: Backend, session_id: Callable[[], str]
) -> None:
    # The real score scale: (1 + cosine) / 2, so "nothing in common" is about 0.5, not 0.
    client = await _memories(backend, session_id(), "I prefer tabs over spaces in Makefiles.")
    memories = await client.spaces.resolve_uri("viking://user/memories")
    related = await client.find("tabs spaces Makefiles", target_uri=memories, limit=5)
    unrelated = await client.find("quantum chromodynamics lecture", target_uri=memories, limit=5)
    top_related = max(h.score for h in related.memories)
    assert top_related > 0.6
    assert unrelated.memories, "the server fills the answer with unrelated items"
    assert all(0.4 <= h.score <= 0.6 for h in unrelated.memories)


async def test_search_with_session_has_the_find_shape(
    backend: Backend, session_id: Callable[[], str]
) -> None:
    sid = session_id()
    client = await _memories(backend, sid, "I prefer Neovim as my editor.")
    found = await client.search(
        "editor", session_id=sid, target_uri="viking://user/memories", limit=5
    )
    assert all(0.0 <= h.score <= 1.0 for h in found.memories)
    assert any("Neovim" in h.abstract for h in found.memories)


async def test_context_type_filter(backend: Backend, session_id: Callable[[], str]) -> None:
    client = await _memories(backend, session_id(), "I prefer Poetry for locking dependencies.")
    only_resources = await client.find("Poetry dependencies", context_type="resource", limit=5)
    assert only_resources.memories == []
    assert all(h.context_type == "resource" for h in only_resources.resources)
