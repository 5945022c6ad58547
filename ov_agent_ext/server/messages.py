"""Session messages: stored parts, their token estimate, their JSON and summary lines.

A plain ``content`` is stored as one text part; ``parts`` (which win when both are given) are
normalised to the real server's shapes, and a part of unknown type is kept as its text
rendering, as the real server does. Token estimates count every part: text, a context part's
abstract, and a tool call's name, input and output (a tool-only turn is not free).
"""

from __future__ import annotations

import json
from typing import Any

from .schemas import AddMessageRequest
from .util import estimate_tokens

__all__ = ["message_json", "message_tokens", "normalize_parts", "summary_line"]

SUMMARY_LINE_CHARS = 160


def normalize_parts(message: AddMessageRequest) -> list[dict[str, Any]]:
    """The stored parts: ``content`` becomes one text part; unknown parts become text."""
    if not message.parts:
        return [] if message.content is None else [{"type": "text", "text": message.content}]
    parts: list[dict[str, Any]] = []
    for part in message.parts:
        kind = part.get("type")
        if kind == "text" or (kind is None and "text" in part):
            parts.append({"type": "text", "text": str(part.get("text") or "")})
        elif kind == "context":
            parts.append(
                {
                    "type": "context",
                    "uri": str(part.get("uri") or ""),
                    "context_type": str(part.get("context_type") or "memory"),
                    "abstract": str(part.get("abstract") or ""),
                }
            )
        elif kind == "tool":
            tool_input = part.get("tool_input")
            parts.append(
                {
                    "type": "tool",
                    "tool_id": str(part.get("tool_id") or ""),
                    "tool_name": str(part.get("tool_name") or ""),
                    "tool_uri": str(part.get("tool_uri") or ""),
                    "skill_uri": str(part.get("skill_uri") or ""),
                    "tool_status": str(part.get("tool_status") or "completed"),
                    "tool_input": tool_input if isinstance(tool_input, dict) else {},
                    "tool_output": str(part.get("tool_output") or ""),
                }
            )
        else:  # the real server keeps unknown parts as their text rendering
            parts.append({"type": "text", "text": str(part)})
    return parts


def _part_text(part: dict[str, Any]) -> str:
    kind = part.get("type")
    if kind == "context":
        return str(part.get("abstract", ""))
    if kind == "tool":
        tool_input = json.dumps(part.get("tool_input", {}), ensure_ascii=False)
        return f"{part.get('tool_name', '')}{tool_input}{part.get('tool_output', '')}"
    return str(part.get("text", ""))


def message_tokens(parts: list[dict[str, Any]]) -> int:
    """Token estimate of a message; tool calls count (name, input, output)."""
    return sum(estimate_tokens(_part_text(part)) for part in parts)


def message_json(row: Any) -> dict[str, Any]:
    return {
        "id": row["id"],
        "role": row["role"],
        "parts": json.loads(row["parts"]),
        "created_at": row["created_at"],
    }


def summary_line(message: dict[str, Any]) -> str:
    texts = []
    for part in message["parts"]:
        if part.get("type") == "tool":
            texts.append(f"[tool {part.get('tool_name', '')}]")
        elif part.get("type") == "context":
            texts.append(f"[context {part.get('uri', '')}]")
        else:
            texts.append(str(part.get("text", "")))
    text = " ".join(" ".join(texts).split())
    return f"- {message['role']}: {text[:SUMMARY_LINE_CHARS]}"
