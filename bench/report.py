"""Figures, percentiles, machine facts, the printed table and the saved JSON."""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

RESULTS = Path(__file__).parent / "results"


def percentile(samples: list[float], fraction: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default)."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    position = (len(ordered) - 1) * fraction
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summary(samples: list[float]) -> dict[str, float | int]:
    """Count, p50/p95/p99, min, max and mean of latency samples."""
    return {
        "n": len(samples),
        "p50": percentile(samples, 0.50),
        "p95": percentile(samples, 0.95),
        "p99": percentile(samples, 0.99),
        "min": min(samples) if samples else math.nan,
        "max": max(samples) if samples else math.nan,
        "mean": statistics.fmean(samples) if samples else math.nan,
    }


def repeats(values: list[float]) -> dict[str, Any]:
    """Median, min and max of a figure measured once per repeat."""
    return {
        "repeats": len(values),
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "values": values,
    }


@dataclass
class Figure:
    """One reported number; `target` is an upper bound (a lower bound when `at_least`), None
    when the figure has none."""

    name: str
    value: float
    unit: str
    target: float | None = None
    note: str = ""
    detail: dict[str, Any] = field(default_factory=dict)
    at_least: bool = False

    @property
    def met(self) -> bool | None:
        if self.target is None or math.isnan(self.value):
            return None
        return self.value >= self.target if self.at_least else self.value <= self.target

    @property
    def bound(self) -> str:
        return "≥ " if self.at_least else "≤ "


def _number(value: float, unit: str) -> str:
    if math.isnan(value):
        return "n/a"
    if unit in ("rows", "count", "requests"):
        return f"{value:,.0f} {unit}"
    if unit in ("rows/s", "jobs/s"):
        return f"{value:,.0f} {unit}"
    if unit == "ms":
        return f"{value:,.2f} ms" if value < 100 else f"{value:,.0f} ms"
    return f"{value:,.3f} {unit}" if value < 1 else f"{value:,.2f} {unit}"


def print_table(title: str, figures: list[Figure], console: Console | None = None) -> None:
    console = console or Console()
    table = Table(title=title, title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_column("target", justify="right")
    table.add_column("met?", justify="center")
    table.add_column("note", overflow="fold")
    for figure in figures:
        met = figure.met
        mark = "" if met is None else ("[green]yes[/]" if met else "[bold red]NO[/]")
        target = "" if figure.target is None else figure.bound + _number(figure.target, figure.unit)
        table.add_row(figure.name, _number(figure.value, figure.unit), target, mark, figure.note)
    console.print(table)
    missed = [figure for figure in figures if figure.met is False]
    for figure in missed:
        console.print(
            f"[bold red]MISSED[/] {figure.name}: {_number(figure.value, figure.unit)} "
            f"against a target of {figure.bound}{_number(figure.target or 0, figure.unit)}"
        )
    if not missed and any(figure.target is not None for figure in figures):
        console.print("[green]every target met[/]")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def machine() -> dict[str, Any]:
    return {
        "cores": os.cpu_count(),
        "memory_bytes": _memory_bytes(),
        "cpu_model": _cpu_model(),
        "platform": platform.platform(),
        "hostname": platform.node(),
    }


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], capture_output=True, text=True, check=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def versions(postgres: dict[str, str] | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {
        "python": sys.version.split()[0],
        "redrive": metadata.version("redrive"),
        "psycopg": metadata.version("psycopg"),
        "asyncpg": metadata.version("asyncpg"),
        "git_commit": _git("rev-parse", "HEAD"),
        # uncommitted changes under src/ at the start of the run (the code that was measured)
        "git_dirty_src": (_git("status", "--porcelain", "--", "src") or "").splitlines(),
    }
    if postgres is not None:
        found["postgresql"] = postgres.get("server_version")
        found["postgresql_settings"] = {k: v for k, v in postgres.items() if k != "server_version"}
    return found


def _clean(value: Any) -> Any:
    """NaN is not JSON: write null instead."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {key: _clean(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(item) for item in value]
    return value


def save(name: str, document: dict[str, Any], started: datetime) -> Path:
    """Write bench/results/<name>-<UTC timestamp>.json and return its path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = started.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = RESULTS / f"{name}-{stamp}.json"
    document = {
        **document,
        "figures": [
            {**asdict(figure), "met": figure.met} for figure in document.get("figures", [])
        ],
    }
    path.write_text(json.dumps(_clean(document), indent=2) + "\n", encoding="utf-8")
    return path
