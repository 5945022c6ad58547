"""HTTP behaviour the contract suite does not pin: envelopes, validation, resources, LLM."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import httpx
from starlette.applications import Starlette

from ov_agent_ext.server import create_app
from ov_agent_ext.server.resources import html_to_text

from .conftest import connect


async def test_envelopes_request_ids_and_router_errors(app: Starlette) -> None:
    async with connect(app) as api:
        health = await api.call("GET", "/health")
        assert health.json() == {
            "status": "ok",
            "healthy": True,
            "version": "0.5.2",
            "auth_mode": "dev",
        }
        status = await api.call("GET", "/api/v1/system/status")
        assert set(status.json()) == {"status", "result", "error", "telemetry", "profile"}
        ids = {(await api.call("GET", "/health")).headers["x-request-id"] for _ in range(3)}
        assert len(ids) == 3
        assert all(uuid.UUID(i).version == 4 for i in ids)
        missing = await api.call("GET", "/api/v1/nope")
        assert (missing.status_code, missing.json()) == (
            404,
            {"status": "error", "error": {"code": "NOT_FOUND", "message": "Not Found"}},
        )
        assert missing.headers["x-request-id"]
        wrong = await api.call("DELETE", "/health")
        assert (wrong.status_code, wrong.json()["error"]) == (
            405,
            {"code": "UNKNOWN", "message": "Method Not Allowed"},
        )


async def test_validation_errors_read_like_the_real_server(app: Starlette) -> None:
    async with connect(app) as api:
        error = await api.error("POST", "/api/v1/search/find", 400, json={"query": "x", "top_k": 3})
        assert error["message"] == (
            "Invalid request parameters: body.top_k: Extra inputs are not permitted"
        )
        assert error["details"]["validation_errors"] == [
            {
                "loc": ["body", "top_k"],
                "message": "Extra inputs are not permitted",
                "type": "extra_forbidden",
            }
        ]
        error = await api.error("POST", "/api/v1/content/write", 400, json={"uri": "viking://x"})
        assert error["message"].endswith("body.content: Field required")
        error = await api.error("GET", "/api/v1/content/read", 400)
        assert error["message"] == "Invalid request parameters: query.uri: Field required"
        batch = {"messages": [{"role": "user", "content": "x"}] * 101}
        error = await api.error("POST", "/api/v1/sessions/s/messages/batch", 400, json=batch)
        assert "at most 100 items" in error["message"]
        error = await api.error(
            "POST",
            "/api/v1/sessions/s/messages",
            400,
            content=b"{nope",
            headers={"content-type": "application/json"},
        )
        assert error["details"]["validation_errors"][0]["type"] == "json_invalid"
        # unknown fields are accepted where the real server accepts them
        await api.ok(
            "POST", "/api/v1/sessions/s/messages", json={"role": "user", "content": "x", "extra": 1}
        )


async def test_filesystem_operations(app: Starlette) -> None:
    base = "viking://resources/docs"
    async with connect(app) as api:
        await api.write(f"{base}/a.md", "line 0\nline 1\nline 2\n")
        await api.write(f"{base}/sub/b.md", "B")
        assert (
            await api.ok(
                "GET",
                "/api/v1/content/read",
                params={"uri": f"{base}/a.md", "offset": 1, "limit": 1},
            )
            == "line 1\n"
        )
        ls = await api.call("GET", "/api/v1/fs/ls", params={"uri": base, "limit": 1})
        assert (len(ls.json()["result"]), ls.json()["has_more"]) == (1, True)
        rec = await api.ok("GET", "/api/v1/fs/ls", params={"uri": base, "recursive": "true"})
        assert [e["rel_path"] for e in rec] == ["a.md", "sub", "sub/b.md"]
        hidden = await api.ok(
            "GET", "/api/v1/fs/ls", params={"uri": base, "show_all_hidden": "true"}
        )
        assert {".abstract.md", ".overview.md"} <= {e["uri"].rsplit("/", 1)[1] for e in hidden}
        simple = await api.ok("GET", "/api/v1/fs/ls", params={"uri": base, "simple": "true"})
        assert simple == [f"{base}/a.md", f"{base}/sub"]
        stat = await api.ok("GET", "/api/v1/fs/stat", params={"uri": f"{base}/a.md"})
        assert (stat["isDir"], stat["size"], stat["isLocked"]) == (False, 21, False)
        await api.ok("POST", "/api/v1/fs/mkdir", json={"uri": f"{base}/empty"})
        conflict = await api.error("POST", "/api/v1/fs/mkdir", 409, json={"uri": f"{base}/empty"})
        assert conflict["code"] == "CONFLICT"
        error = await api.error("DELETE", "/api/v1/fs", 400, params={"uri": f"{base}/sub"})
        assert error["details"] == {"resource": f"{base}/sub", "expected_flag": "recursive"}
        gone = await api.ok(
            "DELETE", "/api/v1/fs", params={"uri": f"{base}/sub", "recursive": "true"}
        )
        assert gone["estimated_deleted_count"] == 1
        assert (await api.find("B", target_uri=f"{base}/sub"))["total"] == 0
        error = await api.error(
            "GET", "/api/v1/content/read", 403, params={"uri": "viking://user/a/../b"}
        )
        assert error["code"] == "PERMISSION_DENIED"
        error = await api.error(
            "POST", "/api/v1/content/write", 400, json={"uri": "/etc/passwd", "content": "x"}
        )
        assert error["code"] == "INVALID_URI"
        await api.error(
            "POST",
            "/api/v1/content/write",
            403,
            json={"uri": "viking://system/x.md", "content": "x"},
        )


def test_html_becomes_readable_text() -> None:
    page = (
        "<html><head><title>Guide</title><style>p{}</style></head><body><h1>Deploy</h1>"
        "<p>Use <b>helm</b> &amp; argo.</p><script>x()</script></body></html>"
    )
    assert html_to_text(page) == "# Guide\n\n# Deploy\nUse helm & argo.\n"


async def test_resources_from_uploads_and_urls(data_dir: Path) -> None:
    async def site(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/moved":
            return httpx.Response(302, headers={"location": "/guide/deploy.html"})
        page = (
            "<html><title>Deploy guide</title><body><p>Roll out with Helm charts.</p></body></html>"
        )
        return httpx.Response(200, text=page, headers={"content-type": "text/html"})

    app = create_app(
        data_dir, allow_private_networks=True, http_transport=httpx.MockTransport(site)
    )
    async with connect(app) as api:
        upload = await api.ok(
            "POST",
            "/api/v1/resources/temp_upload",
            files={"file": ("run-book.md", b"# Runbook\nRestart ingest.\n")},
        )
        assert upload["temp_file_id"].startswith("upload_")
        assert upload["temp_file_id"].endswith(".md")
        first = await api.ok(
            "POST", "/api/v1/resources", json={"temp_file_id": upload["temp_file_id"]}
        )
        second = await api.ok(
            "POST", "/api/v1/resources", json={"temp_file_id": upload["temp_file_id"]}
        )
        assert (first["root_uri"], second["root_uri"]) == (
            "viking://resources/run-book",
            "viking://resources/run-book_1",
        )
        assert first["status"] == "success"
        assert "Restart ingest" in await api.read("viking://resources/run-book/run-book.md")
        fetched = await api.ok(
            "POST", "/api/v1/resources", json={"path": "http://127.0.0.1:8/moved"}
        )
        assert fetched["root_uri"] == "viking://resources/deploy"
        assert "Helm charts" in await api.read("viking://resources/deploy/deploy.md")
        found = await api.find("helm charts rollout", context_type="resource", level=2)
        assert found["resources"][0]["uri"] == "viking://resources/deploy/deploy.md"
        task = await api.ok("GET", f"/api/v1/tasks/{fetched['task_id']}")
        assert (task["task_type"], task["status"]) == ("add_resource", "completed")
        error = await api.error(
            "POST", "/api/v1/resources", 403, json={"path": "file:///etc/passwd"}
        )
        assert "host filesystem paths" in error["message"]
    async with connect(app, user="other") as other:  # an upload belongs to its uploader
        await other.error(
            "POST", "/api/v1/resources", 403, json={"temp_file_id": upload["temp_file_id"]}
        )


def _llm(answer: str | None, delay: float = 0.0) -> httpx.MockTransport:
    async def handler(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(delay)
        if answer is None:
            return httpx.Response(500, json={"error": "down"})
        return httpx.Response(200, json={"choices": [{"message": {"content": answer}}]})

    return httpx.MockTransport(handler)


async def test_llm_extraction_when_configured(data_dir: Path) -> None:
    answer = json.dumps(
        {"memories": [{"type": "preference", "topic": "shell", "text": "Uses fish as the shell."}]}
    )
    app = create_app(
        data_dir, llm_base_url="http://llm/v1", llm_model="m", http_transport=_llm(answer)
    )
    async with connect(app) as api:
        await api.say("s", "fish all the way, honestly")
        await api.commit("s")
        assert await api.read("viking://user/alice/memories/preferences/alice/shell.md") == (
            "- Uses fish as the shell."
        )


async def test_llm_failure_falls_back_to_the_rules(data_dir: Path) -> None:
    app = create_app(
        data_dir, llm_base_url="http://llm/v1", llm_model="m", http_transport=_llm(None)
    )
    async with connect(app) as api:
        await api.say("s", "I prefer fish as my shell.")
        task = await api.commit("s")
        assert task["result"]["memories_extracted"] == {"memory_write": 1}


async def test_wait_times_out_while_a_task_runs(data_dir: Path) -> None:
    answer = json.dumps({"memories": []})
    app = create_app(
        data_dir, llm_base_url="http://llm/v1", llm_model="m", http_transport=_llm(answer, 0.5)
    )
    async with connect(app) as api:
        await api.say("s", "I prefer fish.")
        commit = await api.ok("POST", "/api/v1/sessions/s/commit", json={})
        running = await api.ok("GET", f"/api/v1/tasks/{commit['task_id']}")
        assert running["status"] == "running"
        error = await api.error("POST", "/api/v1/system/wait", 504, json={"timeout": 0.05})
        assert error["code"] == "DEADLINE_EXCEEDED"
        queues = await api.ok("POST", "/api/v1/system/wait", json={"timeout": 10})
        assert queues["SessionCommit"]["processed"] == 1
        done = await api.ok("GET", f"/api/v1/tasks/{commit['task_id']}")
        assert done["status"] == "completed"


async def test_session_ids_and_auto_create(app: Starlette) -> None:
    async with connect(app) as api:
        await api.error("GET", "/api/v1/sessions/lazy", 404)
        info = await api.ok("GET", "/api/v1/sessions/lazy", params={"auto_create": "true"})
        assert (info["session_id"], info["message_count"], info["last_message_at"]) == (
            "lazy",
            0,
            "",
        )
        error = await api.error("POST", "/api/v1/sessions", 400, json={"session_id": ".hidden"})
        assert error["code"] == "INVALID_ARGUMENT"
        created = await api.ok("POST", "/api/v1/sessions", json={})
        assert created["uri"] == f"viking://user/alice/sessions/{created['session_id']}"
        await api.ok("POST", "/api/v1/sessions", json={"session_id": "会话 1"})
