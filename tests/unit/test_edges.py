"""The edges (HTTP, dashboard, worker adapters) use the service's public use-cases, never its
runtime (store, clock, options, metrics) directly."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

SOURCE = Path(__file__).parents[2] / "src" / "redrive"
EDGES = ("api", "dashboard", "worker")
# `service.runtime`, `self.service.runtime`, `request.app.state.service.runtime` …
RUNTIME_ACCESS = re.compile(r"\bservice\.runtime\b")


@pytest.mark.parametrize(
    "module",
    sorted(path for edge in EDGES for path in (SOURCE / edge).rglob("*.py")),
    ids=lambda path: str(path.relative_to(SOURCE)),
)
def test_an_edge_never_reaches_into_the_service_runtime(module: Path) -> None:
    offending = [
        f"{module.name}:{number}: {line.strip()}"
        for number, line in enumerate(module.read_text().splitlines(), 1)
        if RUNTIME_ACCESS.search(line)
    ]
    assert not offending, "\n".join(offending)
