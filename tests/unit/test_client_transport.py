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


# -- the envelope Client.enqueue writes --------------------------------------------------


def _reference_envelope(
    type: str, args: Any = None, queue: Any = None, priority: Any = None, meta: Any = None,
    scheduled_at: Any = None, delay: Any = None, expires_at: Any = None, retry: Any = None,
    timeout_ms: Any = None, visibility_timeout_ms: Any = None, unique: Any = None,
    tags: Any = None, pending: bool = False, metadata: Any = None, schema: Any = None,
    id: Any = None, extra: Any = None,
) -> dict[str, Any]:  # fmt: skip
    """The envelope as the client wrote it before its options were set one by one."""
    from redrive.client.requests import relative, retry_document, timestamp

    options: dict[str, Any] = {
        "queue": queue, "priority": priority, "timeout_ms": timeout_ms,
        "visibility_timeout_ms": visibility_timeout_ms,
        "expires_at": None if expires_at is None else timestamp(expires_at, "expires_at"),
        "retry": None if retry is None else retry_document(retry),
        "unique": None if unique is None else dict(unique), "tags": tags,
        "pending": True if pending else None,
        "metadata": None if metadata is None else dict(metadata),
    }  # fmt: skip
    if scheduled_at is not None:
        options["scheduled_at"] = timestamp(scheduled_at, "scheduled_at")
    if delay is not None:
        options["scheduled_at"] = relative(delay)
    body: dict[str, Any] = {**(extra or {}), "type": type, "args": list(args or [])}
    optional = {"id": id, "meta": meta, "schema": schema}
    body.update({key: value for key, value in optional.items() if value is not None})
    kept = {key: value for key, value in options.items() if value is not None}
    if kept:
        body["options"] = kept
    return body


ENVELOPE_CASES: list[dict[str, Any]] = [
    {},
    {"args": [1, "a"], "queue": "default"},
    {"args": (), "queue": "q", "priority": 0},
    {"args": [], "priority": -3, "tags": [], "pending": False},
    {"meta": {}, "schema": "urn:s", "id": "019ad0b1-aaaa-7bbb-8ccc-ddddeeeeffff"},
    {"timeout_ms": 5, "visibility_timeout_ms": 0, "unique": {"key": "k"}, "tags": ["t"]},
    {"pending": True, "metadata": {"m": 1}, "retry": {"max_attempts": 2}},
    {"expires_at": "2030-01-01T00:00:00Z", "scheduled_at": "2029-01-01T00:00:00Z"},
    {"delay": 5, "expires_at": datetime(2030, 1, 1, tzinfo=UTC)},
    {"extra": {"args": "x", "zeta": 1, "type": "other", "options": {"o": 1}, "meta": 2}},
    {"extra": {"options": {"o": 1}}, "queue": "q", "id": "i", "meta": {"a": 1}},
    {"extra": {}, "args": None, "queue": None, "priority": None},
]


@pytest.mark.parametrize("given", ENVELOPE_CASES)
def test_the_envelope_is_the_one_every_option_written_then_dropped_made(
    given: dict[str, Any],
) -> None:
    from redrive.client.requests import envelope

    written = envelope("email.send", **given)
    expected = _reference_envelope("email.send", **given)
    assert written == expected
    assert json.dumps(written) == json.dumps(expected)  # the same keys in the same order


# -- the connection slots ------------------------------------------------------------------


def test_slots_are_taken_at_once_until_none_is_free_then_in_turn() -> None:
    import asyncio

    from redrive.client.transport import Slots

    async def scenario() -> list[str]:
        slots = Slots(2)
        assert slots.take_now() and slots.take_now()
        assert not slots.take_now()
        loop = asyncio.get_running_loop()
        order: list[str] = []

        async def wait(name: str) -> None:
            await slots.take(loop.time() + 5)
            order.append(name)

        first = asyncio.create_task(wait("first"))
        second = asyncio.create_task(wait("second"))
        await asyncio.sleep(0)
        assert not slots.take_now()  # others wait: no slot taken ahead of them
        slots.give()
        await first
        assert order == ["first"] and not second.done()
        slots.give()
        await second
        slots.give()
        slots.give()
        assert slots.take_now() and slots.take_now() and not slots.take_now()
        return order

    assert asyncio.run(scenario()) == ["first", "second"]


def test_a_wait_for_a_slot_times_out_and_a_slot_handed_to_a_cancelled_waiter_goes_on() -> None:
    import asyncio

    from redrive.client.transport import Slots

    async def scenario() -> None:
        slots = Slots(1)
        assert slots.take_now()
        loop = asyncio.get_running_loop()
        with pytest.raises(TimeoutError):
            await slots.take(loop.time() + 0.01)
        late = asyncio.create_task(slots.take(loop.time() + 5))
        after = asyncio.create_task(slots.take(loop.time() + 5))
        await asyncio.sleep(0)
        slots.give()  # handed to `late`, which is cancelled before it runs: `after` gets it
        late.cancel()
        with pytest.raises(asyncio.CancelledError):
            await late
        await asyncio.wait_for(after, 1)
        assert not slots.take_now()
        slots.give()
        assert slots.take_now()

    asyncio.run(scenario())
