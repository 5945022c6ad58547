"""``ov-agent-ext demo``: two sessions through the event API, showing what a model would see.

Session 1 states preferences and project facts and is committed at shutdown; session 2 asks
questions that need them. The demo prints the context a model would get (profile, index,
the ``<relevant-memories>`` block of each prompt) and succeeds only if session 2 recalled
what session 1 taught, and an unrelated prompt got nothing.

Without ``--endpoint`` it starts the embedded reference server on a loopback port with a
temporary data directory, so it needs nothing but this package.
"""

from __future__ import annotations

import contextlib
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .config import load_config
from .extension import OpenVikingExtension, Turn

__all__ = ["DemoResult", "run_demo"]

TEACHING = [
    ("I prefer uv over pip for Python packaging.", "Noted: uv for packaging."),
    ("Project Falcon uses PostgreSQL 16 in production.", "Got it: Falcon runs on PostgreSQL 16."),
    ("We decided to release every Friday after the smoke tests pass.", "Fridays it is."),
    ("My name is Sam and I work at Nordwind Labs.", "Nice to meet you, Sam."),
]
QUESTIONS = [
    ("Which package manager should I use to set up this Python project?", "uv"),
    ("What database does Falcon run on?", "PostgreSQL"),
    ("When do we usually release?", "Friday"),
]
UNRELATED = "Write a haiku about autumn leaves."


@dataclass
class DemoResult:
    recalled: int
    asked: int
    unrelated_silent: bool

    @property
    def ok(self) -> bool:
        return self.recalled == self.asked and self.unrelated_silent


@contextlib.contextmanager
def _reference_server(data_dir: Path) -> Iterator[str]:
    """The reference server on a free loopback port (needs the ``server`` extra)."""
    from .server import create_app
    from .server.thread import ThreadedServer

    with ThreadedServer(create_app(data_dir)) as server:
        yield server.url


async def run_demo(endpoint: str | None, out: Callable[[str], None] = print) -> DemoResult:
    """Run the two sessions; ``out`` receives the report line by line."""
    with tempfile.TemporaryDirectory(prefix="ov-agent-ext-demo-") as tmp:
        root = Path(tmp)
        if endpoint is None:
            out("Starting the embedded reference server (temporary data directory)...")
            with _reference_server(root / "server") as url:
                out(f"  listening on {url}\n")
                return await _sessions(url, root, out)
        return await _sessions(endpoint, root, out)


async def _sessions(endpoint: str, root: Path, out: Callable[[str], None]) -> DemoResult:
    user = f"demo-{uuid.uuid4().hex[:8]}"  # a fresh identity: the demo never mixes with yours
    config = load_config(
        endpoint=endpoint,
        account="demo",
        user=user,
        agent_id="demo",
        state_dir=root / "state",
        commit_timeout=60.0,
    )

    out("== Session 1: the user teaches the agent")
    first = OpenVikingExtension(config)
    await first.session_start("session-1", cwd=str(root), reason="startup")
    for index, (said, reply) in enumerate(TEACHING, start=1):
        await first.before_agent_start(said)
        await first.turn_end(Turn(index=index, user=said, assistant=reply))
        first.agent_end()
        out(f"  user: {said}")
    out("  shutting down: flush, commit, wait for memory extraction...")
    report = await first.session_shutdown()
    await first.aclose()
    if report is None or report.status != "committed":
        out(f"  commit did not complete: {report.error if report else 'not capturing'}")
    else:
        out(f"  committed; {report.memories_extracted} memories extracted\n")

    out("== Session 2: a new session asks questions that need them")
    second = OpenVikingExtension(config)
    await second.session_start("session-2", cwd=str(root), reason="startup")
    addition = second.system_prompt_addition()
    out("-- system prompt addition (profile, index) --")
    out(addition or "(empty)")
    recalled = 0
    for question, expected in QUESTIONS:
        await second.before_agent_start(question)
        block = second.recall_block
        hit = expected.lower() in block.lower()
        recalled += hit
        out(f"\n-- prompt: {question}")
        out(block or "(no <relevant-memories> block)")
        out(f"   -> {'recalled' if hit else 'MISSED'} {expected!r}")
        second.agent_end()
    await second.before_agent_start(UNRELATED)
    silent = second.recall_block == ""
    out(f"\n-- prompt: {UNRELATED}")
    out("(no <relevant-memories> block)" if silent else second.recall_block)
    second.agent_end()
    await second.session_shutdown()
    await second.aclose()

    result = DemoResult(recalled, len(QUESTIONS), silent)
    out(
        f"\n== Summary: session 2 recalled {recalled}/{len(QUESTIONS)} facts from session 1; "
        f"the unrelated prompt got {'no block' if silent else 'a block (unexpected)'}. "
        + ("OK" if result.ok else "FAILED")
    )
    return result
