"""The server shares the contract, not the client's code."""

from __future__ import annotations

import ast
from pathlib import Path

import ov_agent_ext.server

FORBIDDEN = {"client", "models", "spaces", "config", "tokens"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def test_server_modules_never_import_the_client_side() -> None:
    package = Path(ov_agent_ext.server.__file__).parent
    offenders = []
    for path in sorted(package.glob("*.py")):
        for name in _imports(path):
            parts = name.lstrip(".").split(".")
            parent_relative = name.startswith("..")
            absolute = name.startswith("ov_agent_ext.")
            if (parent_relative and parts[0] in FORBIDDEN) or (
                absolute and len(parts) > 1 and parts[1] in FORBIDDEN
            ):
                offenders.append(f"{path.name}: {name}")
    assert offenders == []
