"""The seven ``viking_*`` tools: schemas from pydantic models, handlers that never raise.

Each tool is a name, the spec's description, an input model (``Field(description=...)``) and a
handler. ``schemas(format)`` renders them for OpenAI, Anthropic or MCP; ``call(name, args)``
validates the arguments and returns text for the agent. A bad argument or a failed call is an
error *result* the agent can read ("Error: ..."), never an exception into the host.

What the existing integrations got wrong, fixed here: search resolves short scope URIs to the
caller's space; remember goes through the durable outbox and says truthfully whether it was
delivered or only queued; forget deletes only memories (never resources, skills or sessions)
and by query only a memory hit above 0.8, reporting exactly what it deleted; add_resource takes
a URL or a local file (uploaded first); archive_expand returns the archived raw messages.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .client import OVClient
from .errors import ClientError, NotFoundError
from .models import FsEntry, Message
from .spaces import RESERVED_NAMES, split_uri
from .sync import SyncManager
from .tokens import estimate_tokens

__all__ = ["TOOL_NAMES", "ToolBox", "ToolFormat"]

logger = logging.getLogger(__name__)

ToolFormat = Literal["openai", "anthropic", "mcp"]
FORGET_MIN_SCORE = 0.8  # the spec: a query deletes its strongest match only above this
REMEMBER_FLUSH_DEADLINE = 2.0  # seconds remember waits to deliver before answering "queued"


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SearchArgs(_Args):
    query: str = Field(min_length=1, description="Search query")
    scope: str | None = Field(
        None, description="Viking URI prefix to scope search (e.g., 'viking://resources/')"
    )
    limit: int | None = Field(None, ge=1, le=50, description="Max results (default: 10)")


class ReadArgs(_Args):
    uri: str = Field(description="viking:// URI to read")
    level: Literal["abstract", "overview", "full"] = Field(
        "abstract", description="Detail level: 'abstract', 'overview' or 'full'"
    )


class BrowseArgs(_Args):
    action: Literal["list", "stat"] = Field(description="'list' a directory or 'stat' a URI")
    uri: str | None = Field(None, description="viking:// URI (default: 'viking://')")


class RememberArgs(_Args):
    content: str = Field(min_length=1, description="The fact or observation to store")
    category: str | None = Field(
        None, description="Category hint: 'preference', 'entity', 'event', 'case', 'pattern'"
    )


class ForgetArgs(_Args):
    uri: str | None = Field(None, description="Exact viking:// URI to delete")
    query: str | None = Field(
        None, description="Search query — deletes the strongest match if score > 0.8"
    )


class AddResourceArgs(_Args):
    url: str = Field(min_length=1, description="URL or file path to ingest")
    reason: str | None = Field(
        None, description="Why this resource is relevant (improves indexing)"
    )


class ArchiveExpandArgs(_Args):
    archive_id: str | None = Field(None, description="Archive ID to expand (from session context)")
    session_id: str | None = Field(None, description="OV session ID to expand")


@dataclass(frozen=True)
class _Tool:
    name: str
    description: str
    args: type[_Args]


_TOOLS = (
    _Tool(
        "viking_search",
        "Semantic search over the OpenViking knowledge base. Returns ranked results with "
        "viking:// URIs and abstracts. Use when you need to recall past decisions, user "
        "preferences, or project-specific knowledge not in current context.",
        SearchArgs,
    ),
    _Tool(
        "viking_read",
        "Read content at a viking:// URI. Three detail levels: 'abstract' (~100 tokens), "
        "'overview' (~2k tokens), 'full' (complete). Start with abstract, escalate to "
        "overview/full when needed.",
        ReadArgs,
    ),
    _Tool(
        "viking_browse",
        "Browse the OpenViking knowledge store like a filesystem. List directory contents, get "
        "metadata, or view the hierarchy tree.",
        BrowseArgs,
    ),
    _Tool(
        "viking_remember",
        "Store a fact or memory in OpenViking. Stored as a session message and extracted into "
        "long-term memory on commit. Use for important information the agent should remember: "
        "preferences, decisions, gotchas, lessons learned.",
        RememberArgs,
    ),
    _Tool(
        "viking_forget",
        "Delete a memory by URI or search for a specific memory and remove it. Use to correct "
        "outdated or wrong information in the knowledge base.",
        ForgetArgs,
    ),
    _Tool(
        "viking_add_resource",
        "Ingest a URL, file path, or document into the OpenViking knowledge base. OV "
        "auto-processes it into L0/L1/L2 tiers and indexes it for semantic search. Use for "
        "bootstrapping knowledge or adding reference documentation.",
        AddResourceArgs,
    ),
    _Tool(
        "viking_archive_expand",
        "Expand an archived session back into raw messages. Use when the archive summary is "
        "too coarse and you need the detailed conversation history. Returns the full message "
        "transcript for that archive.",
        ArchiveExpandArgs,
    ),
)
TOOL_NAMES = tuple(tool.name for tool in _TOOLS)


def _strip_titles(schema: Any) -> Any:
    """JSON schema without pydantic's "title" keys (noise for a model reading the schema)."""
    if isinstance(schema, dict):
        return {k: _strip_titles(v) for k, v in schema.items() if k != "title"}
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    return schema


def _plain(prop: dict[str, Any]) -> dict[str, Any]:
    """An optional field as the spec writes it (``{"type": "string", ...}``), not pydantic's
    ``anyOf: [{...}, {"type": "null"}]`` with ``default: null``, which some hosts' schema
    dialects reject (Gemini) and which invites a model to send nulls."""
    options = prop.get("anyOf")
    if not isinstance(options, list):
        return prop
    kept = [o for o in options if o != {"type": "null"}]
    if len(kept) != 1 or len(kept) == len(options):
        return prop
    rest = {k: v for k, v in prop.items() if k != "anyOf"}
    if rest.get("default", "") is None:
        del rest["default"]
    return {**kept[0], **rest}


def _schema(args: type[_Args]) -> dict[str, Any]:
    schema: dict[str, Any] = _strip_titles(args.model_json_schema())
    properties = schema.get("properties", {})
    schema["properties"] = {name: _plain(prop) for name, prop in properties.items()}
    schema.setdefault("required", [])
    return schema


def _where(entry: FsEntry) -> str:
    kind = "dir" if entry.is_dir else "file"
    abstract = f" — {entry.abstract.strip()}" if entry.abstract.strip() else ""
    return f"- {entry.uri} ({kind}){abstract}"


class ToolBox:
    """The tools for one agent session.

    ``session_id`` is the OpenViking session of the conversation (archive_expand's default);
    ``capture_session`` is where remembered facts go (None: not captured, remember refuses;
    defaults to ``session_id``); ``available`` says whether OpenViking may be called at all
    (a bypassed session or a server found down turns every tool into a clear "not reachable"
    answer); ``cwd`` is the session's working directory, for relative file paths.
    """

    def __init__(
        self,
        client: OVClient,
        sync: SyncManager | None,
        *,
        session_id: Callable[[], str | None],
        available: Callable[[], str | None],
        capture_session: Callable[[], str | None] | None = None,
        cwd: Callable[[], str | None] | None = None,
    ):
        self._client = client
        self._sync = sync
        self._session_id = session_id
        self._unavailable = available
        # Where remembered facts may go: None while the session captures nothing (incognito,
        # syncTurns off), so remember never writes what the session promised not to keep.
        self._capture_session = capture_session or session_id
        self._cwd = cwd or (lambda: None)
        self._handlers: dict[str, Callable[[Any], Awaitable[str]]] = {
            "viking_search": self._search,
            "viking_read": self._read,
            "viking_browse": self._browse,
            "viking_remember": self._remember,
            "viking_forget": self._forget,
            "viking_add_resource": self._add_resource,
            "viking_archive_expand": self._archive_expand,
        }

    @staticmethod
    def schemas(format: ToolFormat = "openai") -> list[dict[str, Any]]:
        """The seven tool schemas in the host's format."""
        out: list[dict[str, Any]] = []
        for tool in _TOOLS:
            schema = _schema(tool.args)
            if format == "openai":
                out.append(
                    {
                        "type": "function",
                        "function": {
                            "name": tool.name,
                            "description": tool.description,
                            "parameters": schema,
                        },
                    }
                )
            elif format == "anthropic":
                out.append(
                    {"name": tool.name, "description": tool.description, "input_schema": schema}
                )
            elif format == "mcp":
                out.append(
                    {"name": tool.name, "description": tool.description, "inputSchema": schema}
                )
            else:
                raise ValueError(f"unknown tool format {format!r}: use openai, anthropic or mcp")
        return out

    async def call(self, name: str, arguments: dict[str, Any] | str | None) -> str:
        """Run a tool; the answer is always text, errors included."""
        tool = next((t for t in _TOOLS if t.name == name), None)
        if tool is None:
            return f"Error: unknown tool {name!r}; available: {', '.join(TOOL_NAMES)}"
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                return f"Error: {name} arguments are not valid JSON ({exc.msg})"
        try:
            args = tool.args.model_validate(arguments or {})
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in exc.errors()
            )
            return f"Error: invalid arguments for {name}: {problems}"
        reason = self._unavailable()
        if reason:
            return f"Error: {reason}"
        try:
            return await self._handlers[name](args)
        except ClientError as exc:
            return f"Error: {name} failed: {exc}"
        except ValidationError as exc:  # an answer of the wrong shape (pydantic, from models)
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            return (
                f"Error: {name} failed: OpenViking answered in an unexpected shape "
                f"({exc.title}: {where}: {first['msg']})"
            )
        except Exception as exc:  # a bug here must never become an exception in the host
            logger.exception("tool %s failed unexpectedly", name)
            return f"Error: {name} failed unexpectedly: {type(exc).__name__}: {exc}"

    # --- handlers -----------------------------------------------------------------------------

    async def _search(self, args: SearchArgs) -> str:
        scope = args.scope or "viking://user/memories"
        found = await self._client.find(args.query, target_uri=scope, limit=args.limit or 10)
        hits = found.all_hits()
        if not hits:
            return (
                f"No results for {args.query!r} in {await self._client.spaces.resolve_uri(scope)}."
            )
        lines = [f"{len(hits)} result(s) for {args.query!r}:"]
        for hit in hits:
            abstract = " ".join(hit.abstract.split())[:300]
            lines.append(f"- [{hit.context_type} {hit.score:.2f}] {hit.uri}\n  {abstract}")
        return "\n".join(lines)

    async def _read(self, args: ReadArgs) -> str:
        uri = args.uri
        if args.level == "full":
            return await self._client.read(uri)
        reader = self._client.abstract if args.level == "abstract" else self._client.overview
        try:
            entry = await self._client.stat(uri)
        except NotFoundError:
            return f"Error: {uri} does not exist"
        if entry.is_dir:
            return await reader(uri)
        # Abstracts and overviews are directory-level on 0.5.x: for a file, its head.
        text = await self._client.read(uri)
        cap = 400 if args.level == "abstract" else 4000
        return text if len(text) <= cap else text[:cap].rstrip() + "\n… (use level 'full')"

    async def _browse(self, args: BrowseArgs) -> str:
        uri = args.uri or "viking://"
        if args.action == "stat":
            entry = await self._client.stat(uri)
            return json.dumps(entry.model_dump(by_alias=True), ensure_ascii=False, indent=2)
        entries = await self._client.ls(uri)
        if not entries:
            return f"{uri} is empty."
        return "\n".join([f"{uri} ({len(entries)} entries):", *(_where(e) for e in entries)])

    async def _remember(self, args: RememberArgs) -> str:
        session_id = self._capture_session()
        if self._sync is None or session_id is None:
            return "Error: remembering needs an active session (capture is off or incognito)."
        hint = f" ({args.category})" if args.category else ""
        text = f"Please remember{hint}: {args.content}"
        self._sync.accept_messages(
            session_id, [Message(role="user", content=text)], estimate_tokens(text)
        )
        # Durable now; try to deliver at once so the answer can say which it is.
        report = await self._sync.flush(session_id, deadline=REMEMBER_FLUSH_DEADLINE)
        if report.pending == 0 and report.error is None:
            return (
                "Remembered: sent to OpenViking; it becomes long-term memory at the next "
                "commit (session end, compaction, or the token threshold)."
            )
        return (
            "Queued: saved locally and will be sent to OpenViking when it is reachable "
            f"({report.error or 'delivery pending'})."
        )

    async def _forget(self, args: ForgetArgs) -> str:
        if bool(args.uri) == bool(args.query):
            return "Error: give exactly one of 'uri' or 'query'."
        if args.uri:
            uri = await self._client.spaces.resolve_uri(args.uri)
            if not await self._is_memory(uri):
                return (
                    f"Error: refusing to delete {uri}: viking_forget deletes memories only "
                    "(under viking://user/.../memories or viking://agent/.../memories)."
                )
            entry = await self._client.stat(uri)
            if entry.is_dir:
                return f"Error: {uri} is a directory; forget one memory file at a time."
            await self._client.delete(uri)
            return f"Deleted {uri}."
        assert args.query is not None
        found = await self._client.find(args.query, target_uri="viking://user/memories", limit=5)
        memories = [h for h in found.memories if not h.is_summary]
        best = max(memories, key=lambda h: h.score, default=None)
        if best is None or best.score <= FORGET_MIN_SCORE or not await self._is_memory(best.uri):
            near = f" Closest: {best.uri} ({best.score:.2f})." if best else ""
            return (
                f"Nothing deleted: no memory matches {args.query!r} with a score above "
                f"{FORGET_MIN_SCORE}.{near} Use viking_forget with its uri to delete it."
            )
        await self._client.delete(best.uri)
        return f"Deleted {best.uri} ({best.score:.2f}): {' '.join(best.abstract.split())[:200]}"

    async def _is_memory(self, uri: str) -> bool:
        split = split_uri(uri)
        if split is None:
            return False
        scope, parts = split
        if scope not in ("user", "agent") or len(parts) < 2 or ".." in parts:
            return False
        if parts[-1].startswith("."):
            return False  # a directory's .abstract.md / .overview.md, not a memory
        # viking://user/<space>/memories/<...>/x.md, or the flat viking://agent/memories/x.md;
        # never viking://agent/skills/memories/... (a skill that happens to be so named).
        if parts[0] == "memories":
            return True
        return parts[1] == "memories" and parts[0] not in RESERVED_NAMES

    async def _add_resource(self, args: AddResourceArgs) -> str:
        is_url = args.url.lower().startswith(("http://", "https://"))
        source: str | Path = args.url
        if not is_url:
            # A relative path is the agent's: relative to the session's working directory,
            # not to wherever the host process happens to run.
            # (``~`` is expanded later, off the event loop, by the client.)
            source = Path(args.url)
            base = self._cwd()
            if base and not source.is_absolute() and not args.url.startswith("~"):
                source = Path(base) / source
        try:
            result = await self._client.add_resource(source, reason=args.reason or "")
        except ValueError as exc:  # a local path that cannot be read
            return f"Error: {args.url} is neither an http(s) URL nor a readable file ({exc})."
        root = result.get("root_uri", "")
        return f"Added {args.url} as {root or 'a resource'}; it is indexed in the background."

    async def _archive_expand(self, args: ArchiveExpandArgs) -> str:
        session_id = args.session_id or self._session_id()
        if not session_id:
            return "Error: no session_id given and no active session."
        if not args.archive_id:
            history = await self._client.spaces.resolve_uri(
                f"viking://user/sessions/{session_id}/history"
            )
            try:
                entries = await self._client.ls(history)
            except NotFoundError:
                return f"Session {session_id} has no archives yet."
            ids = sorted(e.basename for e in entries if e.basename.startswith("archive_"))
            if not ids:
                return f"Session {session_id} has no archives yet."
            return f"Archives of {session_id}: {', '.join(ids)}. Pass archive_id to expand one."
        archive = await self._client.get_archive(session_id, args.archive_id)
        lines = [
            f"Archive {archive.archive_id} of {session_id} ({len(archive.messages)} messages):"
        ]
        for message in archive.messages:
            lines.append(f"[{message.get('role', '?')}] {_message_text(message)}")
        return "\n".join(lines)


def _message_text(message: dict[str, Any]) -> str:
    parts = message.get("parts") or []
    texts: list[str] = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text":
            texts.append(str(part.get("text", "")))
        elif part.get("type") == "tool":
            texts.append(
                f"[tool {part.get('tool_name', '?')}] {json.dumps(part.get('tool_input', {}))}"
            )
    return " ".join(texts) or str(message.get("content", ""))
