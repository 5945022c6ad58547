"""The README's examples run as written, against the reference server on loopback."""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from ov_agent_ext.cli import main
from ov_agent_ext.demo import _reference_server

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_block(after_heading: str) -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index(after_heading) :]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, f"no python example under {after_heading!r}"
    return match.group(1)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    with _reference_server(tmp_path / "server") as url:
        yield url


def test_event_api_example_runs_as_written(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENVIKING_URL", server)
    monkeypatch.setenv("OV_AGENT_EXT_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    code = _python_block("## Use it from any agent")
    exec(compile(code, "README.md", "exec"), {"__name__": "__readme__"})
    out = capsys.readouterr().out
    assert "No results for 'Falcon database'" in out or "result(s) for 'Falcon database'" in out
    assert "Status(endpoint=" in out
    assert "last_capture='turn 1: queued" in out  # captured locally, sent in the background

    # The CLI examples, against the same server and state.
    assert main(["--endpoint", server, "status"]) == 0
    assert main(["--endpoint", server, "search", "Falcon database"]) == 0
    assert main(["--endpoint", server, "commit", "pi-my-session"]) == 0
    out = capsys.readouterr().out
    assert "reachable" in out
    # status, in its own process, sees what the agent did (its saved snapshot).
    assert "session    pi-my-session" in out
    assert "last recall" in out
    assert "last commit  committed pi-my-session" in out
    assert "Nothing to commit in pi-my-session" in out  # shutdown committed it already


def test_tools_command_prints_the_seven_schemas(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tools", "--format", "mcp"]) == 0
    tools = json.loads(capsys.readouterr().out)
    assert [t["name"] for t in tools] == [
        "viking_search",
        "viking_read",
        "viking_browse",
        "viking_remember",
        "viking_forget",
        "viking_add_resource",
        "viking_archive_expand",
    ]
    assert all("inputSchema" in t for t in tools)


def test_demo_recalls_what_the_first_session_taught() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["demo"])
    text = out.getvalue()
    assert code == 0, text
    assert "session 2 recalled 3/3 facts" in text
    assert "<relevant-memories>" in text
    assert "the unrelated prompt got no block" in text
