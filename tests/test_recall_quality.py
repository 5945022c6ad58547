"""Recall quality on the reference server: the fixture of ``bench/recall_quality.py``.

The fixture store is seeded through real sessions and commits on an in-process reference
server; every fixture prompt is then answered by raw server score order and by the full
recall pipeline. Acceptance: the pipeline's hit@1 and hit@3 are at least raw order's, and no
unrelated prompt gets a block. The benchmark itself (both backends, the report) is
``bench/recall_quality.py``.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ov_agent_ext.tokens import get_tokenizer

BENCH_DIR = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    sys.path.insert(0, str(BENCH_DIR))
    try:
        return importlib.import_module("recall_quality")
    finally:
        sys.path.remove(str(BENCH_DIR))


@pytest.fixture(scope="module")
def result(bench: ModuleType) -> Any:
    fixture = bench.load_fixture()
    return asyncio.run(bench.measure_reference(fixture, get_tokenizer("estimate")))


def _misses(bench: ModuleType, result: Any, ordering: str, k: int) -> list[str]:
    return [
        q.query.prompt
        for q in result.queries
        if not bench.is_hit(getattr(q, ordering).lines, q.query, k)
    ]


def test_fixture_size(bench: ModuleType, result: Any) -> None:
    fixture = bench.load_fixture()
    assert fixture.statements >= 60
    assert len(fixture.queries) >= 25
    assert len(fixture.unrelated) >= 10
    assert result.seed.commits == len(fixture.sessions)
    # Every statement became a memory (the updated editor preference replaces its file here).
    assert result.seed.memory_files >= 60


def test_pipeline_hit_at_1_not_below_raw_order(bench: ModuleType, result: Any) -> None:
    full, raw = result.hits("full", 1), result.hits("raw", 1)
    assert full >= raw, f"pipeline misses at 1: {_misses(bench, result, 'full', 1)}"


def test_pipeline_hit_at_3_not_below_raw_order(bench: ModuleType, result: Any) -> None:
    full, raw = result.hits("full", 3), result.hits("raw", 3)
    assert full >= raw, f"pipeline misses at 3: {_misses(bench, result, 'full', 3)}"


def test_unrelated_prompts_recall_nothing(result: Any) -> None:
    assert result.injected_unrelated("full") == []
    # Raw order injects something for every one of them: the filter is what keeps them clean.
    assert len(result.injected_unrelated("raw")) == len(result.unrelated)


def test_pipeline_blocks_are_smaller(result: Any) -> None:
    full, raw = result.blocks("full"), result.blocks("raw")
    assert sum(full) / len(full) < sum(raw) / len(raw)
