"""Sync over real loopback HTTP: a server that stops and restarts, an agent process killed at
random points (and while a send is held at the server), a server that hangs. Each ends with
the server holding every accepted turn exactly once, in order."""

from __future__ import annotations

import asyncio
import random
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from sync_helpers import (
    NeverOpen,
    ThreadServer,
    free_port,
    history,
    make_config,
    turn,
    turn_texts,
)

from ov_agent_ext.breaker import CircuitBreaker
from ov_agent_ext.client import OVClient
from ov_agent_ext.errors import ServerUnavailable
from ov_agent_ext.outbox import Outbox
from ov_agent_ext.sync import SyncManager, identity_of

AGENT = Path(__file__).parent / "sync_helpers" / "agent.py"


async def until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def check_history(url: str, state: Path, sessions: dict[str, int]) -> None:
    """Each session holds turns 0..n-1, once each, in order (archives, then live)."""
    config = make_config(url, state)
    async with OVClient(config, breaker=NeverOpen()) as reader:
        for sid, n in sessions.items():
            assert await history(reader, sid) == turn_texts(sid, range(n)), sid
            assert (await reader.get_session(sid)).total_message_count == 2 * n


# ================================================================================================
# 1. The server stops and restarts (same data directory, same port)


async def test_turns_accepted_across_server_restarts_land_once_in_order(tmp_path: Path) -> None:
    data, state = tmp_path / "server", tmp_path / "state"
    server = ThreadServer(data)
    port, url = server.port, server.url
    config = make_config(
        url,
        state,
        commit_token_threshold=70,  # a commit every 7 turns: history spans archives
        write_queue_flush_threshold=1,
        write_timeout=0.5,
        connect_timeout=0.5,
    )
    outbox = Outbox(state / "outbox.sqlite3")
    client = OVClient(config, breaker=CircuitBreaker(base_delay=0.02, max_delay=0.1))
    sync = SyncManager(client, config, outbox)
    sync.start()
    sessions = ("r1", "r2")
    accepted = 0

    async def accept(count: int) -> None:
        nonlocal accepted
        for _ in range(count):
            for sid in sessions:
                assert sync.accept_turn(sid, accepted, turn(sid, accepted), tokens=10)
            accepted += 1
            await asyncio.sleep(0.003)

    try:
        await accept(8)  # up
        await until(lambda: sync.stats().pending == 0, 5, "the first turns")
        server.stop()
        await accept(8)  # down: refused
        await until(lambda: client.breaker.is_open, 5, "the breaker to open")
        assert sync.stats().pending > 0
        server = ThreadServer(data, port, gate=True)  # back, but answers to batches are lost
        assert server.gate is not None
        server.gate.mode = "after"
        await accept(4)
        await asyncio.to_thread(server.gate.reached.wait, 5)
        await until(lambda: client.breaker.is_open, 5, "the lost answer's deadline")
        server.stop()
        server = ThreadServer(data, port)  # restarted for good
        await accept(6)
        await until(lambda: sync.stats().pending == 0, 10, "the drain after restart")
        await check_history(url, state, {sid: accepted for sid in sessions})
    finally:
        await sync.aclose(deadline=1)
        await client.aclose()
        outbox.close()
        server.stop()


# ================================================================================================
# 2. The agent process is killed


def start_agent(state: Path, url: str, seed: int, turns: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(AGENT), str(state), url, str(seed), str(turns)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def kill(proc: subprocess.Popen[str]) -> tuple[str, str]:
    proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=10)  # reaps it: its lease is now a dead process's
    assert proc.returncode == -signal.SIGKILL, err
    return out, err


async def read_line(proc: subprocess.Popen[str], prefix: str, timeout: float = 10) -> str:
    assert proc.stdout is not None
    line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), timeout)
    assert line.startswith(prefix), (line, proc.stderr.read() if proc.stderr else "")
    return line


def reported(out: str, first_line: str) -> dict[str, int]:
    """Per session, how many turns the agent reported accepted (highest index + 1)."""
    counts: dict[str, int] = {}
    for line in (first_line + out).splitlines():
        if line.startswith("accepted "):
            _, sid, index = line.split()
            counts[sid] = max(counts.get(sid, 0), int(index) + 1)
    return counts


async def drain_here(url: str, state: Path) -> dict[str, int]:
    """What a new process does: open the outbox, flush everything; returns each session's
    accepted turn count (its watermark + 1)."""
    config = make_config(url, state)
    outbox = Outbox(state / "outbox.sqlite3")
    try:
        async with OVClient(config, breaker=NeverOpen()) as client:
            sync = SyncManager(client, config, outbox)
            for _ in range(50):
                report = await sync.flush()
                if report.pending == 0:
                    break
            assert report.pending == 0, report
            me = identity_of(config)
            marks = {sid: outbox.session_state(me, sid).watermark for sid in ("k1", "k2")}
            return {sid: -1 if m is None else m + 1 for sid, m in marks.items()}
    finally:
        outbox.close()


async def test_agent_killed_at_random_points_loses_and_duplicates_nothing(
    tmp_path: Path,
) -> None:
    server = ThreadServer(tmp_path / "server")
    state = tmp_path / "state"
    rng = random.Random(20261122)
    try:
        at_least: dict[str, int] = {}
        for seed in (1, 2, 3):
            agent = start_agent(state, server.url, seed, turns=400)
            first = await read_line(agent, ("accepted", "guard"))
            await asyncio.sleep(rng.uniform(0.02, 0.25))  # mid-stream, at a random point
            out, _ = kill(agent)
            if seed > 1:
                assert "guard" in first + out  # the next process refused the old index
            for sid, n in reported(out, first).items():
                at_least[sid] = max(at_least.get(sid, 0), n)
        counts = await drain_here(server.url, state)
        for sid, n in at_least.items():
            assert counts[sid] >= n  # everything reported accepted was kept
        await check_history(server.url, state, counts)
    finally:
        server.stop()


@pytest.mark.parametrize("mode", ["after", "before"])
async def test_agent_killed_while_its_send_is_at_the_server(tmp_path: Path, mode: str) -> None:
    # "after": the server has processed the batch, the answer never reaches the agent;
    # "before": the request reached the server, which had not processed it at the kill.
    # Either way the next process reconciles with the server's total: nothing twice, nothing
    # lost. (The held request is over before the drain starts.)
    server = ThreadServer(tmp_path / "server", gate=True)
    assert server.gate is not None
    state = tmp_path / "state"
    try:
        server.gate.mode = mode
        agent = start_agent(state, server.url, 5, turns=20)
        first = await read_line(agent, "accepted")
        assert await asyncio.to_thread(server.gate.reached.wait, 10)
        out, _ = kill(agent)
        server.gate.mode = None
        server.gate.release.set()
        assert await asyncio.to_thread(server.gate.finished.wait, 10)
        counts = await drain_here(server.url, state)
        assert counts == {"k1": 20, "k2": 20} or all(
            counts[s] >= n for s, n in reported(out, first).items()
        )
        await check_history(server.url, state, counts)
    finally:
        server.stop()


# ================================================================================================
# 3. The server hangs (accepts, never answers), then comes back on the same port


@asynccontextmanager
async def hanging_server(port: int) -> AsyncIterator[None]:
    release = asyncio.Event()
    handlers: list[asyncio.Task[Any]] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.append(task)
        try:
            await release.wait()
        finally:
            writer.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", port)
    try:
        yield
    finally:
        release.set()
        await asyncio.gather(*handlers, return_exceptions=True)
        srv.close()
        await srv.wait_closed()


async def test_hanging_server_costs_one_deadline_then_turns_stay_fast(tmp_path: Path) -> None:
    port = free_port()
    url, state = f"http://127.0.0.1:{port}", tmp_path / "state"
    config = make_config(
        url, state, write_timeout=0.3, read_timeout=0.3, health_timeout=0.3, connect_timeout=0.3
    )
    outbox = Outbox(state / "outbox.sqlite3")
    client = OVClient(config, breaker=CircuitBreaker(base_delay=0.05, max_delay=0.2))
    sync = SyncManager(client, config, outbox)
    server: ThreadServer | None = None
    try:
        async with hanging_server(port):
            sync.start()
            sync.accept_turn("h1", 0, turn("h1", 0), tokens=10)
            sync.nudge()
            await until(lambda: client.breaker.is_open, 3, "the first deadline")
            costs = []
            for i in range(1, 60):
                started = time.perf_counter()
                assert sync.accept_turn("h1", i, turn("h1", i, tools=True), tokens=10)
                with pytest.raises(ServerUnavailable):  # the recall of the next prompt
                    await client.find("what did we decide", limit=5)
                costs.append(time.perf_counter() - started)
                await asyncio.sleep(0.005)  # the flusher and the probe run in between
            # Milliseconds, not the 0.3 s deadline per turn.
            assert statistics.median(costs) < 0.005, statistics.median(costs)
            assert max(costs) < 0.1, max(costs)
            assert sync.stats().pending >= 59
        # Back on the same port (a fresh data directory): the long-lived manager drains
        # without a restart once the background probe closes the breaker.
        server = ThreadServer(tmp_path / "server", port)
        await until(lambda: sync.stats().pending == 0, 10, "the drain")
        async with OVClient(config, breaker=NeverOpen()) as reader:
            assert await history(reader, "h1") == turn_texts("h1", range(60))
    finally:
        await sync.aclose(deadline=1)
        await client.aclose()
        outbox.close()
        if server is not None:
            server.stop()
