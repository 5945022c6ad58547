"""Extraction rules: what becomes which memory, and updates that never duplicate."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest
from starlette.applications import Starlette

from ov_agent_ext.server.extract import MemoryOp, extract, merge

from .conftest import connect

TODAY = datetime(2026, 3, 4, 12, 0, tzinfo=timezone.utc)


def said(*texts: str, role: str = "user") -> list[dict[str, Any]]:
    return [{"role": role, "parts": [{"type": "text", "text": t}]} for t in texts]


def paths(*texts: str) -> list[str]:
    return [op.rel_path for op in extract(said(*texts), "alice", TODAY)]


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("I prefer uv over pip for Python packaging.", "preferences/alice/python_packaging.md"),
        ("I prefer tabs over spaces.", "preferences/alice/spaces_vs_tabs.md"),
        ("I really like dark mode.", "preferences/alice/dark_mode.md"),
        ("My favourite editor is Helix.", "preferences/alice/editor.md"),
        ("I'm a big fan of Rust.", "preferences/alice/rust.md"),
        ("I always use ripgrep when searching code.", "preferences/alice/searching_code.md"),
        ("My name is Alice Smith.", "profile.md"),
        ("I live in Berlin.", "profile.md"),
        ("I work at Acme Corp.", "profile.md"),
        ("I am a backend engineer.", "profile.md"),
        ("Project Falcon uses PostgreSQL 16 in production.", "entities/projects/falcon.md"),
        ("The Heron service runs on Kubernetes.", "entities/services/heron.md"),
        ("We decided to ship on Fridays.", "events/2026/03/04/ship_fridays.md"),
        ("我喜欢用Python写代码。", "preferences/alice/python写代码.md"),
        ("我叫小明。", "profile.md"),
        ("我们决定下周发布。", "events/2026/03/04/下周发布.md"),
    ],
)
def test_each_rule_family_names_its_file(text: str, path: str) -> None:
    assert paths(text) == [path]


def test_only_the_users_own_statements_count() -> None:
    assert extract(said("I prefer emacs.", role="assistant"), "alice", TODAY) == []
    tool = {"type": "tool", "tool_name": "bash", "tool_output": "I prefer vim."}
    assert extract([{"role": "user", "parts": [tool]}], "alice", TODAY) == []
    recalled = "<memory-context>- I prefer nano.</memory-context> Thanks."
    assert extract(said(recalled), "alice", TODAY) == []


def test_questions_and_empty_objects_are_not_memories() -> None:
    assert paths("Do you think I prefer vim?", "I like it.", "Hello there.") == []


def test_one_message_can_hold_several_memories() -> None:
    ops = extract(
        said("My name is Ann and I prefer vim. 我喜欢喝茶。Project Zeta uses Rust."),
        "ann",
        TODAY,
    )
    assert [op.kind for op in ops] == ["profile", "preferences", "preferences", "entities"]


def test_merge_rules() -> None:
    pref = MemoryOp("preferences", "preferences/a/x.md", "- I prefer vim.", "replace")
    assert merge("- I prefer emacs.", pref) == "- I prefer vim."
    fact = MemoryOp("entities", "entities/projects/f.md", "- Falcon uses Go.", "merge")
    assert merge("- Falcon uses Redis.", fact) == "- Falcon uses Redis.\n- Falcon uses Go."
    assert merge("- Falcon uses Go.", fact) == "- Falcon uses Go."  # no duplicate
    name = MemoryOp("profile", "profile.md", "- My name is Ann.", "profile")
    assert merge("- My name is Anna.\n- I live in Oslo.", name) == (
        "- I live in Oslo.\n- My name is Ann."
    )


async def test_a_second_statement_updates_instead_of_duplicating(app: Starlette) -> None:
    memories = "viking://user/alice/memories"
    async with connect(app) as api:
        await api.say("s1", "I prefer tabs over spaces.", "My name is Alice.", "I live in Oslo.")
        first = await api.commit("s1")
        assert first["result"]["memories_extracted"] == {"memory_write": 2}
        await api.say("s1", "Actually I prefer spaces to tabs.", "I live in Berlin now.")
        second = await api.commit("s1")
        assert second["result"]["memories_extracted"] == {"memory_write": 0, "memory_edit": 2}
        listing = await api.ok(
            "GET", "/api/v1/fs/ls", params={"uri": f"{memories}/preferences/alice"}
        )
        assert [e["uri"].rsplit("/", 1)[1] for e in listing] == ["spaces_vs_tabs.md"]
        assert await api.read(f"{memories}/preferences/alice/spaces_vs_tabs.md") == (
            "- Actually I prefer spaces to tabs."
        )
        profile = await api.read(f"{memories}/profile.md")
        assert profile == "- My name is Alice.\n- I live in Berlin now."
        # Saying the same again changes nothing and counts nothing.
        await api.say("s1", "I live in Berlin now.")
        third = await api.commit("s1")
        assert third["result"]["memories_extracted"] == {"memory_write": 0}


async def test_memory_files_are_tagged_and_directories_summarized(app: Starlette) -> None:
    memories = "viking://user/alice/memories"
    async with connect(app) as api:
        await api.say("s1", "Project Falcon uses PostgreSQL.", "We decided to ship on Fridays.")
        await api.commit("s1")
        found = await api.find("falcon postgresql", target_uri=f"{memories}/entities")
        best = found["memories"][0]
        assert (best["level"], best["tags"]) == (2, ["memory_type=entities"])
        overview = await api.ok(
            "GET", "/api/v1/content/overview", params={"uri": f"{memories}/entities/projects"}
        )
        assert "[falcon](./falcon.md)" in overview
        abstract = await api.ok(
            "GET", "/api/v1/content/abstract", params={"uri": f"{memories}/entities/projects"}
        )
        assert "falcon" in abstract
        assert len(abstract) <= 256
        events = await api.ok(
            "GET", "/api/v1/fs/tree", params={"uri": f"{memories}/events", "level_limit": 5}
        )
        assert any(e["uri"].endswith("/ship_fridays.md") for e in events)
