"""The seven ``viking_*`` tools through the extension, against the reference server in process:
exact schemas, argument validation, what each tool sends and answers, and the answers when
OpenViking may not be called (bypassed session, open breaker)."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from ov_agent_ext import OpenVikingExtension, OVConfig, ToolCall, Turn
from ov_agent_ext.client import OVClient
from ov_agent_ext.errors import NotFoundError
from ov_agent_ext.models import Message
from ov_agent_ext.server import create_app
from ov_agent_ext.sync import identity_of
from ov_agent_ext.tools import TOOL_NAMES, ToolBox

URL = "http://ref"
SESSION = "pi-t1"
PREF = "viking://user/alice/memories/preferences/alice/python_packaging.md"
FALCON = "viking://user/alice/memories/entities/projects/falcon.md"

# --- helpers ------------------------------------------------------------------------------------


@dataclass
class Sent:
    method: str
    path: str
    params: dict[str, str]
    body: Any


@dataclass
class Net(httpx.AsyncBaseTransport):
    """The reference server behind a switch (down: connection refused), recording requests.

    ``on_request`` runs before each request reaches the server (to look at local state)."""

    inner: httpx.AsyncBaseTransport
    up: bool = True
    sent: list[Sent] = field(default_factory=list)
    on_request: Callable[[Sent], None] | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        raw = await request.aread()
        body: Any = None
        if request.headers.get("content-type", "").startswith("application/json"):
            body = json.loads(raw)
        sent = Sent(request.method, request.url.path, dict(request.url.params), body)
        self.sent.append(sent)
        if self.on_request is not None:
            self.on_request(sent)
        if not self.up:
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        return await self.inner.handle_async_request(request)

    def since(self, mark: int) -> list[Sent]:
        return self.sent[mark:]


def make_config(tmp_path: Path, **settings: Any) -> OVConfig:
    settings.setdefault("write_queue_flush_interval", 60_000)  # the tests flush explicitly
    settings.setdefault("commit_token_threshold", 0)
    return OVConfig(
        endpoint=URL, account="acme", user="alice", state_dir=tmp_path / "state", **settings
    )


def _text(message: dict[str, Any]) -> str:
    if message.get("content"):
        return str(message["content"])
    return " ".join(str(p.get("text", "")) for p in message.get("parts", []) if "text" in p)


async def session_texts(reader: OVClient, session_id: str) -> list[str]:
    """Every message the server holds for a session (archived first), as text."""
    try:
        info = await reader.get_session(session_id)
    except NotFoundError:
        return []
    texts: list[str] = []
    for number in range(1, info.commit_count + 1):
        archive = await reader.get_archive(session_id, f"archive_{number:03d}")
        texts += [_text(m) for m in archive.messages]
    context = await reader.session_context(session_id, token_budget=10**6)
    return texts + [_text(m) for m in context.messages]


async def exists(reader: OVClient, uri: str) -> bool:
    try:
        await reader.stat(uri)
    except NotFoundError:
        return False
    return True


@dataclass
class Env:
    tmp: Path
    app: Any
    net: Net
    reader: OVClient
    ext: OpenVikingExtension
    config: OVConfig

    async def call(self, name: str, arguments: Any) -> str:
        answer = await self.ext.call_tool(name, arguments)
        assert isinstance(answer, str)
        return answer

    async def seed(self) -> None:
        """Two memories (a preference and a project fact) from another session's commit."""
        await self.reader.add_messages(
            "seed",
            [
                Message(role="user", content="I prefer uv over pip for Python packaging."),
                Message(role="assistant", content="Noted."),
                Message(role="user", content="Project Falcon uses PostgreSQL 16 in production."),
                Message(role="assistant", content="Got it."),
            ],
        )
        commit = await self.reader.commit_and_wait("seed", timeout=10)
        assert commit.task is not None
        assert commit.task.memories_extracted == 2
        assert await exists(self.reader, PREF)
        assert await exists(self.reader, FALCON)


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    app = create_app(tmp_path / "srv")
    net = Net(httpx.ASGITransport(app=app))
    config = make_config(tmp_path)
    reader = OVClient(config, transport=httpx.ASGITransport(app=app))
    ext = OpenVikingExtension(config, transport=net)
    (tmp_path / "work").mkdir()
    await ext.session_start("t1", cwd=str(tmp_path / "work"))
    assert ext.session_id == SESSION
    try:
        yield Env(tmp_path, app, net, reader, ext, config)
    finally:
        await ext.client.breaker.wait_probe()
        await ext.aclose()
        await reader.aclose()


@pytest.fixture(autouse=True)
def _package_log_level() -> Iterator[None]:
    """An extension sets the process-wide ``ov_agent_ext`` logger level (its logLevel):
    put it back, so later tests that capture the package's logs are not affected."""
    logger = logging.getLogger("ov_agent_ext")
    level = logger.level
    yield
    logger.setLevel(level)


# --- schemas ------------------------------------------------------------------------------------

DESCRIPTIONS = {
    "viking_search": (
        "Semantic search over the OpenViking knowledge base. Returns ranked results with "
        "viking:// URIs and abstracts. Use when you need to recall past decisions, user "
        "preferences, or project-specific knowledge not in current context."
    ),
    "viking_read": (
        "Read content at a viking:// URI. Three detail levels: 'abstract' (~100 tokens), "
        "'overview' (~2k tokens), 'full' (complete). Start with abstract, escalate to "
        "overview/full when needed."
    ),
    "viking_browse": (
        "Browse the OpenViking knowledge store like a filesystem. List directory contents, get "
        "metadata, or view the hierarchy tree."
    ),
    "viking_remember": (
        "Store a fact or memory in OpenViking. Stored as a session message and extracted into "
        "long-term memory on commit. Use for important information the agent should remember: "
        "preferences, decisions, gotchas, lessons learned."
    ),
    "viking_forget": (
        "Delete a memory by URI or search for a specific memory and remove it. Use to correct "
        "outdated or wrong information in the knowledge base."
    ),
    "viking_add_resource": (
        "Ingest a URL, file path, or document into the OpenViking knowledge base. OV "
        "auto-processes it into L0/L1/L2 tiers and indexes it for semantic search. Use for "
        "bootstrapping knowledge or adding reference documentation."
    ),
    "viking_archive_expand": (
        "Expand an archived session back into raw messages. Use when the archive summary is "
        "too coarse and you need the detailed conversation history. Returns the full message "
        "transcript for that archive."
    ),
}


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": properties,
        "required": required,
    }


PARAMETERS = {
    "viking_search": _object(
        {
            "query": {"type": "string", "description": "Search query", "minLength": 1},
            "scope": {
                "type": "string",
                "description": "Viking URI prefix to scope search (e.g., 'viking://resources/')",
            },
            "limit": {
                "type": "integer",
                "description": "Max results (default: 10)",
                "minimum": 1,
                "maximum": 50,
            },
        },
        ["query"],
    ),
    "viking_read": _object(
        {
            "uri": {"type": "string", "description": "viking:// URI to read"},
            "level": {
                "type": "string",
                "enum": ["abstract", "overview", "full"],
                "default": "abstract",
                "description": "Detail level: 'abstract', 'overview' or 'full'",
            },
        },
        ["uri"],
    ),
    "viking_browse": _object(
        {
            "action": {
                "type": "string",
                "enum": ["list", "stat"],
                "description": "'list' a directory or 'stat' a URI",
            },
            "uri": {"type": "string", "description": "viking:// URI (default: 'viking://')"},
        },
        ["action"],
    ),
    "viking_remember": _object(
        {
            "content": {
                "type": "string",
                "description": "The fact or observation to store",
                "minLength": 1,
            },
            "category": {
                "type": "string",
                "description": (
                    "Category hint: 'preference', 'entity', 'event', 'case', 'pattern'"
                ),
            },
        },
        ["content"],
    ),
    "viking_forget": _object(
        {
            "uri": {"type": "string", "description": "Exact viking:// URI to delete"},
            "query": {
                "type": "string",
                "description": "Search query — deletes the strongest match if score > 0.8",
            },
        },
        [],
    ),
    "viking_add_resource": _object(
        {
            "url": {"type": "string", "description": "URL or file path to ingest", "minLength": 1},
            "reason": {
                "type": "string",
                "description": "Why this resource is relevant (improves indexing)",
            },
        },
        ["url"],
    ),
    "viking_archive_expand": _object(
        {
            "archive_id": {
                "type": "string",
                "description": "Archive ID to expand (from session context)",
            },
            "session_id": {"type": "string", "description": "OV session ID to expand"},
        },
        [],
    ),
}


def _keys(schema: Any) -> set[str]:
    if isinstance(schema, dict):
        return set(schema) | {k for v in schema.values() for k in _keys(v)}
    if isinstance(schema, list):
        return {k for v in schema for k in _keys(v)}
    return set()


def test_openai_schemas_are_exactly_the_specs_tools() -> None:
    expected = [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": DESCRIPTIONS[name],
                "parameters": PARAMETERS[name],
            },
        }
        for name in TOOL_NAMES
    ]
    assert ToolBox.schemas("openai") == expected
    assert ToolBox.schemas() == expected  # openai is the default
    assert list(TOOL_NAMES) == list(DESCRIPTIONS)


@pytest.mark.parametrize(("format", "key"), [("anthropic", "input_schema"), ("mcp", "inputSchema")])
def test_anthropic_and_mcp_shapes(format: Any, key: str) -> None:
    assert ToolBox.schemas(format) == [
        {"name": name, "description": DESCRIPTIONS[name], key: PARAMETERS[name]}
        for name in TOOL_NAMES
    ]


def test_schemas_are_plain_json_schema() -> None:
    """No pydantic noise a model would read: no titles, no anyOf-with-null, no null defaults;
    every property has a type and a description; JSON-serializable as is."""
    for tool in ToolBox.schemas("mcp"):
        schema = tool["inputSchema"]
        assert not {"title", "anyOf", "$defs"} & _keys(schema)
        for prop in schema["properties"].values():
            assert prop["type"] in ("string", "integer")
            assert prop["description"]
            assert prop.get("default", "") is not None
        json.dumps(tool)


def test_extension_exposes_the_same_schemas(tmp_path: Path) -> None:
    ext = OpenVikingExtension(make_config(tmp_path))
    for format in ("openai", "anthropic", "mcp"):
        assert ext.tool_schemas(format) == ToolBox.schemas(format)


def test_an_unknown_format_raises() -> None:
    with pytest.raises(ValueError, match="unknown tool format 'gemini'"):
        ToolBox.schemas("gemini")  # type: ignore[arg-type]


# --- argument validation --------------------------------------------------------------------------


INVALID = [
    ("viking_search", {}, "query: Field required"),
    ("viking_search", None, "query: Field required"),
    ("viking_search", {"query": ""}, "query: String should have at least 1 character"),
    ("viking_search", {"query": "x", "limit": "many"}, "limit: Input should be a valid"),
    ("viking_search", {"query": "x", "limit": 0}, "limit: Input should be greater than"),
    ("viking_search", {"query": "x", "limit": 51}, "limit: Input should be less than"),
    ("viking_search", {"query": 3}, "query: Input should be a valid string"),
    ("viking_search", {"qury": "x"}, "qury: Extra inputs are not permitted"),
    ("viking_read", {"uri": "viking://x", "depth": 2}, "depth: Extra inputs are not permitted"),
    ("viking_read", {"uri": "viking://x", "level": "all"}, "level: Input should be 'abstract'"),
    ("viking_read", {"level": "full"}, "uri: Field required"),
    ("viking_browse", {"action": "tree"}, "action: Input should be 'list' or 'stat'"),
    ("viking_browse", {"uri": "viking://"}, "action: Field required"),
    ("viking_remember", {"content": ""}, "content: String should have at least 1 character"),
    ("viking_remember", {"content": "x", "category": 5}, "category: Input should be a valid"),
    ("viking_forget", {"uri": ["a"]}, "uri: Input should be a valid string"),
    ("viking_add_resource", {"reason": "docs"}, "url: Field required"),
    ("viking_archive_expand", {"archive": "archive_001"}, "archive: Extra inputs are not"),
    ("viking_search", "[1, 2]", "arguments: Input should be a valid dictionary"),
    ("viking_search", '"text"', "arguments: Input should be a valid dictionary"),
]


async def test_invalid_arguments_are_an_error_result_naming_the_field(env: Env) -> None:
    mark = len(env.net.sent)
    for name, arguments, expected in INVALID:
        answer = await env.call(name, arguments)
        assert answer.startswith(f"Error: invalid arguments for {name}: "), (arguments, answer)
        assert expected in answer, (arguments, answer)
    assert env.net.since(mark) == []  # refused before any request


async def test_every_problem_is_listed(env: Env) -> None:
    answer = await env.call("viking_search", {"limit": "x", "extra": 1})
    assert answer.startswith("Error: invalid arguments for viking_search: ")
    for field_name in ("query:", "limit:", "extra:"):
        assert field_name in answer


async def test_arguments_as_a_json_string(env: Env) -> None:
    await env.seed()
    answer = await env.call("viking_search", '{"query": "python packaging", "limit": 3}')
    assert PREF in answer
    assert env.net.sent[-1].body["limit"] == 3
    # An empty string is "no arguments", which is fine for a tool without required ones.
    assert "no archives yet" in await env.call("viking_archive_expand", "  ")


async def test_invalid_json_is_an_error_result(env: Env) -> None:
    mark = len(env.net.sent)
    answer = await env.call("viking_search", '{"query": "x"')
    assert answer.startswith("Error: viking_search arguments are not valid JSON (")
    assert env.net.since(mark) == []


async def test_an_unknown_tool_lists_the_tools(env: Env) -> None:
    answer = await env.call("viking_delete_everything", {})
    assert answer == (
        "Error: unknown tool 'viking_delete_everything'; available: viking_search, viking_read, "
        "viking_browse, viking_remember, viking_forget, viking_add_resource, "
        "viking_archive_expand"
    )


async def test_a_server_error_is_an_error_result_not_an_exception(env: Env) -> None:
    def refuse(sent: Sent) -> None:
        if sent.path == "/api/v1/search/find":
            raise httpx.RemoteProtocolError("server hung up")

    env.net.on_request = refuse
    answer = await env.call("viking_search", {"query": "anything"})
    assert answer.startswith("Error: viking_search failed: ")
    assert "not reachable" in answer


async def test_a_malformed_answer_or_a_bug_is_an_error_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def server(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/health":
            return httpx.Response(200, json={"status": "ok", "healthy": True})
        if request.url.path == "/api/v1/search/find":
            bad = {"memories": [{"uri": 5, "score": "high"}]}
            return httpx.Response(200, json={"status": "ok", "result": bad})
        if request.url.path == "/api/v1/fs/ls":
            return httpx.Response(200, json={"status": "ok", "result": [{"isDir": "maybe"}]})
        return httpx.Response(200, json={"status": "ok", "result": {}})

    ext = OpenVikingExtension(make_config(tmp_path), transport=httpx.MockTransport(server))
    try:
        await ext.session_start("m1", cwd=str(tmp_path))
        answer = await ext.call_tool("viking_search", {"query": "x", "scope": "viking://resources"})
        assert answer.startswith(
            "Error: viking_search failed: OpenViking answered in an unexpected shape (FindResult: "
        )
        answer = await ext.call_tool("viking_browse", {"action": "list", "uri": "viking://x"})
        assert answer.startswith("Error: viking_browse failed: OpenViking answered in an ")

        async def broken(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("a bug in the handler")

        monkeypatch.setattr(ext.client, "stat", broken)
        answer = await ext.call_tool("viking_read", {"uri": "viking://resources/a"})
        assert answer == (
            "Error: viking_read failed unexpectedly: RuntimeError: a bug in the handler"
        )
    finally:
        await ext.aclose()


# --- viking_search ------------------------------------------------------------------------------


async def test_search_resolves_the_default_scope_and_lists_uri_score_abstract(env: Env) -> None:
    await env.seed()
    mark = len(env.net.sent)
    answer = await env.call("viking_search", {"query": "python packaging"})
    finds = [s for s in env.net.since(mark) if s.path == "/api/v1/search/find"]
    assert [f.body for f in finds] == [
        {"query": "python packaging", "limit": 10, "target_uri": "viking://user/alice/memories"}
    ]
    lines = answer.splitlines()
    assert re.fullmatch(r"\d+ result\(s\) for 'python packaging':", lines[0])
    at = next(i for i, line in enumerate(lines) if line.endswith(PREF))
    assert re.fullmatch(rf"- \[memory 0\.\d\d\] {re.escape(PREF)}", lines[at])
    assert "I prefer uv over pip for Python packaging." in lines[at + 1]
    # The strongest hit comes first.
    assert lines[1].endswith(PREF)


async def test_search_short_scopes_resolve_and_full_ones_pass(env: Env) -> None:
    await env.seed()
    cases = {
        "viking://user/memories/preferences": "viking://user/alice/memories/preferences",
        "viking://user/alice/memories/entities": "viking://user/alice/memories/entities",
        "viking://resources/": "viking://resources/",
    }
    for scope, sent in cases.items():
        mark = len(env.net.sent)
        await env.call("viking_search", {"query": "falcon database", "scope": scope, "limit": 2})
        (find,) = [s for s in env.net.since(mark) if s.path == "/api/v1/search/find"]
        assert find.body["target_uri"] == sent
        assert find.body["limit"] == 2


async def test_search_without_results_says_so(env: Env) -> None:
    answer = await env.call("viking_search", {"query": "falcon database"})
    assert answer == "No results for 'falcon database' in viking://user/alice/memories."
    answer = await env.call("viking_search", {"query": "runbook", "scope": "viking://resources/"})
    assert answer == "No results for 'runbook' in viking://resources/."


async def test_search_finds_resources_in_their_scope(env: Env) -> None:
    doc = env.tmp / "work" / "runbook.md"
    doc.write_text("# Falcon runbook\nRestart the Falcon service with make restart.\n")
    assert "viking://resources/runbook" in await env.call("viking_add_resource", {"url": str(doc)})
    answer = await env.call(
        "viking_search", {"query": "restart falcon service", "scope": "viking://resources/"}
    )
    assert "[resource " in answer
    assert "viking://resources/runbook/runbook.md" in answer


# --- viking_read --------------------------------------------------------------------------------


async def test_read_abstract_and_overview_of_a_directory(env: Env) -> None:
    await env.seed()
    mark = len(env.net.sent)
    abstract = await env.call("viking_read", {"uri": "viking://user/memories"})
    assert abstract == await env.reader.abstract("viking://user/alice/memories")
    assert abstract.strip()
    assert "/api/v1/content/abstract" in [s.path for s in env.net.since(mark)]

    mark = len(env.net.sent)
    overview = await env.call(
        "viking_read", {"uri": "viking://user/memories/preferences/alice", "level": "overview"}
    )
    assert overview == await env.reader.overview("viking://user/alice/memories/preferences/alice")
    assert "python_packaging" in overview
    assert "/api/v1/content/overview" in [s.path for s in env.net.since(mark)]


async def test_read_a_file_gives_its_head_and_full_gives_all(env: Env) -> None:
    body = "# Falcon handbook\n" + "".join(
        f"Step {i}: check the Falcon replica number {i} before the deploy.\n" for i in range(150)
    )
    assert len(body) > 4000
    doc = env.tmp / "work" / "handbook.md"
    doc.write_text(body)
    await env.call("viking_add_resource", {"url": str(doc)})
    uri = "viking://resources/handbook/handbook.md"

    full = await env.call("viking_read", {"uri": uri, "level": "full"})
    assert full.strip() == body.strip()
    abstract = await env.call("viking_read", {"uri": uri})
    assert abstract.endswith("\n… (use level 'full')")
    head = abstract.removesuffix("\n… (use level 'full')")
    assert full.startswith(head)
    assert 300 < len(head) <= 400
    overview = await env.call("viking_read", {"uri": uri, "level": "overview"})
    assert overview.endswith("\n… (use level 'full')")
    assert full.startswith(overview.removesuffix("\n… (use level 'full')"))
    assert 3900 < len(overview) < 4100

    await env.seed()
    # A short file is returned whole at every level.
    for level in ("abstract", "overview", "full"):
        text = await env.call("viking_read", {"uri": PREF, "level": level})
        assert "I prefer uv over pip for Python packaging." in text
        assert "use level 'full'" not in text


async def test_read_a_missing_uri_is_an_error(env: Env) -> None:
    missing = "viking://user/memories/nope.md"
    assert await env.call("viking_read", {"uri": missing}) == f"Error: {missing} does not exist"
    answer = await env.call("viking_read", {"uri": missing, "level": "full"})
    assert answer.startswith("Error: viking_read failed: ")
    assert "viking://user/alice/memories/nope.md" in answer


# --- viking_browse ------------------------------------------------------------------------------


async def test_browse_list(env: Env) -> None:
    await env.seed()
    answer = await env.call("viking_browse", {"action": "list", "uri": "viking://user/memories"})
    assert answer.splitlines() == [
        "viking://user/memories (2 entries):",
        "- viking://user/alice/memories/entities (dir) — Entities memories: projects.",
        "- viking://user/alice/memories/preferences (dir) — Preferences memories: alice.",
    ]
    root = await env.call("viking_browse", {"action": "list"})
    assert root.startswith("viking:// (")
    assert "- viking://user (dir)" in root
    files = await env.call(
        "viking_browse", {"action": "list", "uri": "viking://user/memories/entities/projects"}
    )
    assert files.splitlines()[1:] == [f"- {FALCON} (file)"]


async def test_browse_stat(env: Env) -> None:
    await env.seed()
    stat = json.loads(await env.call("viking_browse", {"action": "stat", "uri": PREF}))
    assert stat["uri"] == PREF
    assert stat["isDir"] is False
    assert stat["size"] > 0
    directory = json.loads(
        await env.call("viking_browse", {"action": "stat", "uri": "viking://user/memories"})
    )
    assert directory["uri"] == "viking://user/alice/memories"
    assert directory["isDir"] is True
    missing = await env.call("viking_browse", {"action": "stat", "uri": "viking://user/nope"})
    assert missing.startswith("Error: viking_browse failed: ")


# --- viking_remember ------------------------------------------------------------------------------


async def test_remember_is_durable_before_any_request_and_says_sent(env: Env) -> None:
    outbox, identity = env.ext.sync.outbox, identity_of(env.config)  # type: ignore[union-attr]
    queued_at_first_request: list[list[Any]] = []

    def look(sent: Sent) -> None:
        if not queued_at_first_request:
            queued_at_first_request.append(
                [m for e in outbox.head(identity, SESSION, max_messages=100) for m in e.payload]
            )

    env.net.on_request = look
    answer = await env.call(
        "viking_remember",
        {"content": "The staging DB password rotates monthly.", "category": "event"},
    )
    assert answer.startswith("Remembered: sent to OpenViking")
    text = "Please remember (event): The staging DB password rotates monthly."
    assert [_text(m) for m in queued_at_first_request[0]] == [text]
    assert outbox.stats(identity).pending == 0
    assert await session_texts(env.reader, SESSION) == [text]


async def test_remember_while_down_is_queued_and_delivered_later(env: Env) -> None:
    env.ext.client.breaker.base_delay = 60.0  # no probe on its own during the test
    env.net.up = False
    answer = await env.call("viking_remember", {"content": "I prefer tabs over spaces."})
    assert answer.startswith("Queued: saved locally and will be sent to OpenViking when it is ")
    assert "Connection refused" in answer
    assert env.ext.status().pending == 1
    assert await session_texts(env.reader, SESSION) == []

    env.net.up = True
    env.ext.client.breaker.retry_at = 0.0  # the breaker's window has passed: probe now
    env.ext.client.breaker.allow()
    await env.ext.client.breaker.wait_probe()
    assert not env.ext.client.breaker.is_open
    report = await env.ext.sync.flush()  # type: ignore[union-attr]
    assert report.pending == 0
    assert await session_texts(env.reader, SESSION) == [
        "Please remember: I prefer tabs over spaces."
    ]


async def test_remember_is_refused_in_an_incognito_session(tmp_path: Path) -> None:
    app = create_app(tmp_path / "srv")
    net = Net(httpx.ASGITransport(app=app))
    ext = OpenVikingExtension(make_config(tmp_path), transport=net)
    try:
        await ext.session_start("quiet", cwd=str(tmp_path), incognito=True)
        mark = len(net.sent)
        answer = await ext.call_tool("viking_remember", {"content": "I prefer tabs."})
        assert answer.startswith("Error: remembering needs an active session")
        assert net.since(mark) == []
        assert ext.status().pending == 0
    finally:
        await ext.aclose()


# --- viking_forget ------------------------------------------------------------------------------


async def test_forget_by_uri_deletes_a_memory(env: Env) -> None:
    await env.seed()
    answer = await env.call("viking_forget", {"uri": PREF})
    assert answer == f"Deleted {PREF}."
    assert not await exists(env.reader, PREF)
    assert await exists(env.reader, FALCON)
    # The short form resolves to the caller's space.
    short = "viking://user/memories/entities/projects/falcon.md"
    assert await env.call("viking_forget", {"uri": short}) == f"Deleted {FALCON}."
    assert not await exists(env.reader, FALCON)


NOT_MEMORIES = [
    "viking://resources/handbook/handbook.md",
    "viking://resources/handbook",
    "viking://agent/skills/deploy/SKILL.md",
    "viking://agent/skills/memories/SKILL.md",  # a skill that happens to be named memories
    "viking://user/sessions/pi-t1/messages.jsonl",
    "viking://user/alice/sessions/pi-t1/history/archive_001/messages.jsonl",
    "viking://user/alice/memories/.abstract.md",
    "viking://user/alice/memories/preferences/.overview.md",
    "viking://user/alice/memories/../sessions/pi-t1/messages.jsonl",
    "viking://user/alice/profile.md",
    "/etc/passwd",
    "viking://",
]


async def test_forget_refuses_anything_but_a_memory(env: Env) -> None:
    """Resources, skills, sessions, summaries, profile: refused before any stat or delete,
    whether they exist or not."""
    doc = env.tmp / "work" / "handbook.md"
    doc.write_text("# Handbook\nAsk before deploying.\n")
    await env.call("viking_add_resource", {"url": str(doc)})
    await env.ext.turn_end(Turn(1, user="Remember that deploys need approval.", assistant="Ok."))
    await env.ext.commit(wait=True)
    await env.seed()
    mark = len(env.net.sent)
    for uri in NOT_MEMORIES:
        answer = await env.call("viking_forget", {"uri": uri})
        assert answer.startswith("Error: refusing to delete "), (uri, answer)
        assert "viking_forget deletes memories only" in answer
    assert not [
        s for s in env.net.since(mark) if s.path == "/api/v1/fs/stat" or s.method == "DELETE"
    ]
    assert await exists(env.reader, "viking://resources/handbook/handbook.md")
    assert await exists(env.reader, "viking://user/alice/memories/.abstract.md")


async def test_forget_refuses_a_directory(env: Env) -> None:
    await env.seed()
    for uri in ("viking://user/memories", "viking://user/alice/memories/preferences/alice"):
        mark = len(env.net.sent)
        answer = await env.call("viking_forget", {"uri": uri})
        assert answer.startswith("Error: viking://user/alice/memories")
        assert "is a directory; forget one memory file at a time." in answer
        assert not [s for s in env.net.since(mark) if s.method == "DELETE"]
    assert await exists(env.reader, PREF)


async def test_forget_a_missing_memory_is_an_error(env: Env) -> None:
    answer = await env.call("viking_forget", {"uri": "viking://user/memories/nope.md"})
    assert answer.startswith("Error: viking_forget failed: ")


async def test_forget_by_query_deletes_only_a_strong_memory_hit(env: Env) -> None:
    await env.seed()
    mark = len(env.net.sent)
    answer = await env.call("viking_forget", {"query": "python packaging"})
    assert re.fullmatch(
        rf"Deleted {re.escape(PREF)} \(0\.(8[1-9]|9\d)\): - I prefer uv over pip for Python "
        r"packaging\.",
        answer,
    )
    deletes = [s for s in env.net.since(mark) if s.method == "DELETE"]
    assert [d.params["uri"] for d in deletes] == [PREF]
    assert not await exists(env.reader, PREF)
    assert await exists(env.reader, FALCON)


async def test_forget_by_a_weak_query_deletes_nothing_and_names_the_closest(env: Env) -> None:
    await env.seed()
    mark = len(env.net.sent)
    answer = await env.call("viking_forget", {"query": "kubernetes helm charts"})
    assert answer.startswith(
        "Nothing deleted: no memory matches 'kubernetes helm charts' with a score above 0.8. "
        "Closest: viking://user/alice/memories/"
    )
    closest = re.search(r"Closest: (\S+) \((0\.\d\d)\)\.", answer)
    assert closest is not None
    assert closest.group(1) in (PREF, FALCON)
    assert float(closest.group(2)) <= 0.8
    assert answer.endswith("Use viking_forget with its uri to delete it.")
    assert not [s for s in env.net.since(mark) if s.method == "DELETE"]
    assert await exists(env.reader, PREF)
    assert await exists(env.reader, FALCON)


async def test_forget_by_query_with_no_memories(env: Env) -> None:
    answer = await env.call("viking_forget", {"query": "python packaging"})
    assert answer == (
        "Nothing deleted: no memory matches 'python packaging' with a score above 0.8. "
        "Use viking_forget with its uri to delete it."
    )


@pytest.mark.parametrize(
    "arguments", [{}, {"uri": PREF, "query": "python"}, {"uri": "", "query": ""}]
)
async def test_forget_needs_exactly_one_of_uri_or_query(env: Env, arguments: Any) -> None:
    mark = len(env.net.sent)
    assert await env.call("viking_forget", arguments) == (
        "Error: give exactly one of 'uri' or 'query'."
    )
    assert env.net.since(mark) == []


# --- viking_add_resource ------------------------------------------------------------------------


async def test_add_a_local_file(env: Env) -> None:
    doc = env.tmp / "work" / "guide.md"
    doc.write_text("# Deploy guide\nDeploys go through the blue-green pipeline.\n")
    mark = len(env.net.sent)
    answer = await env.call("viking_add_resource", {"url": str(doc), "reason": "deploy docs"})
    assert answer == (f"Added {doc} as viking://resources/guide; it is indexed in the background.")
    writes = [s for s in env.net.since(mark) if s.method == "POST"]
    assert [s.path for s in writes] == ["/api/v1/resources/temp_upload", "/api/v1/resources"]
    body = writes[1].body
    assert body["temp_file_id"]
    assert "path" not in body
    assert body["reason"] == "deploy docs"
    text = await env.reader.read("viking://resources/guide/guide.md")
    assert "blue-green pipeline" in text


async def test_a_relative_path_is_the_sessions_working_directory(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    (env.tmp / "work" / "notes.md").write_text("# Notes\nThe cache lives in Redis.\n")
    elsewhere = env.tmp / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the host process runs somewhere else
    answer = await env.call("viking_add_resource", {"url": "notes.md"})
    assert answer == "Added notes.md as viking://resources/notes; it is indexed in the background."


async def test_add_a_missing_file_is_an_error_without_any_request(env: Env) -> None:
    missing = env.tmp / "work" / "missing.md"
    mark = len(env.net.sent)
    answer = await env.call("viking_add_resource", {"url": str(missing)})
    assert answer.startswith(f"Error: {missing} is neither an http(s) URL nor a readable file (")
    assert "No such file or directory" in answer
    assert env.net.since(mark) == []


async def test_a_url_is_sent_as_path_and_a_refusal_is_an_error(env: Env) -> None:
    url = "http://127.0.0.1:9/internal/secrets"
    mark = len(env.net.sent)
    answer = await env.call("viking_add_resource", {"url": url, "reason": "why not"})
    (post,) = [s for s in env.net.since(mark) if s.path == "/api/v1/resources"]
    assert post.body == {"reason": "why not", "wait": False, "path": url}
    assert answer.startswith("Error: viking_add_resource failed: PERMISSION_DENIED 403")
    assert "non-public address" in answer


# --- viking_archive_expand ----------------------------------------------------------------------


async def test_archive_expand(env: Env) -> None:
    assert await env.call("viking_archive_expand", {}) == f"Session {SESSION} has no archives yet."
    await env.ext.turn_end(
        Turn(
            1,
            user="Rename the helper to parse_config everywhere.",
            assistant="Renamed it in three files.",
            tool_calls=[ToolCall(name="edit", input={"path": "cfg.py"}, output="ok")],
        )
    )
    report = await env.ext.commit(wait=True)
    assert report is not None
    assert report.status == "committed"
    await env.ext.turn_end(Turn(2, user="Now add a docstring to parse_config.", assistant="Done."))
    assert (await env.ext.commit(wait=True)).status == "committed"  # type: ignore[union-attr]

    assert await env.call("viking_archive_expand", {}) == (
        f"Archives of {SESSION}: archive_001, archive_002. Pass archive_id to expand one."
    )
    answer = await env.call("viking_archive_expand", {"archive_id": "archive_001"})
    assert answer.splitlines() == [
        f"Archive archive_001 of {SESSION} (2 messages):",
        "[user] Rename the helper to parse_config everywhere.",
        "[assistant] Renamed it in three files.",
        "",
        '[assistant used tools: edit] [tool edit] {"path": "cfg.py"}',
    ]
    second = await env.call(
        "viking_archive_expand", {"archive_id": "archive_002", "session_id": SESSION}
    )
    assert "[user] Now add a docstring to parse_config." in second
    missing = await env.call("viking_archive_expand", {"archive_id": "archive_009"})
    assert missing.startswith("Error: viking_archive_expand failed: ")


async def test_archive_expand_of_another_session(env: Env) -> None:
    await env.seed()
    assert await env.call("viking_archive_expand", {"session_id": "seed"}) == (
        "Archives of seed: archive_001. Pass archive_id to expand one."
    )
    answer = await env.call(
        "viking_archive_expand", {"session_id": "seed", "archive_id": "archive_001"}
    )
    assert "[user] Project Falcon uses PostgreSQL 16 in production." in answer
    assert await env.call("viking_archive_expand", {"session_id": "nobody"}) == (
        "Session nobody has no archives yet."
    )


# --- when OpenViking may not be called ------------------------------------------------------------

EVERY_TOOL = [
    ("viking_search", {"query": "python packaging"}),
    ("viking_read", {"uri": "viking://user/memories"}),
    ("viking_browse", {"action": "list"}),
    ("viking_remember", {"content": "I prefer tabs."}),
    ("viking_forget", {"query": "tabs"}),
    ("viking_add_resource", {"url": "https://example.com/doc"}),
    ("viking_archive_expand", {}),
]


async def test_a_bypassed_session_answers_without_any_request(tmp_path: Path) -> None:
    app = create_app(tmp_path / "srv")
    net = Net(httpx.ASGITransport(app=app))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    ext = OpenVikingExtension(
        make_config(tmp_path, bypass_patterns=[f"{scratch}/**", str(scratch)]), transport=net
    )
    try:
        await ext.session_start("b1", cwd=str(scratch))
        for name, arguments in EVERY_TOOL:
            answer = await ext.call_tool(name, arguments)
            assert answer.startswith("Error: OpenViking is bypassed for this session: "), answer
            assert "matches bypassPatterns" in answer
    finally:
        await ext.aclose()
    assert net.sent == []


async def test_an_open_breaker_answers_not_reachable_without_any_request(tmp_path: Path) -> None:
    app = create_app(tmp_path / "srv")
    net = Net(httpx.ASGITransport(app=app), up=False)
    ext = OpenVikingExtension(make_config(tmp_path), transport=net)
    ext.client.breaker.base_delay = 60.0  # the background probe does not run in this test
    try:
        await ext.session_start("d1", cwd=str(tmp_path))
        assert ext.client.breaker.is_open
        mark = len(net.sent)
        for name, arguments in EVERY_TOOL:
            answer = await ext.call_tool(name, arguments)
            assert answer == "Error: OpenViking server is not reachable at http://ref."
        assert net.since(mark) == []
    finally:
        await ext.aclose()


async def test_a_disabled_extension_says_so(tmp_path: Path) -> None:
    net = Net(httpx.ASGITransport(app=create_app(tmp_path / "srv")))
    ext = OpenVikingExtension(make_config(tmp_path, enabled=False), transport=net)
    await ext.session_start("x", cwd=str(tmp_path))
    answer = await ext.call_tool("viking_search", {"query": "x"})
    assert answer == "Error: OpenViking memory is disabled (enabled: false)."
    await ext.aclose()
    assert net.sent == []
