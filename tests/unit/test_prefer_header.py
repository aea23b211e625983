"""Reading RFC 7240's Prefer header for `return=minimal` (the batch enqueue's short answer)."""

from __future__ import annotations

import pytest

from redrive.api.routes_jobs import prefers_minimal


@pytest.mark.parametrize(
    "header",
    ["return=minimal", "Return=Minimal", 'return="minimal"', "wait=5, return=minimal; x=y"],
)
def test_minimal_is_found_among_preferences(header: str) -> None:
    assert prefers_minimal(header)


@pytest.mark.parametrize(
    "header", [None, "", "return=representation", "respond-async", "minimal", "return"]
)
def test_anything_else_is_not_minimal(header: str | None) -> None:
    assert not prefers_minimal(header)
