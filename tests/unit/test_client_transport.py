"""The client's network plumbing: query strings as httpx wrote them, the proxy from the
environment looked up once."""

from __future__ import annotations

import pytest

from redrive.client.transport import _query, proxy_for


def test_query_repeats_lists_lowers_booleans_and_empties_none() -> None:
    given = {"queue": ["a", "b"], "dry_run": True, "all": False, "limit": 5, "cursor": None}
    assert _query(given) == (
        ("queue", "a"), ("queue", "b"), ("dry_run", "true"), ("all", "false"), ("limit", "5"),
        ("cursor", ""),
    )  # fmt: skip


@pytest.fixture
def no_proxy_environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    return monkeypatch


def test_the_environment_names_the_proxy_unless_no_proxy_covers_the_host(
    no_proxy_environment: pytest.MonkeyPatch,
) -> None:
    assert proxy_for("http://jobs.internal:8080") is None
    no_proxy_environment.setenv("HTTP_PROXY", "http://proxy.internal:3128")
    assert proxy_for("http://jobs.internal:8080") == "http://proxy.internal:3128"
    assert proxy_for("https://jobs.internal") is None
    no_proxy_environment.setenv("NO_PROXY", "jobs.internal")
    assert proxy_for("http://jobs.internal:8080") is None
