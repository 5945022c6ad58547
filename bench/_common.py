"""Helpers shared by the reference-server benchmarks (not a benchmark itself).

Percentiles, resident memory, the machine line, in-process HTTP clients, and replacing one
``## `` section of ``bench/RESULTS.md`` while keeping the others.
"""

from __future__ import annotations

import datetime
import os
import platform
import re
import resource
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
RESULTS = BENCH_DIR / "RESULTS.md"
if str(REPO_ROOT) not in sys.path:  # run from a checkout without installing the package
    sys.path.insert(0, str(REPO_ROOT))

USER = "alice"
HEADERS = {"X-OpenViking-Account": "default", "X-OpenViking-User": USER}


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), ``q`` in [0, 1]."""
    data = sorted(values)
    if not data:
        return float("nan")
    pos = (len(data) - 1) * q
    low = int(pos)
    high = min(low + 1, len(data) - 1)
    return data[low] + (data[high] - data[low]) * (pos - low)


def rss_mib() -> float:
    """This process's resident set size now (VmRSS), in MiB."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")  # pragma: no cover - Linux only


def _busy_seconds() -> float:
    """CPU seconds all processes have spent since boot (every core), from /proc/stat."""
    with open("/proc/stat", encoding="ascii") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _own_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class OtherCpu:
    """How many cores other processes kept busy while the ``with`` block ran (0 = none).

    Machine-wide busy time from /proc/stat minus this process's own CPU time, over wall time:
    a direct measure of how much the measurement had to share the machine."""

    cores = 0.0

    def __enter__(self) -> OtherCpu:
        self._start = (_busy_seconds(), _own_seconds(), time.perf_counter())
        return self

    def __exit__(self, *exc_info: object) -> None:
        busy, own, wall = self._start
        elapsed = time.perf_counter() - wall
        others = (_busy_seconds() - busy) - (_own_seconds() - own)
        self.cores = max(0.0, others / elapsed) if elapsed > 0 else 0.0


def calibration_ms() -> float:
    """A fixed pure-Python workload (best of 5), in ms: how fast this machine is right now.

    Shared virtual machines slow down when the host is busy, which no process here can see;
    comparing this number between runs tells a slower machine from a slower server."""
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        total = 0
        for i in range(300_000):
            total += i * i % 7
        best = min(best, time.perf_counter() - start)
    return best * 1000


def machine() -> str:
    """One line: CPU model, cores, Python, OS."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:  # pragma: no cover - not Linux
        pass
    return (
        f"{os.cpu_count()} cores ({model}), Python {sys.version.split()[0]}, "
        f"{platform.system()} {platform.release()}"
    )


def today() -> str:
    return datetime.date.today().isoformat()


def asgi_client(app: Any) -> httpx.AsyncClient:
    """An httpx client calling ``app`` in process, as user ``USER`` in dev mode."""
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://ref",
        headers=HEADERS,
    )


def write_section(heading: str, text: str, path: Path = RESULTS) -> None:
    """Replace the section ``heading`` (up to the next ``## ``) or append it; keep the rest."""
    content = path.read_text(encoding="utf-8") if path.exists() else "# Benchmark results\n"
    pattern = re.compile(rf"^{re.escape(heading)}[ \t]*\n.*?(?=^## |\Z)", re.MULTILINE | re.DOTALL)
    if pattern.search(content):
        content = pattern.sub(lambda _: text.rstrip("\n") + "\n\n", content, count=1)
    else:
        content = content.rstrip("\n") + "\n\n" + text
    path.write_text(content.rstrip("\n") + "\n", encoding="utf-8")
