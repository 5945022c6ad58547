"""Resources: temporary uploads and ``add_resource`` (an http(s) URL or an upload).

A resource becomes ``viking://resources/<stem>/<stem>.md`` (``<stem>_1``, ``_2``... when the
name is taken), with directory summaries, searchable as ``context_type: "resource"``. Like the
real server, host file paths are refused (403) and so are URLs whose host resolves to a
private, loopback or link-local address (an SSRF guard), unless the server was created with
``allow_private_networks=True`` (tests that serve documents from loopback do that).
"""

from __future__ import annotations

import asyncio
import html
import ipaddress
import re
import socket
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx

from .auth import Identity
from .errors import ApiError, invalid_argument, permission_denied
from .paths import to_uri
from .schemas import AddResourceRequest
from .store import Store
from .tasks import TaskManager
from .util import new_id, now
from .vfs import Vfs

__all__ = ["FETCH_TIMEOUT", "MAX_RESOURCE_BYTES", "Resources", "html_to_text"]

FETCH_TIMEOUT = 30.0  # seconds for one remote resource, redirects included
MAX_RESOURCE_BYTES = 20 * 1024 * 1024
MAX_REDIRECTS = 5
HOST_PATH_REFUSED = (
    "HTTP server only accepts remote resource URLs or temp-uploaded files; direct host "
    "filesystem paths are not allowed."
)
UPLOAD_REFUSED = "HTTP server only accepts regular files from the upload temp directory."

_DROP = re.compile(r"<(script|style|noscript|template)\b.*?</\1\s*>", re.S | re.I)
_TITLE = re.compile(r"<title\b[^>]*>(.*?)</title\s*>", re.S | re.I)
_HEADING = re.compile(r"<h([1-6])\b[^>]*>(.*?)</h\1\s*>", re.S | re.I)
_BLOCK = re.compile(r"</?(p|div|br|li|tr|section|article|ul|ol|table|pre|blockquote)\b[^>]*>", re.I)
_TAG = re.compile(r"<[^>]+>")


def html_to_text(page: str) -> str:
    """Readable markdown-ish text of an HTML page (headings kept as ``#`` lines)."""
    title = _TITLE.search(page)
    body = _DROP.sub(" ", page)
    body = _TITLE.sub(" ", body)
    body = _HEADING.sub(lambda m: f"\n\n{'#' * int(m.group(1))} {m.group(2)}\n\n", body)
    body = _BLOCK.sub("\n", body)
    text = html.unescape(_TAG.sub(" ", body))
    lines = [" ".join(line.split()) for line in text.splitlines()]
    out = "\n".join(line for line in lines if line)
    if title and title.group(1).strip():
        out = f"# {html.unescape(title.group(1).strip())}\n\n{out}"
    return out.strip() + "\n"


def _stem(name: str) -> str:
    stem = PurePosixPath(name).stem or "resource"
    return re.sub(r"[^\w.-]+", "_", stem).strip("._") or "resource"


class Resources:
    """Temporary uploads and resource ingestion."""

    def __init__(
        self,
        store: Store,
        vfs: Vfs,
        tasks: TaskManager,
        *,
        allow_private_networks: bool = False,
        transport: httpx.AsyncBaseTransport | None = None,
    ):
        self._store = store
        self._vfs = vfs
        self._tasks = tasks
        self._allow_private = allow_private_networks
        self._transport = transport

    def save_upload(self, identity: Identity, filename: str, data: bytes) -> str:
        suffix = PurePosixPath(filename).suffix.lower()
        if not re.fullmatch(r"\.[a-z0-9]{1,10}", suffix):
            suffix = ""
        temp_id = f"upload_{new_id()}{suffix}"
        self._store.run(
            "INSERT INTO uploads VALUES (?, ?, ?, ?, ?, ?)",
            (temp_id, identity.account, identity.user, filename or "upload", data, now()),
        )
        return temp_id

    async def _check_public(self, url: str) -> None:
        if self._allow_private:
            return
        parts = urlsplit(url)
        host = parts.hostname or ""
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, parts.port or 0, type=socket.SOCK_STREAM
            )
        except OSError as exc:
            raise invalid_argument(f"Cannot resolve host '{host}': {exc}") from None
        for info in infos:
            address = str(info[4][0]).split("%", 1)[0]
            if not ipaddress.ip_address(address).is_global:
                raise permission_denied(
                    "HTTP server only accepts public remote resource targets; host "
                    f"'{host}' resolves to non-public address '{address}'. To allow this, "
                    "create the reference server with allow_private_networks=True."
                )

    async def _fetch(self, url: str) -> tuple[str, bytes, str]:
        """``(final url, body, content type)``; every redirect hop is checked too."""
        async with httpx.AsyncClient(
            transport=self._transport, timeout=FETCH_TIMEOUT, trust_env=False
        ) as http:
            for _ in range(MAX_REDIRECTS + 1):
                await self._check_public(url)
                try:
                    response = await http.get(url, follow_redirects=False)
                except httpx.HTTPError as exc:
                    raise invalid_argument(f"Failed to fetch {url}: {type(exc).__name__}") from None
                if response.is_redirect and "location" in response.headers:
                    url = urljoin(url, response.headers["location"])
                    if urlsplit(url).scheme not in ("http", "https"):
                        raise invalid_argument(f"Refusing to follow a redirect to {url}")
                    continue
                if response.status_code >= 400:
                    raise invalid_argument(f"Failed to fetch {url}: HTTP {response.status_code}")
                if len(response.content) > MAX_RESOURCE_BYTES:
                    raise invalid_argument(f"Resource too large: {url}")
                return url, response.content, response.headers.get("content-type", "")
        raise invalid_argument(f"Too many redirects: {url}")

    def _upload(self, identity: Identity, temp_id: str) -> tuple[str, bytes]:
        row = self._store.one(
            "SELECT filename, data FROM uploads WHERE temp_file_id = ? AND account = ? "
            "AND user = ?",
            (temp_id, identity.account, identity.user),
        )
        if row is None:
            raise permission_denied(UPLOAD_REFUSED)
        return str(row["filename"]), bytes(row["data"])

    def _root(self, identity: Identity, request: AddResourceRequest, stem: str) -> str:
        if request.to:
            return self._vfs.resolve(identity, request.to, "write")
        base = "resources"
        if request.parent:
            base = self._vfs.resolve(identity, request.parent, "write")
        root, n = f"{base}/{stem}", 0
        while self._vfs.get(identity.account, root) is not None:
            n += 1
            root = f"{base}/{stem}_{n}"
        return root

    async def add(self, identity: Identity, request: AddResourceRequest) -> dict[str, Any]:
        if request.path:
            source = request.path
            if urlsplit(source).scheme.lower() not in ("http", "https"):
                raise permission_denied(HOST_PATH_REFUSED)
            final, data, content_type = await self._fetch(source)
            filename = PurePosixPath(urlsplit(final).path).name or urlsplit(final).hostname or ""
        else:
            filename, data = self._upload(identity, request.temp_file_id or "")
            source, content_type = filename, ""
        if b"\x00" in data[:4096]:
            raise ApiError(400, "INVALID_ARGUMENT", f"Unsupported binary resource: {filename}")
        text = data.decode("utf-8", errors="replace")
        if "html" in content_type.lower() or filename.lower().endswith((".html", ".htm")):
            text = html_to_text(text)
        stem = _stem(request.source_name or filename)
        root = self._root(identity, request, stem)
        self._vfs.write(identity.account, f"{root}/{stem}.md", text, "replace", tags=request.tags)
        root_uri = to_uri(root)
        result = {"status": "success", "source_path": source, "root_uri": root_uri}
        task_id = self._tasks.record(identity, "add_resource", root_uri, dict(result))
        return {
            "status": "success",
            "task_id": task_id,
            "source_path": source,
            "root_uri": root_uri,
        }
