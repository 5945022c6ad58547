"""Everything survives a restart: a new app on the same data directory continues."""

from __future__ import annotations

from pathlib import Path

from ov_agent_ext.server import create_app
from ov_agent_ext.server.auth import Identity
from ov_agent_ext.server.schemas import CommitRequest

from .conftest import connect


async def test_files_sessions_archives_tasks_and_index_survive_a_restart(data_dir: Path) -> None:
    first = create_app(data_dir)
    async with connect(first) as api:
        await api.write("viking://user/alice/memories/notes/a.md", "Zebra crossings matter.")
        await api.say("s1", "I prefer uv over pip for Python packaging.", "Hello again.")
        task = await api.commit("s1", keep_recent_count=1)
        await api.say("s1", "A message after the commit.")

    second = create_app(data_dir)  # the "restart": same directory, a fresh process state
    async with connect(second) as api:
        assert await api.read("viking://user/alice/memories/notes/a.md") == (
            "Zebra crossings matter."
        )
        info = await api.ok("GET", "/api/v1/sessions/s1")
        assert (info["message_count"], info["total_message_count"], info["commit_count"]) == (
            2,
            3,
            1,
        )
        assert info["memories_extracted"]["total"] >= 1
        archive = await api.ok("GET", "/api/v1/sessions/s1/archives/archive_001")
        assert [m["parts"][0]["text"] for m in archive["messages"]] == [
            "I prefer uv over pip for Python packaging."
        ]
        again = await api.ok("GET", f"/api/v1/tasks/{task['task_id']}")
        assert (again["status"], again["result"]) == ("completed", task["result"])
        # The search index is rebuilt from SQLite at start.
        found = await api.find("zebra crossings", target_uri="viking://user/alice/memories")
        assert found["memories"][0]["uri"].endswith("/notes/a.md")
        found = await api.find("python packaging tool", target_uri="viking://~/memories")
        assert "uv" in found["memories"][0]["abstract"]


def _stored_bytes(data_dir: Path) -> bytes:
    return b"".join(p.read_bytes() for p in data_dir.iterdir() if p.is_file())


async def test_api_keys_survive_a_restart_and_are_stored_hashed(data_dir: Path) -> None:
    first = create_app(data_dir, root_api_key="root-secret")
    async with connect(first, key="root-secret") as root:
        created = await root.ok(
            "POST", "/api/v1/admin/accounts", json={"account_id": "acme", "admin_user_id": "ann"}
        )
    key = created["user_key"]
    second = create_app(data_dir, root_api_key="root-secret")
    async with connect(second, key=key) as ann:
        assert (await ann.ok("GET", "/api/v1/system/status"))["user"] == "ann"
    assert key.encode() not in _stored_bytes(data_dir)


async def test_a_task_interrupted_by_shutdown_is_re_run_at_the_next_start(data_dir: Path) -> None:
    first = create_app(data_dir)
    async with connect(first) as api:
        await api.say("s1", "My favourite editor is Helix.")
    # Commit without running the task: what a shutdown right after the commit leaves behind.
    state = first.state.reference
    commit = state.sessions.commit(Identity("acme", "alice", "user"), "s1", CommitRequest())
    async with connect(first) as api:
        pending = await api.ok("GET", f"/api/v1/tasks/{commit['task_id']}")
    assert pending["status"] == "pending"

    second = create_app(data_dir)
    async with connect(second) as api:
        await api.ok("POST", "/api/v1/system/wait", json={"timeout": 10})  # first request
        task = await api.ok("GET", f"/api/v1/tasks/{commit['task_id']}")
        assert task["status"] == "completed"
        assert task["result"]["memories_extracted"]["memory_write"] == 1
        text = await api.read("viking://user/alice/memories/preferences/alice/editor.md")
        assert "Helix" in text
