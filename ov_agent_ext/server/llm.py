"""Optional LLM-assisted extraction through an OpenAI-compatible chat endpoint.

Off by default: ``create_app(..., llm_base_url=..., llm_model=...)`` turns it on. The model
is asked for a JSON list of memories from the user's own statements; its answer is mapped onto
the same files and update rules as the rule-based path. Any failure (network, HTTP status,
malformed JSON) falls back to the rules, so a commit never fails because a model did.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any

import httpx

from .extract import MemoryOp, user_statements
from .sessions import Extractor
from .util import slug

__all__ = ["LLM_TIMEOUT", "LlmExtractor", "parse_answer"]

logger = logging.getLogger(__name__)

LLM_TIMEOUT = 60.0  # seconds for one extraction call
_PROMPT = """You extract long-term memories from what a USER said to a coding assistant.
Use only the user's own statements below. Answer with JSON only, in this shape:
{"memories": [
  {"type": "preference", "topic": "<2-4 words>", "text": "<one sentence>"},
  {"type": "profile", "text": "<one sentence about who the user is>"},
  {"type": "entity", "category": "projects", "name": "<entity name>", "text": "<one fact>"},
  {"type": "event", "name": "<2-4 words>", "text": "<one sentence: a decision or event>"}
]}
Return {"memories": []} when nothing is worth remembering.

User statements:
"""


def parse_answer(content: str, user: str, today: datetime) -> list[MemoryOp]:
    """Memory operations from the model's JSON answer (ValueError when it is not JSON)."""
    text = content.strip()
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    data = json.loads(text)
    items = data.get("memories", []) if isinstance(data, dict) else data
    ops: list[MemoryOp] = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or not str(item.get("text", "")).strip():
            continue
        kind, bullet = str(item.get("type", "")).lower(), "- " + str(item["text"]).strip()
        if kind == "preference":
            topic = slug(str(item.get("topic") or item["text"]), words=4) or "preference"
            ops.append(MemoryOp("preferences", f"preferences/{user}/{topic}.md", bullet, "replace"))
        elif kind == "profile":
            ops.append(MemoryOp("profile", "profile.md", bullet, "profile"))
        elif kind == "entity":
            category = slug(str(item.get("category") or "projects"), words=1) or "projects"
            name = slug(str(item.get("name") or item["text"]), words=3) or "entity"
            ops.append(MemoryOp("entities", f"entities/{category}/{name}.md", bullet, "merge"))
        elif kind == "event":
            name = slug(str(item.get("name") or item["text"]), words=4) or "event"
            folder = today.strftime("%Y/%m/%d")
            ops.append(MemoryOp("events", f"events/{folder}/{name}.md", bullet, "replace"))
    return ops


class LlmExtractor:
    """An :data:`~.sessions.Extractor` backed by a chat-completions endpoint."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None,
        *,
        fallback: Extractor,
        transport: httpx.AsyncBaseTransport | None = None,
    ):
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._model = model
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._fallback = fallback
        self._transport = transport

    async def __call__(
        self, messages: list[dict[str, Any]], user: str, today: datetime
    ) -> list[MemoryOp]:
        statements = [text for text, _ in user_statements(messages)]
        if not statements:
            return []
        request = {
            "model": self._model,
            "temperature": 0,
            "messages": [{"role": "user", "content": _PROMPT + "\n".join(statements)}],
        }
        try:
            async with httpx.AsyncClient(
                transport=self._transport, timeout=LLM_TIMEOUT, trust_env=False
            ) as http:
                response = await http.post(self._url, json=request, headers=self._headers)
                response.raise_for_status()
                content = response.json()["choices"][0]["message"]["content"]
            return parse_answer(str(content), user, today)
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
            logger.warning("LLM extraction failed (%s); using the rules", type(exc).__name__)
            return await self._fallback(messages, user, today)
