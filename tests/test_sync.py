"""SyncManager against the reference server in process, with faults injected at the transport:
exactly once and in order through lost answers, refused connections, partial deliveries and
permanent rejections; identity; retries; the three commit triggers; opting out."""

from __future__ import annotations

import asyncio
import random
import sqlite3
import time
from collections.abc import AsyncIterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from sync_helpers import BATCH, Faults, NeverOpen, history, make_config, turn, turn_texts

from ov_agent_ext.breaker import CircuitBreaker
from ov_agent_ext.client import OVClient
from ov_agent_ext.config import OVConfig, load_config
from ov_agent_ext.models import Message, ToolPart
from ov_agent_ext.optout import bypass_reason
from ov_agent_ext.outbox import Outbox
from ov_agent_ext.server import create_app
from ov_agent_ext.sync import SyncManager, identity_of

URL = "http://ref.test"


@dataclass
class Env:
    app: Any
    faults: Faults
    config: OVConfig
    outbox: Outbox
    sync: SyncManager
    reader: OVClient
    tmp: Path
    _clients: list[OVClient] = field(default_factory=list)

    def manager(
        self,
        config: OVConfig | None = None,
        *,
        outbox: Outbox | None = None,
        breaker: CircuitBreaker | None = None,
        **kw: Any,
    ) -> SyncManager:
        config = config or self.config
        client = OVClient(config, transport=self.faults, breaker=breaker or NeverOpen())
        self._clients.append(client)
        return SyncManager(client, config, outbox or self.outbox, **kw)


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    app = create_app(tmp_path / "server")
    faults = Faults(httpx.ASGITransport(app=app))
    config = make_config(URL, tmp_path / "state")
    outbox = Outbox(config.state_dir / "outbox.sqlite")
    reader = OVClient(config, transport=httpx.ASGITransport(app=app))
    client = OVClient(config, transport=faults, breaker=NeverOpen())
    sync = SyncManager(client, config, outbox)
    e = Env(app, faults, config, outbox, sync, reader, tmp_path)
    e._clients = [client, reader]
    try:
        yield e
    finally:
        await e.sync.aclose(deadline=1)
        for c in e._clients:
            await c.aclose()
        e.outbox.close()


async def drain(sync: SyncManager, *, rounds: int = 300) -> int:
    """Explicit flushes (retry backoff ignored) until nothing is pending; returns how many."""
    for n in range(1, rounds + 1):
        report = await sync.flush()
        if report.pending == 0:
            return n
    raise AssertionError(f"still pending after {rounds} flushes: {sync.stats()}")


def rows(outbox: Outbox, sql: str) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(outbox.path)) as db:
        return db.execute(sql).fetchall()


# ================================================================================================
# The hot path


async def test_accept_turn_is_durable_without_the_network(env: Env) -> None:
    assert env.sync.accept_turn("s1", 0, turn("s1", 0), tokens=12)
    assert env.faults.log == []  # nothing sent: the turn is only on disk
    assert env.sync.stats().pending == 1
    # Another process (a fresh Outbox on the same file) sees it at once.
    other = Outbox(env.outbox.path)
    try:
        assert other.stats(identity_of(env.config)).pending == 1
    finally:
        other.close()
    report = await env.sync.flush()
    assert (report.sent_messages, report.pending, report.error) == (2, 0, None)
    assert await history(env.reader, "s1") == turn_texts("s1", [0])


async def test_replayed_turn_index_is_a_no_op(env: Env) -> None:
    assert env.sync.accept_turn("s1", 0, turn("s1", 0), tokens=1)
    assert env.sync.accept_turn("s1", 1, turn("s1", 1), tokens=1)
    assert not env.sync.accept_turn("s1", 1, turn("s1", 1), tokens=1)  # retried turn_end
    assert not env.sync.accept_turn("s1", 0, turn("s1", 0), tokens=1)  # older index
    assert env.sync.accept_turn("s1", 2, [], tokens=0)  # a skipped turn moves the guard
    assert not env.sync.accept_turn("s1", 2, turn("s1", 2), tokens=1)
    assert env.sync.accept_turn("s2", 0, turn("s2", 0), tokens=1)  # per session
    await drain(env.sync)
    assert await history(env.reader, "s1") == turn_texts("s1", [0, 1])


async def test_an_empty_entry_does_not_stall_its_session(env: Env) -> None:
    env.sync.accept_messages("s1", [], tokens=0)
    env.sync.accept_turn("s1", 0, turn("s1", 0), tokens=1)
    report = await env.sync.flush()
    assert report.pending == 0
    assert await history(env.reader, "s1") == turn_texts("s1", [0])


async def test_dedup_guard_survives_a_restart(env: Env) -> None:
    for i in range(3):
        env.sync.accept_turn("s1", i, turn("s1", i), tokens=1)
    await env.sync.aclose()
    env.outbox.close()
    outbox = Outbox(env.outbox.path)  # what a new process opens
    try:
        sync = env.manager(outbox=outbox)
        assert not sync.accept_turn("s1", 2, turn("s1", 2), tokens=1)
        assert not sync.accept_turn("s1", 0, turn("s1", 0), tokens=1)
        assert sync.stats().pending == 0  # the flush at close sent them
        assert sync.accept_turn("s1", 3, turn("s1", 3), tokens=1)
        await drain(sync)
    finally:
        outbox.close()
        env.outbox = Outbox(env.outbox.path)  # for the fixture's teardown
        env.sync = env.manager()
    assert await history(env.reader, "s1") == turn_texts("s1", range(4))


async def test_background_flusher_batches_at_the_threshold(env: Env) -> None:
    config = make_config(URL, env.config.state_dir, write_queue_flush_interval=60_000)
    sync = env.manager(config)
    sync.start()  # flushes what earlier runs left at once (nothing here), then waits
    await asyncio.sleep(0.02)
    try:
        for i in range(4):
            sync.accept_turn("s1", i, turn("s1", i), tokens=1)
        await asyncio.sleep(0.05)
        assert env.faults.batches() == []  # below the threshold (5) and the interval (60 s)
        sync.accept_turn("s1", 4, turn("s1", 4), tokens=1)
        for _ in range(100):
            if sync.stats().pending == 0:
                break
            await asyncio.sleep(0.01)
        # One request for the five turns, in order.
        assert env.faults.batches() == [turn_texts("s1", range(5))]
    finally:
        await sync.aclose()


async def test_background_flusher_sends_on_the_interval(env: Env) -> None:
    env.sync.start()
    env.sync.accept_turn("s1", 0, turn("s1", 0), tokens=1)
    for _ in range(100):
        if env.sync.stats().pending == 0:
            break
        await asyncio.sleep(0.01)
    assert env.sync.stats().pending == 0
    assert await history(env.reader, "s1") == turn_texts("s1", [0])


async def test_a_session_fed_during_a_flush_does_not_starve_the_others(env: Env) -> None:
    # Turns that arrive while a flush runs wait for the next one: a busy session cannot keep
    # one flush going forever (other sessions starved, batching lost to one request per turn).
    arrivals = 0

    def before(request: httpx.Request) -> None:
        nonlocal arrivals
        if request.url.path.endswith("/busy" + BATCH) and arrivals < 20:
            arrivals += 1
            env.sync.accept_turn("busy", arrivals, turn("busy", arrivals), tokens=1)

    env.faults.before = before  # type: ignore[assignment]
    env.sync.accept_turn("busy", 0, turn("busy", 0), tokens=1)
    env.sync.accept_turn("quiet", 0, turn("quiet", 0), tokens=1)
    report = await env.sync.flush()
    assert len(env.faults.batches("busy")) == 1
    assert await history(env.reader, "quiet") == turn_texts("quiet", [0])
    assert report.pending == 1  # the turn that arrived during the flush
    await drain(env.sync)
    assert await history(env.reader, "busy") == turn_texts("busy", range(arrivals + 1))


# ================================================================================================
# Exactly once, in order, through faults


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
async def test_lost_answers_and_connect_timeouts_deliver_exactly_once_in_order(
    env: Env, seed: int
) -> None:
    rng = random.Random(seed)
    lost = {"before": 0, "after": 0}

    def before(request: httpx.Request) -> None:
        if rng.random() < 0.2:
            lost["before"] += 1
            raise httpx.ConnectTimeout("connect timed out", request=request)

    def after(request: httpx.Request) -> None:
        if rng.random() < 0.3:
            lost["after"] += request.url.path.endswith(BATCH)
            raise httpx.ReadTimeout("timed out", request=request)  # processed, answer lost

    env.faults.before, env.faults.after = before, after  # type: ignore[assignment]
    config = make_config(URL, env.config.state_dir, commit_token_threshold=75)
    sync = env.manager(config)
    sessions = ["s-a", "s-b"]
    for i in range(30):
        for sid in sessions:
            assert sync.accept_turn(sid, i, turn(sid, i, tools=i % 2 == 1), tokens=10)
        if rng.random() < 0.5:
            await sync.flush()
    await drain(sync)
    env.faults.before = env.faults.after = None
    assert lost["before"] > 0
    assert lost["after"] > 0
    for sid in sessions:
        assert await history(env.reader, sid) == turn_texts(sid, range(30))
        info = await env.reader.get_session(sid)
        assert info.total_message_count == 60
        assert info.commit_count >= 3  # threshold commits every 8 turns went through too


async def test_lost_answer_of_the_second_chunk_of_a_large_turn(env: Env) -> None:
    batches = 0

    def after(request: httpx.Request) -> None:
        nonlocal batches
        if request.url.path.endswith(BATCH):
            batches += 1
            if batches == 2:
                raise httpx.ReadTimeout("timed out", request=request)

    env.faults.after = after
    big = [Message(role="user", content=f"m{i}") for i in range(250)]
    env.sync.accept_turn("s1", 0, big, tokens=250)
    first = await env.sync.flush()
    assert first.error
    assert first.pending == 1
    assert first.sent_messages == 100  # the first request was confirmed on its own
    await drain(env.sync)
    assert await history(env.reader, "s1") == [f"m{i}" for i in range(250)]
    sent = [len(b) for b in env.faults.batches()]
    assert sent == [100, 100, 50]  # the lost chunk was not sent again


async def test_connect_timeout_on_the_third_chunk_sends_only_the_rest(env: Env) -> None:
    batches = 0

    def before(request: httpx.Request) -> None:
        nonlocal batches
        if request.url.path.endswith(BATCH):
            batches += 1
            if batches == 3:
                raise httpx.ConnectTimeout("connect timed out", request=request)

    env.faults.before = before  # type: ignore[assignment]
    env.sync.accept_turn("s1", 0, [Message(role="user", content=f"m{i}") for i in range(250)], 1)
    env.sync.accept_turn("s1", 1, turn("s1", 1), tokens=1)
    await drain(env.sync)
    assert await history(env.reader, "s1") == [f"m{i}" for i in range(250)] + turn_texts("s1", [1])


async def test_lost_commit_answer_archives_once(env: Env) -> None:
    def after(request: httpx.Request) -> None:
        if request.url.path.endswith("/commit") and env.faults.after is after:
            env.faults.after = None
            raise httpx.ReadTimeout("timed out", request=request)

    env.faults.after = after
    config = make_config(URL, env.config.state_dir, commit_token_threshold=20)
    sync = env.manager(config)
    for i in range(4):
        sync.accept_turn("s1", i, turn("s1", i), tokens=10)
    await drain(sync)
    info = await env.reader.get_session("s1")
    # Commits after turns 1 and 3; the first one's answer was lost and it was sent again
    # (found nothing new: skipped), so exactly two archives.
    assert info.commit_count == 2
    assert await history(env.reader, "s1") == turn_texts("s1", range(4))


# ================================================================================================
# Identity


async def test_entries_are_sent_only_with_their_own_identity(tmp_path: Path) -> None:
    root = "root-key-for-the-test"
    app = create_app(tmp_path / "server", root_api_key=root)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url=URL,
        headers={"Authorization": f"Bearer {root}"},
    ) as admin:
        answer = await admin.post(
            "/api/v1/admin/accounts", json={"account_id": "acme", "admin_user_id": "alice"}
        )
        alice_key = answer.json()["result"]["user_key"]
        answer = await admin.post("/api/v1/admin/accounts/acme/users", json={"user_id": "bob"})
        bob_key = answer.json()["result"]["user_key"]
    state = tmp_path / "state"
    alice = make_config(URL, state, account="", user="", api_key=alice_key)
    bob = make_config(URL, state, account="", user="", api_key=bob_key)
    faults = Faults(httpx.ASGITransport(app=app))
    outbox = Outbox(state / "outbox.sqlite")
    alice_sync = SyncManager(OVClient(alice, transport=faults), alice, outbox)
    bob_sync = SyncManager(OVClient(bob, transport=faults), bob, outbox)
    try:
        assert alice_sync.accept_turn("shared", 0, turn("shared", 0), tokens=1)
        assert bob_sync.accept_turn("shared", 0, turn("shared", 9), tokens=1)  # own guard
        report = await bob_sync.flush()
        assert report.sent_messages == 2
        assert report.pending == 0
        assert faults.batches() == [turn_texts("shared", [9])]  # only bob's own entry
        assert alice_sync.stats().pending == 1  # alice's waits for alice
        assert (await alice_sync.flush()).sent_messages == 2
        assert faults.batches()[-1] == turn_texts("shared", [0])
        # Each landed in its owner's session (the server tells users apart by key).
        assert await history(alice_sync.client, "shared") == turn_texts("shared", [0])
        assert await history(bob_sync.client, "shared") == turn_texts("shared", [9])
        # Entries waiting in the file: the API keys are not in any of its bytes.
        alice_sync.accept_turn("shared", 1, turn("shared", 1), tokens=1)
        blob = b"".join(p.read_bytes() for p in state.iterdir() if p.is_file())
        assert b"shared turn 1 user" in blob  # the entry is there...
        for key in (alice_key, bob_key):
            assert key.encode() not in blob  # ...its key is not
    finally:
        for sync in (alice_sync, bob_sync):
            await sync.client.aclose()
        outbox.close()


# ================================================================================================
# Order per session, permanent rejections, retries


async def test_a_pending_entry_holds_back_its_session_only(env: Env) -> None:
    blocked = "s1 turn 0 user"

    def before(request: httpx.Request) -> httpx.Response | None:
        if request.url.path.endswith(BATCH) and blocked in request.content.decode():
            return httpx.Response(503, json={"status": "error", "error": {"code": "UNAVAILABLE"}})
        return None

    env.faults.before = before
    for i in range(3):
        for sid in ("s1", "s2"):
            env.sync.accept_turn(sid, i, turn(sid, i), tokens=1)
    for _ in range(3):
        report = await env.sync.flush()
        assert "UNAVAILABLE" in (report.error or "")
        # Nothing of s1 got through: every s1 request carried the blocked head first.
        assert await history(env.reader, "s1") == []
        assert all(b[0] == blocked for b in env.faults.batches("s1"))
    assert await history(env.reader, "s2") == turn_texts("s2", range(3))
    assert env.sync.stats().sessions_waiting == 1
    env.faults.before = None
    await drain(env.sync)
    assert await history(env.reader, "s1") == turn_texts("s1", range(3))


def _refuse(text: str) -> Any:
    def before(request: httpx.Request) -> httpx.Response | None:
        if request.url.path.endswith(BATCH) and text in request.content.decode():
            body = {"status": "error", "error": {"code": "INVALID_ARGUMENT", "message": "bad"}}
            return httpx.Response(400, json=body)
        return None

    return before


async def test_a_refused_entry_is_set_aside_and_the_rest_of_the_batch_goes(env: Env) -> None:
    env.faults.before = _refuse("s1 turn 1 user")
    for i in range(4):
        env.sync.accept_turn("s1", i, turn("s1", i), tokens=1)
    report = await env.sync.flush()
    assert report.set_aside == 1
    assert report.pending == 0
    assert await history(env.reader, "s1") == turn_texts("s1", [0, 2, 3])
    aside = env.sync.stats().set_aside
    assert len(aside) == 1
    assert aside[0].payload[0]["content"] == "s1 turn 1 user"
    assert "bad" in (aside[0].last_error or "")
    sent = len(env.faults.log)
    for _ in range(3):  # never retried
        await env.sync.flush()
    assert len(env.faults.log) == sent
    env.sync.accept_turn("s1", 4, turn("s1", 4), tokens=1)
    await env.sync.flush()
    assert await history(env.reader, "s1") == turn_texts("s1", [0, 2, 3, 4])


async def test_a_session_the_real_server_refuses_is_set_aside(env: Env) -> None:
    # The reference server answers 400 "Invalid session id" for this id; other sessions go.
    env.sync.accept_turn(".hidden", 0, turn("x", 0), tokens=1)
    env.sync.accept_turn("ok", 0, turn("ok", 0), tokens=1)
    report = await env.sync.flush()
    assert report.pending == 0
    assert report.set_aside == 1
    (aside,) = env.sync.stats().set_aside
    assert aside.session_id == ".hidden"
    assert "Invalid session id" in (aside.last_error or "")
    assert await history(env.reader, "ok") == turn_texts("ok", [0])


async def test_refused_second_chunk_keeps_the_first_and_later_turns_exactly_once(
    env: Env,
) -> None:
    # A 250-message turn whose 150th message the server refuses: the first chunk (100) is on
    # the server; the refusal must not make the client lose track of the session's total,
    # or a later uncertain send would be counted as landed (lost) or resent (duplicated).
    env.faults.before = _refuse("m149")
    big = [Message(role="user", content=f"m{i}") for i in range(250)]
    env.sync.accept_turn("s1", 0, big, tokens=1)
    report = await env.sync.flush()
    assert report.set_aside == 1
    env.faults.before = None
    fail_next = True

    def connect_timeout(request: httpx.Request) -> None:
        nonlocal fail_next
        if request.url.path.endswith(BATCH) and fail_next:
            fail_next = False
            raise httpx.ConnectTimeout("connect timed out", request=request)

    env.faults.before = connect_timeout  # type: ignore[assignment]
    env.sync.accept_turn("s1", 1, turn("s1", 1), tokens=1)
    await drain(env.sync)
    assert await history(env.reader, "s1") == [f"m{i}" for i in range(100)] + turn_texts("s1", [1])
    (aside,) = env.sync.stats().set_aside
    assert [m["content"] for m in aside.payload] == [f"m{i}" for i in range(100, 250)]


async def test_a_message_that_cannot_be_encoded_is_set_aside_not_retried_forever(
    env: Env,
) -> None:
    # A lone surrogate (from a tool's undecodable output) or a NaN in a tool input is valid
    # Python but not valid JSON on the wire: the entry must not block its session forever.
    env.sync.accept_turn("s1", 0, turn("s1", 0), tokens=1)
    env.sync.accept_turn("s1", 1, [Message(role="user", content="bad \udcff bytes")], tokens=1)
    nan = ToolPart(tool_id="t", tool_name="calc", tool_input={"x": float("nan")})
    env.sync.accept_turn("s1", 2, [Message(role="assistant", parts=[nan])], tokens=1)
    env.sync.accept_turn("s1", 3, turn("s1", 3), tokens=1)
    report = await env.sync.flush()
    assert report.pending == 0
    assert report.set_aside == 2
    assert await history(env.reader, "s1") == turn_texts("s1", [0, 3])
    reasons = [e.last_error or "" for e in env.sync.stats().set_aside]
    assert all(reasons)


def _next_attempts(outbox: Outbox) -> list[tuple[int, float]]:
    found = rows(outbox, "SELECT attempts, next_attempt_at FROM entries")
    return [(int(a), float(t)) for a, t in found]


async def test_retries_back_off_with_jitter_only_on_retryable_errors(env: Env) -> None:
    random.seed(7)
    env.faults.before = lambda r: (
        httpx.Response(503, json={"status": "error", "error": {"code": "UNAVAILABLE"}})
        if r.url.path.endswith(BATCH)
        else None
    )
    env.sync.accept_turn("s1", 0, turn("s1", 0), tokens=1)
    delays = []
    for expected in range(1, 6):
        started = time.time()
        await env.sync.flush()  # explicit: tries now, whatever the backoff says
        ((attempts, at),) = _next_attempts(env.outbox)
        assert attempts == expected
        delays.append(at - started)
    # 0.5 * 2^(n-1) seconds, times a jitter in [0.5, 1]: every delay in its own band.
    ratios = [delay / (0.5 * 2 ** (n - 1)) for n, delay in enumerate(delays, start=1)]
    assert all(0.45 <= r <= 1.05 for r in ratios), ratios
    assert delays == sorted(delays)
    # The jitter: not the bare exponential (clients retrying in lockstep), and not constant.
    assert sum(r < 0.95 for r in ratios) >= 3, ratios
    assert len({round(r, 2) for r in ratios}) >= 4, ratios
    # The background flusher respects the backoff: not due, nothing sent.
    sent = len(env.faults.batches())
    await env.sync.flush(due_only=True)
    assert len(env.faults.batches()) == sent
    # A permanent refusal is tried once, then set aside.
    env.faults.before = _refuse("s2 turn 0 user")
    env.sync.accept_turn("s2", 0, turn("s2", 0), tokens=1)
    await env.sync.flush("s2")
    await env.sync.flush("s2")
    assert len(env.faults.batches("s2")) == 1
    assert len(env.sync.stats().set_aside) == 1


async def test_backoff_grows_when_the_server_total_cannot_be_read(env: Env) -> None:
    # The first send of a session asks the server for its total first; when that fails the
    # entry backs off like any failed send (more each time), not at a fixed short delay.
    env.faults.before = lambda r: (
        httpx.Response(503, json={"status": "error", "error": {"code": "UNAVAILABLE"}})
        if r.method == "GET"
        else None
    )
    env.sync.accept_turn("s1", 0, turn("s1", 0), tokens=1)
    seen = []
    for _ in range(4):
        started = time.time()
        await env.sync.flush()
        ((attempts, at),) = _next_attempts(env.outbox)
        seen.append((attempts, at - started))
    assert [a for a, _ in seen] == [1, 2, 3, 4]
    assert seen[-1][1] > 2.0  # 4th attempt: 0.5 * 2^3 * [0.5, 1] >= 2 s
    env.faults.before = None
    await drain(env.sync)
    assert await history(env.reader, "s1") == turn_texts("s1", [0])


# ================================================================================================
# Commits


async def test_threshold_commit_follows_the_crossing_turn(env: Env) -> None:
    config = make_config(URL, env.config.state_dir, commit_token_threshold=100)
    sync = env.manager(config)
    tool = Message(
        role="assistant",
        parts=[ToolPart(tool_id="t1", tool_name="bash", tool_input={"cmd": "make"})],
    )
    sync.accept_turn("s1", 0, turn("s1", 0), tokens=40)
    sync.accept_turn("s1", 1, [tool], tokens=40)  # tool-only: counts by its tokens
    started = time.perf_counter()
    sync.accept_turn("s1", 2, [tool], tokens=40)  # crosses 100
    assert time.perf_counter() - started < 0.05  # queued, not sent: no network in accept
    assert env.faults.log == []
    kinds = [k for (k,) in rows(env.outbox, "SELECT kind FROM entries ORDER BY id")]
    assert kinds == ["messages", "messages", "messages", "commit"]
    sync.accept_turn("s1", 3, turn("s1", 3), tokens=40)
    await drain(sync)
    info = await env.reader.get_session("s1")
    assert info.commit_count == 1
    archive = await env.reader.get_archive("s1", "archive_001")
    assert len(archive.messages) == 4  # turns 0-2: the crossing turn is in the commit
    context = await env.reader.session_context("s1", token_budget=10**6)
    assert len(context.messages) == 2  # turn 3 waits for the next threshold
    assert env.outbox.session_state(identity_of(config), "s1").pending_tokens == 40


async def test_no_threshold_commit_below_it_or_when_disabled(env: Env) -> None:
    for threshold in (0, 1000):
        config = make_config(URL, env.config.state_dir, commit_token_threshold=threshold)
        sync = env.manager(config)
        sid = f"s{threshold}"
        for i in range(5):
            sync.accept_turn(sid, i, turn(sid, i), tokens=150)
        await drain(sync)
        assert (await env.reader.get_session(sid)).commit_count == 0


async def test_pre_compact_commit_flushes_first_and_waits_for_extraction(env: Env) -> None:
    env.sync.accept_turn("s1", 0, [Message(role="user", content="I prefer uv over pip")], 8)
    env.sync.accept_turn(
        "s1", 1, [Message(role="assistant", content="Noted: uv for Python packaging.")], 8
    )
    report = await env.sync.commit_now("s1", wait=True, timeout=10)
    assert report.status == "committed"
    assert report.result is not None
    assert report.result.task is not None
    assert report.result.task.status == "completed"
    assert report.memories_extracted > 0
    archive = await env.reader.get_archive("s1", "archive_001")
    assert len(archive.messages) == 2  # the queued turns went out before the commit
    assert env.sync.stats().pending == 0
    assert env.outbox.session_state(identity_of(env.config), "s1").pending_tokens == 0
    again = await env.sync.commit_now("s1", wait=False, timeout=5)
    assert again.status == "skipped"


async def test_shutdown_commit_with_the_server_down_is_queued_and_runs_later(env: Env) -> None:
    env.sync.accept_turn("s1", 0, turn("s1", 0), tokens=1)
    await env.sync.flush()

    def refused(request: httpx.Request) -> None:
        raise httpx.ConnectError("connection refused", request=request)

    env.faults.before = refused  # type: ignore[assignment]
    env.sync.accept_turn("s1", 1, turn("s1", 1), tokens=1)
    down = env.manager(breaker=CircuitBreaker())
    report = await down.commit_now("s1", wait=True, timeout=2)
    assert report.status == "queued"
    await down.aclose(deadline=0.5)
    await env.sync.aclose(deadline=0.5)
    env.outbox.close()
    # Durable: a new process finds the turn and the commit behind it.
    outbox = Outbox(env.outbox.path)
    env.outbox = outbox
    kinds = [k for (k,) in rows(outbox, "SELECT kind FROM entries ORDER BY id")]
    assert kinds == ["messages", "commit"]
    env.faults.before = None
    env.sync = env.manager(outbox=outbox)
    env.sync.start()
    for _ in range(200):
        if env.sync.stats().pending == 0:
            break
        await asyncio.sleep(0.01)
    info = await env.reader.get_session("s1")
    assert info.commit_count == 1
    assert await history(env.reader, "s1") == turn_texts("s1", [0, 1])


async def test_commit_now_with_the_server_down_and_nothing_queued_is_queued(env: Env) -> None:
    env.sync.accept_turn("s1", 0, turn("s1", 0), tokens=1)
    await env.sync.flush()

    def refused(request: httpx.Request) -> None:
        raise httpx.ConnectError("connection refused", request=request)

    env.faults.before = refused  # type: ignore[assignment]
    report = await env.sync.commit_now("s1", wait=False, timeout=2)
    assert report.status == "queued"
    env.faults.before = None
    await drain(env.sync)
    assert (await env.reader.get_session("s1")).commit_count == 1


async def test_on_commit_is_called_for_queued_and_direct_commits(env: Env) -> None:
    seen: list[tuple[str, str]] = []

    async def on_commit(session_id: str, result: Any) -> None:
        seen.append((session_id, result.status))

    config = make_config(URL, env.config.state_dir, commit_token_threshold=10)
    sync = env.manager(config, on_commit=on_commit)
    sync.accept_turn("s1", 0, turn("s1", 0), tokens=10)
    await drain(sync)
    sync.accept_turn("s1", 1, turn("s1", 1), tokens=1)
    await sync.commit_now("s1", wait=False, timeout=5)
    assert seen == [("s1", "accepted"), ("s1", "accepted")]


# ================================================================================================
# Deadlines: shutdown and commit_now never wait out a hanging request


async def test_aclose_keeps_its_deadline_while_a_send_hangs(env: Env) -> None:
    release = asyncio.Event()
    inner = env.faults.inner

    class Hanging(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            if request.url.path.endswith(BATCH):
                await release.wait()
            return await inner.handle_async_request(request)

    config = make_config(URL, env.config.state_dir, write_timeout=30)
    client = OVClient(config, transport=Hanging())
    sync = SyncManager(client, config, env.outbox)
    try:
        sync.start()
        sync.accept_turn("s1", 0, turn("s1", 0), tokens=1)
        sync.nudge()
        await asyncio.sleep(0.1)  # the flusher is now waiting on the hanging request
        started = time.monotonic()
        report = await sync.commit_now("s1", wait=True, timeout=0.3)
        assert time.monotonic() - started < 1.0
        assert report.status == "queued"
        started = time.monotonic()
        await sync.aclose(deadline=0.3)
        assert time.monotonic() - started < 1.0
        assert sync.stats().pending == 2  # the turn (outcome unknown) and the commit
    finally:
        release.set()
        await client.aclose()
    await drain(env.sync)
    assert await history(env.reader, "s1") == turn_texts("s1", [0])
    assert (await env.reader.get_session("s1")).commit_count == 1


# ================================================================================================
# Opting out


def test_bypass_patterns_match_the_directory_or_the_session() -> None:
    config = OVConfig(bypass_patterns=["/tmp/**", "scratch/", "throwaway-*"])
    assert "working directory" in (bypass_reason(config, cwd="/tmp/x/y", session_id="s") or "")
    assert bypass_reason(config, cwd="/home/u/proj/scratch/y", session_id="s")
    assert bypass_reason(config, cwd="/home/u/proj/scratch", session_id="s")
    assert bypass_reason(config, cwd="/home/u/proj", session_id="s") is None
    assert bypass_reason(config, cwd="/home/u/tmpdir", session_id="s") is None
    reason = bypass_reason(config, cwd=None, session_id="throwaway-7")
    assert reason == "session throwaway-7 matches bypassPatterns"
    assert bypass_reason(config, cwd="/home/u", session_id="keep-7") is None
    assert bypass_reason(OVConfig(), cwd="/tmp/x", session_id="throwaway-1") is None
    assert bypass_reason(config, cwd="/tmp", session_id="s")  # the directory itself too
    spec_example = OVConfig(bypass_patterns=["**/scratch/**"])  # the design spec's example
    assert bypass_reason(spec_example, cwd="/home/u/scratch/exp", session_id="s")
    assert bypass_reason(spec_example, cwd="/home/u/scratchpad", session_id="s") is None


def test_incognito_from_the_environment() -> None:
    assert load_config(environ={"OV_AGENT_EXT_INCOGNITO": "1"}).incognito is True
    assert load_config(environ={"OV_AGENT_EXT_INCOGNITO": "0"}).incognito is False
    assert load_config(environ={}).incognito is False
    config = load_config(environ={"OV_AGENT_EXT_INCOGNITO": "1"})
    assert config.source_of("incognito") == "OV_AGENT_EXT_INCOGNITO"
