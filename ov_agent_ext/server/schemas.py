"""Request shapes, validated the way the real server (FastAPI + pydantic) validates them.

Models mirror ``openapi-0.5.2.json``: the routes whose schema says
``additionalProperties: false`` (find, search, content/write, resources) forbid unknown
fields; the others ignore them, as the real server does. A failure becomes the real 400:
``Invalid request parameters: body.top_k: Extra inputs are not permitted`` with
``details.validation_errors``.
"""

from __future__ import annotations

import json
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .errors import ApiError

__all__ = [
    "AddMessageRequest",
    "AddResourceRequest",
    "BatchAddRequest",
    "CommitRequest",
    "ContextQuery",
    "CreateAccountRequest",
    "CreateSessionRequest",
    "DeleteQuery",
    "FindRequest",
    "LsQuery",
    "MkdirRequest",
    "ReadQuery",
    "RegisterUserRequest",
    "SearchRequest",
    "TasksQuery",
    "TreeQuery",
    "UriQuery",
    "WaitRequest",
    "WriteRequest",
    "parse_json_body",
    "query_dict",
    "validate",
]

Model = TypeVar("Model", bound=BaseModel)
Telemetry = bool | dict[str, bool]


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CreateSessionRequest(_Lenient):
    session_id: str | None = None
    memory_policy: dict[str, Any] | None = None
    auto_commit_policy: dict[str, Any] | None = None
    memory_extraction_config: dict[str, Any] | None = None
    telemetry: Telemetry = False


class AddMessageRequest(_Lenient):
    role: str
    peer_id: str | None = None
    content: str | None = None
    parts: list[dict[str, Any]] | None = None
    created_at: str | None = None
    turn_id: str | None = None
    message_kind: Literal["user_query", "assistant_step", "tool_transport", "checkpoint"] | None = (
        None
    )
    source_message_ids: list[str] | None = None
    telemetry: Telemetry = False

    @model_validator(mode="after")
    def _content_or_parts(self) -> AddMessageRequest:
        if self.content is None and self.parts is None:
            raise ValueError("Either 'content' or 'parts' must be provided")
        return self


class BatchAddRequest(_Lenient):
    messages: list[AddMessageRequest] = Field(max_length=100)
    telemetry: Telemetry = False


class CommitRequest(_Lenient):
    enable_working_memory: bool | None = None
    reset_context: bool = False
    keep_recent_count: int = Field(0, ge=0, le=10000)
    retention_mode: Literal["turn_budget"] | None = None
    keep_recent_turn_count: int | None = Field(None, ge=0, le=10000)
    retained_message_token_budget: int | None = Field(None, ge=1)
    min_raw_tail_steps: int | None = Field(None, ge=0, le=10000)
    extraction_metadata: dict[str, Any] | None = None
    telemetry: Telemetry = False


class WaitRequest(_Lenient):
    timeout: float | None = None


class CreateAccountRequest(_Lenient):
    account_id: str
    admin_user_id: str
    seed: str | None = None
    user_config: dict[str, Any] | None = None
    settings: dict[str, Any] | None = None


class RegisterUserRequest(_Lenient):
    user_id: str
    role: str = "user"
    seed: str | None = None
    user_config: dict[str, Any] | None = None


class MkdirRequest(_Lenient):
    uri: str
    description: str | None = None
    acl: dict[str, Any] | None = None


class WriteRequest(_Strict):
    uri: str
    content: str
    mode: str = "replace"
    wait: bool = False
    telemetry: Telemetry = False
    processing_mode: Literal["semantic_and_vectors", "vectors_only"] = "semantic_and_vectors"
    tags: list[str] | None = None
    tag_mode: Literal["replace", "append", "clear"] = "replace"
    acl: dict[str, Any] | None = None
    edit_source: Literal["manual", "agent", "compile"] = "agent"


class FindRequest(_Strict):
    query: str = ""
    image_url: str | list[str] | None = None
    target_uri: str | list[str] = ""
    context_type: str | list[str] | None = None
    limit: int = 10
    node_limit: int | None = None
    score_threshold: float | None = None
    filter: dict[str, Any] | None = None
    include_provenance: bool = False
    tags: list[str] | None = None
    since: str | None = None
    until: str | None = None
    time_field: Literal["updated_at", "created_at"] | None = None
    level: int | str | list[int] | None = None
    read_content: bool = False
    telemetry: Telemetry = False
    events_time_decay_protection: str | None = None


class SearchRequest(FindRequest):
    search_type: Literal["semantic", "keywords"] = "semantic"
    session_id: str | None = None
    mode: Literal["list", "context"] = "list"
    query_expansion: Literal["off", "auto"] = "auto"
    max_tokens: int = 1600
    quotas: dict[str, Any] | None = None
    purpose: Literal["chat", "coding"] | None = None
    detail: Any = None
    dedup_turns: int = Field(0, ge=0, le=100)
    exclude_uris: list[str] = Field(default_factory=list)
    peer_scope: Literal["actor", "all"] = "all"
    other_peer_penalty: float | dict[str, Any] | None = None
    rewrite: bool | str = False
    rewrite_max_bullets: int = 6


class AddResourceRequest(_Strict):
    path: str | None = None
    temp_file_id: str | None = None
    add_type: str | None = None
    to: str | None = None
    parent: str | None = None
    create_parent: bool = False
    reason: str = ""
    instruction: str = ""
    wait: bool = False
    strict: bool = False
    internal_task: bool = False
    source_name: str | None = None
    ignore_dirs: str | None = None
    include: str | None = None
    exclude: str | None = None
    directly_upload_media: bool = True
    preserve_structure: bool | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    telemetry: Telemetry = False
    watch_interval: float = 0
    is_active: bool = True
    processing_mode: Literal["semantic_and_vectors", "vectors_only"] = "semantic_and_vectors"
    tags: list[str] | None = None
    tag_mode: str = "replace"
    acl: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _path_or_upload(self) -> AddResourceRequest:
        if not self.path and not self.temp_file_id:
            raise ValueError("Either 'path' or 'temp_file_id' must be provided")
        return self


def _invalid(errors: list[dict[str, Any]]) -> ApiError:
    first = errors[0]
    where = ".".join(first["loc"])
    return ApiError(
        400,
        "INVALID_ARGUMENT",
        f"Invalid request parameters: {where}: {first['message']}",
        {"validation_errors": errors},
        short=True,
    )


def validate(model: type[Model], data: Any, *, where: str = "body") -> Model:
    """``model`` from ``data``; a 400 ``INVALID_ARGUMENT`` in the real server's words if not."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = [
            {
                "loc": [where, *(str(part) for part in error["loc"])],
                "message": error["msg"],
                "type": error["type"],
            }
            for error in exc.errors(include_url=False)
        ]
        raise _invalid(errors) from None


def parse_json_body(raw: bytes, *, required: bool) -> Any:
    """The decoded JSON body; ``{}`` for an empty optional body."""
    if not raw.strip():
        if required:
            raise _invalid([{"loc": ["body"], "message": "Field required", "type": "missing"}])
        return {}
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        position = str(getattr(exc, "pos", 0))
        raise _invalid(
            [{"loc": ["body", position], "message": "JSON decode error", "type": "json_invalid"}]
        ) from None


# --- query strings ---------------------------------------------------------------------------


class UriQuery(_Lenient):
    uri: str


class ReadQuery(UriQuery):
    offset: int = 0
    limit: int = -1
    raw: bool = False


class LsQuery(UriQuery):
    simple: bool = False
    recursive: bool = False
    output: str = "agent"
    abs_limit: int = 256
    show_all_hidden: bool = False
    node_limit: int = 1000
    offset: int = Field(0, ge=0)
    limit: int | None = Field(None, ge=1)
    sort_by: Literal["name", "mtime"] | None = None
    sort_order: Literal["asc", "desc"] = "asc"
    include_tags: bool = False


class TreeQuery(LsQuery):
    level_limit: int = 3
    directories_only: bool = False


class DeleteQuery(UriQuery):
    recursive: bool = False
    wait: bool = False


class ContextQuery(_Lenient):
    token_budget: int = 128000


class TasksQuery(_Lenient):
    task_type: str | None = None
    status: str | None = None
    resource_id: str | None = None
    limit: int = 50


def query_dict(items: list[tuple[str, str]], lists: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Query parameters as a dict: the last value wins, except for list-valued names."""
    data: dict[str, Any] = {}
    for key, value in items:
        if key in lists:
            data.setdefault(key, []).append(value)
        else:
            data[key] = value
    return data
