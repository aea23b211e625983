"""The client's network plumbing: query strings as httpx wrote them, the proxy from the
environment looked up once."""

from __future__ import annotations

import json
import math
import os
from collections import OrderedDict
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import pytest

from redrive.client.errors import InvalidRequestError
from redrive.client.transport import _encode, _query, proxy_for


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


@pytest.mark.parametrize(
    "body",
    [
        {"jobs": [{"type": "a.b", "args": [1, 2.5, "é", True, {"k": [None]}]}]},
        {"type": "a.b", "args": [10**30, -(2**64)], "meta": {"1e16": 1e16, "tiny": 5e-324}},
        {1: "key not a string", "ordered": OrderedDict(b=1, a=2)},
        [None, "null", ""],
    ],
)
def test_a_body_is_the_json_the_standard_library_writes(body: object) -> None:
    assert json.loads(_encode(body)) == json.loads(json.dumps(body))


@pytest.mark.parametrize(
    "value",
    [math.nan, math.inf, -math.inf, object(), datetime.now(UTC), "\ud800", {"x": {1, 2}}],
)
def test_what_json_cannot_hold_is_refused(value: Any) -> None:
    with pytest.raises(InvalidRequestError) as refused:
        _encode({"args": [value]})
    assert refused.value.code == "invalid_payload"


@pytest.mark.parametrize(
    "environment",
    [
        {},
        {"HTTP_PROXY": ""},
        {"http_proxy": "", "HTTPS_PROXY": "http://secure.internal:3128"},
        {"ALL_PROXY": "socks5://all.internal:1080"},
        {"no_proxy": "jobs.internal"},
        {"Http_Proxy": "http://mixed.internal:3128"},
        {"HTTP_PROXY": "http://upper.internal", "http_proxy": "http://lower.internal"},
        {"HTTP_PROXY": "http://cgi.internal", "REQUEST_METHOD": "GET"},
    ],
)
@pytest.mark.parametrize("url", ["http://jobs.internal:8080", "https://jobs.internal", "http://x"])
def test_the_proxy_is_the_one_urllib_finds(
    no_proxy_environment: pytest.MonkeyPatch, environment: dict[str, str], url: str
) -> None:
    """Where the environment names no proxy, the answer (None) comes without urllib.request;
    every other environment is still asked of urllib, so both agree."""
    import urllib.request

    for name in [name for name in os.environ if name.lower().endswith("_proxy")]:
        no_proxy_environment.delenv(name)
    no_proxy_environment.delenv("REQUEST_METHOD", raising=False)
    for name, value in environment.items():
        no_proxy_environment.setenv(name, value)
    parts = urlsplit(url)
    assert parts.hostname is not None
    proxies = urllib.request.getproxies()
    expected = (
        None
        if urllib.request.proxy_bypass(parts.hostname)
        else proxies.get(parts.scheme) or proxies.get("all")
    )
    assert proxy_for(url) == expected
