"""Crons belong to a tenant: two tenants may use one cron name, and each sees only its own."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from redrive.domain.caller import SYSTEM
from redrive.domain.durations import format_timestamp
from redrive.domain.job import DEFAULT_TENANT
from redrive.domain.records import CronRecord, WorkerRecord
from redrive.service.facade import Service
from redrive.store.postgres.store import PostgresStore
from redrive.store.sqlite.store import SqliteStore
from tests.behaviour.ojs_http import assert_error, fetch, forbid_server_errors
from tests.support.clock import ManualClock
from tests.support.postgres import fresh_database

pytestmark = pytest.mark.anyio

MINUTE_MS = 60_000
NAME = "report"
QUEUE = "reports"
# Two tenants register a cron of the same name, each with its own schedule and arguments.
TENANTS = {"tenant-a": "* * * * *", "tenant-b": "*/5 * * * *"}


def header(tenant: str) -> dict[str, str]:
    return {"X-OJS-Tenant": tenant}


def cron_body(tenant: str, **more: Any) -> dict[str, Any]:
    return {
        "name": NAME,
        "expression": TENANTS[tenant],
        "job_template": {"type": "report.build", "args": [tenant], "options": {"queue": QUEUE}},
        **more,
    }


@pytest.fixture(autouse=True)
def no_server_errors(client: httpx.AsyncClient) -> None:
    forbid_server_errors(client)


async def register_both(client: httpx.AsyncClient) -> None:
    for tenant in TENANTS:
        response = await client.post("/ojs/v1/cron", json=cron_body(tenant), headers=header(tenant))
        assert response.status_code == 201, response.text


async def get_cron(client: httpx.AsyncClient, tenant: str) -> dict[str, Any]:
    response = await client.get(f"/ojs/v1/cron/{NAME}", headers=header(tenant))
    assert response.status_code == 200, response.text
    cron: dict[str, Any] = response.json()["cron"]
    return cron


async def listed(client: httpx.AsyncClient, headers: dict[str, str] | None) -> list[dict[str, Any]]:
    response = await client.get("/ojs/v1/cron", headers=headers)
    assert response.status_code == 200, response.text
    crons: list[dict[str, Any]] = response.json()["crons"]
    return crons


async def sweep_at(clock: ManualClock, service: Service, moment_ms: int) -> None:
    clock.advance(moment_ms - clock.now_ms())
    await service.sweeper.sweep()


async def fired_args(client: httpx.AsyncClient, tenant: str) -> list[list[Any]]:
    """The arguments of every cron job waiting for this tenant (claimed as its worker would)."""
    return [job["args"] for job in await fetch(client, [QUEUE], count=10, headers=header(tenant))]


async def test_two_tenants_keep_their_own_cron_of_the_same_name(
    client: httpx.AsyncClient,
) -> None:
    await register_both(client)
    for tenant, expression in TENANTS.items():
        crons = await listed(client, header(tenant))
        assert [(cron["name"], cron["expression"]) for cron in crons] == [(NAME, expression)]
        own = await get_cron(client, tenant)
        assert own["expression"] == expression
        assert own["job_template"]["args"] == [tenant]
    # The default tenant (no header) registered nothing, and sees neither tenant's cron.
    assert await listed(client, None) == []
    assert_error(await client.get(f"/ojs/v1/cron/{NAME}"), 404, "not_found")
    assert_error(
        await client.get(f"/ojs/v1/cron/{NAME}", headers=header("tenant-c")), 404, "not_found"
    )


async def test_the_default_tenant_has_a_cron_of_the_same_name_beside_a_tenants(
    client: httpx.AsyncClient,
) -> None:
    own = {**cron_body("tenant-a"), "expression": "0 * * * *"}
    assert (await client.post("/ojs/v1/cron", json=own)).status_code == 201
    await register_both(client)
    assert [cron["expression"] for cron in await listed(client, None)] == ["0 * * * *"]
    assert (await get_cron(client, "tenant-a"))["expression"] == TENANTS["tenant-a"]
    deleted = await client.delete(f"/ojs/v1/cron/{NAME}")
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["cron"]["expression"] == "0 * * * *"
    assert await listed(client, None) == []
    for tenant in TENANTS:
        assert [cron["name"] for cron in await listed(client, header(tenant))] == [NAME]


async def test_each_tenant_disables_and_deletes_only_its_own(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    await register_both(client)
    disabled = await client.patch(
        f"/ojs/v1/cron/{NAME}", json={"enabled": False}, headers=header("tenant-b")
    )
    assert disabled.status_code == 200, disabled.text
    assert disabled.json()["cron"]["expression"] == TENANTS["tenant-b"]
    assert (await get_cron(client, "tenant-b"))["enabled"] is False
    still_on = await get_cron(client, "tenant-a")
    assert still_on["enabled"] is True
    assert still_on["next_run_at"] is not None

    # Only tenant-a's cron fires; tenant-b's stays off.
    await sweep_at(clock, service, clock.now_ms() + 10 * MINUTE_MS)
    assert await fired_args(client, "tenant-b") == []
    assert await fired_args(client, "tenant-a") == [["tenant-a"]]

    deleted = await client.delete(f"/ojs/v1/cron/{NAME}", headers=header("tenant-a"))
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["cron"]["expression"] == TENANTS["tenant-a"]
    assert_error(
        await client.get(f"/ojs/v1/cron/{NAME}", headers=header("tenant-a")), 404, "not_found"
    )
    assert_error(
        await client.delete(f"/ojs/v1/cron/{NAME}", headers=header("tenant-a")), 404, "not_found"
    )
    assert await listed(client, header("tenant-a")) == []
    # Deleting tenant-a's left tenant-b's as it was (still disabled).
    remaining = await listed(client, header("tenant-b"))
    assert [(cron["name"], cron["enabled"]) for cron in remaining] == [(NAME, False)]
    # No tenant reaches another's cron by name, not even the default one.
    assert_error(await client.delete(f"/ojs/v1/cron/{NAME}"), 404, "not_found")
    assert_error(
        await client.patch(f"/ojs/v1/cron/{NAME}", json={"enabled": True}), 404, "not_found"
    )
    assert (await get_cron(client, "tenant-b"))["enabled"] is False


async def test_both_fire_for_their_own_tenant_on_their_own_schedule(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    await register_both(client)
    # Epoch milliseconds: the next whole minute, and the next minute divisible by five (UTC).
    next_minute = (clock.now_ms() // MINUTE_MS + 1) * MINUTE_MS
    next_fifth = (clock.now_ms() // (5 * MINUTE_MS) + 1) * 5 * MINUTE_MS
    assert (await get_cron(client, "tenant-a"))["next_run_at"] == format_timestamp(next_minute)
    assert (await get_cron(client, "tenant-b"))["next_run_at"] == format_timestamp(next_fifth)

    await sweep_at(clock, service, next_fifth)
    for tenant in TENANTS:
        jobs = await fetch(client, [QUEUE], count=10, headers=header(tenant))
        assert [(job["args"], job["meta"]["tenant_id"]) for job in jobs] == [([tenant], tenant)]
        assert (await get_cron(client, tenant))["run_count"] == 1
        done = await client.post(
            "/ojs/v1/workers/ack", json={"job_id": jobs[0]["id"]}, headers=header(tenant)
        )
        assert done.status_code == 200, done.text

    # A minute on (the first runs done, so no overlap), only the every-minute cron is due again.
    await sweep_at(clock, service, next_fifth + MINUTE_MS)
    assert await fired_args(client, "tenant-b") == []
    assert await fired_args(client, "tenant-a") == [["tenant-a"]]
    assert (await get_cron(client, "tenant-a"))["run_count"] == 2
    assert (await get_cron(client, "tenant-b"))["run_count"] == 1


async def test_registering_takes_no_history_from_another_tenants_cron(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    first = await client.post(
        "/ojs/v1/cron", json=cron_body("tenant-a"), headers=header("tenant-a")
    )
    assert first.status_code == 201, first.text
    await sweep_at(clock, service, clock.now_ms() + 10 * MINUTE_MS)
    assert (await get_cron(client, "tenant-a"))["run_count"] == 1

    second = await client.post(
        "/ojs/v1/cron", json=cron_body("tenant-b"), headers=header("tenant-b")
    )
    assert second.status_code == 201, second.text
    assert second.json()["cron"]["run_count"] == 0
    assert second.json()["cron"]["last_job_id"] is None
    replaced = {**cron_body("tenant-b"), "expression": "0 0 * * *"}
    again = await client.post("/ojs/v1/cron", json=replaced, headers=header("tenant-b"))
    assert again.status_code == 201, again.text
    assert (await get_cron(client, "tenant-b"))["expression"] == "0 0 * * *"
    untouched = await get_cron(client, "tenant-a")
    assert (untouched["expression"], untouched["run_count"]) == (TENANTS["tenant-a"], 1)


# --- migration ----------------------------------------------------------------------------------

BEFORE_TENANT_KEYS = "0002_dead_letter_retention"
DEFINITION = {
    "name": "nightly",
    "expression": "0 3 * * *",
    "timezone": "UTC",
    "overlap_policy": "skip",
    "enabled": True,
    "job_template": {"type": "report.build", "args": [1]},
    "description": "kept",
}
CRON = {
    "name": "nightly",
    "tenant_id": "acme",
    "definition": json.dumps(DEFINITION),
    "enabled": True,
    "next_run_at": 1_790_010_800_000,
    "last_run_at": 1_789_924_400_000,
    "last_job_id": "019a0000-0000-7000-8000-000000000001",
    "run_count": 7,
    "created_at": 1_780_000_000_000,
}  # fmt: skip
WORKER = {
    "id": "w1",
    "tenant_id": "acme",
    "state": "quiet",
    "directive": "quiet",
    "queues": json.dumps(["reports"]),
    "active_jobs": 2,
    "first_seen_at": 1_789_000_000_000,
    "last_heartbeat_at": 1_789_900_000_000,
}
# The same rows as the store reads them back.
KEPT_CRON = CronRecord(
    tenant_id="acme", name="nightly", expression="0 3 * * *", timezone="UTC",
    overlap_policy="skip", enabled=True, job_template={"type": "report.build", "args": [1]},
    description="kept", next_run_at=1_790_010_800_000, last_run_at=1_789_924_400_000,
    last_job_id="019a0000-0000-7000-8000-000000000001", run_count=7, created_at=1_780_000_000_000,
)  # fmt: skip
KEPT_WORKER = WorkerRecord(
    tenant_id="acme", id="w1", state="quiet", directive="quiet", queues=("reports",),
    active_jobs=2, first_seen_at=1_789_000_000_000, last_heartbeat_at=1_789_900_000_000,
)  # fmt: skip
# The rows as schema 2 stored them, written with that schema's columns.
INSERTS = {
    "sqlite": [
        "INSERT INTO crons (name, tenant_id, definition, enabled, next_run_at, last_run_at, "
        "last_job_id, run_count, created_at) VALUES (:name, :tenant_id, :definition, :enabled, "
        ":next_run_at, :last_run_at, :last_job_id, :run_count, :created_at)",
        "INSERT INTO workers (id, tenant_id, state, directive, queues, active_jobs, first_seen_at, "
        "last_heartbeat_at) VALUES (:id, :tenant_id, :state, :directive, :queues, :active_jobs, "
        ":first_seen_at, :last_heartbeat_at)",
    ],
    "postgres": [
        "INSERT INTO crons (name, tenant_id, definition, enabled, next_run_at, last_run_at, "
        "last_job_id, run_count, created_at) VALUES (%(name)s, %(tenant_id)s, "
        "CAST(%(definition)s AS jsonb), %(enabled)s, %(next_run_at)s, %(last_run_at)s, "
        "%(last_job_id)s, %(run_count)s, %(created_at)s)",
        "INSERT INTO workers (id, tenant_id, state, directive, queues, active_jobs, first_seen_at, "
        "last_heartbeat_at) VALUES (%(id)s, %(tenant_id)s, %(state)s, %(directive)s, "
        "CAST(%(queues)s AS jsonb), %(active_jobs)s, %(first_seen_at)s, %(last_heartbeat_at)s)",
    ],
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


def write_schema_2_rows(backend: str, location: str) -> None:
    first, second = INSERTS[backend]
    if backend == "sqlite":
        with sqlite3.connect(location) as connection:
            connection.execute(first, CRON)
            connection.execute(second, WORKER)
        connection.close()
        return
    with psycopg.connect(location) as postgres:
        postgres.execute(first, CRON)
        postgres.execute(second, WORKER)


async def test_migrating_to_head_keeps_the_crons_and_workers_of_schema_2(
    backend: str, empty_database: str
) -> None:
    store = await open_store(backend, empty_database)
    try:
        applied = await store.migrate(until=BEFORE_TENANT_KEYS)
        assert applied[-1] == BEFORE_TENANT_KEYS
        write_schema_2_rows(backend, empty_database)
        later = await store.migrate()
        assert later and all(version > BEFORE_TENANT_KEYS for version in later)
        assert await store.migrate() == []

        async with store.transaction(SYSTEM) as transaction:
            kept = await transaction.get_cron("nightly", "acme")
            assert kept == KEPT_CRON
            assert await transaction.get_cron("nightly", DEFAULT_TENANT) is None
            workers = await transaction.list_workers("acme")
            assert workers == [KEPT_WORKER]

            # The keys are (tenant, name) and (tenant, id) now: another tenant may reuse both.
            await transaction.save_cron(
                replace(KEPT_CRON, tenant_id=DEFAULT_TENANT, run_count=0, last_job_id=None)
            )
            await transaction.touch_worker("w1", DEFAULT_TENANT, ["other"], 0, 1_790_000_000_000)
        async with store.transaction(SYSTEM) as transaction:
            for tenant, run_count in (("acme", 7), (DEFAULT_TENANT, 0)):
                crons = await transaction.list_crons(tenant)
                assert [(cron.name, cron.run_count) for cron in crons] == [("nightly", run_count)]
            both = await transaction.list_workers(None)
            assert sorted((worker.tenant_id, worker.active_jobs) for worker in both) == [
                (DEFAULT_TENANT, 0),
                ("acme", 2),
            ]
    finally:
        await store.close()


async def test_a_cron_lookup_without_a_tenant_is_refused(backend: str, empty_database: str) -> None:
    store = await open_store(backend, empty_database)
    try:
        await store.migrate()
        async with store.transaction(SYSTEM) as transaction:
            with pytest.raises(ValueError, match="needs a tenant"):
                await transaction.get_cron("nightly", None)
            with pytest.raises(ValueError, match="needs a tenant"):
                await transaction.list_crons(None)
    finally:
        await store.close()


async def test_migrating_until_an_unknown_version_is_refused(
    backend: str, empty_database: str
) -> None:
    store = await open_store(backend, empty_database)
    try:
        with pytest.raises(ValueError, match="no migration"):
            await store.migrate(until="0002")
    finally:
        await store.close()
