"""The peer results' arithmetic: medians over rounds, the best peer per path, redrive's per-round
ratios against it (or, for the SQLite column, against redrive's PostgreSQL one), and the figures,
table rows and targets made from them (pure; no I/O)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from bench.report import Figure

# jobs/s per tool, per path, one entry per round (None: that round's measurement failed)
Rates = dict[str, dict[str, list[float | None]]]

# Issue 13's targets: redrive / the best peer on each path, at least.
TARGETS: dict[tuple[str, str], float] = {
    ("redrive embedded", "enqueue one job per call"): 1.0,
    ("redrive embedded", "enqueue 1,000 per call"): 1.0,
    ("redrive embedded", "process no-op jobs"): 1.5,
    ("redrive embedded", "always-failing jobs to the dead/failed state"): 2.0,
    ("redrive embedded", "retry every failed job"): 1.0,
    ("redrive HTTP", "enqueue one job per call"): 0.7,
    ("redrive HTTP", "enqueue 1,000 per call"): 0.6,
    ("redrive HTTP", "process no-op jobs"): 1.0,
    ("redrive HTTP", "always-failing jobs to the dead/failed state"): 1.0,
    ("redrive HTTP", "retry every failed job"): 1.0,
    ("redrive embedded SQLite", "process no-op jobs"): 1.5,
    ("redrive embedded SQLite", "always-failing jobs to the dead/failed state"): 1.5,
}
# Columns compared with another redrive column instead of the best peer, on the paths issue 13
# gives them a target (their other paths show the rate alone): SQLite embedded / PostgreSQL
# embedded.
BASELINES: dict[str, tuple[str, tuple[str, ...]]] = {
    "redrive embedded SQLite": (
        "redrive embedded",
        ("process no-op jobs", "always-failing jobs to the dead/failed state"),
    ),
}


def median(values: Sequence[float | None]) -> float | None:
    """The median of the rounds that produced a figure; None when none did."""
    present = [value for value in values if value is not None]
    return statistics.median(present) if present else None


def best_peer(rates: Rates, peers: Sequence[str], path: str) -> str | None:
    """The peer with the highest median on `path` (None when no peer has a figure there)."""
    medians = {peer: median(rates.get(peer, {}).get(path, [])) for peer in peers}
    ranked = [(value, peer) for peer, value in medians.items() if value is not None]
    return max(ranked)[1] if ranked else None


def round_ratios(ours: Sequence[float | None], theirs: Sequence[float | None]) -> list[float]:
    """ours / theirs for each round where both were measured."""
    return [
        mine / other
        for mine, other in zip(ours, theirs, strict=False)
        if mine is not None and other is not None and other > 0
    ]


@dataclass(frozen=True)
class Comparison:
    """One redrive column on one path against the best peer there (or its baseline column)."""

    tool: str
    path: str
    peer: str
    ratios: list[float]
    target: float | None

    @property
    def ratio(self) -> float | None:
        return median(self.ratios)


def compared_with(rates: Rates, peers: Sequence[str], tool: str, path: str) -> str | None:
    """The column `tool` is measured against on `path`: its baseline on the paths it has one,
    nothing on its other paths, else the best peer."""
    if tool in BASELINES:
        baseline, paths = BASELINES[tool]
        return baseline if path in paths else None
    return best_peer(rates, peers, path)


def compare(rates: Rates, peers: Sequence[str], ours: Sequence[str], path: str) -> list[Comparison]:
    found = []
    for tool in ours:
        other = compared_with(rates, peers, tool, path)
        if other is None:
            continue
        ratios = round_ratios(rates.get(tool, {}).get(path, []), rates.get(other, {}).get(path, []))
        if ratios:
            found.append(Comparison(tool, path, other, ratios, TARGETS.get((tool, path))))
    return found


def rate_figures(
    rates: Rates, tools: Sequence[str], paths: Sequence[str], jobs: int
) -> list[Figure]:
    """Each tool's median jobs/s on each path, every round kept in the detail."""
    figures = []
    for tool in tools:
        for path in paths:
            values = rates.get(tool, {}).get(path, [])
            middle = median(values)
            if middle is None:
                continue
            present = [value for value in values if value is not None]
            note = f"median of {len(present)}; min {min(present):,.0f}, max {max(present):,.0f}"
            detail = {"rounds": values, "jobs": jobs}
            figures.append(Figure(f"{tool}: {path}", middle, "jobs/s", None, note, detail))
    return figures


def ratio_figures(comparisons: Sequence[Comparison]) -> list[Figure]:
    """redrive / best peer (or baseline column) per path: the median of the per-round ratios,
    against issue 13's target."""
    figures = []
    for comparison in comparisons:
        ratio = comparison.ratio
        if ratio is None:
            continue
        rounds = ", ".join(f"{value:.2f}" for value in comparison.ratios)
        figures.append(
            Figure(
                f"{comparison.tool} / {comparison.peer}: {comparison.path}",
                ratio,
                "x",
                comparison.target,
                f"per round: {rounds}",
                {"ratios": comparison.ratios, "peer": comparison.peer},
                at_least=True,
            )
        )
    return figures


def cell(rates: Rates, tool: str, path: str, comparison: Comparison | None) -> str:
    """A table cell: the median jobs/s, with the ratio to the best peer (or the baseline column)
    for redrive's columns."""
    middle = median(rates.get(tool, {}).get(path, []))
    if middle is None:
        return "n/a"
    if comparison is None or comparison.ratio is None:
        return f"{middle:,.0f}"
    return f"{middle:,.0f} ({comparison.ratio:.2f}x)"


def rows(
    rates: Rates, peers: Sequence[str], ours: Sequence[str], paths: Sequence[str]
) -> list[list[str]]:
    """One row per path: the path, each tool's cell (peers first), and the peer compared with."""
    table = []
    for path in paths:
        comparisons = {item.tool: item for item in compare(rates, peers, ours, path)}
        cells = [cell(rates, tool, path, comparisons.get(tool)) for tool in (*peers, *ours)]
        table.append([path, *cells, best_peer(rates, peers, path) or "none"])
    return table
