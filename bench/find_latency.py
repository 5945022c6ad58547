"""Reference server ``find`` latency, restart time and memory at 1k / 10k / 100k memories.

One user's memory tree is generated deterministically (fixed seed, Zipf-weighted vocabulary of
tools, domains, people and generated project names): preference files
``preferences/alice/<topic>.md``, entity files ``entities/<category>/<name>.md`` and event
files ``events/yyyy/mm/dd/<name>.md``, each a few short markdown bullets. The tiers are nested
(the 10k tier is the 1k tier plus 9k more), seeded through ``POST /api/v1/content/write``
in process (``httpx.ASGITransport``), so the server makes its directory summaries as usual.

After each tier is seeded, a fresh Python process opens the data directory
(``create_app``: the restart, which rebuilds the search index), and measures:

- restart time and the resident memory it added (VmRSS after minus before ``create_app``);
- ``POST /api/v1/search/find`` end to end through the in-process HTTP stack: a fixed mix of
  short queries (most share words with the memories, some share none), ``target_uri`` the
  user's memories, ``limit`` 10, after a warm-up; p50 / p90 / p99;
- the same queries against the index alone (no HTTP, no JSON), to show where time goes.

Optionally (``--loopback``) the same ``find`` calls go to ``ov-agent-ext serve`` (uvicorn) in
another process over a real loopback socket.

Each tier has its own data directory (a copy of the tier below plus the new memories), kept
with ``--data-dir DIR`` and reused by later runs with the same seed: seeding 100k memories over
HTTP is most of a first run (~6-8 min on 2 cores; ``--direct-above 10000`` seeds beyond 10k
through the server's own ``Vfs.write`` instead, and says so in the table's notes).

Usage::

    .venv/bin/python bench/find_latency.py --quick            # 1k and 10k only (~1 min)
    .venv/bin/python bench/find_latency.py --loopback --repeat 3 --write   # all, RESULTS.md
    .venv/bin/python bench/find_latency.py --data-dir /tmp/ov-bench-find   # keep/reuse data
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import re
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import date, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import httpx
from _common import (
    HEADERS,
    REPO_ROOT,
    USER,
    OtherCpu,
    asgi_client,
    calibration_ms,
    machine,
    percentile,
    rss_mib,
    today,
    write_section,
)

SECTION = "## Reference server: find latency"
COMMAND = ".venv/bin/python bench/find_latency.py --loopback --repeat 3 --write"
TARGET = f"viking://user/{USER}/memories"
MEMORIES = f"user/{USER}/memories"
TARGET_P50_MS = 20.0  # at 10k memories
MAX_GROWTH = 10.0  # p50 ratio per 10x more memories: no worse than linear

# --- the vocabulary -------------------------------------------------------------------------

TOOLS = """
postgresql mysql sqlite redis kafka rabbitmq elasticsearch clickhouse mongodb cassandra docker
kubernetes helm terraform ansible pulumi nginx caddy envoy grafana prometheus loki sentry
datadog jaeger opentelemetry pytest hypothesis tox nox ruff black mypy pyright poetry uv pip
conda hatch setuptools fastapi django flask starlette pydantic sqlalchemy alembic celery
dramatiq airflow dagster pandas polars numpy pytorch jax react vue svelte nextjs vite webpack
esbuild tailwind typescript javascript golang rust java kotlin scala elixir haskell ocaml zig
neovim vscode emacs jetbrains tmux zsh fish git github gitlab bazel make cmake ninja grpc
graphql protobuf openapi s3 gcs lambda cloudflare vercel heroku linux macos nix homebrew
wireguard tailscale vault keycloak oauth jwt duckdb minio traefik argocd jenkins buildkite
""".split()
DOMAINS = [
    "testing", "logging", "formatting", "linting", "type checking", "deployment", "caching",
    "packaging", "monitoring", "alerting", "tracing", "profiling", "benchmarks",
    "documentation", "code review", "branching", "releases", "migrations", "backups", "secrets",
    "authentication", "authorization", "rate limiting", "retries", "pagination",
    "serialization", "configuration", "feature flags", "localization", "accessibility",
    "onboarding", "incident response", "on-call", "dependency updates", "containers",
    "ci pipelines", "schema design", "error handling", "concurrency", "state management",
    "styling", "data pipelines", "notebooks", "query tuning", "indexing", "full-text search",
    "message queues", "cron jobs", "load testing", "fuzzing", "code generation", "refactoring",
]  # fmt: skip
QUALITIES = """
fast predictable boring explicit minimal strict reproducible readable stable lightweight typed
declarative incremental portable observable cheap battle-tested well-documented composable
deterministic simple robust secure maintainable flexible mature lean isolated consistent
scalable ergonomic transparent auditable idempotent resilient
""".split()
PROBLEMS = """
flaky slow brittle noisy opaque leaky bloated fragile expensive confusing inconsistent racy
""".split()
VERBS = [
    "migrate to", "adopt", "drop", "deprecate", "pin", "upgrade", "evaluate", "replace",
    "standardize on", "roll back", "benchmark", "sunset", "self-host", "vendor", "freeze",
]  # fmt: skip
PEOPLE = """
maria kenji priya olu sven amara diego lena tomasz yuki hamid chloe rafael ines marek noor
jonas aiko pablo greta ravi sofia emeka hana lucas mei anders fatima oscar zara nikolai
bianca tariq elena kwame ingrid mateo sana felix leila viktor camila dmitri astrid kofi
""".split()
CATEGORIES = """
projects services libraries teams repos datasets tools clients environments vendors
""".split()
KINDS = {
    "projects": "Project",
    "services": "Service",
    "libraries": "Library",
    "teams": "Team",
    "repos": "Repo",
    "datasets": "Dataset",
    "tools": "Tool",
    "clients": "Client",
    "environments": "Environment",
    "vendors": "Vendor",
}
SYLLABLES = """
ka lo mi ra zen tor vel qua nix bor dal fen gri hel ost pra sul tam urd vix wen yor zel arn
bel cor dun eth fal gor hin ist jor kel lun mar nor ori pel
""".split()
# Words none of the generated memories contain (checked at run time).
UNRELATED = [
    "banana bread recipe",
    "how tall is mount everest",
    "hiking trails near the lake",
    "translate this poem into french",
    "weather tomorrow afternoon",
    "birthday gift ideas for grandma",
    "medieval castle architecture",
    "guitar chord progressions",
]


def _zipf(items: list[str], rng: random.Random) -> tuple[list[str], list[float]]:
    """``items`` in a random popularity order with Zipf-like weights (1 / rank^0.9)."""
    order = items[:]
    rng.shuffle(order)
    return order, [1 / (rank + 1) ** 0.9 for rank in range(len(order))]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


@dataclass(frozen=True)
class Memory:
    path: str  # relative to the user's memories/
    content: str


class Generator:
    """A deterministic stream of memories; the first N are the N-memory tier."""

    def __init__(self, seed: int):
        self.rng = rng = random.Random(seed)
        self.tools = _zipf(TOOLS, rng)
        self.domains = _zipf(DOMAINS, rng)
        self.qualities = _zipf(QUALITIES, rng)
        self.people = _zipf(PEOPLE, rng)
        self.names: list[str] = []  # entity names generated so far
        self.used: set[str] = set()
        self.start = date(2023, 1, 1)

    def pick(self, pool: tuple[list[str], list[float]]) -> str:
        return self.rng.choices(pool[0], pool[1])[0]

    def _name(self) -> str:
        rng = self.rng
        while True:
            name = "".join(rng.choice(SYLLABLES) for _ in range(rng.choice((2, 2, 3))))
            if name not in self.used:
                self.used.add(name)
                return name

    def _ref(self) -> str:
        """An existing entity name, recent ones likelier (or a new one at the start)."""
        if not self.names:
            return self._name()
        recent = self.names[-200:]
        return self.rng.choice(recent if self.rng.random() < 0.6 else self.names).capitalize()

    def _unique(self, path: str) -> str:
        stem, n = path.removesuffix(".md"), 2
        while path in self.used:
            path = f"{stem}_{n}.md"
            n += 1
        self.used.add(path)
        return path

    def preference(self) -> Memory:
        rng = self.rng
        tool, other = self.pick(self.tools), self.pick(self.tools)
        domain = self.pick(self.domains)
        q1, q2 = self.pick(self.qualities), self.pick(self.qualities)
        bullets = [f"- I prefer {tool} over {other} for {domain}."]
        if rng.random() < 0.7:
            bullets.append(f"- {q1.capitalize()} and {q2}: {tool} keeps {domain} {q1}.")
        if rng.random() < 0.4:
            bad = self.pick(self.tools)
            bullets.append(f"- Avoid {bad} in {domain}; it was {rng.choice(PROBLEMS)} last time.")
        path = self._unique(f"preferences/{USER}/{_slug(domain)}_{_slug(tool)}.md")
        return Memory(path, "\n".join(bullets))

    def entity(self) -> Memory:
        rng = self.rng
        category = rng.choice(CATEGORIES)
        name = self._name()
        self.names.append(name)
        tool, other, host = self.pick(self.tools), self.pick(self.tools), self.pick(self.tools)
        bullets = [f"- {KINDS[category]} {name.capitalize()} uses {tool} and {other}."]
        bullets.append(f"- Owned by {self.pick(self.people).capitalize()}; deployed on {host}.")
        if rng.random() < 0.5:
            quality, domain = self.pick(self.qualities), self.pick(self.domains)
            bullets.append(f"- Notes: {quality} {domain}, {rng.randrange(1, 60)} open issues.")
        if rng.random() < 0.3:
            via = rng.choice(("grpc", "http", "kafka"))
            bullets.append(f"- Talks to {self._ref()} over {via}.")
        return Memory(self._unique(f"entities/{category}/{name}.md"), "\n".join(bullets))

    def event(self) -> Memory:
        rng = self.rng
        day = self.start + timedelta(days=rng.randrange(3 * 365))
        verb, tool, project = rng.choice(VERBS), self.pick(self.tools), self._ref()
        domain = self.pick(self.domains)
        bullets = [f"- We decided to {verb} {tool} in {project} for {domain}."]
        if rng.random() < 0.8:
            reason = f"{rng.choice(PROBLEMS)} {self.pick(self.domains)}"
            owner = self.pick(self.people).capitalize()
            bullets.append(f"- Reason: {reason}. Follow-up owner: {owner}.")
        name = _slug(f"{verb} {tool} {project}")
        path = self._unique(f"events/{day:%Y/%m/%d}/{name}.md")
        return Memory(path, "\n".join(bullets))

    def take(self, count: int) -> list[Memory]:
        out = []
        for _ in range(count):
            roll = self.rng.random()
            kind = self.preference if roll < 0.25 else self.entity if roll < 0.6 else self.event
            out.append(kind())
        return out

    def queries(self, early: list[Memory]) -> list[tuple[str, str]]:
        """A fixed query mix: ``(kind, text)``, kind ``match`` or ``unrelated``.

        Named entities come from ``early`` (the first memories), so they exist at every tier.
        """
        rng = random.Random(7)
        names = [
            m.path.rsplit("/", 1)[1].removesuffix(".md") for m in early if "entities/" in m.path
        ]
        tool, domain = partial(rng.choice, TOOLS), partial(rng.choice, DOMAINS)
        person, quality = partial(rng.choice, PEOPLE), partial(rng.choice, QUALITIES)
        verb = partial(rng.choice, VERBS)
        templates = [
            lambda: f"which database does {rng.choice(names)} use",
            lambda: f"who owns {rng.choice(names)}",
            lambda: f"what does {rng.choice(names)} talk to",
            lambda: f"{domain()} preferences",
            lambda: f"preferred tool for {domain()}",
            lambda: f"why did we {verb()} {tool()}",
            lambda: f"{tool()} or {tool()} for {domain()}",
            lambda: f"decision about {tool()} last month",
            lambda: f"what is {person()} responsible for",
            lambda: f"{quality()} {domain()} setup",
            lambda: f"{tool()} configuration",
            lambda: f"projects using {tool()} and {tool()}",
        ]
        matching = [("match", templates[i % len(templates)]()) for i in range(32)]
        return matching + [("unrelated", text) for text in UNRELATED]


# --- seeding --------------------------------------------------------------------------------


async def seed_http(http: httpx.AsyncClient, memories: list[Memory]) -> None:
    for number, memory in enumerate(memories, 1):
        response = await http.post(
            "/api/v1/content/write",
            json={"uri": f"{TARGET}/{memory.path}", "content": memory.content},
        )
        if response.status_code != 200:
            raise RuntimeError(f"write {memory.path}: {response.status_code} {response.text}")
        if number % 10000 == 0:
            print(f"  ... {number} written", file=sys.stderr)


def seed_direct(app: Any, memories: list[Memory]) -> None:
    """The same writes through the server's own vfs layer (no HTTP): for huge tiers."""
    state = app.state.reference
    state.vfs.ensure_user_space("default", USER)
    for memory in memories:
        state.vfs.write("default", f"{MEMORIES}/{memory.path}", memory.content)


# --- the probe: a fresh process on an existing data dir -------------------------------------


async def _time_find(
    http: httpx.AsyncClient, queries: list[tuple[str, str]], samples: int, seed: int
) -> dict[str, list[float]]:
    """``samples`` find calls cycling through ``queries`` in a shuffled order: ms per kind."""
    order = queries[:]
    random.Random(seed).shuffle(order)
    times: dict[str, list[float]] = {"match": [], "unrelated": []}
    perf = time.perf_counter
    for i in range(samples):
        kind, text = order[i % len(order)]
        body = {"query": text, "target_uri": TARGET, "limit": 10}
        start = perf()
        response = await http.post("/api/v1/search/find", json=body)
        elapsed = (perf() - start) * 1000
        if response.status_code != 200:
            raise RuntimeError(f"find: {response.status_code} {response.text}")
        times[kind].append(elapsed)
    return times


async def _probe_async(app: Any, queries: list[tuple[str, str]], samples: int) -> dict[str, Any]:
    from ov_agent_ext.server.search import Query, tokenize

    index = app.state.reference.index.account("default")
    async with asgi_client(app) as http:
        for _ in range(2):  # warm-up: every query twice
            await _time_find(http, queries, len(queries), seed=1)
        calibration = calibration_ms()
        with OtherCpu() as others:
            times = await _time_find(http, queries, samples, seed=2)
        hits = (await http.post("/api/v1/search/find", json={"query": queries[0][1]})).json()
    # The index alone: the same queries, no HTTP, no JSON.
    direct: list[float] = []
    matched: dict[str, list[int]] = {"match": [], "unrelated": []}
    per_query: dict[str, list[float]] = {}
    shared: dict[str, int] = {}
    perf = time.perf_counter
    for round_no in range(max(1, samples // len(queries) // 2)):
        for kind, text in queries:
            query = Query(text=text, scopes=[MEMORIES], limit=10)
            start = perf()
            index.find(query)
            elapsed = (perf() - start) * 1000
            direct.append(elapsed)
            per_query.setdefault(text, []).append(elapsed)
            if round_no == 0:
                tokens = set(tokenize(text))
                docs = set().union(*(index.postings.get(t, {}) for t in tokens)) if tokens else ()
                matched[kind].append(len(docs))
                shared[text] = len(docs)
    slowest = sorted(
        ((percentile(v, 0.5), text, shared[text]) for text, v in per_query.items()), reverse=True
    )
    return {
        "times": times,
        "direct": direct,
        "matched": matched,
        "slowest": slowest[:3],
        "other_cpu": others.cores,
        "calibration_ms": calibration,
        "sample": hits["result"],
    }


def probe(data_dir: str, queries: list[tuple[str, str]], samples: int) -> dict[str, Any]:
    from ov_agent_ext.server import create_app

    gc.collect()
    before = rss_mib()
    start = time.perf_counter()
    app = create_app(data_dir)
    restart = time.perf_counter() - start
    gc.collect()
    after = rss_mib()
    state = app.state.reference
    docs = len(state.index)
    files = sum(1 for p in state.index.account("default").docs if p.startswith(MEMORIES))
    result = asyncio.run(_probe_async(app, queries, samples))
    gc.collect()
    result.update(
        restart_s=restart,
        rss_before=before,
        rss_delta=after - before,
        rss_after_queries=rss_mib(),
        docs=docs,
        memory_docs=files,
    )
    return result


def run_probe(data_dir: Path, queries: list[tuple[str, str]], samples: int) -> dict[str, Any]:
    """``probe`` in a fresh interpreter, so restart time and RSS are not blurred by seeding."""
    completed = subprocess.run(
        [sys.executable, __file__, "--probe", str(data_dir), "--samples", str(samples)],
        input=json.dumps(queries),
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO_ROOT,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"probe failed:\n{completed.stderr}")
    result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


# --- loopback: the server under uvicorn in its own process ----------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def _loopback_calls(
    port: int, server: subprocess.Popen[bytes], queries: list[tuple[str, str]], samples: int
) -> list[float]:
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}", headers=HEADERS, trust_env=False
    ) as http:
        deadline = time.monotonic() + 300
        while True:
            try:
                if (await http.get("/health")).status_code == 200:
                    break
            except httpx.TransportError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the loopback server did not start") from None
                await asyncio.sleep(0.1)
        await _time_find(http, queries, 2 * len(queries), seed=1)
        times = await _time_find(http, queries, samples, seed=2)
    return times["match"] + times["unrelated"]


def loopback(data_dir: Path, queries: list[tuple[str, str]], samples: int) -> list[float]:
    """``find`` over a real socket to ``ov-agent-ext serve`` (uvicorn) in its own process."""
    port = _free_port()
    command = [sys.executable, "-m", "ov_agent_ext.cli", "serve", "--data-dir", str(data_dir)]
    command += ["--port", str(port), "--log-level", "warning"]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    with tempfile.TemporaryFile() as log:
        server = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=log, env=env, cwd=REPO_ROOT
        )
        try:
            return asyncio.run(_loopback_calls(port, server, queries, samples))
        except RuntimeError:
            log.seek(0)
            sys.stderr.write(log.read().decode(errors="replace"))
            raise
        finally:
            server.terminate()
            server.wait(timeout=30)


# --- the report -----------------------------------------------------------------------------


@dataclass
class Tier:
    memories: int
    seed_s: float
    seeded_via: str
    probe: dict[str, Any]
    loopback: list[float] | None = None

    @property
    def all_times(self) -> list[float]:
        times = self.probe["times"]
        return list(times["match"]) + list(times["unrelated"])

    def p(self, q: float) -> float:
        return percentile(self.all_times, q)


def _fmt(ms: float) -> str:
    return f"{ms:.2f}" if ms < 10 else f"{ms:.1f}"


def section(tiers: list[Tier], args: argparse.Namespace, queries: list[tuple[str, str]]) -> str:
    by_size = {t.memories: t for t in tiers}
    lines = [
        SECTION,
        "",
        "`POST /api/v1/search/find` on the reference server, one user's memories "
        f"(`target_uri` = `{TARGET}`, `limit` 10), end to end through the HTTP stack in "
        "process (`httpx.ASGITransport`: routing, auth, body validation, JSON both ways), "
        "after a warm-up. Each tier is measured in a fresh process that first opens the data "
        "directory (`create_app`: the restart, which rebuilds the search index from SQLite).",
        "",
        "| Memories | Indexed docs (files + dir summaries) | find p50 ms | p90 ms | p99 ms "
        "| p50 matching / unrelated ms | Index only p50 ms | Docs sharing a query word (avg) "
        "| Restart s | RSS delta MiB | Other CPU |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for t in tiers:
        times, matched = t.probe["times"], t.probe["matched"]
        avg_matched = sum(matched["match"]) / max(1, len(matched["match"]))
        lines.append(
            f"| {t.memories:,} | {t.probe['docs']:,} | {_fmt(t.p(0.5))} | {_fmt(t.p(0.9))} "
            f"| {_fmt(t.p(0.99))} | {_fmt(percentile(times['match'], 0.5))} / "
            f"{_fmt(percentile(times['unrelated'], 0.5))} "
            f"| {_fmt(percentile(t.probe['direct'], 0.5))} | {avg_matched:,.0f} "
            f"| {t.probe['restart_s']:.2f} | {t.probe['rss_delta']:.0f} "
            f"| {t.probe['other_cpu']:.2f} |"
        )
    lines.append("")
    growth = []
    for small, big in ((1000, 10000), (10000, 100000)):
        if small in by_size and big in by_size:
            ratio = by_size[big].p(0.5) / by_size[small].p(0.5)
            verdict = "met" if ratio <= MAX_GROWTH else "**missed**"
            growth.append(
                f"p50({big // 1000}k) / p50({small // 1000}k) = {ratio:.2f} "
                f"(target <= {MAX_GROWTH:.0f}: {verdict})"
            )
    targets = []
    if 10000 in by_size:
        p50 = by_size[10000].p(0.5)
        verdict = "met" if p50 < TARGET_P50_MS else "**missed**"
        targets.append(
            f"find p50 at 10k = {p50:.2f} ms (target < {TARGET_P50_MS:.0f} ms: {verdict})"
        )
    targets += growth
    lines += ["Targets: " + "; ".join(targets) + ".", ""]
    if any(t.loopback for t in tiers):
        lines += [
            "Over a real loopback socket (`ov-agent-ext serve`, uvicorn, in its own process; "
            "the client in this one), same queries:",
            "",
            "| Memories | find p50 ms | p90 ms | p99 ms | in-process p50 ms |",
            "|---:|---:|---:|---:|---:|",
        ]
        for t in tiers:
            if t.loopback:
                lines.append(
                    f"| {t.memories:,} | {_fmt(percentile(t.loopback, 0.5))} "
                    f"| {_fmt(percentile(t.loopback, 0.9))} | {_fmt(percentile(t.loopback, 0.99))} "
                    f"| {_fmt(t.p(0.5))} |"
                )
        lines.append("")
    seeding = ", ".join(
        f"{t.memories:,}: {t.seed_s:.0f} s via {t.seeded_via}" for t in tiers if t.seed_s
    )
    n_match = sum(1 for kind, _ in queries if kind == "match")
    slowest = ", ".join(
        f'"{text}" {ms:.1f} ms ({docs:,} docs share a word)'
        for ms, text, docs in tiers[-1].probe["slowest"]
    )
    lines += [
        f"Data: generated with seed {args.seed}: 25% preferences "
        f"(`preferences/{USER}/<topic>.md`), "
        "35% entities (`entities/<category>/<name>.md`, 10 categories), 40% events "
        "(`events/yyyy/mm/dd/<name>.md` over 3 years), 1-4 short bullets each, Zipf-weighted "
        f"words ({len(TOOLS)} tools, {len(DOMAINS)} domains, {len(QUALITIES)} qualities, "
        f"{len(PEOPLE)} people) and generated project names. "
        f"Tiers are nested; seeded through `POST /api/v1/content/write` in process unless "
        f"marked vfs (the server's own `Vfs.write`, no HTTP) (cumulative seeding time: "
        f"{seeding}). Queries: {len(queries)} fixed ones, {n_match} "
        "sharing words with the memories (named entities, domains, tools, people) and "
        f"{len(queries) - n_match} sharing none (answered with the neutral 0.5 filler); "
        f"{args.samples} timed calls per tier ({args.samples_100k} at 100k)"
        + (
            f"; each tier probed {args.repeat} times, the probe with the least CPU taken by "
            "other processes kept. "
            if args.repeat > 1
            else ". "
        )
        + "Restart = `create_app` on the existing directory; RSS delta = VmRSS after it minus "
        'before, in that fresh process. "Index only" = `AccountIndex.find` called directly. '
        '"Other CPU" = cores kept busy by other processes during the timed calls (machine '
        "busy time from /proc/stat minus the probe's own; this machine is shared, 0.0 would "
        "be idle).",
        "Machine speed at each probe (a fixed pure-Python loop, best of 5; lower is faster; "
        "this shared VM slows down when its host is busy, invisibly to /proc/stat): "
        + ", ".join(f"{t.memories:,}: {t.probe['calibration_ms']:.1f} ms" for t in tiers)
        + ". Run-to-run differences of up to ~1.5x in absolute times are that, not the server; "
        "ratios within one run are the stable part.",
        f"Slowest queries at {tiers[-1].memories:,} (index only, p50): {slowest}: the cost "
        "follows how many documents share a query word (`uses` and `owned` are in every "
        "entity, `prefer` in every preference), not the store's size as such.",
        f"Measured on {today()}, {machine()}.",
        f"Reproduce: `{COMMAND}` (`--quick`: 1k and 10k only).",
        "",
    ]
    return "\n".join(lines)


MARKER = "bench-seed.json"


def prepare_tier(
    data_dir: Path, previous: Path | None, memories: list[Memory], args: argparse.Namespace
) -> dict[str, Any]:
    """A data dir holding exactly ``memories``: reused when a marker says so, else built from
    the previous (smaller, nested) tier's copy plus the missing memories. The marker keeps the
    cumulative seeding time: ``{"seed", "count", "seconds", "via"}``."""
    from ov_agent_ext.server import create_app
    from ov_agent_ext.server.store import DB_NAME

    marker = data_dir / MARKER
    if marker.exists():
        seeded: dict[str, Any] = json.loads(marker.read_text())
        if seeded["seed"] == args.seed and seeded["count"] == len(memories):
            print(f"reusing {data_dir} ({len(memories)} memories)", file=sys.stderr)
            return seeded
        raise SystemExit(f"{data_dir} holds other data ({seeded}): remove it first")
    if data_dir.exists() and any(data_dir.iterdir()):
        raise SystemExit(f"{data_dir} is not empty and has no {MARKER}: remove it first")
    data_dir.mkdir(parents=True, exist_ok=True)
    done, seconds, via = 0, 0.0, []
    if previous is not None:  # the nested tier below: copy its database, seed the rest
        base = json.loads((previous / MARKER).read_text())
        done, seconds, via = base["count"], base["seconds"], [base["via"]]
        source = sqlite3.connect(previous / DB_NAME)
        target = sqlite3.connect(data_dir / DB_NAME)
        source.backup(target)
        source.close()
        target.close()
    app = create_app(data_dir)
    batch = memories[done:]
    direct = bool(args.direct_above) and len(memories) > args.direct_above
    print(f"seeding {len(batch)} memories (to {len(memories)})...", file=sys.stderr)
    start = time.perf_counter()
    if direct:
        seed_direct(app, batch)
    else:

        async def over_http() -> None:
            async with asgi_client(app) as http:
                await seed_http(http, batch)

        asyncio.run(over_http())
    seconds += time.perf_counter() - start
    app.state.reference.store.close()
    via.append("vfs" if direct else "HTTP")
    seeded = {
        "seed": args.seed,
        "count": len(memories),
        "seconds": seconds,
        "via": "+".join(dict.fromkeys("+".join(via).split("+"))),
    }
    marker.write_text(json.dumps(seeded))
    return seeded


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"update {SECTION!r} in RESULTS.md")
    parser.add_argument("--quick", action="store_true", help="only the 1k and 10k tiers")
    parser.add_argument("--tiers", default="1000,10000,100000", help="memory counts (nested)")
    parser.add_argument("--seed", type=int, default=20261122, help="data generator seed")
    parser.add_argument("--samples", type=int, default=1000, help="timed find calls per tier")
    parser.add_argument("--samples-100k", type=int, default=600, help="timed calls at >= 100k")
    parser.add_argument("--loopback", action="store_true", help="also measure over loopback")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="probe each tier this many times and keep the one other processes disturbed least "
        "(for a shared machine)",
    )
    parser.add_argument(
        "--direct-above",
        type=int,
        default=0,
        help="seed memories beyond this count through the vfs layer instead of HTTP (0: never)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        help="keep each tier's data under this directory and reuse it on the next run "
        "(default: a temporary directory)",
    )
    parser.add_argument("--probe", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.probe:  # the child process: queries as JSON on stdin, the result on stdout
        queries = [tuple(q) for q in json.load(sys.stdin)]
        print(json.dumps(probe(args.probe, queries, args.samples)))  # type: ignore[arg-type]
        return 0

    sizes = sorted({int(s) for s in args.tiers.split(",") if s.strip()})
    if args.quick:
        sizes = [s for s in sizes if s <= 10000]
    generator = Generator(args.seed)
    memories = generator.take(sizes[-1])
    queries = generator.queries(memories[:500])
    from ov_agent_ext.server.search import tokenize

    vocabulary = {t for m in memories for t in tokenize(f"{m.path}\n{m.content}")}
    stray = {t for kind, text in queries if kind == "unrelated" for t in tokenize(text)}
    if stray & vocabulary:
        print(f"warning: 'unrelated' query words in data: {stray & vocabulary}", file=sys.stderr)

    with tempfile.TemporaryDirectory(prefix="ov-bench-find-") as tmp:
        root = args.data_dir or Path(tmp)
        tiers: list[Tier] = []
        previous: Path | None = None
        for size in sizes:
            data_dir = root / f"memories-{size}"
            seeded = prepare_tier(data_dir, previous, memories[:size], args)
            previous = data_dir
            samples = args.samples_100k if size >= 100000 else args.samples
            print(f"probing {size}...", file=sys.stderr)
            tries = [run_probe(data_dir, queries, samples) for _ in range(args.repeat)]
            result = min(tries, key=lambda r: r["other_cpu"])  # the least disturbed probe
            tier = Tier(size, seeded["seconds"], seeded["via"], result)
            if args.loopback:
                tier.loopback = loopback(data_dir, queries, min(samples, 500))
            tiers.append(tier)
            print(
                f"  {size}: p50 {tier.p(0.5):.2f} ms, p99 {tier.p(0.99):.2f} ms, restart "
                f"{tier.probe['restart_s']:.2f} s, RSS +{tier.probe['rss_delta']:.0f} MiB, "
                f"other CPU {tier.probe['other_cpu']:.2f} cores",
                file=sys.stderr,
            )

    text = section(tiers, args, queries)
    print(text)
    if args.write:
        write_section(SECTION, text)
        print("updated bench/RESULTS.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
