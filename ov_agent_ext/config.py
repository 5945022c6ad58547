"""Configuration: one documented model, loaded from arguments, environment, config.json, defaults.

Sources, highest first::

    load_config(path, **overrides)   explicit arguments (snake_case or camelCase)
    OPENVIKING_URL, OPENVIKING_API_KEY, OPENVIKING_ACCOUNT, OPENVIKING_USER,
    OPENVIKING_AGENT_ID, OPENVIKING_PEER_ID, and OV_AGENT_EXT_<KEY> for every other key
    config.json                      path argument, else $OV_AGENT_EXT_CONFIG, else the
                                     platformdirs user config dir of "ov-agent-ext"
    defaults                         the design spec's

Every error is a :class:`~ov_agent_ext.errors.ConfigError` naming the key, the source and what
was expected. The API key is a ``SecretStr``: it never appears in ``repr``, logs or errors.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import pathspec
import platformdirs
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
)
from pydantic.alias_generators import to_camel

from .errors import ConfigError

__all__ = [
    "APP_NAME",
    "CONFIG_ENV",
    "ENV_PREFIX",
    "OVConfig",
    "default_config_path",
    "env_var_for",
    "load_config",
    "save_config",
]

APP_NAME = "ov-agent-ext"
CONFIG_ENV = "OV_AGENT_EXT_CONFIG"
ENV_PREFIX = "OV_AGENT_EXT_"

# The variables every OpenViking integration shares; other keys use OV_AGENT_EXT_<KEY>.
_SHARED_ENV = {
    "endpoint": "OPENVIKING_URL",
    "api_key": "OPENVIKING_API_KEY",
    "account": "OPENVIKING_ACCOUNT",
    "user": "OPENVIKING_USER",
    "agent_id": "OPENVIKING_AGENT_ID",
    "peer_id": "OPENVIKING_PEER_ID",
}
_SECRET_FIELDS = frozenset({"api_key"})
_TOKENIZER = re.compile(r"^(auto|estimate|tiktoken:[A-Za-z0-9_.-]+)$")


def _state_dir_default() -> Path:
    return platformdirs.user_state_path(APP_NAME)


class OVConfig(BaseModel):
    """Every setting of the extension. Field names are snake_case; config.json uses camelCase.

    >>> OVConfig(recall_budget=1500).recall_budget
    1500
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        validate_default=True,
    )

    # Connection and identity
    enabled: bool = Field(True, description="Master switch; false makes every hook a no-op.")
    endpoint: str = Field(
        "http://127.0.0.1:1933", description="OpenViking server URL (http or https)."
    )
    api_key: SecretStr = Field(
        SecretStr(""),
        description="API key sent as 'Authorization: Bearer'; empty for a dev-mode server.",
    )
    account: str = Field("", description="Account sent as X-OpenViking-Account (dev/trusted).")
    user: str = Field("", description="User sent as X-OpenViking-User (dev/trusted mode).")
    agent_id: str = Field(
        "pi",
        description="Agent identity; host adapters set their own (the spec's default is 'pi').",
    )
    peer_id: str = Field("", description="Peer sent as X-OpenViking-Actor-Peer when set.")

    # Timeouts per call class, in seconds.
    health_timeout: float = Field(5.0, gt=0, le=600, description="Health check timeout (s).")
    read_timeout: float = Field(10.0, gt=0, le=600, description="Read/search timeout (s).")
    write_timeout: float = Field(30.0, gt=0, le=600, description="Write/commit timeout (s).")
    connect_timeout: float = Field(
        3.0, gt=0, le=600, description="TCP connect timeout (s), capped by the call's timeout."
    )

    # Recall
    sync_turns: bool = Field(True, description="Send conversation turns to the server.")
    recall_budget: int = Field(2000, ge=0, description="Token budget of <relevant-memories>.")
    recall_max_content_chars: int = Field(
        500, ge=1, description="Characters kept per recalled item."
    )
    recall_prefer_abstract: bool = Field(
        True, description="Use abstracts/overviews instead of fetching full memory text."
    )
    recall_limit: int = Field(6, ge=1, le=100, description="Items kept after dedup.")
    recall_score_threshold: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Similarity (cosine scale: the server reports (1+cos)/2, so 0.5 means a "
        "score of 0.75) at which a hit is recalled without sharing a word with the prompt; "
        "hits that share one need only a positive similarity.",
    )
    recall_min_query_length: int = Field(
        3, ge=0, description="Prompts shorter than this (characters) skip recall."
    )
    recall_timeout: float = Field(
        3.0,
        gt=0,
        le=60,
        description="Deadline (s) for the whole recall of one prompt; on expiry the prompt "
        "goes on without memories. Keep it below the host's hook limit.",
    )
    profile_budget: int = Field(10000, ge=0, description="Token budget of the profile block.")
    resume_context_budget: int = Field(
        2000, ge=0, description="Token budget of the archive overview on resume/compact."
    )
    index_budget: int = Field(2000, ge=0, description="Token budget of the knowledge index.")

    # Capture
    capture_tool_results: bool = Field(False, description="Also capture tool results (capped).")
    capture_mode: Literal["semantic", "keyword"] = Field(
        "semantic", description="'semantic' captures every turn; 'keyword' only trigger phrases."
    )
    capture_max_length: int = Field(
        24000, ge=1, description="Longest user text (characters) considered for capture."
    )
    capture_assistant_turns: bool = Field(True, description="Capture assistant replies too.")

    # Commits and the write queue
    commit_token_threshold: int = Field(
        20000, ge=0, description="Commit after this many pending tokens; 0 = session end only."
    )
    commit_on_shutdown: bool = Field(True, description="Commit when the session shuts down.")
    commit_timeout: float = Field(
        20.0,
        gt=0,
        le=600,
        description="Deadline (s) for a commit that waits for extraction (pre-compact, "
        "shutdown, manual); past it the commit is queued and runs later.",
    )
    mirror_memory_writes: bool = Field(
        True, description="Send the local MEMORY.md as a session message before shutdown commit."
    )
    memory_file: str = Field(
        ".memory/MEMORY.md",
        description="The local MEMORY.md mirrored at shutdown (relative to the working dir).",
    )
    write_queue_flush_interval: int = Field(
        5000, ge=10, le=3_600_000, description="Write queue flush interval (ms)."
    )
    write_queue_flush_threshold: int = Field(
        5, ge=1, le=1000, description="Flush after this many queued turns."
    )

    # Opting out, logging, local state
    bypass_patterns: tuple[str, ...] = Field(
        default=(),
        description="gitignore-style globs on the working directory or session id to skip.",
    )
    incognito: bool = Field(
        False,
        description="Capture and commit nothing (recall still works); also per session.",
    )
    log_level: Literal["silent", "error", "warning", "info", "debug"] = Field(
        "error", description="Logging level of the 'ov_agent_ext' logger."
    )
    state_dir: Path = Field(
        default_factory=_state_dir_default,
        description="Where the outbox and watermarks live (null: the user state dir).",
    )
    tokenizer: str = Field(
        "auto",
        description="'auto' (tiktoken if local, else estimate), 'estimate', 'tiktoken:NAME'.",
    )

    _sources: dict[str, str] = PrivateAttr(default_factory=dict)

    @field_validator("endpoint")
    @classmethod
    def _check_endpoint(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if not re.match(r"^https?://[^/\s]+", value):
            raise ValueError("expected an http:// or https:// URL, e.g. http://127.0.0.1:1933")
        return value

    @field_validator("state_dir", mode="before")
    @classmethod
    def _expand_state_dir(cls, value: Any) -> Any:
        if value is None or value == "":
            return _state_dir_default()
        if isinstance(value, (str, Path)):
            return Path(value).expanduser()
        return value

    @field_validator(
        "health_timeout",
        "read_timeout",
        "write_timeout",
        "connect_timeout",
        "recall_budget",
        "recall_max_content_chars",
        "recall_limit",
        "recall_score_threshold",
        "recall_min_query_length",
        "recall_timeout",
        "commit_timeout",
        "profile_budget",
        "resume_context_budget",
        "index_budget",
        "capture_max_length",
        "commit_token_threshold",
        "write_queue_flush_interval",
        "write_queue_flush_threshold",
        mode="before",
    )
    @classmethod
    def _no_bool_numbers(cls, value: Any) -> Any:
        # JSON true/false would otherwise pass as 1/0: almost certainly a wrong key or value.
        if isinstance(value, bool):
            raise ValueError("expected a number, got a boolean")
        return value

    @field_validator("tokenizer")
    @classmethod
    def _check_tokenizer(cls, value: str) -> str:
        if not _TOKENIZER.match(value):
            raise ValueError("expected 'auto', 'estimate' or 'tiktoken:<encoding name>'")
        return value

    @field_validator("bypass_patterns", mode="before")
    @classmethod
    def _patterns_are_a_list(cls, value: Any) -> Any:
        if not isinstance(value, (list, tuple)) or not all(isinstance(p, str) for p in value):
            raise ValueError('expected a list of glob strings, e.g. ["/tmp/**"]')
        return value

    @field_validator("bypass_patterns")
    @classmethod
    def _check_patterns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:
            try:
                # GitIgnoreSpec, not the "gitwildmatch" factory: pathspec >= 1.0 deprecates that
                # name, and its DeprecationWarning (an error under -W error) was caught here and
                # reported as an invalid glob for every pattern.
                pathspec.GitIgnoreSpec.from_lines([pattern])
            except Exception as exc:
                raise ValueError(f"invalid glob {pattern!r}: {exc}") from None
        return value

    def source_of(self, name: str) -> str:
        """Where a field's value came from: a file path, a variable, 'argument' or 'default'."""
        return self._sources.get(name, "default")

    def display(self) -> dict[str, tuple[Any, str]]:
        """camelCase key -> (JSON-ready value, source), with the API key masked."""
        out: dict[str, tuple[Any, str]] = {}
        for name, field in type(self).model_fields.items():
            value = getattr(self, name)
            if isinstance(value, SecretStr):
                value = "********" if value.get_secret_value() else ""
            elif isinstance(value, Path):
                value = str(value)
            elif isinstance(value, tuple):
                value = list(value)
            out[field.alias or name] = (value, self.source_of(name))
        return out


# ---------------------------------------------------------------------------------------------
# Loading


def env_var_for(name: str) -> str:
    """The environment variable that sets a field (snake_case name)."""
    return _SHARED_ENV.get(name) or ENV_PREFIX + name.upper()


def default_config_path() -> Path:
    """config.json in the platformdirs user config directory of ov-agent-ext."""
    return platformdirs.user_config_path(APP_NAME) / "config.json"


def _fields() -> dict[str, str]:
    """snake_case field name -> camelCase alias."""
    return {name: (f.alias or name) for name, f in OVConfig.model_fields.items()}


def _suggest(word: str, candidates: list[str]) -> str:
    folded = {c.replace("_", "").lower(): c for c in candidates}
    exact = folded.get(word.replace("_", "").lower())
    close = [exact] if exact else difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def _read_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"{path}: cannot read config file ({exc.strerror})", source=str(path)
        ) from None
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
            source=str(path),
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object of settings", source=str(path))
    fields = _fields()
    by_alias = {alias: name for name, alias in fields.items()}
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key == "$schema":
            continue
        if key not in by_alias:
            raise ConfigError(
                f"{path}: unknown key '{key}'{_suggest(key, list(by_alias))}",
                key=key,
                source=str(path),
            )
        out[by_alias[key]] = value
    return out


def _env_value(name: str, raw: str) -> Any:
    """Environment strings into what the model validates; lists take JSON or commas."""
    if name == "bypass_patterns":
        raw = raw.strip()
        if raw.startswith("["):
            try:
                return json.loads(raw)
            except json.JSONDecodeError:
                pass  # validated below as a string, which names the variable
            return raw
        return [p.strip() for p in raw.split(",") if p.strip()]
    return raw


def _read_env(environ: Mapping[str, str]) -> dict[str, tuple[Any, str]]:
    fields = _fields()
    known = {env_var_for(name): name for name in fields}
    out: dict[str, tuple[Any, str]] = {}
    for var, raw in environ.items():
        if var in known:
            if not raw.strip():
                continue  # `export OPENVIKING_URL=` clears a setting, as in most tools
            name = known[var]
            out[name] = (_env_value(name, raw), var)
        elif var.startswith(ENV_PREFIX) and var != CONFIG_ENV:
            # OV_AGENT_EXT_ENDPOINT etc.: the key exists but is set by a shared variable.
            shared = _SHARED_ENV.get(var.removeprefix(ENV_PREFIX).lower())
            hint = f"; did you mean '{shared}'?" if shared else _suggest(var, list(known))
            raise ConfigError(f"environment variable {var} is not a setting{hint}", source=var)
    return out


def _describe(error: Mapping[str, Any]) -> str:
    message = str(error.get("msg", "invalid value")).removeprefix("Value error, ")
    return message[0].lower() + message[1:] if message else "invalid value"


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    **overrides: Any,
) -> OVConfig:
    """Resolve the configuration from every source; see the module docstring for precedence.

    >>> load_config(environ={}, recall_limit=3).recall_limit  # doctest: +SKIP
    3
    """
    env = os.environ if environ is None else environ
    fields = _fields()
    by_alias = {alias: name for name, alias in fields.items()}
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}

    file_path: Path | None
    if path is not None:
        file_path = Path(path).expanduser()
    elif env.get(CONFIG_ENV):
        file_path = Path(env[CONFIG_ENV]).expanduser()
    else:
        file_path = default_config_path()
        if not file_path.is_file():
            file_path = None
    if file_path is not None:
        if not file_path.is_file():
            named_by = "argument" if path is not None else CONFIG_ENV
            raise ConfigError(f"config file {file_path} (from {named_by}) does not exist")
        for name, value in _read_file(file_path).items():
            values[name], sources[name] = value, str(file_path)

    for name, (value, var) in _read_env(env).items():
        values[name], sources[name] = value, var

    for key, value in overrides.items():
        field_name = key if key in fields else by_alias.get(key)
        if field_name is None:
            raise ConfigError(
                f"unknown setting '{key}' passed to load_config{_suggest(key, list(fields))}",
                key=key,
                source="argument",
            )
        values[field_name], sources[field_name] = value, "argument"

    try:
        config = OVConfig.model_validate(values)
    except ValidationError as exc:
        error = exc.errors()[0]
        name = str(error["loc"][0]) if error["loc"] else ""
        alias = fields.get(name, name)
        source = sources.get(name, "default")
        got = "" if name in _SECRET_FIELDS else f"; got {values.get(name)!r}"
        raise ConfigError(
            f"{source}: config key '{alias}': {_describe(error)}{got}", key=alias, source=source
        ) from None
    config._sources.update(sources)
    return config


def save_config(values: Mapping[str, Any], path: str | os.PathLike[str] | None = None) -> Path:
    """Validate and write a config.json (camelCase keys) atomically, readable only by its owner.

    The file may hold an API key, so it is created 0600 and never passes through a wider mode.
    """
    target = Path(path).expanduser() if path is not None else default_config_path()
    fields = _fields()
    by_alias = {alias: name for name, alias in fields.items()}
    data: dict[str, Any] = {}
    for key, value in values.items():
        if key == "$schema":
            continue
        name = key if key in fields else by_alias.get(key)
        if name is None:
            raise ConfigError(
                f"unknown setting '{key}'{_suggest(key, list(by_alias))}",
                key=key,
                source="argument",
            )
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        elif isinstance(value, Path):
            value = str(value)
        elif isinstance(value, tuple):
            value = list(value)
        data[fields[name]] = value
    try:
        OVConfig.model_validate({by_alias[k]: v for k, v in data.items()})
    except ValidationError as exc:
        error = exc.errors()[0]
        alias = fields.get(str(error["loc"][0]), str(error["loc"][0]))
        raise ConfigError(
            f"config key '{alias}': {_describe(error)}", key=alias, source="argument"
        ) from None
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, ensure_ascii=False)
            fh.write("\n")
        os.chmod(tmp, 0o600)  # in case the file pre-existed with a wider mode
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target
