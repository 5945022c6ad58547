"""ov-agent-ext: long-term memory for Python coding agents through an OpenViking server."""

from ._version import __version__
from .capture import (
    CaptureDecision,
    CapturedTurn,
    ToolCall,
    Turn,
    build_messages,
    should_capture,
    turn_from_messages,
)
from .client import OVClient
from .config import OVConfig, load_config, save_config
from .errors import (
    ClientError,
    ConfigError,
    NotFoundError,
    OVError,
    ServerError,
    ServerUnavailable,
)
from .extension import OpenVikingExtension, Status
from .index import IndexBuilder
from .models import (
    AddMessagesResult,
    Archive,
    CommitResult,
    ContextPart,
    FindResult,
    FsEntry,
    HealthInfo,
    Message,
    SearchHit,
    SessionContext,
    SessionInfo,
    TaskInfo,
    TextPart,
    ToolPart,
)
from .profile import ProfileBuilder, RehydrationBuilder, compose_system_prompt
from .tokens import Tokenizer, estimate_tokens, get_tokenizer

__all__ = [
    "AddMessagesResult",
    "Archive",
    "CaptureDecision",
    "CapturedTurn",
    "ClientError",
    "CommitResult",
    "ConfigError",
    "ContextPart",
    "FindResult",
    "FsEntry",
    "HealthInfo",
    "IndexBuilder",
    "Message",
    "NotFoundError",
    "OVClient",
    "OVConfig",
    "OVError",
    "OpenVikingExtension",
    "ProfileBuilder",
    "RehydrationBuilder",
    "SearchHit",
    "ServerError",
    "ServerUnavailable",
    "SessionContext",
    "SessionInfo",
    "Status",
    "TaskInfo",
    "TextPart",
    "Tokenizer",
    "ToolCall",
    "ToolPart",
    "Turn",
    "__version__",
    "build_messages",
    "compose_system_prompt",
    "estimate_tokens",
    "get_tokenizer",
    "load_config",
    "save_config",
    "should_capture",
    "turn_from_messages",
]
