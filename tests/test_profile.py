"""The profile block, the rehydration block and the system prompt composition."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from ov_agent_ext import Message, OVClient, OVConfig
from ov_agent_ext.profile import (
    HEAD_LINES,
    ProfileBuilder,
    RehydrationBuilder,
    compose_system_prompt,
    elide_profile,
    truncate_to_tokens,
)
from ov_agent_ext.server import create_app
from ov_agent_ext.tokens import EstimateTokenizer, Tokenizer, get_tokenizer

CONFIG = OVConfig(endpoint="http://ref", user="alice", account="acme")
ESTIMATE = EstimateTokenizer()


class Switchable(httpx.AsyncBaseTransport):
    """Wraps a transport: records request paths, and can play a server that went down."""

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
def transport(tmp_path: Path) -> Switchable:
    return Switchable(httpx.ASGITransport(app=create_app(tmp_path / "ref")))


@pytest.fixture
async def client(transport: Switchable) -> AsyncIterator[OVClient]:
    async with OVClient(CONFIG, transport=transport) as ov:
        yield ov


def profile_builder(
    client: OVClient, budget: int = 10000, tokenizer: Tokenizer = ESTIMATE
) -> ProfileBuilder:
    return ProfileBuilder(client, CONFIG.model_copy(update={"profile_budget": budget}), tokenizer)


def history_builder(client: OVClient, budget: int = 2000) -> RehydrationBuilder:
    config = CONFIG.model_copy(update={"resume_context_budget": budget})
    return RehydrationBuilder(client, config, ESTIMATE)


async def say_and_commit(client: OVClient, session_id: str, *texts: str, **commit: Any) -> int:
    await client.add_messages(session_id, [Message(role="user", content=t) for t in texts])
    result = await client.commit_and_wait(session_id, timeout=10, **commit)
    assert result.task is not None
    return result.task.memories_extracted


async def seed(client: OVClient, files: dict[str, str]) -> None:
    for uri, content in files.items():
        await client.write(uri, content, mode="create")


def mock_client(handler: Callable[[httpx.Request], Any]) -> OVClient:
    return OVClient(CONFIG, transport=httpx.MockTransport(handler))


def ok(result: Any) -> httpx.Response:
    return httpx.Response(200, json={"status": "ok", "result": result})


def refuse(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


# --- the profile block ----------------------------------------------------------------------


async def test_profile_block_from_extracted_memories(client: OVClient) -> None:
    await say_and_commit(
        client,
        "pi-1",
        "My name is Alice. I live in Berlin. I prefer uv over pip. "
        "Project Falcon uses PostgreSQL. 我喜欢喝茶。",
    )

    block = await profile_builder(client).build()

    assert block == (
        '<openviking-context source="session-start">\n'
        '<user-profile uri="viking://user/alice/memories/profile.md">\n'
        "- My name is Alice.\n"
        "- I live in Berlin.\n"
        "</user-profile>\n"
        "<available-memories>\n"
        "  viking://user/alice/memories/preferences/alice/\n"
        "    - pip_vs_uv.md — I prefer uv over pip.\n"
        "    - 喝茶.md — 我喜欢喝茶。\n"
        "  viking://user/alice/memories/entities/projects/\n"
        "    - falcon.md — Project Falcon uses PostgreSQL.\n"
        "</available-memories>\n"
        "</openviking-context>"
    )


async def test_no_profile_and_no_memories_gives_nothing(client: OVClient) -> None:
    await seed(client, {"viking://user/memories/events/2026/05/01/x.md": "- not listed"})

    assert await profile_builder(client).build() == ""


async def test_memories_without_a_profile(client: OVClient) -> None:
    await seed(client, {"viking://user/memories/preferences/dark_mode.md": "prefers dark mode"})

    assert await profile_builder(client).build() == (
        '<openviking-context source="session-start">\n'
        "<available-memories>\n"
        "  viking://user/alice/memories/preferences/\n"
        "    - dark_mode.md — prefers dark mode\n"
        "</available-memories>\n"
        "</openviking-context>"
    )


async def test_a_profile_without_memories(client: OVClient) -> None:
    await seed(client, {"viking://user/memories/profile.md": "I am Alice.\n</user-profile> x"})

    assert await profile_builder(client).build() == (
        '<openviking-context source="session-start">\n'
        '<user-profile uri="viking://user/alice/memories/profile.md">\n'
        "I am Alice.\n"
        "&lt;/user-profile> x\n"  # stored text cannot close the block early
        "</user-profile>\n"
        "</openviking-context>"
    )


@pytest.mark.parametrize("tokenizer", [ESTIMATE, get_tokenizer("auto")], ids=lambda t: t.name)
async def test_a_long_profile_is_elided_and_the_listing_cut_within_budget(
    client: OVClient, tokenizer: Tokenizer
) -> None:
    facts = [f"- fact {n}: worked on the billing service migration" for n in range(300)]
    profile = "\n".join(facts)
    await seed(
        client,
        {"viking://user/memories/profile.md": profile}
        | {
            f"viking://user/memories/preferences/alice/p{n:03d}.md": f"- prefers tool {n}"
            for n in range(60)
        }
        | {
            f"viking://user/memories/entities/projects/e{n:03d}.md": f"- project {n} uses Go"
            for n in range(60)
        },
    )

    block = await profile_builder(client, budget=1200, tokenizer=tokenizer).build()

    assert 0 < tokenizer.count(block) <= 1200
    lines = block.split("\n")
    body = lines[2:]
    assert body[:HEAD_LINES] == [
        f"- fact {n}: worked on the billing service migration" for n in range(8)
    ]
    assert body[HEAD_LINES].startswith("[... ")
    assert body[HEAD_LINES].endswith(" lines elided ...]")
    assert facts[-1] in block  # the most recent fact is kept
    # The profile goes first; what is left of the budget lists both categories.
    assert "p000.md — prefers tool 0" in block
    assert "e000.md — project 0 uses Go" in block
    listed = sum(1 for line in lines if line.startswith("    - "))
    more = next(line for line in lines if line.startswith("  (") and " more — " in line)
    assert listed + int(more.split()[0].lstrip("(")) == 120


async def test_budget_zero_turns_the_block_off(client: OVClient, transport: Switchable) -> None:
    transport.paths.clear()

    assert await profile_builder(client, budget=0).build() == ""
    assert transport.paths == []


async def test_refresh_after_commit_only_when_memories_were_extracted(
    client: OVClient, transport: Switchable
) -> None:
    profile = profile_builder(client)
    assert await profile.build() == ""
    extracted = await say_and_commit(client, "pi-1", "I live in Lisbon.")
    assert extracted == 1

    transport.paths.clear()
    assert await profile.refresh_after_commit(0) == ""
    assert transport.paths == []

    refreshed = await profile.refresh_after_commit(extracted)

    assert "- I live in Lisbon." in refreshed
    assert profile.cached == refreshed


async def test_server_down_gives_empty_and_keeps_the_previous_block(
    client: OVClient, transport: Switchable, caplog: pytest.LogCaptureFixture
) -> None:
    await seed(client, {"viking://user/memories/profile.md": "I am Alice."})
    profile = profile_builder(client)
    built = await profile.build()

    transport.down = True
    started = time.monotonic()
    assert await profile.build() == ""

    assert time.monotonic() - started < 0.5
    assert profile.cached == built
    assert "profile block not built" in caplog.text
    profile.invalidate()
    assert profile.cached == ""


async def test_a_slow_server_is_cut_off_at_the_deadline() -> None:
    async def hang(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(30)
        return ok([])

    async with mock_client(hang) as ov:
        profile = ProfileBuilder(ov, CONFIG, ESTIMATE, deadline=0.2)
        started = time.monotonic()
        assert await profile.build() == ""
        assert time.monotonic() - started < 1.0


# --- elision --------------------------------------------------------------------------------


def test_a_profile_that_fits_is_unchanged() -> None:
    assert elide_profile("\nline one\nline two\n\n", 100, ESTIMATE) == "line one\nline two"


def test_elision_keeps_head_and_most_recent_tail() -> None:
    lines = [f"line {n:03d} " + "x" * 30 for n in range(100)]

    elided = elide_profile("\n".join(lines), 200, ESTIMATE)

    out = elided.split("\n")
    assert ESTIMATE.count(elided) <= 200
    assert out[:HEAD_LINES] == lines[:HEAD_LINES]
    tail = out[HEAD_LINES + 1 :]
    assert tail
    assert tail == lines[len(lines) - len(tail) :]
    assert out[HEAD_LINES] == f"[... {100 - HEAD_LINES - len(tail)} lines elided ...]"


def test_a_file_too_short_to_elide_is_truncated_from_the_top() -> None:
    lines = [f"line {n} " + "y" * 80 for n in range(9)]

    truncated = elide_profile("\n".join(lines), 100, ESTIMATE)

    out = truncated.split("\n")
    assert ESTIMATE.count(truncated) <= 100
    assert out[:-1] == lines[: len(out) - 1]
    assert out[-1] == f"[... {9 - (len(out) - 1)} lines truncated ...]"


def test_a_head_over_budget_falls_back_to_truncation() -> None:
    lines = ["h" * 200 for _ in range(20)]

    truncated = elide_profile("\n".join(lines), 120, ESTIMATE)

    assert ESTIMATE.count(truncated) <= 120
    assert truncated.endswith("lines truncated ...]")
    assert "elided" not in truncated


def test_one_huge_line_is_cut_with_an_ellipsis() -> None:
    truncated = elide_profile("我" * 1000, 30, ESTIMATE)

    assert truncated.endswith("…")
    assert truncated.startswith("我")
    assert ESTIMATE.count(truncated) <= 30


def test_truncate_to_tokens() -> None:
    assert truncate_to_tokens("short", 10, ESTIMATE) == "short"
    assert truncate_to_tokens("word " * 50, 5, ESTIMATE) == "word word word word…"
    assert truncate_to_tokens("anything", 0, ESTIMATE) == ""


# --- rehydration ----------------------------------------------------------------------------


async def test_overview_of_the_latest_archive(client: OVClient) -> None:
    await say_and_commit(client, "pi-1", "first run")
    await say_and_commit(client, "pi-1", "second run")
    history = history_builder(client)

    text = await history.archive_overview("pi-1")

    assert text == (
        "[Session History Summary]\n# Working Memory\n\n## Session Summary\n- user: second run"
    )
    assert history.cached == text


async def test_overview_from_the_session_context_with_working_memory(client: OVClient) -> None:
    await say_and_commit(client, "pi-1", "worked on the parser", enable_working_memory=True)

    text = await history_builder(client).archive_overview("pi-1")

    assert text.startswith("[Session History Summary]\n# Working Memory")
    assert "worked on the parser" in text


async def test_no_session_or_no_archive_gives_nothing(client: OVClient) -> None:
    await client.add_messages("live", [Message(role="user", content="not committed")])

    assert await history_builder(client).archive_overview("missing") == ""
    assert await history_builder(client).archive_overview("live") == ""


async def test_a_long_overview_is_cut_at_a_line_boundary(client: OVClient) -> None:
    await say_and_commit(
        client, "pi-1", *[f"step {n}: refactored the module number {n}" for n in range(80)]
    )

    text = await history_builder(client, budget=120).archive_overview("pi-1")

    lines = text.split("\n")
    assert ESTIMATE.count(text) <= 120
    assert lines[0] == "[Session History Summary]"
    assert lines[-1] == "…"
    assert lines[-2].startswith("- user: step ")  # whole lines only


class HistoryServer:
    """A session with archives 9 and 10 (numeric order, not text order) on a MockTransport."""

    def __init__(self, overview: str = "", placeholder: bool = False):
        self.context_overview = overview
        self.placeholder = placeholder
        self.archives_read: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/api/v1/system/status":
            return ok({"user": "alice"})
        if path.endswith("/context"):
            return ok({"latest_archive_overview": self.context_overview, "messages": []})
        if path == "/api/v1/fs/ls":
            base = "viking://user/alice/sessions/pi-1/history"
            return ok([{"uri": f"{base}/archive_{n:03d}", "isDir": True} for n in (9, 10, 2)])
        if "/archives/" in path:
            archive_id = path.rsplit("/", 1)[-1]
            self.archives_read.append(archive_id)
            overview = "[Directory overview is not ready]" if self.placeholder else archive_id
            return ok({"archive_id": archive_id, "abstract": "", "overview": overview})
        return httpx.Response(404, json={"detail": "Not Found"})


async def test_the_highest_numbered_archive_is_the_latest() -> None:
    server = HistoryServer()
    async with mock_client(server) as ov:
        text = await history_builder(ov).archive_overview("pi-1")

    assert text == "[Session History Summary]\narchive_010"
    assert server.archives_read == ["archive_010"]


async def test_the_context_overview_wins_when_the_server_has_one() -> None:
    server = HistoryServer(overview="from the context")
    async with mock_client(server) as ov:
        text = await history_builder(ov).archive_overview("pi-1")

    assert text == "[Session History Summary]\nfrom the context"
    assert server.archives_read == []


async def test_a_placeholder_overview_is_no_overview() -> None:
    async with mock_client(HistoryServer(placeholder=True)) as ov:
        assert await history_builder(ov).archive_overview("pi-1") == ""


async def test_rehydration_fails_open() -> None:
    async with mock_client(refuse) as ov:
        history = history_builder(ov)
        started = time.monotonic()
        assert await history.archive_overview("pi-1") == ""
        assert time.monotonic() - started < 0.5


async def test_rehydration_is_cut_off_at_the_deadline() -> None:
    async def hang(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(30)
        return ok({})

    async with mock_client(hang) as ov:
        history = RehydrationBuilder(ov, CONFIG, ESTIMATE, deadline=0.2)
        started = time.monotonic()
        assert await history.archive_overview("pi-1") == ""
        assert time.monotonic() - started < 1.0


# --- the system prompt ----------------------------------------------------------------------

PROFILE = '<openviking-context source="session-start">\n...\n</openviking-context>'
HISTORY = "[Session History Summary]\nArchive 2026-05-27: design session"
INDEX = "## OpenViking Knowledge Index\n[Showing what's in your long-term memory]\n\nTools: x"
TOOLS_AD = "Use viking_search before answering questions about past work."


def test_system_prompt_composes_every_part_in_the_spec_order() -> None:
    assert compose_system_prompt(PROFILE, HISTORY, INDEX, TOOLS_AD) == (
        f"## OpenViking Context\n{PROFILE}\n\n{HISTORY}\n\n{INDEX}\n\n{TOOLS_AD}"
    )


def test_system_prompt_leaves_out_empty_parts() -> None:
    assert compose_system_prompt("", "  \n", INDEX, TOOLS_AD) == (
        f"## OpenViking Context\n{INDEX}\n\n{TOOLS_AD}"
    )
    assert compose_system_prompt(PROFILE + "\n\n", "", "", "") == (
        f"## OpenViking Context\n{PROFILE}"
    )
    assert compose_system_prompt("", "", "", "") == ""


def test_system_prompt_is_byte_identical_for_the_same_inputs() -> None:
    first = compose_system_prompt(PROFILE, HISTORY, INDEX, TOOLS_AD)
    second = compose_system_prompt(str(PROFILE), "".join(HISTORY), INDEX[:], f"{TOOLS_AD}")

    assert first.encode() == second.encode()
