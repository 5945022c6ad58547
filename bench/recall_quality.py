"""Recall quality: the full recall pipeline against raw server score order, on a fixture store.

A fixture memory store (``bench/fixtures/recall_quality.json``) is seeded through real
sessions: each statement is its own user message with a short assistant reply between, one
``commit_and_wait`` per session, then ``wait_processed``, so the server's own extraction writes
the memories and its directory summaries. Then every fixture prompt is answered twice:

- **raw score order**: ``find`` over the pipeline's three scopes (user memories, agent
  memories, agent skills; a scope the server lacks counts as empty), the hits merged and
  sorted by score, the top ``recallLimit`` taken as they come, directory summaries included,
  no threshold: what a naive integration injects. Formatted exactly as the pipeline formats
  its block, so sizes compare;
- **full pipeline**: ``RecallManager(client, config).recall(prompt)`` with the default config.

Metrics per backend and ordering: hit@1 / hit@3 over the queries (a hit: one of the query's
expected substrings, case-insensitive, is in the first 1 / 3 injected item lines), unrelated
prompts that got a block (raw order injects whenever the server returns anything), block size
in tokens (``get_tokenizer("auto")``), and the pipeline's recall latency.

Backends: the reference server in process (``create_app`` + ``httpx.ASGITransport``), and the
real OpenViking server when ``--real URL`` is given or ``OV_REAL_URL`` is set (dev mode; a
unique account and user per run).

Usage::

    .venv/bin/python bench/recall_quality.py                  # reference server (+ OV_REAL_URL)
    eval "$(scripts/realserver start)"
    .venv/bin/python bench/recall_quality.py --real "$OV_REAL_URL" --write
    scripts/realserver stop "$OV_REAL_DIRS"
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from _common import BENCH_DIR, machine, percentile, today, write_section

from ov_agent_ext import OVClient, OVConfig, __version__
from ov_agent_ext.errors import NotFoundError
from ov_agent_ext.models import Message, SearchHit
from ov_agent_ext.recall import RECALL_SCOPES, RecallItem, RecallManager, RecallOutcome
from ov_agent_ext.tokens import Tokenizer, get_tokenizer

SECTION = "## Recall quality"
FIXTURE = BENCH_DIR / "fixtures" / "recall_quality.json"
COMMAND = '.venv/bin/python bench/recall_quality.py --real "$OV_REAL_URL" --write'
COMMIT_TIMEOUT = 180.0  # seconds per commit's extraction task (the real server: ~10 s)
ITEM_PREFIX = "- ["  # every item line of a recall block starts so


# --- the fixture ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Query:
    prompt: str
    expect: tuple[str, ...]  # any one of these substrings (case-insensitive) marks the memory
    kind: str = ""


@dataclass(frozen=True)
class Fixture:
    sessions: tuple[tuple[str, tuple[str, ...]], ...]  # (name, user statements)
    replies: tuple[str, ...]
    queries: tuple[Query, ...]
    unrelated: tuple[str, ...]

    @property
    def statements(self) -> int:
        return sum(len(s) for _, s in self.sessions)


def load_fixture(path: Path = FIXTURE) -> Fixture:
    data = json.loads(path.read_text(encoding="utf-8"))
    return Fixture(
        sessions=tuple((s["name"], tuple(s["statements"])) for s in data["sessions"]),
        replies=tuple(data.get("assistant_replies") or ["Noted."]),
        queries=tuple(
            Query(q["prompt"], tuple(q["expect"]), q.get("kind", "")) for q in data["queries"]
        ),
        unrelated=tuple(data["unrelated"]),
    )


# --- seeding --------------------------------------------------------------------------------


@dataclass
class SeedStats:
    commits: int = 0
    memory_files: int = 0  # new memory files the commits' tasks reported (memory_write)
    memory_edits: int = 0
    seconds: float = 0.0


async def seed(client: OVClient, fixture: Fixture, *, timeout: float = COMMIT_TIMEOUT) -> SeedStats:
    """One session and one commit per fixture session; then wait for the queues to drain."""
    stats = SeedStats()
    started = time.perf_counter()
    run = uuid.uuid4().hex[:8]
    for number, (_, statements) in enumerate(fixture.sessions, 1):
        messages: list[Message] = []
        for index, statement in enumerate(statements):
            messages.append(Message(role="user", content=statement))
            reply = fixture.replies[index % len(fixture.replies)]
            messages.append(Message(role="assistant", content=reply))
        session_id = f"recall-quality-{run}-{number}"
        await client.add_messages(session_id, messages)
        result = await client.commit_and_wait(session_id, timeout=timeout)
        task = result.task
        if result.timed_out or result.wait_error or task is None or task.status != "completed":
            state = task.status if task is not None else "?"
            raise RuntimeError(
                f"commit of session {number} did not complete: status {state}, "
                f"timed out {result.timed_out}, {result.wait_error or (task and task.error)}"
            )
        extracted = (task.result or {}).get("memories_extracted") or {}
        stats.memory_files += int(extracted.get("memory_write", 0))
        stats.memory_edits += int(extracted.get("memory_edit", 0))
        stats.commits += 1
    await client.wait_processed(timeout=timeout)
    stats.seconds = time.perf_counter() - started
    return stats


# --- the two orderings ----------------------------------------------------------------------


def item_lines(block: str) -> list[str]:
    """The item lines of a recall block, in order (one line per injected item)."""
    return [line for line in block.splitlines() if line.startswith(ITEM_PREFIX)]


def is_hit(lines: Sequence[str], query: Query, k: int) -> bool:
    wanted = [e.lower() for e in query.expect]
    return any(e in line.lower() for line in lines[:k] for e in wanted)


@dataclass
class Answer:
    """One prompt's injected block under one ordering."""

    block: str = ""
    tokens: int = 0
    elapsed_ms: float = 0.0

    @property
    def lines(self) -> list[str]:
        return item_lines(self.block)


async def _scope_hits(client: OVClient, prompt: str, scope: str, limit: int) -> list[SearchHit]:
    try:
        found = await client.find(prompt, target_uri=scope, limit=limit)
    except NotFoundError:
        return []  # the server has no such scope for this caller: nothing to inject from it
    return [*found.memories, *found.resources, *found.skills]


async def raw_order(client: OVClient, manager: RecallManager, prompt: str) -> Answer:
    """The server's hits over the pipeline's scopes by score, top ``recallLimit``, no filter."""
    config = client.config
    per_scope = max(config.recall_limit * 2, 8)  # what the pipeline asks each scope for
    found = await asyncio.gather(
        *(_scope_hits(client, prompt, scope, per_scope) for scope in RECALL_SCOPES)
    )
    hits = sorted((h for hits in found for h in hits), key=lambda h: -h.score)  # stable
    top = hits[: config.recall_limit]
    if not top:
        return Answer()
    items = [
        RecallItem(
            uri=h.uri,
            context_type=h.context_type or "memory",
            category=h.category,
            level=h.level,
            score=h.score,
            rank=h.score,
            abstract=h.abstract,
            is_summary=h.is_summary,
        )
        for h in top
    ]
    # The pipeline's own text resolution and formatting (abstracts, capped, within the token
    # budget), so the two orderings differ only in which items are shown and in what order.
    texts = await manager._contents(items)
    block, _, _, tokens = manager._format(items, texts)
    return Answer(block=block, tokens=tokens)


async def pipeline(manager: RecallManager, prompt: str) -> Answer:
    manager.invalidate()  # every prompt recalls afresh
    result = await manager.recall(prompt)
    if result.outcome in (RecallOutcome.FAILED, RecallOutcome.TIMED_OUT):
        raise RuntimeError(f"recall {result.outcome.value} for {prompt!r}: {result.error}")
    return Answer(block=result.block, tokens=result.tokens, elapsed_ms=result.elapsed_ms)


# --- one backend ----------------------------------------------------------------------------


@dataclass
class QueryOutcome:
    query: Query
    raw: Answer
    full: Answer


@dataclass
class UnrelatedOutcome:
    prompt: str
    raw: Answer
    full: Answer


@dataclass
class BackendResult:
    name: str
    version: str
    seed: SeedStats
    queries: list[QueryOutcome] = field(default_factory=list)
    unrelated: list[UnrelatedOutcome] = field(default_factory=list)

    def hits(self, ordering: str, k: int) -> int:
        return sum(is_hit(getattr(q, ordering).lines, q.query, k) for q in self.queries)

    def injected_unrelated(self, ordering: str) -> list[str]:
        return [u.prompt for u in self.unrelated if getattr(u, ordering).block]

    def blocks(self, ordering: str) -> list[int]:
        answers: list[Answer] = [getattr(p, ordering) for p in [*self.queries, *self.unrelated]]
        return [a.tokens for a in answers if a.block]

    def latencies(self) -> list[float]:
        outcomes: list[QueryOutcome | UnrelatedOutcome] = [*self.queries, *self.unrelated]
        return [o.full.elapsed_ms for o in outcomes]

    def acceptance(self) -> list[tuple[str, bool]]:
        return [
            ("pipeline hit@1 >= raw hit@1", self.hits("full", 1) >= self.hits("raw", 1)),
            ("pipeline hit@3 >= raw hit@3", self.hits("full", 3) >= self.hits("raw", 3)),
            ("no unrelated prompt gets a block", not self.injected_unrelated("full")),
        ]

    def misses(self, ordering: str = "full", k: int = 3) -> list[QueryOutcome]:
        return [q for q in self.queries if not is_hit(getattr(q, ordering).lines, q.query, k)]


async def measure(
    client: OVClient, fixture: Fixture, name: str, tokenizer: Tokenizer | None = None
) -> BackendResult:
    """Seed ``fixture`` through ``client``'s (fresh) identity, then answer every prompt."""
    health = await client.health()
    stats = await seed(client, fixture)
    manager = RecallManager(client, client.config, tokenizer or get_tokenizer("auto"))
    await pipeline(manager, "warm-up: resolve the caller's spaces once")  # not timed
    result = BackendResult(name=name, version=health.version or "?", seed=stats)
    for query in fixture.queries:
        result.queries.append(
            QueryOutcome(
                query,
                await raw_order(client, manager, query.prompt),
                await pipeline(manager, query.prompt),
            )
        )
    for prompt in fixture.unrelated:
        result.unrelated.append(
            UnrelatedOutcome(
                prompt, await raw_order(client, manager, prompt), await pipeline(manager, prompt)
            )
        )
    return result


def _identity() -> dict[str, str]:
    run = uuid.uuid4().hex[:10]
    return {"account": f"rq{run}", "user": f"u{run}"}


@asynccontextmanager
async def reference_client(data_dir: Path) -> AsyncIterator[OVClient]:
    """A client of a fresh reference server in this process, as a unique identity."""
    from ov_agent_ext.server import create_app

    transport = httpx.ASGITransport(app=create_app(data_dir))
    async with OVClient(OVConfig(endpoint="http://ref", **_identity()), transport=transport) as c:
        yield c


async def measure_reference(fixture: Fixture, tokenizer: Tokenizer | None = None) -> BackendResult:
    with tempfile.TemporaryDirectory(prefix="ov-bench-recall-") as tmp:
        async with reference_client(Path(tmp)) as client:
            return await measure(client, fixture, "reference (in process)", tokenizer)


async def measure_real(
    url: str, fixture: Fixture, tokenizer: Tokenizer | None = None
) -> BackendResult:
    config = OVConfig(endpoint=url, write_timeout=COMMIT_TIMEOUT, **_identity())
    async with OVClient(config) as client:
        return await measure(client, fixture, "real OpenViking (dev mode)", tokenizer)


# --- the report -----------------------------------------------------------------------------


def _pct(n: int, total: int) -> str:
    return f"{n}/{total} ({n / total:.0%})" if total else "0/0"


def _short(text: str, cap: int = 90) -> str:
    text = text.removeprefix("- ")
    return text if len(text) <= cap else text[: cap - 1] + "…"


def table(results: Sequence[BackendResult]) -> str:
    lines = [
        "| Backend | Ordering | hit@1 | hit@3 | Unrelated prompts given a block "
        "| Block tokens mean / max | Recall p50 / p90 ms |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        n, u = len(r.queries), len(r.unrelated)
        for ordering, label in (("raw", "raw score order"), ("full", "full pipeline")):
            sizes = r.blocks(ordering)
            mean = f"{sum(sizes) / len(sizes):.0f} / {max(sizes)}" if sizes else "- / -"
            latency = "-"
            if ordering == "full":
                times = r.latencies()
                latency = f"{percentile(times, 0.5):.1f} / {percentile(times, 0.9):.1f}"
            lines.append(
                f"| {r.name} | {label} | {_pct(r.hits(ordering, 1), n)} "
                f"| {_pct(r.hits(ordering, 3), n)} "
                f"| {_pct(len(r.injected_unrelated(ordering)), u)} | {mean} | {latency} |"
            )
    return "\n".join(lines)


def details(r: BackendResult) -> list[str]:
    """Acceptance, then every query the pipeline missed at 3 (with what it injected)."""
    verdicts = "; ".join(f"{name}: {'met' if ok else '**missed**'}" for name, ok in r.acceptance())
    out = [f"- **{r.name}** (`/health` version {r.version}): {verdicts}."]
    for q in r.misses("full", 3):
        shown = " / ".join(_short(line) for line in q.full.lines[:3]) or "nothing"
        raw = "hit" if is_hit(q.raw.lines, q.query, 3) else "miss"
        out.append(
            f"  - missed at 3: {q.query.prompt!r} (expected {' or '.join(q.query.expect)!r}; "
            f"raw order: {raw}); injected: {shown}"
        )
    for u in r.unrelated:
        if u.full.block:
            shown = " / ".join(_short(line) for line in u.full.lines)
            out.append(f"  - unrelated prompt got a block: {u.prompt!r}; injected: {shown}")
    return out


def section(results: Sequence[BackendResult], fixture: Fixture, tokenizer: Tokenizer) -> str:
    config = OVConfig()
    memories = ", ".join(
        f"{r.name}: {r.seed.memory_files} files written ({r.seed.memory_edits} edits) "
        f"in {r.seed.seconds:.0f} s"
        for r in results
    )
    lines = [
        SECTION,
        "",
        "The full recall pipeline (`RecallManager.recall`, default config: `recallLimit` "
        f"{config.recall_limit}, `recallScoreThreshold` {config.recall_score_threshold}, "
        f"`recallBudget` {config.recall_budget}) against **raw score order** (`find` over the "
        "same three scopes, user memories, agent memories and agent skills, hits merged by "
        f"score, the top {config.recall_limit} as they come, directory summaries included, no "
        "threshold: what a naive integration injects, formatted as the pipeline formats its "
        "block). hit@k: one of the query's expected substrings is in the first k injected "
        "items. Raw order gives every prompt a block whenever the server returns anything, and "
        "keeps the server's order among equal scores, which on the real server changes from "
        "run to run (raw hit@k there moves by a query or so between runs). "
        f"Block tokens: `{tokenizer.name}`, over prompts that got a block. Latency: "
        "`recall()` end to end per prompt (three `find` calls in parallel), after a warm-up.",
        "",
        table(results),
        "",
        "Acceptance (pipeline hit@1 and hit@3 >= raw order's; no unrelated prompt injected):",
        "",
    ]
    for r in results:
        lines += details(r)
    lines += [
        "",
        f"Fixture: `bench/fixtures/recall_quality.json`, {fixture.statements} user statements "
        f"in {len(fixture.sessions)} sessions (one commit each; {memories}): preferences, "
        "profile facts, project entities, decisions, CJK statements, near-duplicates and an "
        "updated preference, with neighbouring distractors (several databases, editors, "
        f"indentation rules). {len(fixture.queries)} queries, {len(fixture.unrelated)} "
        "unrelated prompts. Each run uses a fresh account and user.",
        f"Measured on {today()}, {machine()}; reference server = ov-agent-ext "
        f"{__version__} in process"
        + (
            "; real server = OpenViking "
            + ", ".join(r.version for r in results if r.name.startswith("real"))
            + " with `../shared/realserver/shim.py` for its embedding and LLM calls"
            if any(r.name.startswith("real") for r in results)
            else ""
        )
        + ".",
        f'Reproduce: `eval "$(scripts/realserver start)"; {COMMAND}; '
        'scripts/realserver stop "$OV_REAL_DIRS"` (without `--real`/`OV_REAL_URL`: the '
        "reference server only).",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"update {SECTION!r} in RESULTS.md")
    parser.add_argument(
        "--real", default=os.environ.get("OV_REAL_URL", ""), help="real server URL (dev mode)"
    )
    parser.add_argument("--no-reference", action="store_true", help="skip the reference server")
    parser.add_argument("--fixture", type=Path, default=FIXTURE)
    parser.add_argument("--json", type=Path, help="also dump per-prompt answers here")
    args = parser.parse_args(argv)

    fixture = load_fixture(args.fixture)
    tokenizer = get_tokenizer("auto")
    results: list[BackendResult] = []
    if not args.no_reference:
        print("reference server: seeding and querying...", file=sys.stderr)
        results.append(asyncio.run(measure_reference(fixture, tokenizer)))
    if args.real:
        print(f"real server at {args.real}: seeding (~10 s per commit)...", file=sys.stderr)
        results.append(asyncio.run(measure_real(args.real, fixture, tokenizer)))
    if not results:
        print("error: nothing to measure", file=sys.stderr)
        return 2

    text = section(results, fixture, tokenizer)
    print(text)
    if args.json:
        args.json.write_text(json.dumps([_dump(r) for r in results], ensure_ascii=False, indent=1))
    if args.write:
        write_section(SECTION, text)
        print("updated bench/RESULTS.md", file=sys.stderr)
    return 0


def _dump(r: BackendResult) -> dict[str, Any]:
    def answer(a: Answer) -> dict[str, Any]:
        return {"lines": a.lines, "tokens": a.tokens, "ms": a.elapsed_ms}

    return {
        "backend": r.name,
        "version": r.version,
        "queries": [
            {
                "prompt": q.query.prompt,
                "expect": q.query.expect,
                "raw": answer(q.raw),
                "full": answer(q.full),
            }
            for q in r.queries
        ],
        "unrelated": [
            {"prompt": u.prompt, "raw": answer(u.raw), "full": answer(u.full)} for u in r.unrelated
        ],
    }


if __name__ == "__main__":
    sys.exit(main())
