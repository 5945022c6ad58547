"""Capture: what one conversation turn sends to the memory store, and what it leaves out.

A host describes a turn as a :class:`Turn` (the user's prompt, the assistant's reply, the tool
calls in between), built directly or from its own message list by :func:`turn_from_messages`.
:func:`build_messages` turns it into the session messages to send:

1. Injected blocks (``<relevant-memories>``, ``<system-reminder>``, ...) are stripped from the
   user text, the assistant text and tool outputs, so recall is never captured back into memory
   (the feedback loop). A tag left half open by a cut is dropped with its injected side.
2. Secrets are redacted (:mod:`ov_agent_ext.redact`) in everything that leaves.
3. :func:`should_capture` decides on the user text as it would be sent (stripped, redacted),
   with the spec's pipeline: empty, length bounds (CJK-aware), slash command, punctuation
   only, question only, and in ``keyword`` mode a memory trigger. A skipped turn sends
   nothing and says why.
4. The user message is plain ``content``. The assistant message is parts: its text plus the
   summary line ``[assistant used tools: read, edit, bash]``, then one ``ToolPart`` per call
   with its input kept structured (string values capped) and its output dropped unless
   ``captureToolResults`` (then capped too). Tool results are noise for extraction and were
   78% of captured bytes in the existing integrations; which tools ran, on what, is signal.
5. Tokens are counted for the commit threshold, tool parts included, so a turn that only ran
   tools still moves the session toward a commit (it counted 0 before, so commits never came).
"""

from __future__ import annotations

import dataclasses
import json
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import Field
from pydantic.dataclasses import dataclass as pydantic_dataclass

from .blocks import strip_injected
from .config import OVConfig
from .models import Message, TextPart, ToolPart
from .redact import redact, redact_value
from .tokens import estimate_tokens

__all__ = [
    "MEMORY_TRIGGERS",
    "TOOL_INPUT_CAP",
    "TOOL_OUTPUT_CAP",
    "CaptureDecision",
    "CaptureMode",
    "CaptureReason",
    "CapturedTurn",
    "ToolCall",
    "Turn",
    "build_messages",
    "clean_text",
    "should_capture",
    "turn_from_messages",
]

CaptureMode = Literal["semantic", "keyword"]
CaptureReason = Literal[
    "empty",  # nothing left once injected blocks are stripped
    "length_out_of_range",  # too short to mean anything, or longer than captureMaxLength
    "command",  # a slash command (/help, /compact): a directive to the host, not content
    "non_content",  # only punctuation, symbols and whitespace
    "question_only",  # a bare question ("what is X?"): nothing to remember
    "no_trigger",  # keyword mode, and no memory trigger matched
    "trigger_matched",  # keyword mode, a memory trigger matched: captured
    "semantic",  # semantic mode (the default): every turn that passes the filters is captured
]
ToolStatus = Literal["completed", "error", "running"]

TOOL_OUTPUT_CAP = 2000
"""Characters of a tool's output kept when ``captureToolResults`` is on."""
TOOL_INPUT_CAP = 2000
"""Characters kept of each string inside a tool's input (a write tool's whole file is not a
memory; its path and the start of its content are)."""
_TRUNCATED = "…[truncated]"
_REDACT_BEFORE_FILTER = 4  # user texts up to this many times captureMaxLength are redacted first


# --- the unit of capture ------------------------------------------------------------------------


@pydantic_dataclass(frozen=True)
class ToolCall:
    """One tool call of a turn: what the agent asked for, and what came back."""

    name: str
    input: dict[str, Any] = Field(default_factory=dict)
    output: str = ""
    status: ToolStatus = "completed"
    id: str = ""


@pydantic_dataclass(frozen=True)
class Turn:
    """One user prompt and everything the agent did for it, as the host saw it.

    >>> Turn(3, user="Use uv, not pip", assistant="Noted.").index
    3
    """

    index: int
    user: str
    assistant: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class CaptureDecision:
    """Whether a turn is captured, and why (one of :data:`CaptureReason`)."""

    capture: bool
    reason: CaptureReason


@dataclasses.dataclass(frozen=True)
class CapturedTurn:
    """The messages to send for a turn (none if skipped), their token estimate, the decision."""

    messages: list[Message]
    tokens: int
    decision: CaptureDecision


# --- the filter (the spec's shouldCapture) ------------------------------------------------------

MEMORY_TRIGGERS: tuple[re.Pattern[str], ...] = (
    re.compile(r"remember|preference|prefer|important|decision|decided|always|never", re.I),
    re.compile(r"[\w.-]+@[\w.-]+\.\w+", re.ASCII),  # an email address
    re.compile(r"(?:my)\s*(?:name|live|from|birthday|phone|email)", re.I),  # identity
    re.compile(r"(?:i)\s*(?:like|hate|love|want|need|think|believe)", re.I),  # preference
    re.compile(r"(?:favorite|favourite|love|hate|enjoy|dislike)", re.I),
)
"""The spec's keyword-mode triggers, ported as written (including their looseness: "my" and
"i" need no word boundary)."""

_WHITESPACE = re.compile(r"\s+")
# Hiragana/Katakana, CJK ideographs (extension A and unified), compatibility ideographs, Hangul.
_CJK = re.compile("[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff\uac00-\ud7af]")
# JavaScript regexes without the u flag: \b and case folding are ASCII; "." stops at line ends.
_COMMAND = re.compile(r"^/[a-z0-9_-]{1,64}\b", re.I | re.ASCII)
_PATH_START = re.compile(r"^/[^\s/]+/")
_QUESTION = re.compile(
    r"^(?:who|what|when|where|why|how|is|are|does|did|can|could|would|should)\b"
    "[^\n\r\u2028\u2029]{0,200}[?\uff1f]\\Z",
    re.I | re.ASCII,
)


def _js_length(text: str) -> int:
    """``text.length`` in JavaScript: UTF-16 code units (a character outside the BMP is 2)."""
    return len(text) if text.isascii() else len(text.encode("utf-16-le")) // 2


def _is_non_content(text: str) -> bool:
    """Only punctuation, symbols and whitespace (``/^[\\p{P}\\p{S}\\s]+$/u``)."""
    return all(c.isspace() or unicodedata.category(c)[0] in "PS" for c in text)


_OPEN_TAG = re.compile(
    r"<(?:relevant-memories|system-reminder|openviking-context|memory-context)(?:\s[^>]*)?>",
    re.I,
)
_CLOSE_TAG = re.compile(
    r"</(?:relevant-memories|system-reminder|openviking-context|memory-context)\s*>", re.I
)


def clean_text(text: str) -> str:
    """Text as capture sees it: every injected block stripped (``strip_injected``), then what a
    cut left of one: before a closing tag with no opening is the injected side (the block's
    start was cut), and so is everything after an opening tag with no closing.

    >>> clean_text("<relevant-memories>\\n- [memory 0.9] x\\n</relevant-memories>\\n\\nFix it")
    'Fix it'
    >>> clean_text("- [memory 0.9] cut off\\n</relevant-memories>\\nFix it")
    'Fix it'
    """
    text = strip_injected(text)
    if "<" not in text:
        return text
    closes = list(_CLOSE_TAG.finditer(text))
    if closes:
        text = text[closes[-1].end() :]
    opening = _OPEN_TAG.search(text)
    if opening is not None:
        text = text[: opening.start()]
    return text.strip()


def should_capture(
    text: str, mode: CaptureMode = "semantic", max_length: int = 24000
) -> CaptureDecision:
    """The spec's capture filter on a user message; never raises for any text.

    One deviation: text that starts with an absolute path (``/etc/nginx/nginx.conf has a
    typo``) is not a slash command; the spec's pattern took its first segment for one.

    >>> should_capture("ok")
    CaptureDecision(capture=False, reason='length_out_of_range')
    >>> should_capture("I prefer uv over pip for packaging", "keyword")
    CaptureDecision(capture=True, reason='trigger_matched')
    """
    if mode not in ("semantic", "keyword"):
        raise ValueError(f"capture mode must be 'semantic' or 'keyword', not {mode!r}")
    normalized = clean_text(text)
    if not normalized:
        return CaptureDecision(False, "empty")

    compact = _WHITESPACE.sub("", normalized)
    min_length = 4 if _CJK.search(compact) else 10
    if _js_length(compact) < min_length or _js_length(normalized) > max_length:
        return CaptureDecision(False, "length_out_of_range")

    if _COMMAND.match(normalized) and not _PATH_START.match(normalized):
        return CaptureDecision(False, "command")

    if _is_non_content(normalized):
        return CaptureDecision(False, "non_content")

    if _QUESTION.match(normalized):
        return CaptureDecision(False, "question_only")

    if mode == "keyword":
        if any(trigger.search(normalized) for trigger in MEMORY_TRIGGERS):
            return CaptureDecision(True, "trigger_matched")
        return CaptureDecision(False, "no_trigger")
    return CaptureDecision(True, "semantic")


# --- building the messages ----------------------------------------------------------------------


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + _TRUNCATED


def _has_injected_marker(text: str) -> bool:
    return "\x00" in text or "[Subagent Context]" in text or bool(_OPEN_TAG.search(text))


def _prepare_input(value: Any) -> Any:
    """JSON-safe, cut to twice the cap (redaction needs a margin around the cut), injected
    blocks removed from strings that hold one (others keep their exact whitespace)."""
    if isinstance(value, str):
        value = value[: 2 * TOOL_INPUT_CAP]
        if _has_injected_marker(value) or _CLOSE_TAG.search(value):
            return clean_text(value)
        return value
    if isinstance(value, Mapping):
        return {str(k): _prepare_input(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_prepare_input(v) for v in value]
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, bytes):
        return _prepare_input(value.decode("utf-8", "replace"))
    return _prepare_input(str(value))


def _cap_strings(value: Any) -> Any:
    if isinstance(value, str):
        return _cap(value, TOOL_INPUT_CAP)
    if isinstance(value, dict):
        return {k: _cap_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cap_strings(v) for v in value]
    return value


def _tool_input(call: ToolCall) -> dict[str, Any]:
    prepared = _prepare_input(call.input)
    capped: dict[str, Any] = _cap_strings(redact_value(prepared))
    return capped


def _tool_output(call: ToolCall) -> str:
    text = clean_text(call.output[: 2 * TOOL_OUTPUT_CAP])
    return _cap(redact(text), TOOL_OUTPUT_CAP)


def _unique(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))


def build_messages(turn: Turn, config: OVConfig) -> CapturedTurn:
    """The messages a turn sends, after the filter, stripping and redaction.

    >>> config = OVConfig()
    >>> captured = build_messages(
    ...     Turn(0, user="Rename the helper to parse_config", assistant="Renamed.",
    ...          tool_calls=[ToolCall("edit", {"path": "cfg.py"}, output="ok")]),
    ...     config,
    ... )
    >>> [m.role for m in captured.messages], captured.decision.reason
    (['user', 'assistant'], 'semantic')
    >>> captured.messages[1].parts[0].text
    'Renamed.\\n\\n[assistant used tools: edit]'
    """
    # The filter judges the text that would be sent: stripped, then redacted (so a redaction
    # can never turn a captured text into one the filter would skip, or back). A text far over
    # the length bound is rejected before paying for its redaction (a pasted 1 MB log).
    user_content = clean_text(turn.user)
    if len(user_content) <= _REDACT_BEFORE_FILTER * config.capture_max_length:
        user_content = redact(user_content)
    decision = should_capture(user_content, config.capture_mode, config.capture_max_length)
    if not decision.capture:
        return CapturedTurn([], 0, decision)

    messages = [Message(role="user", content=user_content)]
    tokens = estimate_tokens(user_content)
    if not config.capture_assistant_turns:
        return CapturedTurn(messages, tokens, decision)

    assistant_text = redact(clean_text(turn.assistant))
    names = _unique(call.name for call in turn.tool_calls)
    summary = f"[assistant used tools: {', '.join(names)}]" if names else ""
    text = "\n\n".join(t for t in (assistant_text, summary) if t)

    parts: list[TextPart | ToolPart] = []
    if text:
        parts.append(TextPart(text=text))
        tokens += estimate_tokens(text)
    for i, call in enumerate(turn.tool_calls):
        part = ToolPart(
            tool_id=call.id or f"turn{turn.index}-tool{i}",
            tool_name=call.name,
            tool_input=_tool_input(call),
            tool_output=_tool_output(call) if config.capture_tool_results else "",
            tool_status=call.status,
        )
        parts.append(part)
        counted = {"name": part.tool_name, "input": part.tool_input, "output": part.tool_output}
        tokens += estimate_tokens(json.dumps(counted, ensure_ascii=False))
    if parts:
        messages.append(Message(role="assistant", parts=list(parts)))
    return CapturedTurn(messages, tokens, decision)


# --- host message lists -------------------------------------------------------------------------

_USER_ROLES = frozenset({"user", "human"})
_ASSISTANT_ROLES = frozenset({"assistant", "model", "ai", "bot"})
# Every spelling of "this message is a tool's result", compared lower-case without "_"/"-":
# OpenAI "tool", legacy OpenAI and Gemini "function", pi "toolResult", Claude Code plugin
# "tool_result", and the rest seen in hosts and SDKs. A result whose role is not recognised is
# silently lost (the pi extension's bug), so the list is generous.
_TOOL_RESULT_ROLES = frozenset(
    {
        "tool",
        "toolresult",
        "toolresults",
        "toolresponse",
        "tooloutput",
        "function",
        "functionresult",
        "functionresponse",
        "ipython",
    }
)
_TEXT_BLOCKS = frozenset({"text", "inputtext", "outputtext"})
_CALL_BLOCKS = frozenset({"tooluse", "toolcall", "functioncall", "servertooluse"})
_RESULT_BLOCKS = frozenset(
    {"toolresult", "functioncalloutput", "functionresponse", "toolresponse", "toolerror"}
)
_RESULT_ID_KEYS = ("tool_call_id", "toolCallId", "tool_use_id", "toolUseId", "call_id", "callId")
# A Responses API item has its own "id" besides the "call_id" its output refers to.
_CALL_ID_KEYS = ("call_id", "callId", "toolCallId", "tool_call_id", "toolUseId", "id")


def _norm(kind: Any) -> str:
    return str(kind or "").lower().replace("_", "").replace("-", "")


def _as_mapping(item: Any) -> Mapping[str, Any] | None:
    if isinstance(item, Mapping):
        return item
    dump = getattr(item, "model_dump", None)  # a pydantic message object
    if callable(dump):
        dumped = dump()
        return dumped if isinstance(dumped, Mapping) else None
    return None


def _blocks(content: Any) -> list[Mapping[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, Mapping):
        return [content]
    if isinstance(content, Sequence):
        blocks: list[Mapping[str, Any]] = []
        for item in content:
            if isinstance(item, str):
                blocks.append({"type": "text", "text": item})
            elif (block := _as_mapping(item)) is not None:
                blocks.append(block)
        return blocks
    return []


def _block_kind(block: Mapping[str, Any]) -> str:
    kind = _norm(block.get("type"))
    if kind:
        return kind
    # Gemini parts carry no type: {"text"}, {"functionCall"}, {"functionResponse"}.
    for key, implied in (
        ("functionCall", "functioncall"),
        ("function_call", "functioncall"),
        ("functionResponse", "functionresponse"),
        ("function_response", "functionresponse"),
        ("text", "text"),
    ):
        if key in block:
            return implied
    return ""


def _text_of(value: Any) -> str:
    """A tool result's or a message's text, whatever its shape."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        pieces = [_text_of(item) for item in value]
        return "\n".join(p for p in pieces if p)
    if isinstance(value, Mapping):
        kind = _block_kind(value)
        if kind in _TEXT_BLOCKS and isinstance(value.get("text"), str):
            return str(value["text"])
        if kind in ("image", "inputimage", "imageurl", "document", "file"):
            return f"[{kind}]"
        for key in ("content", "output", "result", "response", "value"):
            if key in value:
                return _text_of(value[key])
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _message_text(message: Mapping[str, Any]) -> str:
    pieces = [
        str(block.get("text") or "")
        for block in _blocks(message.get("content", message.get("parts")))
        if _block_kind(block) in _TEXT_BLOCKS
    ]
    return "\n".join(p for p in pieces if p)


def _parse_arguments(raw: Any) -> dict[str, Any]:
    if raw is None:
        return {}
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            raw = json.loads(raw)
        except ValueError:
            return {"arguments": raw}
    if isinstance(raw, Mapping):
        return dict(raw)
    return {"arguments": raw}


def _first(mapping: Mapping[str, Any], keys: Sequence[str]) -> str:
    for key in keys:
        value = mapping.get(key)
        if value:
            return str(value)
    return ""


@dataclasses.dataclass
class _Call:
    id: str
    name: str
    input: dict[str, Any]
    output: str = ""
    status: ToolStatus = "running"  # until its result is seen
    paired: bool = False


@dataclasses.dataclass
class _Result:
    id: str
    name: str
    output: str
    error: bool


def _call_from_block(block: Mapping[str, Any]) -> _Call:
    inner = block.get("functionCall") or block.get("function_call") or block.get("function")
    source = inner if isinstance(inner, Mapping) else block
    name = _first(source, ("name", "toolName", "tool_name")) or _first(block, ("name", "toolName"))
    raw = None
    for key in ("input", "arguments", "args", "parameters"):
        if key in source:
            raw = source[key]
            break
    return _Call(
        _first(block, _CALL_ID_KEYS) or _first(source, ("id",)), name, _parse_arguments(raw)
    )


def _is_error(mapping: Mapping[str, Any]) -> bool:
    if mapping.get("is_error") or mapping.get("isError"):
        return True
    if _norm(mapping.get("status")) in ("error", "failed", "failure"):
        return True
    return _block_kind(mapping) == "toolerror"


def _result_from_block(block: Mapping[str, Any]) -> _Result:
    inner = block.get("functionResponse") or block.get("function_response")
    if isinstance(inner, Mapping):  # Gemini: {"functionResponse": {"id"?, "name", "response"}}
        return _Result(
            _first(inner, ("id",)), _first(inner, ("name",)), _text_of(inner.get("response")), False
        )
    output = next(
        (block[k] for k in ("content", "output", "result", "response", "error") if k in block), ""
    )
    return _Result(
        _first(block, _RESULT_ID_KEYS),
        _first(block, ("name", "toolName", "tool_name")),
        _text_of(output),
        _is_error(block),
    )


def _result_from_message(message: Mapping[str, Any]) -> _Result:
    content = message.get("content", message.get("parts"))
    blocks = _blocks(content)
    # Gemini's function role wraps functionResponse parts; others carry the output directly.
    if blocks and all(_block_kind(b) in _RESULT_BLOCKS for b in blocks):
        result = _result_from_block(blocks[0])
        result.output = "\n".join(_result_from_block(b).output for b in blocks)
        return result
    return _Result(
        _first(message, _RESULT_ID_KEYS),
        _first(message, ("name", "toolName", "tool_name")),
        _text_of(content),
        _is_error(message),
    )


def _pair(calls: list[_Call], results: list[_Result]) -> list[_Call]:
    """Attach each result to its call: by id, else the first unpaired call of its name, else the
    first unpaired call. A result with no call becomes a call of its own."""
    by_id = {call.id: call for call in calls if call.id}
    for result in results:
        call = by_id.get(result.id) if result.id else None
        if call is None or call.paired:
            call = next(
                (c for c in calls if not c.paired and result.name and c.name == result.name),
                None,
            )
        if call is None and not result.id:
            call = next((c for c in calls if not c.paired), None)
        if call is None:
            call = _Call(result.id, result.name or "unknown", {})
            calls.append(call)
        call.paired = True
        call.output = result.output
        call.status = "error" if result.error else "completed"
    return calls


def turn_from_messages(messages: Sequence[Any], index: int) -> Turn:
    """A :class:`Turn` from a host's message list (the whole conversation or just this turn).

    The turn starts at the last user message that is a prompt (has text once injected blocks
    are stripped, and carries no tool results); the assistant text and tool calls after it are
    the turn's. Understood shapes: OpenAI chat (``tool_calls`` + ``role: "tool"``, legacy
    ``function_call`` + ``role: "function"``), OpenAI Responses (``function_call`` /
    ``function_call_output`` items), Anthropic (``tool_use`` / ``tool_result`` blocks, results
    in user messages), pi (``toolCall`` blocks + ``role: "toolResult"``), Claude Code
    (``role: "tool_result"``), Gemini (``functionCall`` / ``functionResponse`` parts), Vercel
    AI SDK (``tool-call`` / ``tool-result``). Results pair with calls by id.

    >>> turn = turn_from_messages([
    ...     {"role": "user", "content": "Fix the failing test"},
    ...     {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
    ...      "function": {"name": "bash", "arguments": '{"command": "pytest -x"}'}}]},
    ...     {"role": "tool", "tool_call_id": "c1", "content": "1 failed"},
    ...     {"role": "assistant", "content": "Fixed the off-by-one."},
    ... ], index=4)
    >>> turn.user, turn.assistant, turn.tool_calls[0].output
    ('Fix the failing test', 'Fixed the off-by-one.', '1 failed')
    """
    items = [m for m in (_as_mapping(item) for item in messages) if m is not None]

    def role(message: Mapping[str, Any]) -> str:
        value = message.get("role")
        if value is None and message.get("type") is not None:  # Responses API items
            return _norm(message.get("type"))
        return _norm(value)

    def is_prompt(message: Mapping[str, Any], *, strict: bool) -> bool:
        if role(message) not in _USER_ROLES:
            return False
        blocks = _blocks(message.get("content", message.get("parts")))
        if any(_block_kind(b) in _RESULT_BLOCKS for b in blocks):
            return False
        return not strict or bool(clean_text(_message_text(message)))

    start = next(
        (i for i in range(len(items) - 1, -1, -1) if is_prompt(items[i], strict=True)), None
    )
    if start is None:
        start = next(
            (i for i in range(len(items) - 1, -1, -1) if is_prompt(items[i], strict=False)), None
        )
    user = _message_text(items[start]) if start is not None else ""
    rest = items[start + 1 :] if start is not None else items

    texts: list[str] = []
    calls: list[_Call] = []
    results: list[_Result] = []
    for message in rest:
        kind = role(message)
        if kind in _TOOL_RESULT_ROLES:
            results.append(_result_from_message(message))
            continue
        if kind == "functioncall":  # OpenAI Responses API items
            calls.append(_call_from_block(message))
            continue
        if kind == "functioncalloutput":
            results.append(_result_from_block(message))
            continue
        if kind not in _ASSISTANT_ROLES and kind not in _USER_ROLES:
            continue  # system, developer, reasoning items: not captured
        for tool_call in message.get("tool_calls") or ():
            if (mapping := _as_mapping(tool_call)) is not None:
                calls.append(_call_from_block(mapping))
        legacy = message.get("function_call")
        if isinstance(legacy, Mapping):
            calls.append(_call_from_block({"function": legacy}))
        pieces: list[str] = []
        for block in _blocks(message.get("content", message.get("parts"))):
            block_kind = _block_kind(block)
            if block_kind in _CALL_BLOCKS:
                calls.append(_call_from_block(block))
            elif block_kind in _RESULT_BLOCKS:
                results.append(_result_from_block(block))
            elif block_kind in _TEXT_BLOCKS and kind in _ASSISTANT_ROLES:
                pieces.append(str(block.get("text") or ""))
        text = "\n".join(p for p in pieces if p)
        if text.strip():
            texts.append(text)

    paired = _pair(calls, results)
    return Turn(
        index,
        user=user,
        assistant="\n\n".join(texts),
        tool_calls=[
            ToolCall(c.name or "unknown", c.input, output=c.output, status=c.status, id=c.id)
            for c in paired
        ],
    )
