"""Contract-style: recall end to end on every backend, seeded through real sessions."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ov_agent_ext import Message
from ov_agent_ext.recall import RecallManager, RecallOutcome

from .conftest import Backend

pytestmark = pytest.mark.contract

STATEMENTS = [
    "I prefer uv over pip for Python packaging.",
    "Project Falcon uses PostgreSQL 16 in production.",
    "Project Heron uses Redis for caching.",
    "I always use ruff for linting Python code.",
]
UNRELATED = [
    "write a haiku about autumn leaves",
    "how do I center a div in CSS",
    "explain how quicksort partitions an array",
]


async def test_recall_finds_the_right_memory_and_stays_silent_otherwise(
    backend: Backend, session_id: Callable[[], str]
) -> None:
    client = backend.client()
    sid = session_id()
    messages: list[Message] = []
    for statement in STATEMENTS:
        messages += [
            Message(role="user", content=statement),
            Message(role="assistant", content="Noted."),
        ]
    await client.add_messages(sid, messages)
    commit = await client.commit_and_wait(sid, timeout=90)
    assert commit.task is not None
    assert commit.task.status == "completed"
    await client.wait_processed(timeout=90)

    recall = RecallManager(client, client.config)
    falcon = await recall.recall("Which database does Falcon run on?")
    assert falcon.outcome is RecallOutcome.INJECTED
    assert "PostgreSQL" in falcon.items[0].abstract
    assert not any("Redis" in item.abstract for item in falcon.items)
    assert falcon.block.startswith("<relevant-memories>\n[System note:")

    packaging = await recall.recall("what should I use for python packaging?")
    assert packaging.outcome is RecallOutcome.INJECTED
    assert "uv" in packaging.items[0].abstract

    for prompt in UNRELATED:
        silent = await recall.recall(prompt)
        assert silent.outcome is RecallOutcome.NOTHING_RELEVANT, (prompt, silent.block)
        assert silent.block == ""

    # Same store, same prompt: the same bytes (prompt caches hold).
    again = await RecallManager(client, client.config).recall("Which database does Falcon run on?")
    assert again.block == falcon.block
