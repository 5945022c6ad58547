"""Directory summaries: the L0 abstract (<= 256 chars) and L1 overview of a directory.

Pure functions of a directory's path and its children's names (and, for a resource directory,
its document's first line), so regenerating them is cheap and deterministic. The standard
directories carry the real server's own descriptions; memory directories get the real
server's overview headings ("# Preferences Overview", "**Category:** projects", ...).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "ABSTRACT_LIMIT",
    "FIXED",
    "OVERVIEW_ENTRIES",
    "OVERVIEW_LIMIT",
    "describe",
    "document_title",
    "shorten",
]

ABSTRACT_LIMIT, OVERVIEW_LIMIT, OVERVIEW_ENTRIES = 256, 4000, 50

FIXED = {  # "user/*" stands for any user's space
    "user/*": "User scope. Stores user's long-term memory, persisted across sessions.",
    "user/*/memories": (
        "User's long-term memory storage. Contains memory types like preferences, entities, "
        "events, managed hierarchically by type."
    ),
    "user/*/peers": (
        "User peer memory root. Stores the current User's long-term memory about stable "
        "interaction peers."
    ),
    "user/*/privacy": (
        "User privacy config root. Stores user-scoped sensitive configuration snapshots by "
        "category and target key."
    ),
    "user/*/resources": (
        "User-owned resource storage. Contains private documents and knowledge resources "
        "owned by the current User."
    ),
    "user/*/skills": (
        "User skill registry. Uses Claude Skills protocol format, flat storage of callable "
        "skill definitions owned by the current User."
    ),
    "agent": "Shared agent capabilities and configuration available across the account.",
    "agent/skills": "Agent skill registry: callable skill definitions shared by the account.",
    "resources": (
        "Resources scope. Independent knowledge and resource storage, not bound to specific "
        "account or Agent."
    ),
}


def shorten(text: str, limit: int) -> str:
    """``text`` stripped, cut to ``limit`` characters with an ellipsis."""
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def document_title(head: str) -> str:
    """The first non-empty line of a document, without markdown heading marks."""
    lines = (line.strip().lstrip("#").strip() for line in head.splitlines())
    return next((line for line in lines if line), "")[:120]


def describe(
    path: str, children: Sequence[tuple[str, bool]], count: int, title: str = ""
) -> tuple[str, str] | None:
    """(abstract, overview) of the directory at ``path``, or None when it is empty and has
    no fixed description. ``children`` are its first visible ``(name, is_dir)`` entries in
    name order, ``count`` how many there are, ``title`` its first document's title."""
    parts = path.split("/")
    name = parts[-1]
    key = "/".join("*" if i == 1 and parts[0] == "user" else p for i, p in enumerate(parts))
    if not count and key not in FIXED:
        return None
    shown = children[:OVERVIEW_ENTRIES]
    labels = ", ".join(child if is_dir else child.removesuffix(".md") for child, is_dir in shown)
    links = [
        f"- [{child}/](./{child}/)" if is_dir else f"- [{child.removesuffix('.md')}](./{child})"
        for child, is_dir in shown
    ]
    if count > OVERVIEW_ENTRIES:
        links.append(f"- ... and {count - OVERVIEW_ENTRIES} more")
    head, heading = "", name
    in_memories = len(parts) >= 4 and parts[0] == "user" and parts[2] == "memories"
    if key in FIXED:
        abstract = FIXED[key]
    elif in_memories and parts[3] == "preferences" and len(parts) == 5:
        heading, head = "Preferences Overview", f"**User:** {name}\n\n"
        abstract = f"Preferences of {name}: {labels}."
    elif in_memories and parts[3] == "entities" and len(parts) == 5:
        heading, head = "Entities Overview", f"**Category:** {name}\n\n"
        abstract = f"Entities ({name}): {labels}."
    elif in_memories and parts[3] == "events" and len(parts) > 4:
        heading = "Events Overview"
        abstract = f"Events of {'/'.join(parts[4:])}: {labels}."
    elif in_memories and len(parts) == 4:
        heading = f"{name.capitalize()} Overview"
        abstract = f"{name.capitalize()} memories: {labels}."
    elif parts[0] == "resources" and len(parts) >= 2 and title:
        abstract = f"Resource {name}: {title}."
    else:
        abstract = f"{name}: {count} item{'s' if count != 1 else ''}: {labels}."
    overview = f"# {heading}\n\n{head}{abstract}\n\n" + "\n".join(links)
    return shorten(abstract, ABSTRACT_LIMIT), shorten(overview, OVERVIEW_LIMIT)
