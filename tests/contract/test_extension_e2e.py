"""End to end on every backend: two sessions through the event API, the second recalling
what the first taught (the demo's flow, asserted)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from ov_agent_ext import OpenVikingExtension, OVConfig, ToolCall, Turn

from .conftest import Backend

pytestmark = pytest.mark.contract


async def test_second_session_recalls_what_the_first_taught(
    backend: Backend, session_id: Callable[[], str], tmp_path: Path
) -> None:
    config = OVConfig(
        endpoint=backend.url,
        account="contract",
        user=f"e2e{uuid.uuid4().hex[:8]}",
        state_dir=tmp_path / "state",
        commit_timeout=90.0,
        write_queue_flush_interval=50,
    )
    first = OpenVikingExtension(config, transport=backend.transport)
    await first.session_start(session_id(), cwd=str(tmp_path))
    teaching = [
        ("I prefer uv over pip for Python packaging.", "Noted."),
        ("Project Falcon uses PostgreSQL 16 in production.", "Got it."),
    ]
    for index, (said, reply) in enumerate(teaching, start=1):
        await first.before_agent_start(said)
        await first.turn_end(
            Turn(
                index,
                user=said,
                assistant=reply,
                tool_calls=[ToolCall(name="read", input={"path": "README.md"}, output="# x")],
            )
        )
        first.agent_end()
    shutdown = await first.session_shutdown()
    await first.aclose()
    assert shutdown is not None
    assert shutdown.status == "committed", shutdown.error
    assert shutdown.memories_extracted >= 2
    assert first.status().pending == 0

    probe = backend.client(account=config.account, user=config.user)
    await probe.wait_processed(timeout=90)

    second = OpenVikingExtension(config, transport=backend.transport)
    await second.session_start(session_id(), cwd=str(tmp_path))
    addition = second.system_prompt_addition()
    assert "## OpenViking Knowledge Index" in addition
    assert "Falcon" in addition
    await second.before_agent_start("What database does Falcon run on?")
    assert "PostgreSQL" in second.recall_block
    messages = await second.context(
        [{"role": "user", "content": "What database does Falcon run on?"}]
    )
    assert messages[0]["content"].startswith("<relevant-memories>")
    second.agent_end()
    await second.before_agent_start("Write a haiku about autumn leaves.")
    assert second.recall_block == ""
    found = await second.call_tool("viking_search", {"query": "python packaging"})
    assert "uv" in found
    await second.session_shutdown()
    await second.aclose()
