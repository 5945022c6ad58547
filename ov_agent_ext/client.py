"""The async OpenViking HTTP client: one long-lived ``httpx.AsyncClient``, transport injectable.

Usage::

    async with OVClient(load_config()) as client:
        await client.add_messages("pi-123", [Message(role="user", content="I prefer uv")])
        result = await client.commit_and_wait("pi-123", timeout=30)
        hits = await client.find("package manager", target_uri="viking://user/memories")

Every call raises :class:`~ov_agent_ext.errors.ServerUnavailable` (no usable answer) or
:class:`~ov_agent_ext.errors.ServerError` (an error answer); nothing else escapes but
programmer errors. Each call class has its own deadline (health, read, write), enforced both
per network phase by httpx and as a whole, so a server that accepts and never answers costs
one deadline, not a hang.
"""

from __future__ import annotations

import asyncio
import logging
import mimetypes
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import httpx

from ._version import __version__
from .breaker import CircuitBreaker
from .config import OVConfig
from .errors import ClientError, NotFoundError, ServerError, ServerUnavailable
from .models import (
    AddMessagesResult,
    Archive,
    CommitResult,
    FindResult,
    FsEntry,
    HealthInfo,
    Message,
    SessionContext,
    SessionInfo,
    TaskInfo,
)
from .spaces import SpaceResolver

__all__ = ["BATCH_LIMIT", "CallKind", "OVClient"]

logger = logging.getLogger(__name__)

CallKind = Literal["health", "read", "write"]
BATCH_LIMIT = 100  # the server's maximum messages per /messages/batch request
TASK_POLL_INTERVAL = 0.5  # seconds between task polls in commit_and_wait

# HTTP status -> error code, for answers that carry no envelope (proxies, unknown routes).
_STATUS_CODES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    408: "DEADLINE_EXCEEDED",
    409: "CONFLICT",
    410: "SESSION_EXPIRED",
    412: "FAILED_PRECONDITION",
    413: "RESOURCE_EXHAUSTED",
    422: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


# Error code -> HTTP status, for an error envelope that arrives with HTTP 200.
_CODE_STATUS = {
    "INVALID_ARGUMENT": 400,
    "INVALID_URI": 400,
    "INVALID_FILTER": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "NOT_FOUND": 404,
    "CONFLICT": 409,
    "ALREADY_EXISTS": 409,
    "ABORTED": 409,
    "SESSION_EXPIRED": 410,
    "FAILED_PRECONDITION": 412,
    "RESOURCE_EXHAUSTED": 429,
    "UNIMPLEMENTED": 501,
    "UNAVAILABLE": 503,
    "MODEL_UNAVAILABLE": 503,
    "DEADLINE_EXCEEDED": 504,
}


def _seg(value: str) -> str:
    """An id as one URL path segment: a '/', '?' or '#' inside it cannot change the route."""
    return quote(value, safe="")


def _redact_url(url: str) -> str:
    """The endpoint without any user:password@ part, for messages and logs."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _error_from(
    status: int,
    body: Any,
    *,
    request_id: str | None,
    method: str,
    path: str,
) -> ServerError:
    code, message = _STATUS_CODES.get(status, f"HTTP_{status}"), ""
    details: dict[str, Any] = {}
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            code = str(error.get("code") or code)
            message = str(error.get("message") or "")
            raw_details = error.get("details")
            details = raw_details if isinstance(raw_details, dict) else {}
        elif "detail" in body:  # FastAPI's own shape: unknown route, validation
            detail = body["detail"]
            message = detail if isinstance(detail, str) else str(detail)[:500]
    elif isinstance(body, str):
        message = body[:500]
    cls = NotFoundError if code == "NOT_FOUND" or status == 404 else ServerError
    return cls(
        message or f"HTTP {status}",
        code=code,
        status_code=status,
        request_id=request_id,
        details=details,
        method=method,
        path=path,
    )


class OVClient:
    """Async client for the OpenViking REST API (0.5.2 contract).

    ``transport`` replaces the network: ``httpx.MockTransport(handler)`` in unit tests,
    ``httpx.ASGITransport(app)`` for an in-process server.
    """

    def __init__(
        self,
        config: OVConfig,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        breaker: CircuitBreaker | None = None,
    ):
        self.config = config
        self.endpoint = _redact_url(config.endpoint)
        headers = {"User-Agent": f"ov-agent-ext/{__version__}", "Accept": "application/json"}
        key = config.api_key.get_secret_value()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        if config.account:
            headers["X-OpenViking-Account"] = config.account
        if config.user:
            headers["X-OpenViking-User"] = config.user
        if config.peer_id:
            headers["X-OpenViking-Actor-Peer"] = config.peer_id
        self._timeouts: dict[CallKind, float] = {
            "health": config.health_timeout,
            "read": config.read_timeout,
            "write": config.write_timeout,
        }
        # user:password@ in the endpoint becomes Basic auth (unless a key is set), so the
        # credentials never sit in a URL that httpx would log at INFO.
        parts = urlsplit(config.endpoint)
        auth = None
        if parts.username is not None and not key:
            auth = httpx.BasicAuth(unquote(parts.username), unquote(parts.password or ""))
        self._http = httpx.AsyncClient(
            base_url=self.endpoint,
            auth=auth,
            headers=headers,
            transport=transport,
            timeout=httpx.Timeout(config.read_timeout, connect=config.connect_timeout),
            follow_redirects=False,
            trust_env=False,  # a proxy from the environment must not see the API key
        )
        self.spaces = SpaceResolver(self)
        # One breaker per client: once the server is found unavailable, calls fail at once and
        # a background health check (never a user's request) decides when to resume.
        self.breaker = breaker or CircuitBreaker()
        self.breaker.set_probe(self._probe_health)

    async def __aenter__(self) -> OVClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    # --- the one place requests are sent and answers interpreted ------------------------------

    async def _request(
        self,
        method: str,
        path: str,
        *,
        kind: CallKind,
        params: dict[str, Any] | None = None,
        json: Any = None,
        files: dict[str, Any] | None = None,
        timeout: float | None = None,
        probe: bool = False,
    ) -> Any:
        """Send one request; return the envelope's ``result`` (or the bare body).

        ``probe`` marks the breaker's own health check, which must reach the server.
        """
        if not probe and not self.breaker.allow():
            raise ServerUnavailable(
                f"OpenViking server at {self.endpoint} is unavailable "
                f"({self.breaker.last_error or 'circuit open'}); checking again in the background",
                endpoint=self.endpoint,
                circuit_open=True,
            )
        deadline = timeout if timeout is not None else self._timeouts[kind]
        per_phase = httpx.Timeout(deadline, connect=min(self.config.connect_timeout, deadline))
        if params:
            params = {k: v for k, v in params.items() if v is not None}
        started = time.perf_counter()
        try:
            response = await asyncio.wait_for(
                self._http.request(
                    method, path, params=params, json=json, files=files, timeout=per_phase
                ),
                timeout=deadline,
            )
        except (asyncio.TimeoutError, httpx.TimeoutException) as exc:
            message = (
                f"OpenViking server at {self.endpoint} did not answer {method} {path} "
                f"within {deadline:g}s"
            )
            if not probe:  # the probe's outcome is the breaker's own to record
                self.breaker.record_failure(f"no answer within {deadline:g}s")
            raise ServerUnavailable(message, endpoint=self.endpoint, timed_out=True) from exc
        except httpx.RequestError as exc:  # transport failures, undecodable bodies
            detail = str(exc).strip()
            reason = f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
            if not probe:
                self.breaker.record_failure(reason)
            raise ServerUnavailable(
                f"OpenViking server at {self.endpoint} is not reachable ({reason})",
                endpoint=self.endpoint,
            ) from exc
        if not probe:
            self.breaker.record_success()  # it answered, whatever it said
        elapsed_ms = (time.perf_counter() - started) * 1000
        request_id = response.headers.get("x-request-id")
        logger.debug(
            "%s %s -> %s in %.0f ms [%s]",
            method,
            path,
            response.status_code,
            elapsed_ms,
            request_id or "-",
        )
        try:
            body: Any = response.json() if response.content else None
        except ValueError:
            body = response.text
        if not response.is_success:
            raise _error_from(
                response.status_code, body, request_id=request_id, method=method, path=path
            )
        if isinstance(body, dict) and "status" in body:
            if body.get("status") == "error" or body.get("error"):
                error = body.get("error")
                code = error.get("code") if isinstance(error, dict) else None
                raise _error_from(
                    _CODE_STATUS.get(str(code), 500),
                    body,
                    request_id=request_id,
                    method=method,
                    path=path,
                )
            if "result" in body:
                return body["result"]
        if isinstance(body, str):
            raise ServerError(
                f"expected JSON, got {body[:80]!r}",
                code="INVALID_RESPONSE",
                status_code=response.status_code,
                request_id=request_id,
                method=method,
                path=path,
            )
        return body

    @staticmethod
    def _expect_dict(value: Any, what: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise ServerError(
                f"expected an object for {what}, got {type(value).__name__}",
                code="INVALID_RESPONSE",
                status_code=200,
            )
        return value

    # --- system ---------------------------------------------------------------------------------

    async def health(self) -> HealthInfo:
        """``GET /health``; raises when the server is down or unhealthy."""
        body = await self._request("GET", "/health", kind="health")
        info = HealthInfo.model_validate(self._expect_dict(body, "health"))
        if not info.healthy:
            raise ServerError(
                "server reports unhealthy", code="UNAVAILABLE", status_code=503, path="/health"
            )
        return info

    async def _probe_health(self) -> bool:
        """The breaker's background check: does the server answer /health, healthy?"""
        try:
            body = await self._request("GET", "/health", kind="health", probe=True)
        except ClientError:
            return False
        return isinstance(body, dict) and bool(body.get("healthy", True))

    async def system_status(self) -> dict[str, Any]:
        """``GET /api/v1/system/status``: ``{initialized, user, ...}``."""
        body = await self._request("GET", "/api/v1/system/status", kind="read")
        return self._expect_dict(body, "system status")

    async def wait_processed(self, *, timeout: float = 30.0) -> dict[str, Any]:
        """Wait until the server's processing queues (embedding, summaries) are drained.

        A commit's task finishing means memories were *written*; they become findable once
        the embedding queue has processed them. The queues are server-wide, so this is for
        tests, tools and commands that need read-after-write, never for a hook's hot path.
        """
        body = await self._request(
            "POST",
            "/api/v1/system/wait",
            kind="write",
            json={"timeout": timeout},
            timeout=timeout + self.config.connect_timeout,
        )
        return self._expect_dict(body, "queue status")

    # --- sessions -------------------------------------------------------------------------------

    async def create_session(self, session_id: str | None = None) -> SessionInfo:
        body = await self._request(
            "POST", "/api/v1/sessions", kind="write", json={"session_id": session_id}
        )
        return SessionInfo.model_validate(self._expect_dict(body, "session"))

    async def get_session(self, session_id: str) -> SessionInfo:
        """Session metadata; :class:`NotFoundError` when it does not exist."""
        body = await self._request("GET", f"/api/v1/sessions/{_seg(session_id)}", kind="read")
        return SessionInfo.model_validate(self._expect_dict(body, "session"))

    async def delete_session(self, session_id: str) -> None:
        await self._request("DELETE", f"/api/v1/sessions/{_seg(session_id)}", kind="write")

    async def add_message(self, session_id: str, message: Message) -> AddMessagesResult:
        """Add one message; the server creates the session if needed."""
        body = await self._request(
            "POST",
            f"/api/v1/sessions/{_seg(session_id)}/messages",
            kind="write",
            json=message.to_request(),
        )
        result = AddMessagesResult.model_validate(self._expect_dict(body, "add message"))
        if not result.added:
            result.added = 1
        return result

    async def add_messages(self, session_id: str, messages: Sequence[Message]) -> AddMessagesResult:
        """Add messages in order, ``BATCH_LIMIT`` per request.

        Servers without ``/messages/batch`` (404/405 on the first chunk) get one request per
        message. A failure part-way raises; ``message_count`` from ``get_session`` tells how
        many landed, which is how the outbox reconciles before resending.
        """
        total = AddMessagesResult(session_id=session_id)
        if not messages:
            return total
        path = f"/api/v1/sessions/{_seg(session_id)}/messages/batch"
        for start in range(0, len(messages), BATCH_LIMIT):
            chunk = messages[start : start + BATCH_LIMIT]
            try:
                body = await self._request(
                    "POST",
                    path,
                    kind="write",
                    json={"messages": [m.to_request() for m in chunk]},
                )
            except ServerError as exc:
                if start == 0 and self._is_missing_route(exc):
                    return await self._add_one_by_one(session_id, messages)
                raise
            result = AddMessagesResult.model_validate(self._expect_dict(body, "batch add"))
            total.added += result.added or len(chunk)
            total.message_count = result.message_count
            total.pending_tokens = result.pending_tokens
        return total

    @staticmethod
    def _is_missing_route(exc: ServerError) -> bool:
        # 405 is always "no such method here"; a 404 from the router itself carries no
        # details and a generic message ("Not Found", or none: "HTTP 404" from _error_from).
        if exc.status_code == 405:
            return True
        return (
            exc.status_code == 404 and not exc.details and exc.args[0] in ("Not Found", "HTTP 404")
        )

    async def _add_one_by_one(
        self, session_id: str, messages: Sequence[Message]
    ) -> AddMessagesResult:
        total = AddMessagesResult(session_id=session_id)
        for message in messages:
            result = await self.add_message(session_id, message)
            total.added += 1
            total.message_count = result.message_count
            total.pending_tokens = result.pending_tokens
        return total

    async def commit(
        self,
        session_id: str,
        *,
        keep_recent_count: int | None = None,
        enable_working_memory: bool | None = None,
    ) -> CommitResult:
        """Archive the session's messages; memory extraction continues as a server task."""
        payload: dict[str, Any] = {}
        if keep_recent_count is not None:
            payload["keep_recent_count"] = keep_recent_count
        if enable_working_memory is not None:
            payload["enable_working_memory"] = enable_working_memory
        body = await self._request(
            "POST", f"/api/v1/sessions/{_seg(session_id)}/commit", kind="write", json=payload
        )
        data = self._expect_dict(body, "commit")
        data.setdefault("session_id", session_id)
        return CommitResult.model_validate(data)

    async def get_task(self, task_id: str, *, timeout: float | None = None) -> TaskInfo:
        """A background task's state; :class:`NotFoundError` when unknown or expired."""
        body = await self._request(
            "GET", f"/api/v1/tasks/{_seg(task_id)}", kind="read", timeout=timeout
        )
        data = self._expect_dict(body, "task")
        data.setdefault("task_id", task_id)
        return TaskInfo.model_validate(data)

    async def wait_task(
        self, task_id: str, *, timeout: float, poll_interval: float = TASK_POLL_INTERVAL
    ) -> tuple[TaskInfo, bool]:
        """Poll a task until it finishes or ``timeout`` passes: ``(last seen, timed_out)``."""
        give_up = time.monotonic() + timeout
        task = TaskInfo(task_id=task_id)
        while True:
            remaining = give_up - time.monotonic()
            if remaining <= 0:
                return task, True
            poll_timeout = min(self.config.read_timeout, remaining)
            try:
                task = await self.get_task(task_id, timeout=poll_timeout)
            except ServerUnavailable as exc:
                if exc.timed_out and poll_timeout < self.config.read_timeout:
                    return task, True  # the wait's deadline, not the server, ended this poll
                raise
            if task.done:
                return task, False
            await asyncio.sleep(min(poll_interval, max(0.0, give_up - time.monotonic())))

    async def commit_and_wait(
        self,
        session_id: str,
        *,
        timeout: float,
        poll_interval: float = TASK_POLL_INTERVAL,
        keep_recent_count: int | None = None,
        enable_working_memory: bool | None = None,
    ) -> CommitResult:
        """Commit, then poll the extraction task until done or ``timeout`` seconds pass.

        The server has no wait flag. ``result.task`` is the last task state seen and
        ``result.timed_out`` says whether the deadline passed first (the task keeps running
        on the server either way). If polling fails, the accepted commit is still returned,
        with ``result.wait_error`` saying why; only the commit request itself raises.
        """
        started = time.monotonic()
        result = await self.commit(
            session_id,
            keep_recent_count=keep_recent_count,
            enable_working_memory=enable_working_memory,
        )
        if result.task_id:
            remaining = max(0.0, timeout - (time.monotonic() - started))
            try:
                result.task, result.timed_out = await self.wait_task(
                    result.task_id, timeout=remaining, poll_interval=poll_interval
                )
            except ClientError as exc:
                # The commit itself was accepted: report that, with why the wait stopped,
                # rather than raising and inviting the caller to commit a second time.
                result.wait_error = str(exc)
        return result

    async def session_context(
        self, session_id: str, *, token_budget: int | None = None
    ) -> SessionContext:
        body = await self._request(
            "GET",
            f"/api/v1/sessions/{_seg(session_id)}/context",
            kind="read",
            params={"token_budget": token_budget},
        )
        return SessionContext.model_validate(self._expect_dict(body, "session context"))

    async def get_archive(self, session_id: str, archive_id: str) -> Archive:
        """An archive's abstract, overview and raw messages."""
        body = await self._request(
            "GET", f"/api/v1/sessions/{_seg(session_id)}/archives/{_seg(archive_id)}", kind="read"
        )
        data = self._expect_dict(body, "archive")
        data.setdefault("archive_id", archive_id)
        return Archive.model_validate(data)

    # --- search ---------------------------------------------------------------------------------

    async def find(
        self,
        query: str,
        *,
        target_uri: str | Sequence[str] | None = None,
        context_type: str | Sequence[str] | None = None,
        limit: int = 10,
        score_threshold: float | None = None,
        tags: Sequence[str] | None = None,
        level: int | Sequence[int] | None = None,
        timeout: float | None = None,
    ) -> FindResult:
        """Semantic search. ``target_uri`` short forms are resolved to the caller's space."""
        payload: dict[str, Any] = {"query": query, "limit": limit}
        if target_uri is not None:
            if isinstance(target_uri, str):
                payload["target_uri"] = await self.spaces.resolve_uri(target_uri)
            else:
                payload["target_uri"] = [await self.spaces.resolve_uri(u) for u in target_uri]
        if context_type is not None:
            payload["context_type"] = (
                context_type if isinstance(context_type, str) else list(context_type)
            )
        if score_threshold is not None:
            payload["score_threshold"] = score_threshold
        if tags is not None:
            payload["tags"] = list(tags)
        if level is not None:
            payload["level"] = level if isinstance(level, int) else list(level)
        body = await self._request(
            "POST", "/api/v1/search/find", kind="read", json=payload, timeout=timeout
        )
        return FindResult.model_validate(self._expect_dict(body, "find"))

    async def search(
        self,
        query: str,
        *,
        session_id: str | None = None,
        target_uri: str | None = None,
        limit: int = 10,
        score_threshold: float | None = None,
    ) -> FindResult:
        """Session-aware search (``/search/search``, list mode): same hit shape as find."""
        payload: dict[str, Any] = {"query": query, "limit": limit}
        if session_id:
            payload["session_id"] = session_id
        if target_uri is not None:
            payload["target_uri"] = await self.spaces.resolve_uri(target_uri)
        if score_threshold is not None:
            payload["score_threshold"] = score_threshold
        body = await self._request("POST", "/api/v1/search/search", kind="read", json=payload)
        return FindResult.model_validate(self._expect_dict(body, "search"))

    # --- content and filesystem -------------------------------------------------------------

    async def _text(self, path: str, uri: str) -> str:
        body = await self._request("GET", path, kind="read", params={"uri": uri})
        return body if isinstance(body, str) else "" if body is None else str(body)

    async def read(self, uri: str) -> str:
        """Full text (L2) of a file."""
        return await self._text("/api/v1/content/read", await self.spaces.resolve_uri(uri))

    async def abstract(self, uri: str) -> str:
        """The L0 abstract of a directory."""
        return await self._text("/api/v1/content/abstract", await self.spaces.resolve_uri(uri))

    async def overview(self, uri: str) -> str:
        """The L1 overview of a directory."""
        return await self._text("/api/v1/content/overview", await self.spaces.resolve_uri(uri))

    async def write(
        self, uri: str, content: str, *, mode: Literal["replace", "append", "create"] = "replace"
    ) -> dict[str, Any]:
        body = await self._request(
            "POST",
            "/api/v1/content/write",
            kind="write",
            json={"uri": await self.spaces.resolve_uri(uri), "content": content, "mode": mode},
        )
        return body if isinstance(body, dict) else {"result": body}

    async def ls(
        self, uri: str = "viking://", *, recursive: bool = False, limit: int | None = None
    ) -> list[FsEntry]:
        """Directory entries with abstracts (``output=agent``)."""
        body = await self._request(
            "GET",
            "/api/v1/fs/ls",
            kind="read",
            params={
                "uri": await self.spaces.resolve_uri(uri),
                "recursive": str(recursive).lower(),
                "output": "agent",
                "limit": limit,
            },
        )
        return [FsEntry.model_validate(e) for e in _entries(body)]

    async def tree(self, uri: str = "viking://", *, level_limit: int = 3) -> list[FsEntry]:
        body = await self._request(
            "GET",
            "/api/v1/fs/tree",
            kind="read",
            params={
                "uri": await self.spaces.resolve_uri(uri),
                "output": "agent",
                "level_limit": level_limit,
            },
        )
        return [FsEntry.model_validate(e) for e in _entries(body)]

    async def stat(self, uri: str) -> FsEntry:
        """Metadata of one URI; :class:`NotFoundError` when it does not exist."""
        resolved = await self.spaces.resolve_uri(uri)
        body = await self._request("GET", "/api/v1/fs/stat", kind="read", params={"uri": resolved})
        data = self._expect_dict(body, "stat")
        data.setdefault("uri", resolved)
        return FsEntry.model_validate(data)

    async def delete(self, uri: str, *, recursive: bool = False) -> None:
        """``DELETE /api/v1/fs``; a directory needs ``recursive=True`` (else 400)."""
        await self._request(
            "DELETE",
            "/api/v1/fs",
            kind="write",
            params={
                "uri": await self.spaces.resolve_uri(uri),
                "recursive": str(recursive).lower(),
            },
        )

    # --- resources ------------------------------------------------------------------------------

    async def add_resource(
        self,
        source: str | Path,
        *,
        to: str | None = None,
        reason: str = "",
        wait: bool = False,
    ) -> dict[str, Any]:
        """Ingest an http(s) URL, or a local file uploaded first through ``temp_upload``.

        The server refuses host file paths, so a local path is never sent as ``path``.
        """
        payload: dict[str, Any] = {"reason": reason, "wait": wait}
        text = str(source)
        is_url = isinstance(source, str) and text.lower().startswith(("http://", "https://"))
        # Read a local file first: a missing one is a ValueError before any request is sent.
        local = None if is_url else await _read_upload(Path(source))
        if to is not None:
            payload["to"] = await self.spaces.resolve_uri(to)
        if local is None:
            payload["path"] = text
        else:
            payload["temp_file_id"] = await self._upload(*local)
        body = await self._request("POST", "/api/v1/resources", kind="write", json=payload)
        return body if isinstance(body, dict) else {"result": body}

    async def upload_temp_file(self, path: Path) -> str:
        """Upload a local file for a later ``add_resource``; returns its ``temp_file_id``."""
        return await self._upload(*await _read_upload(path))

    async def _upload(self, name: str, data_bytes: bytes, content_type: str) -> str:
        body = await self._request(
            "POST",
            "/api/v1/resources/temp_upload",
            kind="write",
            files={"file": (name, data_bytes, content_type)},
        )
        data = self._expect_dict(body, "temp upload")
        temp_id = data.get("temp_file_id")
        if not isinstance(temp_id, str) or not temp_id:
            raise ServerError(
                "temp_upload returned no temp_file_id", code="INVALID_RESPONSE", status_code=200
            )
        return temp_id


def _read_local(path: Path) -> tuple[Path, bytes]:
    path = path.expanduser()
    return path, path.read_bytes()


async def _read_upload(path: Path) -> tuple[str, bytes, str]:
    """``(file name, bytes, content type)`` of a local file; ValueError when unreadable."""
    try:
        path, data_bytes = await asyncio.to_thread(_read_local, path)
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    content_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return path.name, data_bytes, content_type


def _entries(body: Any) -> list[dict[str, Any]]:
    """``fs/ls`` and ``fs/tree`` return a list, or an object wrapping one."""
    if isinstance(body, list):
        return [e for e in body if isinstance(e, dict)]
    if isinstance(body, dict):
        for key in ("entries", "items", "children", "result"):
            value = body.get(key)
            if isinstance(value, list):
                return [e for e in value if isinstance(e, dict)]
    return []
