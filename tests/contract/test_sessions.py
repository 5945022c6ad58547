"""Contract: sessions, messages, commits, archives, tasks."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ov_agent_ext import ContextPart, Message, NotFoundError, ServerError, TextPart, ToolPart

from .conftest import Backend

pytestmark = pytest.mark.contract


async def test_health_reports_version_and_mode(backend: Backend) -> None:
    info = await backend.client().health()
    assert info.healthy is True
    assert info.version
    assert info.auth_mode == "dev"


async def test_system_status_names_the_caller(backend: Backend) -> None:
    client = backend.client(user="status-probe")
    status = await client.system_status()
    assert status["initialized"] is True
    assert status["user"] == "status-probe"


async def test_session_create_get_delete(backend: Backend, session_id: Callable[[], str]) -> None:
    client = backend.client()
    sid = session_id()
    created = await client.create_session(sid)
    assert created.session_id == sid
    assert sid in created.uri
    info = await client.get_session(sid)
    assert (info.session_id, info.message_count, info.commit_count) == (sid, 0, 0)
    await client.delete_session(sid)
    with pytest.raises(NotFoundError):
        await client.get_session(sid)


async def test_missing_session_is_not_found_with_request_id(backend: Backend) -> None:
    with pytest.raises(NotFoundError) as caught:
        await backend.client().get_session("contract-does-not-exist")
    error = caught.value
    assert (error.code, error.status_code, error.retryable) == ("NOT_FOUND", 404, False)
    assert error.request_id


async def test_batch_add_counts_messages_and_tokens(
    backend: Backend, session_id: Callable[[], str]
) -> None:
    client = backend.client()
    sid = session_id()
    result = await client.add_messages(
        sid,
        [
            Message(role="user", content="I prefer tabs over spaces in Go code."),
            Message(role="assistant", content="Understood, tabs in Go."),
            Message(role="user", content="Also, the staging cluster lives in eu-west-1."),
        ],
    )
    assert result.added == 3
    assert result.message_count == 3
    assert result.pending_tokens > 0
    info = await client.get_session(sid)  # the batch created the session
    assert (info.message_count, info.total_message_count) == (3, 3)
    assert info.pending_tokens == result.pending_tokens


async def test_single_message_is_added(backend: Backend, session_id: Callable[[], str]) -> None:
    client = backend.client()
    sid = session_id()
    result = await client.add_message(sid, Message(role="user", content="Remember: port 8443."))
    assert result.message_count == 1
    assert (await client.get_session(sid)).message_count == 1


async def test_commit_archives_tool_parts_and_resets_counts(
    backend: Backend, session_id: Callable[[], str]
) -> None:
    client = backend.client()
    sid = session_id()
    await client.add_messages(
        sid,
        [
            Message(role="user", content="Run the linter on the repo please."),
            Message(
                role="assistant",
                parts=[
                    TextPart(text="Running ruff."),
                    ToolPart(
                        tool_id="call-1",
                        tool_name="bash",
                        tool_input={"command": "ruff check ."},
                        tool_status="completed",
                    ),
                ],
            ),
        ],
    )
    commit = await client.commit_and_wait(sid, timeout=90)
    assert commit.status == "accepted"
    assert commit.task_id
    assert commit.archive_id == "archive_001"

    info = await client.get_session(sid)
    assert info.commit_count == 1
    assert info.message_count == 0  # live messages moved to the archive
    assert info.total_message_count == 2  # ... but the running total keeps counting

    # The archive is readable once the commit's task has finished (not before, on 0.5.2).
    archive = await client.get_archive(sid, "archive_001")
    assert [m["role"] for m in archive.messages] == ["user", "assistant"]
    tool = next(p for p in archive.messages[1]["parts"] if p["type"] == "tool")
    assert (tool["tool_name"], tool["tool_input"]) == ("bash", {"command": "ruff check ."})


async def test_commit_of_empty_session_is_skipped(
    backend: Backend, session_id: Callable[[], str]
) -> None:
    client = backend.client()
    sid = session_id()
    await client.create_session(sid)
    commit = await client.commit(sid)
    assert (commit.status, commit.task_id, commit.reason) == ("skipped", None, "no_messages")


async def test_missing_archive_and_task_are_not_found(
    backend: Backend, session_id: Callable[[], str]
) -> None:
    client = backend.client()
    sid = session_id()
    await client.add_message(sid, Message(role="user", content="Something worth keeping here."))
    with pytest.raises(NotFoundError):
        await client.get_archive(sid, "archive_099")
    with pytest.raises(NotFoundError):
        await client.get_task("no-such-task")


async def test_session_context_after_commit(
    backend: Backend, session_id: Callable[[], str]
) -> None:
    client = backend.client()
    sid = session_id()
    await client.add_message(sid, Message(role="user", content="We deploy with Helm charts."))
    await client.commit_and_wait(sid, timeout=90)
    await client.add_message(sid, Message(role="user", content="And Argo CD syncs them."))
    context = await client.session_context(sid, token_budget=4000)
    assert isinstance(context.latest_archive_overview, str)
    assert context.stats.get("totalArchives") == 1
    assert len(context.messages) == 1


async def test_unknown_request_field_is_rejected(backend: Backend) -> None:
    client = backend.client()
    with pytest.raises(ServerError) as caught:
        # The design spec's `top_k` is not a 0.5.2 field: the server says so with a 400.
        await client._request(
            "POST", "/api/v1/search/find", kind="read", json={"query": "x", "top_k": 3}
        )
    assert (caught.value.code, caught.value.status_code) == ("INVALID_ARGUMENT", 400)
    assert caught.value.retryable is False
    assert "top_k" in str(caught.value)


async def test_wait_processed_reports_the_queues(backend: Backend) -> None:
    status = await backend.client().wait_processed(timeout=30)
    assert "Embedding" in status
    assert {"processed", "error_count"} <= set(status["Embedding"])


async def test_keep_recent_count_keeps_the_tail_live(
    backend: Backend, session_id: Callable[[], str]
) -> None:
    client = backend.client()
    sid = session_id()
    texts = ["I prefer pytest over unittest.", "OK.", "Ship on Fridays.", "Noted."]
    roles = ["user", "assistant", "user", "assistant"]
    await client.add_messages(
        sid, [Message(role=r, content=t) for r, t in zip(roles, texts, strict=True)]
    )
    commit = await client.commit_and_wait(sid, timeout=90, keep_recent_count=2)
    assert commit.status == "accepted"
    info = await client.get_session(sid)
    assert (info.message_count, info.total_message_count) == (2, 4)
    context = await client.session_context(sid)
    assert [m["parts"][0]["text"] for m in context.messages] == texts[2:]
    archive = await client.get_archive(sid, "archive_001")
    assert [m["parts"][0]["text"] for m in archive.messages] == texts[:2]


async def test_commit_keeping_everything_is_skipped(
    backend: Backend, session_id: Callable[[], str]
) -> None:
    client = backend.client()
    sid = session_id()
    await client.add_message(sid, Message(role="user", content="Keep this one live please."))
    commit = await client.commit(sid, keep_recent_count=5)
    assert (commit.status, commit.task_id) == ("skipped", None)
    assert commit.reason == "all_within_keep_window"


async def test_working_memory_overview_comes_back_in_context(
    backend: Backend, session_id: Callable[[], str]
) -> None:
    client = backend.client()
    sid = session_id()
    await client.add_messages(
        sid,
        [
            Message(role="user", content="Let's migrate the billing service to Rust."),
            Message(role="assistant", content="Starting with the invoice module."),
        ],
    )
    commit = await client.commit_and_wait(sid, timeout=90, enable_working_memory=True)
    assert commit.task is not None
    assert commit.task.status == "completed"
    context = await client.session_context(sid)
    assert context.latest_archive_overview.strip()
    assert context.messages == []


async def test_second_commit_makes_the_next_archive(
    backend: Backend, session_id: Callable[[], str]
) -> None:
    client = backend.client()
    sid = session_id()
    await client.add_message(sid, Message(role="user", content="First chunk of the talk."))
    first = await client.commit_and_wait(sid, timeout=90)
    await client.add_message(sid, Message(role="user", content="Second chunk of the talk."))
    second = await client.commit_and_wait(sid, timeout=90)
    assert (first.archive_id, second.archive_id) == ("archive_001", "archive_002")
    archive = await client.get_archive(sid, "archive_002")
    assert [m["parts"][0]["text"] for m in archive.messages] == ["Second chunk of the talk."]
    assert (await client.get_session(sid)).commit_count == 2


async def test_tool_and_context_parts_count_as_pending(
    backend: Backend, session_id: Callable[[], str]
) -> None:
    client = backend.client()
    sid = session_id()
    tool_only = Message(
        role="assistant",
        parts=[
            ToolPart(
                tool_id="t1",
                tool_name="bash",
                tool_input={"command": "pytest -q tests/ --maxfail=1"},
            )
        ],
    )
    first = await client.add_message(sid, tool_only)
    assert first.pending_tokens > 0  # a tool-only turn is not free: commits must see it
    context_part = Message(
        role="user",
        parts=[
            ContextPart(uri="viking://resources/guide", context_type="resource", abstract="guide")
        ],
    )
    second = await client.add_message(sid, context_part)
    assert second.message_count == 2
    assert second.pending_tokens >= first.pending_tokens


async def test_batches_beyond_the_server_limit_are_chunked(
    backend: Backend, session_id: Callable[[], str]
) -> None:
    client = backend.client()
    sid = session_id()
    messages = [
        Message(role="user", content=f"Note number {i} about the build.") for i in range(150)
    ]
    result = await client.add_messages(sid, messages)
    assert (result.added, result.message_count) == (150, 150)
    context = await client.session_context(sid, token_budget=100000)
    assert [m["parts"][0]["text"] for m in context.messages][
        -1
    ] == "Note number 149 about the build."


async def test_deleting_a_missing_session_is_not_found(backend: Backend) -> None:
    with pytest.raises(NotFoundError):
        await backend.client().delete_session("contract-never-created")
