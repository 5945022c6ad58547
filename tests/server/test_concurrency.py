"""Concurrent requests are safe: nothing is lost, each request's messages stay together."""

from __future__ import annotations

import asyncio

import httpx

from .conftest import Loopback

HEADERS = {"X-OpenViking-Account": "acme", "X-OpenViking-User": "alice"}


async def test_fifty_concurrent_batches_keep_every_message_in_order(loopback: Loopback) -> None:
    requests, per_request = 50, 6
    async with httpx.AsyncClient(base_url=loopback.url, headers=HEADERS, timeout=30) as http:

        async def batch(i: int) -> httpx.Response:
            messages = [
                {"role": "user", "content": f"request {i} message {j}"} for j in range(per_request)
            ]
            return await http.post(
                "/api/v1/sessions/busy/messages/batch", json={"messages": messages}
            )

        answers = await asyncio.gather(*(batch(i) for i in range(requests)))
        assert all(a.status_code == 200 for a in answers), [a.text for a in answers][:3]
        assert sorted(a.json()["result"]["message_count"] for a in answers) == [
            per_request * (i + 1) for i in range(requests)
        ]
        context = (await http.get("/api/v1/sessions/busy/context")).json()["result"]
    texts = [m["parts"][0]["text"] for m in context["messages"]]
    assert len(texts) == requests * per_request
    for i in range(requests):
        mine = [t for t in texts if t.startswith(f"request {i} ")]
        assert mine == [f"request {i} message {j}" for j in range(per_request)]
        first = texts.index(mine[0])
        assert texts[first : first + per_request] == mine  # one request, one contiguous run


async def test_concurrent_commits_and_writes_all_land(loopback: Loopback) -> None:
    async with httpx.AsyncClient(base_url=loopback.url, headers=HEADERS, timeout=30) as http:

        async def session(i: int) -> str:
            sid = f"s{i}"
            await http.post(
                f"/api/v1/sessions/{sid}/messages",
                json={"role": "user", "content": f"Project P{i} uses Postgres {i}."},
            )
            commit = (await http.post(f"/api/v1/sessions/{sid}/commit", json={})).json()
            return str(commit["result"]["task_id"])

        async def write(i: int) -> int:
            response = await http.post(
                "/api/v1/content/write",
                json={"uri": f"viking://resources/notes/n{i}.md", "content": f"note {i}"},
            )
            return response.status_code

        results = await asyncio.gather(
            *(session(i) for i in range(20)), *(write(i) for i in range(20))
        )
        assert results[20:] == [200] * 20
        waited = await http.post("/api/v1/system/wait", json={"timeout": 30})
        assert waited.status_code == 200
        for task_id in results[:20]:
            task = (await http.get(f"/api/v1/tasks/{task_id}")).json()["result"]
            assert task["status"] == "completed"
        listing = (
            await http.get(
                "/api/v1/fs/ls",
                params={"uri": "viking://user/alice/memories/entities/projects"},
            )
        ).json()["result"]
        assert len(listing) == 20
        notes = (await http.get("/api/v1/fs/ls", params={"uri": "viking://resources/notes"})).json()
        assert len(notes["result"]) == 20
