"""The knowledge index: over HTTP against the reference server, and failure paths on mocks."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from ov_agent_ext import Message, OVClient, OVConfig
from ov_agent_ext.index import (
    READ_CONCURRENCY,
    IndexBuilder,
    first_meaningful_line,
    order_memories,
    walk_files,
)
from ov_agent_ext.models import FsEntry
from ov_agent_ext.server import create_app
from ov_agent_ext.tokens import EstimateTokenizer, Tokenizer, get_tokenizer

CONFIG = OVConfig(endpoint="http://ref", user="alice", account="acme")
ESTIMATE = EstimateTokenizer()
TOOLS = (
    "Tools: viking_search | viking_read | viking_browse | viking_remember | viking_forget"
    " | viking_add_resource | viking_archive_expand"
)


class Recording(httpx.AsyncBaseTransport):
    """Wraps a transport: records requests, and can play a server that went down."""

    def __init__(self, inner: httpx.AsyncBaseTransport):
        self.inner = inner
        self.down = False
        self.paths: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        if self.down:
            raise httpx.ConnectError("connection refused", request=request)
        return await self.inner.handle_async_request(request)


@pytest.fixture
def transport(tmp_path: Path) -> Recording:
    return Recording(httpx.ASGITransport(app=create_app(tmp_path / "ref")))


@pytest.fixture
async def client(transport: Recording) -> AsyncIterator[OVClient]:
    async with OVClient(CONFIG, transport=transport) as ov:
        yield ov


def builder(client: OVClient, budget: int = 2000, tokenizer: Tokenizer = ESTIMATE) -> IndexBuilder:
    return IndexBuilder(client, CONFIG.model_copy(update={"index_budget": budget}), tokenizer)


async def seed(client: OVClient, files: dict[str, str]) -> None:
    for uri, content in files.items():
        await client.write(uri, content, mode="create")


async def archive_date(client: OVClient, session_id: str, archive: str) -> str:
    entries = await client.ls(f"viking://user/sessions/{session_id}/history")
    (entry,) = [e for e in entries if e.basename == archive]
    assert entry.mod_time
    return entry.mod_time[:10]


def more_count(section: str) -> int:
    match = re.search(r"^- \((\d+) more — ", section, re.MULTILINE)
    return int(match.group(1)) if match else 0


def sections(index: str) -> dict[str, str]:
    """``### header`` -> its block."""
    return {
        block.split("\n", 1)[0]: block for block in index.split("\n\n") if block.startswith("###")
    }


# --- what the index says --------------------------------------------------------------------


async def test_small_store_gives_the_spec_format(client: OVClient) -> None:
    # One memory per category, so the order does not depend on which second a write landed in.
    await seed(
        client,
        {
            "viking://user/memories/profile.md": "- My name is Alice.",
            "viking://user/memories/preferences/alice/editor.md": "- Prefers dark mode everywhere",
            "viking://user/memories/entities/projects/falcon.md": "- Project Falcon uses SQLite",
            "viking://user/memories/events/2026/05/01/ship.md": "# Summary\nShip on Friday.",
            "viking://user/memories/notes/pip.md": "pip can lie: verify with import",
            # Written in reverse name order: newest first and name order agree either way.
            "viking://resources/projx-arch/arch.md": "# Project X architecture\n",
            "viking://resources/openviking-reference/ref.md": "# OpenViking reference doc\n",
        },
    )
    # A session that extracts nothing: a second preference would make the order depend on
    # which second the commit landed in.
    await client.add_messages("pi-1", [Message(role="user", content="Let us get started.")])
    await client.commit_and_wait("pi-1", timeout=10)
    date = await archive_date(client, "pi-1", "archive_001")

    index = await builder(client).build(session_id="pi-1")

    assert index == (
        "## OpenViking Knowledge Index\n"
        "[Showing what's in your long-term memory]\n"
        "\n"
        "### viking://user/memories/ (5 memories)\n"
        "- profile.md (core files: use viking_read)\n"
        "- Prefers dark mode everywhere\n"
        "- Project Falcon uses SQLite\n"
        "- Ship on Friday.\n"
        "- pip can lie: verify with import\n"
        "\n"
        "### viking://resources/ (2 resources)\n"
        "- Resource openviking-reference: OpenViking reference doc."
        " (viking://resources/openviking-reference)\n"
        "- Resource projx-arch: Project X architecture. (viking://resources/projx-arch)\n"
        "\n"
        "### viking://user/sessions/pi-1/history/ (1 archive)\n"
        f"- Archive {date} (archive_001): Conversation of 1 messages. Let us get started.\n"
        "\n" + TOOLS
    )


async def test_empty_store_shows_an_empty_memory_section_and_no_other(client: OVClient) -> None:
    index = await builder(client).build(session_id="never-committed")

    assert index == (
        "## OpenViking Knowledge Index\n"
        "[Showing what's in your long-term memory]\n"
        "\n"
        "### viking://user/memories/ (0 memories)\n"
        "\n" + TOOLS
    )


async def test_event_files_four_levels_down_are_counted_and_listed(client: OVClient) -> None:
    days = ["2026/04/30", "2026/05/01", "2026/05/02"]
    await seed(
        client,
        {
            f"viking://user/memories/events/{day}/e{n}.md": f"- event {day} {n}"
            for day in days
            for n in range(3)
        },
    )

    index = await builder(client).build()

    assert "### viking://user/memories/ (9 memories)" in index
    assert all(f"- event {day} {n}" in index for day in days for n in range(3))


async def test_walk_lists_level_by_level_and_skips_summaries(
    client: OVClient, transport: Recording
) -> None:
    await seed(client, {"viking://user/memories/events/2026/05/01/a.md": "- a"})

    files = await walk_files(client, "viking://user/alice/memories")

    assert [f.uri for f in files] == ["viking://user/alice/memories/events/2026/05/01/a.md"]
    listings = [p for p in transport.paths if p == "/api/v1/fs/ls"]
    assert len(listings) >= 5  # memories, events, 2026, 05, 01: never one recursive call


async def test_cjk_memories_are_listed_and_counted_by_the_tokenizer(client: OVClient) -> None:
    await seed(
        client,
        {
            f"viking://user/memories/preferences/alice/t{n:02d}.md": f"- 我喜欢早上喝绿茶，第{n}条"
            for n in range(40)
        },
    )

    index = await builder(client, budget=300).build()

    assert ESTIMATE.count(index) <= 300
    block = sections(index)["### viking://user/memories/ (40 memories)"]
    shown = [line for line in block.split("\n")[1:] if not line.startswith("- (")]
    assert shown
    assert all("我喜欢早上喝绿茶" in line for line in shown)
    assert len(shown) + more_count(block) == 40


@pytest.mark.parametrize("tokenizer", [ESTIMATE, get_tokenizer("auto")], ids=lambda t: t.name)
async def test_a_large_store_fits_the_budget_and_every_section_shows(
    client: OVClient, tokenizer: Tokenizer
) -> None:
    memories = {
        f"viking://user/memories/events/2026/05/{n % 28 + 1:02d}/e{n:03d}.md": (
            f"- Decided to split service number {n} into two workers with a shared queue"
        )
        for n in range(180)
    } | {
        f"viking://user/memories/preferences/alice/p{n:02d}.md": f"- Prefers tool {n} for builds"
        for n in range(40)
    }
    resources = {f"viking://resources/doc{n}/doc.md": f"# Document {n}\n" for n in range(6)}
    await seed(client, memories | resources)
    for turn in range(4):
        await client.add_messages("pi-1", [Message(role="user", content=f"turn {turn}")])
        await client.commit_and_wait("pi-1", timeout=10)

    index = await builder(client, budget=800, tokenizer=tokenizer).build(session_id="pi-1")

    assert tokenizer.count(index) <= 800
    assert index.endswith(TOOLS)
    blocks = sections(index)
    assert set(blocks) == {
        "### viking://user/memories/ (220 memories)",
        "### viking://resources/ (6 resources)",
        "### viking://user/sessions/pi-1/history/ (4 archives)",
    }
    for header, block in blocks.items():
        total = int(re.search(r"\((\d+) ", header).group(1))  # type: ignore[union-attr]
        lines = block.split("\n")[1:]
        shown = [line for line in lines if not line.startswith("- (")]
        assert shown, header
        assert len(shown) + more_count(block) == total, header
    # Both kinds of memory appear: categories are interleaved, not newest-first overall.
    memory_block = blocks["### viking://user/memories/ (220 memories)"]
    assert "Prefers tool" in memory_block
    assert "Decided to split" in memory_block
    archives = blocks["### viking://user/sessions/pi-1/history/ (4 archives)"]
    assert archives.split("\n")[1].startswith("- Archive ")
    assert "(archive_004)" in archives.split("\n")[1]  # newest archive first


async def test_files_are_read_only_as_far_as_the_budget_goes(
    client: OVClient, transport: Recording
) -> None:
    await seed(
        client,
        {f"viking://user/memories/entities/things/t{n:03d}.md": f"- thing {n}" for n in range(120)},
    )
    transport.paths.clear()

    index = await builder(client, budget=200).build()

    shown = index.count("\n- thing ")
    reads = transport.paths.count("/api/v1/content/read")
    assert 0 < shown < 120
    assert reads <= shown + 2 * READ_CONCURRENCY


async def test_the_same_store_gives_the_same_index(client: OVClient) -> None:
    await seed(
        client,
        {f"viking://user/memories/entities/e/x{n:02d}.md": f"- fact {n}" for n in range(30)},
    )
    first = await builder(client, budget=150).build()
    second = await builder(client, budget=150).build()
    again = await builder(client, budget=150).build()

    assert first == second == again


async def test_budget_zero_turns_the_index_off(client: OVClient, transport: Recording) -> None:
    transport.paths.clear()

    assert await builder(client, budget=0).build() == ""
    assert transport.paths == []


async def test_a_budget_too_small_for_the_frame_gives_nothing(client: OVClient) -> None:
    await seed(client, {"viking://user/memories/entities/e/x.md": "- fact"})

    assert await builder(client, budget=20).build() == ""


async def test_a_small_budget_drops_later_sections_before_the_memories(client: OVClient) -> None:
    await seed(
        client,
        {
            "viking://user/memories/entities/e/x.md": "- fact",
            "viking://resources/doc/doc.md": "# Doc\n",
        },
    )
    full = await builder(client, budget=2000).build()
    without_resources = full.split("\n\n### viking://resources/")[0] + "\n\n" + TOOLS
    # Room for the memories' "(1 more ...)" line (reserved while filling), not for resources.
    budget = ESTIMATE.count(without_resources) + 13
    assert ESTIMATE.count(full) > budget

    index = await builder(client, budget=budget).build()

    assert "### viking://resources/" not in index
    assert "### viking://user/memories/ (1 memory)" in index
    assert ESTIMATE.count(index) <= budget


# --- caching and refresh ------------------------------------------------------------------------


async def test_cached_is_empty_until_built_and_after_invalidate(client: OVClient) -> None:
    index = builder(client)
    assert index.cached == ""

    built = await index.build()

    assert built
    assert index.cached == built
    index.invalidate()
    assert index.cached == ""


async def test_refresh_after_commit_rebuilds_only_when_memories_were_extracted(
    client: OVClient, transport: Recording
) -> None:
    index = builder(client)
    await index.build(session_id="pi-1")
    before = index.cached
    await client.add_messages("pi-1", [Message(role="user", content="I prefer uv over pip.")])
    result = await client.commit_and_wait("pi-1", timeout=10)
    assert result.task is not None
    assert result.task.memories_extracted == 1

    transport.paths.clear()
    assert await index.refresh_after_commit(0, "pi-1") == before
    assert transport.paths == []

    refreshed = await index.refresh_after_commit(result.task.memories_extracted, "pi-1")

    assert refreshed == index.cached != before
    assert "- I prefer uv over pip." in refreshed
    assert "### viking://user/sessions/pi-1/history/ (1 archive)" in refreshed


# --- failures -------------------------------------------------------------------------------


def mock_client(handler: Callable[[httpx.Request], Any]) -> OVClient:
    return OVClient(CONFIG, transport=httpx.MockTransport(handler))


async def test_server_down_gives_empty_fast_and_never_raises() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    async with mock_client(refuse) as ov:
        index = builder(ov)
        started = time.monotonic()
        assert await index.build(session_id="pi-1") == ""
        assert time.monotonic() - started < 0.5
        assert index.cached == ""


async def test_a_failed_rebuild_keeps_the_previous_index(
    client: OVClient, transport: Recording, caplog: pytest.LogCaptureFixture
) -> None:
    await seed(client, {"viking://user/memories/entities/e/x.md": "- fact"})
    index = builder(client)
    built = await index.build()

    transport.down = True
    assert await index.build() == ""

    assert index.cached == built
    assert "memory index not built" in caplog.text


async def test_a_slow_server_is_cut_off_at_the_deadline() -> None:
    async def hang(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(30)
        return httpx.Response(200, json={"status": "ok", "result": []})

    async with mock_client(hang) as ov:
        index = IndexBuilder(ov, CONFIG, ESTIMATE, deadline=0.2)
        started = time.monotonic()
        assert await index.build() == ""
        assert time.monotonic() - started < 1.0


class FakeServer:
    """A real-server-like store on a MockTransport: placeholder abstracts, a broken file."""

    def __init__(self, files: dict[str, str], broken: frozenset[str] = frozenset()):
        self.files = files
        self.broken = broken

    def children(self, uri: str) -> list[dict[str, Any]]:
        prefix = uri.rstrip("/") + "/"
        names = {
            u.removeprefix(prefix).split("/", 1)[0] for u in self.files if u.startswith(prefix)
        }
        out = []
        for name in sorted(names):
            child = prefix + name
            is_dir = child not in self.files
            abstract = f"# {child} [Directory abstract is not ready]" if is_dir else ""
            out.append(
                {
                    "uri": child,
                    "size": 0,
                    "isDir": is_dir,
                    "modTime": "2026-05-25T10:00:00.000Z",
                    "abstract": abstract,
                }
            )
        return out

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path, uri = request.url.path, request.url.params.get("uri", "")
        if path == "/api/v1/system/status":
            return ok({"initialized": True, "user": "alice"})
        if path == "/api/v1/fs/ls":
            children = self.children(uri)
            if not children:
                return httpx.Response(
                    404,
                    json={"status": "error", "error": {"code": "NOT_FOUND", "message": uri}},
                )
            return ok(children)
        if path == "/api/v1/content/read":
            if uri in self.broken:
                return httpx.Response(
                    500, json={"status": "error", "error": {"code": "INTERNAL", "message": "x"}}
                )
            return ok(self.files[uri])
        return httpx.Response(404, json={"detail": "Not Found"})


def ok(result: Any) -> httpx.Response:
    return httpx.Response(200, json={"status": "ok", "result": result})


async def test_placeholders_are_ignored_and_an_unreadable_file_shows_its_name() -> None:
    root = "viking://user/alice/memories"
    server = FakeServer(
        {
            f"{root}/profile.md": "- Alice",
            f"{root}/identity.md": "# identity.md - Who Am I?",
            f"{root}/soul.md": "# soul.md - Who You Are",
            f"{root}/events/2026/05/25/ship_friday.md": "# Summary\nWe decided to ship on Friday.",
            f"{root}/preferences/user/dark_mode.md": "- prefers dark mode",
            f"{root}/entities/projects/project_x.md": "...",
            "viking://resources/openviking-reference/doc.md": "text",
        },
        broken=frozenset({f"{root}/entities/projects/project_x.md"}),
    )
    async with mock_client(server) as ov:
        index = await builder(ov).build()

    assert index == (
        "## OpenViking Knowledge Index\n"
        "[Showing what's in your long-term memory]\n"
        "\n"
        "### viking://user/memories/ (6 memories)\n"
        "- profile.md, identity.md, soul.md (core files: use viking_read)\n"
        "- prefers dark mode\n"
        "- project x\n"
        "- We decided to ship on Friday.\n"
        "\n"
        "### viking://resources/ (1 resource)\n"
        "- openviking-reference (viking://resources/openviking-reference)\n"
        "\n" + TOOLS
    )


# --- the pieces -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("- Prefers uv over pip\n- second", "Prefers uv over pip"),
        ("---\ntags: [x]\n---\n\n* starred fact", "starred fact"),
        ("<!-- MEMORY_FIELDS\n{}\n-->\n# Summary\nShip on Friday.", "Ship on Friday."),
        ("# Only a heading", "Only a heading"),
        ("1. numbered\n", "numbered"),
        ("> - [ ] quoted task", "quoted task"),
        ("\n\n   \n", ""),
        ("---\n***\n", ""),
        ("- 我喜欢喝茶。", "我喜欢喝茶。"),
        ("x" * 300, "x" * 119 + "…"),
    ],
)
def test_first_meaningful_line(text: str, line: str) -> None:
    assert first_meaningful_line(text) == line


def entry(path: str, mod_time: str) -> FsEntry:
    return FsEntry.model_validate(
        {"uri": f"viking://user/alice/memories/{path}", "isDir": False, "modTime": mod_time}
    )


def test_memories_interleave_categories_newest_first_within_each() -> None:
    files = [
        entry("events/2026/05/01/old.md", "2026-05-01T00:00:00Z"),
        entry("events/2026/05/02/new.md", "2026-05-02T00:00:00Z"),
        entry("notes/n.md", "2026-05-03T00:00:00Z"),
        entry("preferences/alice/b.md", "2026-04-01T00:00:00Z"),
        entry("preferences/alice/a.md", "2026-04-01T00:00:00Z"),
        entry("top.md", "2026-06-01T00:00:00Z"),
        entry("soul.md", "2026-01-01T00:00:00Z"),
        entry("profile.md", "2026-01-01T00:00:00Z"),
    ]

    core, ordered = order_memories("viking://user/alice/memories", files)

    assert [e.basename for e in core] == ["profile.md", "soul.md"]
    assert [e.basename for e in ordered] == [
        "a.md",  # preferences (same time as b.md: by name)
        "new.md",  # events
        "n.md",  # other directories
        "top.md",  # files at the top
        "b.md",
        "old.md",
    ]
