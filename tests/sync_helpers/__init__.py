"""Helpers for the sync tests: turns with recognisable text, reading a session back (archives
and live messages), fault-injecting transports, and the reference server on loopback (in a
thread, restartable on the same port, optionally holding batch requests)."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from ov_agent_ext.breaker import CircuitBreaker
from ov_agent_ext.client import OVClient
from ov_agent_ext.config import OVConfig
from ov_agent_ext.errors import NotFoundError
from ov_agent_ext.models import Message, TextPart, ToolPart
from ov_agent_ext.outbox import Outbox
from ov_agent_ext.sync import SyncManager

__all__ = [
    "BATCH",
    "Faults",
    "Gate",
    "NeverOpen",
    "ThreadServer",
    "batch_texts",
    "free_port",
    "history",
    "make_config",
    "turn",
    "turn_texts",
]

BATCH = "/messages/batch"


def make_config(endpoint: str, state_dir: Path, **settings: Any) -> OVConfig:
    """A dev-mode identity (acme/alice unless given), short flush interval, state under tmp."""
    settings.setdefault("account", "acme")
    settings.setdefault("user", "alice")
    settings.setdefault("write_queue_flush_interval", 20)
    settings.setdefault("commit_token_threshold", 0)
    return OVConfig(endpoint=endpoint, state_dir=state_dir, **settings)


def turn(session_id: str, index: int, *, tools: bool = False) -> list[Message]:
    """A user and an assistant message whose text names the session, the turn and the role."""
    user = Message(role="user", content=f"{session_id} turn {index} user")
    if not tools:
        return [user, Message(role="assistant", content=f"{session_id} turn {index} assistant")]
    parts = [
        TextPart(text=f"{session_id} turn {index} assistant"),
        ToolPart(tool_id=f"t{index}a", tool_name="bash", tool_input={"cmd": "ls"}, tool_output="x"),
        ToolPart(tool_id=f"t{index}b", tool_name="read", tool_input={"path": "a.py"}),
    ]
    return [user, Message(role="assistant", parts=parts)]


def turn_texts(session_id: str, indexes: range | list[int]) -> list[str]:
    """What ``history`` returns for those turns, in order."""
    return [f"{session_id} turn {i} {role}" for i in indexes for role in ("user", "assistant")]


def _text(message: dict[str, Any]) -> str:
    return " ".join(str(p.get("text", "")) for p in message["parts"] if p.get("type") == "text")


async def history(client: OVClient, session_id: str) -> list[str]:
    """Every message the server holds for the session, archived ones first, as text."""
    try:
        info = await client.get_session(session_id)
    except NotFoundError:
        return []
    texts: list[str] = []
    for number in range(1, info.commit_count + 1):
        archive = await client.get_archive(session_id, f"archive_{number:03d}")
        texts += [_text(m) for m in archive.messages]
    context = await client.session_context(session_id, token_budget=10**6)
    texts += [_text(m) for m in context.messages]
    return texts


def batch_texts(request: httpx.Request) -> list[str]:
    """The texts of a batch request's messages (content or text parts)."""
    import json

    body = json.loads(request.content or b"{}")
    out = []
    for message in body.get("messages", []):
        if "content" in message:
            out.append(str(message["content"]))
        else:
            out.append(" ".join(p.get("text", "") for p in message.get("parts", [])))
    return out


class NeverOpen(CircuitBreaker):
    """A breaker that always lets calls through (no fast failing): for fault tests that are
    about retries, and for the benchmark's "no breaker" column."""

    def allow(self) -> bool:
        return True


Hook = Callable[[httpx.Request], None]


class Faults(httpx.AsyncBaseTransport):
    """Wraps a transport: ``before`` may raise or answer instead of the server (return a
    response), ``after`` may raise once the server has processed the request (the answer is
    lost). Every request is logged as ``(method, path, texts)``."""

    def __init__(self, inner: httpx.AsyncBaseTransport):
        self.inner = inner
        self.before: Callable[[httpx.Request], httpx.Response | None] | None = None
        self.after: Hook | None = None
        self.log: list[tuple[str, str, list[str]]] = []

    def batches(self, session_id: str | None = None) -> list[list[str]]:
        return [
            texts
            for method, path, texts in self.log
            if path.endswith(BATCH) and (session_id is None or f"/{session_id}/" in path)
        ]

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        texts = batch_texts(request) if request.url.path.endswith(BATCH) else []
        self.log.append((request.method, request.url.path, texts))
        if self.before is not None:
            answer = self.before(request)
            if answer is not None:
                return answer
        response = await self.inner.handle_async_request(request)
        await response.aread()
        if self.after is not None:
            self.after(request)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def free_port() -> int:
    """A port nothing listens on (connections to it are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Gate:
    """An ASGI wrapper that holds batch requests while ``mode`` is set: ``"before"`` the app
    sees them, or ``"after"`` it processed them (the answer is held back). ``reached`` is set
    when a request is held; ``release`` lets them all go; ``finished`` is set when a held
    request is over (the app has run, whatever happened to its answer)."""

    def __init__(self, app: Any):
        self.app = app
        self.mode: str | None = None
        self.reached = threading.Event()
        self.release = threading.Event()
        self.finished = threading.Event()

    async def _hold(self) -> None:
        self.reached.set()
        await asyncio.to_thread(self.release.wait)  # set from the test's thread

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        mode = self.mode
        if scope["type"] != "http" or mode is None or not scope["path"].endswith(BATCH):
            await self.app(scope, receive, send)
            return
        try:
            if mode == "before":
                await self._hold()
                await self.app(scope, receive, send)
                return
            held: list[Any] = []

            async def keep(message: Any) -> None:
                held.append(message)

            await self.app(scope, receive, keep)
            await self._hold()
            for message in held:
                await send(message)
        except Exception:  # the client is gone (killed): nobody to answer
            pass
        finally:
            self.finished.set()


class ThreadServer:
    """The reference server under uvicorn in a thread on 127.0.0.1 (``port`` 0: any free
    one). Stop it and start another on the same port and data dir to restart the server."""

    def __init__(self, data_dir: Path, port: int = 0, *, gate: bool = False):
        from ov_agent_ext.server import create_app
        from ov_agent_ext.server.thread import ThreadedServer

        self.data_dir = data_dir
        app: Any = create_app(data_dir)
        self.gate = Gate(app) if gate else None
        self._server = ThreadedServer(self.gate or app, port=port, log_level="critical")
        self.port = self._server.port
        self.url = self._server.url

    def stop(self) -> None:
        if self.gate is not None:
            self.gate.release.set()
        self._server.stop()


def manager(
    config: OVConfig,
    outbox: Outbox,
    transport: httpx.AsyncBaseTransport | None = None,
    breaker: CircuitBreaker | None = None,
) -> SyncManager:
    """A SyncManager on its own client."""
    return SyncManager(OVClient(config, transport=transport, breaker=breaker), config, outbox)
