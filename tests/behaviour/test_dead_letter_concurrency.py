"""Dead-letter bulk operations under concurrency (two replicas on one database) and dry runs."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import psycopg
import pytest

from redrive.api.app import create_app
from redrive.domain.caller import SYSTEM
from redrive.domain.dead_letter_filter import parse_filter
from redrive.service import dead_letters as dead_letter_service
from redrive.service.dead_letters import BulkRequest
from redrive.service.facade import Service
from redrive.service.runtime import Runtime, ServiceOptions
from redrive.store.postgres.store import PostgresStore
from redrive.store.sqlite.store import SqliteStore
from tests.behaviour.ojs_http import (
    COUNT_EVENTS,
    count_rows,
    explain_all,
    fetch,
    forbid_server_errors,
    kill_job,
)
from tests.behaviour.test_dead_letters import make_dead_letters
from tests.conftest import open_test_store
from tests.support.callers import CALLER, acting_as
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio

THOUSAND = 1000
BURST = 100  # what a bulk retry moves within its request (domain/redrive.py burst)


@pytest.fixture(autouse=True)
def no_server_errors(client: httpx.AsyncClient) -> None:
    forbid_server_errors(client)


@asynccontextmanager
async def replica(
    database_url: str, clock: ManualClock, seed: int
) -> AsyncIterator[tuple[Service, httpx.AsyncClient]]:
    """A second server on the same database: its own store (connections), service and app.

    The seed differs from the `service` fixture's so the two never mint the same ids."""
    store = await open_test_store(database_url)
    options = ServiceOptions(test_hooks=True)
    service = Service(Runtime(store, clock=clock, options=options, rng=random.Random(seed)))
    app = create_app(service, max_body_bytes=64_000)
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://replica.test") as http:
            forbid_server_errors(http)
            yield service, http
    finally:
        await store.close()


async def table(service: Service, sql: str) -> list[tuple[Any, ...]]:
    """Every row of a query straight on the store's database, as tuples."""
    store = service.runtime.store
    if isinstance(store, SqliteStore):
        sqlite = store.connection
        return await store.call(lambda: [tuple(row) for row in sqlite.execute(sql).fetchall()])
    assert isinstance(store, PostgresStore)
    # As the tables' owner: the pool's connections are bound by row-level security.
    async with await psycopg.AsyncConnection.connect(store.url) as postgres:
        cursor = await postgres.execute(sql)
        return [tuple(row) for row in await cursor.fetchall()]


SNAPSHOT_QUERIES = (
    "SELECT id, job_id, status, moved_at, moved_by, queue FROM dead_letters ORDER BY id",
    "SELECT id, state, attempt, queue, enqueued_at FROM jobs ORDER BY id",
    "SELECT tenant_id, queue, type, error_type, count FROM dead_letter_tallies "
    "ORDER BY tenant_id, queue, type, error_type",
    COUNT_EVENTS,
)


async def snapshot(service: Service) -> list[list[tuple[Any, ...]]]:
    return [await table(service, sql) for sql in SNAPSHOT_QUERIES]


def metric(text: str, sample: str) -> float:
    """The value of one exact sample line of /metrics, 0 when it is not there."""
    for line in text.splitlines():
        if line.startswith(sample + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


# --- two replicas at once -----------------------------------------------------------------------


async def test_two_replicas_bulk_retrying_the_same_thousand_redrive_each_once(
    client: httpx.AsyncClient, service: Service, database_url: str, clock: ManualClock
) -> None:
    """In requests of a burst each (what completes within a request), from both at once."""
    ids = await make_dead_letters(service, THOUSAND, "crowd")
    await explain_all(service, CALLER)
    body = {"filter": {"queue": "crowd"}, "confirm": True, "limit": BURST}
    async with replica(database_url, clock, seed=11) as (_, other):
        results: list[dict[str, Any]] = []
        while not results or any(result["succeeded"] for result in results[-2:]):
            responses = await asyncio.gather(
                client.post("/ojs/v1/dead-letter/retry", json=body),
                other.post("/ojs/v1/dead-letter/retry", json=body),
            )
            assert [response.status_code for response in responses] == [200, 200]
            results += [response.json() for response in responses]
        assert sum(result["succeeded"] for result in results) == THOUSAND
        for result in results:
            assert result["matched"] == result["succeeded"] + result["failed"] <= BURST
            assert len(result["errors"]) == min(result["failed"], 10)
            assert {error["job_id"] for error in result["errors"]} <= set(ids)
        metrics = [(await http.get("/metrics")).text for http in (client, other)]
        retried = sum(
            metric(text, 'ojs_dead_letter_retried_total{queue="crowd"}') for text in metrics
        )
        assert retried == THOUSAND

    await assert_all_redriven_once(client, service, ids)


async def test_two_replicas_bulk_retrying_a_thousand_start_one_paced_task(
    client: httpx.AsyncClient, service: Service, database_url: str, clock: ManualClock
) -> None:
    """Past a burst: one replica starts the task (202), the other is told which (409); both
    replicas' maintenance loops then advance it, and each dead letter moves once."""
    ids = await make_dead_letters(service, THOUSAND, "crowd")
    await explain_all(service, CALLER)
    body = {"filter": {"queue": "crowd"}, "confirm": True}
    async with replica(database_url, clock, seed=11) as (other_service, other):
        responses = await asyncio.gather(
            client.post("/ojs/v1/dead-letter/retry", json=body),
            other.post("/ojs/v1/dead-letter/retry", json=body),
        )
        assert sorted(response.status_code for response in responses) == [202, 409]
        started, refused = sorted(responses, key=lambda response: response.status_code)
        task_id = started.json()["task"]["id"]
        assert refused.json()["error"]["details"]["task_id"] == task_id
        for _ in range(70):  # ten minutes at 100 a minute, in ticks of ten seconds
            clock.advance(10_000)
            await asyncio.gather(service.redrives.advance(), other_service.redrives.advance())
        task = (await client.get(f"/ojs/v1/dead-letter/redrives/{task_id}")).json()["task"]
        assert (task["state"], task["counts"]["moved"]) == ("completed", THOUSAND)
    await assert_all_redriven_once(client, service, ids)


async def test_two_replicas_bulk_retrying_by_filter_in_chunks_keep_every_count_exact(
    client: httpx.AsyncClient, service: Service, database_url: str, clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The service's bulk retry (every chunk one statement, over the store's lanes) from two
    replicas at once: each dead letter moves once, its job is requeued once, and the incident's
    dead count, the tallies and the events agree with the table."""
    monkeypatch.setattr(dead_letter_service, "BULK_CHUNK", 50)  # many chunks from each
    monkeypatch.setattr(dead_letter_service, "RETRY_CHUNK_MOST", 50)
    ids = await make_dead_letters(service, THOUSAND, "crowd")
    await explain_all(service, CALLER)
    request = BulkRequest(parse_filter({"queue": "crowd"}, clock.now_ms()), confirm=True)
    async with replica(database_url, clock, seed=17) as (other_service, _):
        results = await asyncio.gather(
            service.dead_letters.bulk_retry(acting_as("operator-1"), request),
            other_service.dead_letters.bulk_retry(acting_as("operator-2"), request),
        )
    assert sum(result.succeeded for result in results) == THOUSAND
    assert all(result.failed == 0 for result in results)
    counted = "SELECT COALESCE(SUM(dead_count), 0) FROM incidents"
    assert await count_rows(service, counted) == 0
    total = "SELECT COALESCE(SUM(total_count), 0) FROM incidents"
    assert await count_rows(service, total) == THOUSAND
    tallied = "SELECT COALESCE(SUM(count), 0) FROM dead_letter_tallies"
    assert await count_rows(service, tallied) == 0
    movers = await table(
        service, "SELECT moved_by, COUNT(*) FROM dead_letters GROUP BY moved_by ORDER BY moved_by"
    )
    assert movers == [
        (f"operator-{number}", result.succeeded)
        for number, result in enumerate(results, start=1)
        if result.succeeded
    ]
    await assert_all_redriven_once(client, service, ids)


async def assert_all_redriven_once(
    client: httpx.AsyncClient, service: Service, ids: list[str]
) -> None:
    assert await count_rows(service, "SELECT COUNT(*) FROM dead_letters") == THOUSAND
    by_status = "SELECT COUNT(*) FROM dead_letters WHERE status = 'retried'"
    assert await count_rows(service, by_status) == THOUSAND
    assert await count_rows(service, "SELECT COUNT(*) FROM jobs") == THOUSAND
    available = "SELECT COUNT(DISTINCT id) FROM jobs WHERE queue = 'crowd' AND state = 'available'"
    assert await count_rows(service, available) == THOUSAND
    events = COUNT_EVENTS + " WHERE type = 'dead_letter.retried'"
    assert await count_rows(service, events) == THOUSAND
    stats = (await client.get("/ojs/v1/dead-letter/stats")).json()
    assert (stats["total"], stats["by_queue"]) == (0, {})
    fetched = await fetch(client, ["crowd"], count=THOUSAND)
    assert sorted(job["id"] for job in fetched) == sorted(ids)
    assert await fetch(client, ["crowd"], count=THOUSAND) == []


async def test_two_replicas_retrying_and_purging_the_same_set_split_it(
    client: httpx.AsyncClient, service: Service, database_url: str, clock: ManualClock
) -> None:
    """Each dead letter is either retried or purged, never both and never neither."""
    ids = await make_dead_letters(service, 600, "split")
    await explain_all(service, CALLER)
    async with replica(database_url, clock, seed=13) as (_, other):
        retry, purge = await asyncio.gather(
            client.post(
                "/ojs/v1/dead-letter/retry",
                json={"filter": {"queue": "split"}, "confirm": True, "limit": BURST},
            ),
            other.request(
                "DELETE",
                "/ojs/v1/dead-letter",
                json={"filter": {"queue": "split"}, "confirm": True},
            ),
        )
    assert (retry.status_code, purge.status_code) == (200, 200), (retry.text, purge.text)
    retried, purged = retry.json()["succeeded"], purge.json()["succeeded"]
    assert retried + purged == 600 and retried <= BURST

    statuses = await table(
        service, "SELECT status, COUNT(*) FROM dead_letters GROUP BY status ORDER BY status"
    )
    expected = [(status, n) for status, n in (("deleted", purged), ("retried", retried)) if n]
    assert statuses == expected
    assert await count_rows(service, "SELECT COUNT(*) FROM jobs") == retried
    assert await count_rows(service, "SELECT COUNT(*) FROM jobs WHERE state = 'available'") == (
        retried
    )
    both = (
        "SELECT COUNT(*) FROM dead_letters d JOIN jobs j ON j.id = d.job_id "
        "WHERE d.status = 'deleted'"
    )
    assert await count_rows(service, both) == 0
    assert (await client.get("/ojs/v1/dead-letter/stats")).json()["total"] == 0
    fetched = await fetch(client, ["split"], count=THOUSAND)
    assert len(fetched) == retried
    assert {job["id"] for job in fetched} <= set(ids)


async def test_two_replicas_pruning_at_once_remove_exactly_the_excess(
    client: httpx.AsyncClient, service: Service, database_url: str, clock: ManualClock
) -> None:
    created: list[str] = []
    for _ in range(5):
        created += await make_dead_letters(service, 40, "capped")
        clock.advance(1_000)
    newest = created[-40:]
    put = await client.put(
        "/ojs/v1/dead-letter/retention", json={"max_count": 40, "min_age": "P0D"}
    )  # the floor off: these are all young
    assert put.status_code == 200, put.text
    async with replica(database_url, clock, seed=17) as (other_service, _):
        reports = await asyncio.gather(
            service.retention.prune(SYSTEM), other_service.retention.prune(SYSTEM)
        )
    assert sum(report.deleted for report in reports) == 160
    assert sum(report.by_queue["capped"] for report in reports) == 160

    survivors = await table(service, "SELECT job_id FROM dead_letters WHERE status = 'dead'")
    assert sorted(row[0] for row in survivors) == sorted(newest)
    assert (await client.get("/ojs/v1/dead-letter/stats")).json()["total"] == 40
    events = (await client.get("/ojs/v1/events?types=dead_letter.pruned")).json()["events"]
    assert sum(event["data"]["count"] for event in events) == 160


# --- dry runs -----------------------------------------------------------------------------------


async def populate_mixed(client: httpx.AsyncClient, clock: ManualClock) -> dict[str, str]:
    """Dead letters in two queues, one of them already retried (an episode that is not dead)."""
    ids = {}
    for name, queue, error_type in (
        ("a", "billing", "Timeout"),
        ("b", "billing", "SmtpError"),
        ("c", "mail", "SmtpError"),
        ("d", "mail", "Timeout"),
        ("e", "mail", "Timeout"),
    ):
        ids[name] = await kill_job(client, queue, "dry.run", error_type, args=[{"n": name}])
        clock.advance(1_000)
    assert (await client.post(f"/ojs/v1/dead-letter/{ids['e']}/retry")).status_code == 200
    return ids


@pytest.mark.parametrize(
    ("method", "path", "body", "matched"),
    [
        ("POST", "/ojs/v1/dead-letter/retry", {"dry_run": True}, 4),
        ("POST", "/ojs/v1/dead-letter/retry", {"filter": {"queue": "mail"}, "dry_run": True}, 2),
        ("POST", "/ojs/v1/dead-letter/retry", {"dry_run": True, "confirm": True}, 4),
        ("POST", "/ojs/v1/admin/dead-letter/retry", {"dry_run": "true"}, 4),
        (
            "POST",
            "/ojs/v1/dead-letter/retry",
            {"filter": {"args_match": '$.n == "b"'}, "dry_run": True},
            1,
        ),
        ("DELETE", "/ojs/v1/dead-letter?dry_run=true", None, 4),
        ("DELETE", "/ojs/v1/dead-letter?error_type=Timeout&dry_run=true", None, 2),
        ("DELETE", "/ojs/v1/dead-letter", {"dry_run": True, "confirm": True}, 4),
        (
            "DELETE",
            "/ojs/v1/admin/dead-letter",
            {"filter": {"queue": "billing"}, "dry_run": True},
            2,
        ),
    ],
)
async def test_dry_runs_of_bulk_retry_and_purge_change_nothing(
    client: httpx.AsyncClient,
    clock: ManualClock,
    service: Service,
    method: str,
    path: str,
    body: dict[str, Any] | None,
    matched: int,
) -> None:
    ids = await populate_mixed(client, clock)
    before = await snapshot(service)
    stats_before = (await client.get("/ojs/v1/dead-letter/stats")).json()
    metrics_before = (await client.get("/metrics")).text

    response = await client.request(method, path, json=body)
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["dry_run"] is True
    assert (result["matched"], result["succeeded"], result["failed"]) == (matched, 0, 0)
    assert len(result["sample"]) == matched
    assert set(result["sample"]) <= {ids[name] for name in "abcd"}

    assert await snapshot(service) == before
    assert (await client.get("/ojs/v1/dead-letter/stats")).json() == stats_before
    assert (await client.get("/metrics")).text == metrics_before
    assert await fetch(client, ["billing"], count=10) == []
