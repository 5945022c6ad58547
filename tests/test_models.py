"""Request and response models: serialisation and derived properties."""

from __future__ import annotations

import pydantic
import pytest

from ov_agent_ext.models import (
    AddMessagesResult,
    Archive,
    CommitResult,
    ContextPart,
    FindResult,
    FsEntry,
    HealthInfo,
    Message,
    SearchHit,
    SessionContext,
    SessionInfo,
    TaskInfo,
    TextPart,
    ToolPart,
)

# --- requests ----------------------------------------------------------------------------------


def test_message_to_request_drops_none() -> None:
    assert Message(role="user", content="I prefer uv").to_request() == {
        "role": "user",
        "content": "I prefer uv",
    }


def test_message_to_request_keeps_set_fields() -> None:
    msg = Message(role="assistant", content="ok", peer_id="p1", created_at="2025-01-01T00:00:00Z")
    assert msg.to_request() == {
        "role": "assistant",
        "content": "ok",
        "peer_id": "p1",
        "created_at": "2025-01-01T00:00:00Z",
    }


def test_message_with_parts_serialises_each_kind() -> None:
    msg = Message(
        role="assistant",
        parts=[
            TextPart(text="running tests"),
            ToolPart(tool_id="t1", tool_name="bash", tool_input={"cmd": "pytest -q"}),
            ContextPart(uri="viking://user/default/memories/x.md", abstract="x"),
        ],
    )
    assert msg.to_request() == {
        "role": "assistant",
        "parts": [
            {"type": "text", "text": "running tests"},
            {
                "type": "tool",
                "tool_id": "t1",
                "tool_name": "bash",
                "tool_input": {"cmd": "pytest -q"},
                "tool_output": "",
                "tool_status": "completed",
            },
            {
                "type": "context",
                "uri": "viking://user/default/memories/x.md",
                "context_type": "memory",
                "abstract": "x",
            },
        ],
    }


def test_tool_part_with_output_and_status() -> None:
    part = ToolPart(
        tool_id="t2", tool_name="read", tool_output="file text", tool_status="error"
    ).model_dump()
    assert part["tool_output"] == "file text"
    assert part["tool_status"] == "error"
    assert part["tool_input"] == {}


def test_tool_part_rejects_unknown_status() -> None:
    with pytest.raises(pydantic.ValidationError):
        ToolPart(tool_id="t", tool_name="x", tool_status="done")


def test_message_parts_parse_from_dicts_by_type() -> None:
    msg = Message.model_validate(
        {
            "role": "user",
            "parts": [
                {"type": "text", "text": "hi"},
                {"type": "tool", "tool_id": "a", "tool_name": "b"},
                {"type": "context", "uri": "viking://x"},
            ],
        }
    )
    assert msg.parts is not None
    assert [type(p) for p in msg.parts] == [TextPart, ToolPart, ContextPart]


def test_message_role_is_checked_and_frozen() -> None:
    with pytest.raises(pydantic.ValidationError):
        Message(role="system", content="x")
    msg = Message(role="user", content="x")
    with pytest.raises(pydantic.ValidationError):
        msg.content = "y"  # type: ignore[misc]


# --- tasks and commits -------------------------------------------------------------------------


def test_task_memories_extracted_sums_dict_counts() -> None:
    task = TaskInfo.model_validate(
        {
            "task_id": "t",
            "task_type": "session_commit",
            "status": "completed",
            "result": {
                "memories_extracted": {"memory_write": 3, "profile": 2, "note": "x"},
                "archive_uri": "viking://user/default/sessions/s/history/archive_001",
            },
            "error": None,
        }
    )
    assert task.memories_extracted == 5
    assert task.done
    assert task.task_type == "session_commit"  # type: ignore[attr-defined]  # extra kept


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (None, 0),
        ({}, 0),
        ({"memories_extracted": None}, 0),
        ({"memories_extracted": 4}, 4),
        ({"memories_extracted": {}}, 0),
        ({"memories_extracted": "many"}, 0),
    ],
)
def test_task_memories_extracted_other_shapes(
    result: dict[str, object] | None, expected: int
) -> None:
    assert TaskInfo(task_id="t", result=result).memories_extracted == expected


@pytest.mark.parametrize(
    ("status", "done"),
    [
        ("pending", False),
        ("running", False),
        ("completed", True),
        ("failed", True),
        ("cancelled", True),
    ],
)
def test_task_done(status: str, done: bool) -> None:
    assert TaskInfo(task_id="t", status=status).done is done


def test_task_defaults_to_pending() -> None:
    assert TaskInfo(task_id="t").status == "pending"


def test_commit_result_archive_id() -> None:
    accepted = CommitResult.model_validate(
        {
            "session_id": "s1",
            "status": "accepted",
            "task_id": "8c0a",
            "archive_uri": "viking://user/default/sessions/s1/history/archive_001",
            "archived": True,
        }
    )
    assert accepted.archive_id == "archive_001"
    assert accepted.archived is True
    assert CommitResult(archive_uri="viking://x/history/archive_002/").archive_id == "archive_002"


def test_commit_result_skipped() -> None:
    skipped = CommitResult.model_validate(
        {"session_id": "s1", "status": "skipped", "reason": "no_messages", "task_id": None}
    )
    assert skipped.archive_id is None
    assert skipped.task_id is None
    assert skipped.reason == "no_messages"
    assert skipped.task is None
    assert skipped.timed_out is False


# --- search ------------------------------------------------------------------------------------

_PREF = "viking://user/default/memories/preferences/user/uv_over_pip.md"


def test_search_hit_category_from_tag_wins_over_uri() -> None:
    hit = SearchHit(uri=_PREF.replace("preferences", "events"), tags=["memory_type=preferences"])
    assert hit.category == "preferences"


def test_search_hit_category_from_uri_directory() -> None:
    assert SearchHit(uri=_PREF).category == "preferences"


def test_search_hit_category_from_top_level_file() -> None:
    assert SearchHit(uri="viking://user/default/memories/profile.md").category == "profile"


def test_search_hit_category_falls_back_to_context_type() -> None:
    assert (
        SearchHit(uri="viking://resources/doc.md", context_type="resource").category == "resource"
    )
    # the summary of the memories root itself is no category
    assert (
        SearchHit(uri="viking://user/default/memories/.overview.md", context_type="memory").category
        == "memory"
    )
    assert (
        SearchHit(uri="viking://user/default/memories", context_type="memory").category == "memory"
    )


def test_search_hit_other_tags_ignored() -> None:
    hit = SearchHit(uri=_PREF, tags=["lang=python", "memory_type=tools"])
    assert hit.category == "tools"


@pytest.mark.parametrize(
    ("uri", "level", "summary"),
    [
        (_PREF, 2, False),
        ("viking://user/default/memories/.overview.md", 1, True),
        ("viking://user/default/memories/preferences", 0, True),
        ("viking://user/default/memories/.abstract.md", 2, True),
        ("viking://user/default/memories/preferences/.overview.md", 2, True),
    ],
)
def test_search_hit_is_summary(uri: str, level: int, summary: bool) -> None:
    assert SearchHit(uri=uri, level=level).is_summary is summary


def test_find_result_parses_real_shape_and_sorts() -> None:
    result = FindResult.model_validate(
        {
            "memories": [
                {
                    "context_type": "memory",
                    "uri": _PREF,
                    "level": 2,
                    "score": 0.588,
                    "abstract": "- I prefer uv...",
                    "tags": ["memory_type=preferences"],
                },
                {
                    "context_type": "memory",
                    "uri": "viking://user/default/memories/.overview.md",
                    "level": 1,
                    "score": 0.41,
                    "abstract": "overview",
                    "tags": [],
                },
            ],
            "resources": [{"uri": "viking://resources/r.md", "score": 0.7}],
            "skills": [],
            "total": 3,
        }
    )
    assert result.total == 3
    assert [h.score for h in result.all_hits()] == [0.7, 0.588, 0.41]
    assert result.memories[0].abstract == "- I prefer uv..."
    assert result.memories[1].is_summary


def test_find_result_empty() -> None:
    result = FindResult.model_validate({"memories": [], "resources": [], "skills": [], "total": 0})
    assert result.all_hits() == []


# --- other responses ---------------------------------------------------------------------------


def test_fs_entry_aliases_and_basename() -> None:
    stat = FsEntry.model_validate(
        {
            "name": "x.md",
            "size": 12,
            "mode": 420,
            "modTime": "2025-01-01T00:00:00Z",
            "isDir": False,
            "uri": "viking://user/default/memories/x.md",
            "isLocked": False,
            "id": "abc",
        }
    )
    assert stat.is_dir is False
    assert stat.mod_time == "2025-01-01T00:00:00Z"
    assert stat.basename == "x.md"
    assert stat.isLocked is False  # type: ignore[attr-defined]  # extra kept
    entry = FsEntry.model_validate(
        {"uri": "viking://user/default/memories/", "size": 0, "isDir": True, "abstract": "mem"}
    )
    assert entry.is_dir is True
    assert entry.basename == "memories"
    assert FsEntry(is_dir=True).is_dir is True  # by field name too


def test_session_info_real_shape() -> None:
    info = SessionInfo.model_validate(
        {
            "session_id": "s1",
            "message_count": 0,
            "commit_count": 1,
            "pending_tokens": 0,
            "total_message_count": 4,
            "last_commit_at": "",
            "memories_extracted": {"total": 0},
            "user": {"account_id": "default", "user_id": "default"},
        }
    )
    assert info.total_message_count == 4
    assert info.commit_count == 1
    assert info.last_commit_at == ""
    assert info.user == {"account_id": "default", "user_id": "default"}  # type: ignore[attr-defined]


def test_session_context_and_archive() -> None:
    ctx = SessionContext.model_validate(
        {
            "latest_archive_overview": "ov",
            "pre_archive_abstracts": [],
            "messages": [],
            "estimatedTokens": 17,
            "stats": {"totalArchives": 1},
        }
    )
    assert ctx.estimated_tokens == 17
    assert ctx.stats == {"totalArchives": 1}
    archive = Archive.model_validate(
        {
            "archive_id": "archive_001",
            "abstract": "a",
            "overview": "o",
            "messages": [{"id": "m1", "role": "user", "parts": [], "created_at": "t"}],
        }
    )
    assert archive.messages[0]["role"] == "user"


def test_health_and_add_result() -> None:
    health = HealthInfo.model_validate(
        {"status": "ok", "healthy": True, "version": "0.5.2", "auth_mode": "dev"}
    )
    assert health.version == "0.5.2"
    assert health.auth_mode == "dev"
    added = AddMessagesResult.model_validate(
        {"session_id": "s", "message_count": 2, "added": 2, "pending_tokens": 31}
    )
    assert (added.added, added.message_count, added.pending_tokens) == (2, 2, 31)


def test_message_without_content_or_parts_is_rejected() -> None:
    with pytest.raises(pydantic.ValidationError, match="content or parts"):
        Message(role="user")
