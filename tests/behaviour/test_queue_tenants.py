"""Queues belong to a tenant: one pausing its queue leaves other tenants' of that name alone."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from redrive.domain.caller import SYSTEM
from redrive.domain.job import DEFAULT_TENANT
from redrive.domain.records import QueueRecord
from redrive.service.facade import Service
from redrive.service.workers import FetchRequest
from redrive.store.postgres.store import PostgresStore
from redrive.store.sqlite.store import SqliteStore
from tests.behaviour.ojs_http import enqueue, fetch, forbid_server_errors
from tests.support.callers import ACROSS_TENANTS
from tests.support.postgres import fresh_database

pytestmark = pytest.mark.anyio

QUEUE = "shared"
PAUSING = "tenant-a"
OTHER = "tenant-b"


def header(tenant: str | None) -> dict[str, str] | None:
    """The request headers of a tenant; None is the default tenant (no header)."""
    return None if tenant is None else {"X-OJS-Tenant": tenant}


@pytest.fixture(autouse=True)
def no_server_errors(client: httpx.AsyncClient) -> None:
    forbid_server_errors(client)


async def enqueue_for_each(client: httpx.AsyncClient) -> dict[str | None, str]:
    """One job in the shared queue for each of the two tenants and the default one, by tenant."""
    return {
        tenant: (await enqueue(client, args=[tenant], headers=header(tenant), queue=QUEUE))["id"]
        for tenant in (PAUSING, OTHER, None)
    }


async def set_paused(client: httpx.AsyncClient, tenant: str | None, paused: bool) -> Any:
    action = "pause" if paused else "resume"
    response = await client.post(f"/ojs/v1/queues/{QUEUE}/{action}", headers=header(tenant))
    assert response.status_code == 200, response.text
    return response.json()


async def paused_flags(client: httpx.AsyncClient, tenant: str | None) -> list[Any]:
    """The shared queue's paused flag as this tenant reads it, from each route that tells it."""
    headers = header(tenant)
    detail = await client.get(f"/ojs/v1/queues/{QUEUE}", headers=headers)
    listed = await client.get("/ojs/v1/queues", headers=headers)
    admin = await client.get(f"/ojs/v1/admin/queues/{QUEUE}", headers=headers)
    for response in (detail, listed, admin):
        assert response.status_code == 200, response.text
    return [
        detail.json()["queue"]["paused"],
        [queue["paused"] for queue in listed.json()["queues"] if queue["name"] == QUEUE],
        admin.json()["paused"],
    ]


async def fetched_ids(client: httpx.AsyncClient, tenant: str | None) -> list[str]:
    return [job["id"] for job in await fetch(client, [QUEUE], count=10, headers=header(tenant))]


async def test_pausing_a_tenants_queue_stops_only_that_tenants_fetches(
    client: httpx.AsyncClient,
) -> None:
    jobs = await enqueue_for_each(client)
    paused = await set_paused(client, PAUSING, True)
    assert paused["queue"]["paused"] is True

    assert await fetched_ids(client, PAUSING) == []
    assert await fetched_ids(client, OTHER) == [jobs[OTHER]]
    assert await fetched_ids(client, None) == [jobs[None]]

    await set_paused(client, PAUSING, False)
    assert await fetched_ids(client, PAUSING) == [jobs[PAUSING]]


async def test_each_tenant_sees_its_own_paused_flag(client: httpx.AsyncClient) -> None:
    await enqueue_for_each(client)
    await set_paused(client, PAUSING, True)
    assert await paused_flags(client, PAUSING) == [True, [True], True]
    assert await paused_flags(client, OTHER) == [False, [False], False]
    assert await paused_flags(client, None) == [False, [False], False]

    # Another tenant resuming its own queue of that name leaves the paused one paused.
    resumed = await set_paused(client, OTHER, False)
    assert resumed["queue"]["paused"] is False
    assert await paused_flags(client, PAUSING) == [True, [True], True]


async def test_the_default_tenant_pausing_stops_no_other_tenant(
    client: httpx.AsyncClient,
) -> None:
    jobs = await enqueue_for_each(client)
    await set_paused(client, None, True)
    assert await paused_flags(client, None) == [True, [True], True]
    assert await paused_flags(client, PAUSING) == [False, [False], False]
    assert await fetched_ids(client, None) == []
    assert await fetched_ids(client, PAUSING) == [jobs[PAUSING]]
    assert await fetched_ids(client, OTHER) == [jobs[OTHER]]


async def test_a_tenant_sees_only_its_own_queues(client: httpx.AsyncClient) -> None:
    await enqueue(client, headers=header(OTHER), queue="only-b")
    await set_paused(client, PAUSING, True)  # a queue tenant-a knows before any job is in it
    for tenant, names in ((PAUSING, [QUEUE]), (OTHER, ["only-b"]), (None, [])):
        listed = await client.get("/ojs/v1/queues", headers=header(tenant))
        assert [queue["name"] for queue in listed.json()["queues"]] == names
        totals = await client.get("/ojs/v1/admin/stats", headers=header(tenant))
        assert totals.json()["queues"] == len(names)


async def test_a_caller_spanning_every_tenant_skips_a_queue_any_tenant_paused(
    client: httpx.AsyncClient, service: Service
) -> None:
    """Its claim would hand out the pausing tenant's jobs too, so it takes none from there."""
    jobs = await enqueue_for_each(client)
    await set_paused(client, PAUSING, True)
    overview = {queue.name: queue for queue in await service.queues.overview(ACROSS_TENANTS)}
    assert overview[QUEUE].paused is True
    assert overview[QUEUE].counts["available"] == 3
    request = FetchRequest(queues=[QUEUE], count=10)
    assert await service.workers.fetch(ACROSS_TENANTS, request) == []

    await set_paused(client, PAUSING, False)
    claimed = await service.workers.fetch(ACROSS_TENANTS, request)
    assert sorted(job.id for job in claimed) == sorted(jobs.values())


# --- migration ----------------------------------------------------------------------------------

BEFORE_QUEUE_KEYS = "0003_tenant_keys"
QUEUE_ROW = {
    "name": "reports",
    "tenant_id": "acme",
    "paused": True,
    "created_at": 1_780_000_000_000,
    "paused_at": 1_789_000_000_000,
    "resumed_at": 1_785_000_000_000,
}
KEPT_QUEUE = QueueRecord(
    tenant_id="acme",
    name="reports",
    paused=True,
    created_at=1_780_000_000_000,
    paused_at=1_789_000_000_000,
    resumed_at=1_785_000_000_000,
)
# The row as schema 3 stored it (queues keyed by name alone), written with that schema's columns.
INSERTS = {
    "sqlite": "INSERT INTO queues (name, tenant_id, paused, created_at, paused_at, resumed_at) "
    "VALUES (:name, :tenant_id, :paused, :created_at, :paused_at, :resumed_at)",
    "postgres": "INSERT INTO queues (name, tenant_id, paused, created_at, paused_at, resumed_at) "
    "VALUES (%(name)s, %(tenant_id)s, %(paused)s, %(created_at)s, %(paused_at)s, %(resumed_at)s)",
}


@pytest.fixture
def empty_database(backend: str, tmp_path: Path) -> Iterator[str]:
    """A database no migration has touched yet."""
    if backend == "sqlite":
        yield str(tmp_path / "old.db")
        return
    with fresh_database("redrive_migration") as url:
        yield url


async def open_store(backend: str, location: str) -> SqliteStore | PostgresStore:
    if backend == "sqlite":
        return SqliteStore(location)
    store = PostgresStore(location, max_size=2)
    return store


def write_schema_3_row(backend: str, location: str) -> None:
    if backend == "sqlite":
        with sqlite3.connect(location) as connection:
            connection.execute(INSERTS["sqlite"], QUEUE_ROW)
        connection.close()
        return
    with psycopg.connect(location) as postgres:
        postgres.execute(INSERTS["postgres"], QUEUE_ROW)


async def test_migrating_to_head_keeps_the_queues_of_schema_3(
    backend: str, empty_database: str
) -> None:
    store = await open_store(backend, empty_database)
    try:
        applied = await store.migrate(until=BEFORE_QUEUE_KEYS)
        assert applied[-1] == BEFORE_QUEUE_KEYS
        write_schema_3_row(backend, empty_database)
        later = await store.migrate()
        assert later and all(version > BEFORE_QUEUE_KEYS for version in later)
        assert await store.migrate() == []

        async with store.transaction(SYSTEM) as transaction:
            assert await transaction.list_queues("acme") == [KEPT_QUEUE]
            assert await transaction.list_queues(DEFAULT_TENANT) == []
            assert await transaction.paused_queue_names("acme") == {"reports"}
            assert await transaction.paused_queue_names(DEFAULT_TENANT) == set()
            # The key is (tenant, name) now: another tenant has a queue of that name of its own.
            await transaction.ensure_queue("reports", DEFAULT_TENANT, 1_790_000_000_000)
            resumed = await transaction.set_queue_paused(
                "reports", DEFAULT_TENANT, False, 1_790_000_000_001
            )
            assert (resumed.tenant_id, resumed.paused) == (DEFAULT_TENANT, False)
        async with store.transaction(SYSTEM) as transaction:
            assert await transaction.list_queues("acme") == [KEPT_QUEUE]
            both = await transaction.list_queues(None)
            assert sorted((queue.tenant_id, queue.paused) for queue in both) == [
                (DEFAULT_TENANT, False),
                ("acme", True),
            ]
            assert await transaction.paused_queue_names(None) == {"reports"}
    finally:
        await store.close()
