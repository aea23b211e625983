"""Jobs listed and counted by queue and state, on both stores: every state, available jobs too,
which PostgreSQL's jobs_tenant leaves out since migration 0045 (their reads go through jobs_claim
or the table), and active ones, which SQLite's leaves out with available ones since 0047 (its
count reads them along jobs_claim and jobs_timeout), before and after a bulk retry puts dead jobs
back in their queue and a worker claims and acks."""

from __future__ import annotations

import sqlite3

import psycopg
import pytest

from redrive.api.routes_jobs import job_requests
from redrive.api.worker_requests import ack_request, batch_items, each_parsed, fetch_request
from redrive.domain.caller import SYSTEM, Caller, Role
from redrive.domain.job import DEFAULT_TENANT
from redrive.ports import JobFilter
from redrive.service.dead_letters import BulkRequest
from redrive.service.facade import Service
from tests.behaviour.test_cron_tenants import empty_database, open_store
from tests.behaviour.test_redrive_failures import by_queue, kill
from tests.support.callers import CALLER

pytestmark = pytest.mark.anyio
__all__ = ["empty_database"]  # a fixture used below
OTHER_TENANT = Caller.for_tenant("tenant-b", "test", Role.ADMIN)


async def listed(service: Service, caller: Caller, queue: str, state: str) -> list[str]:
    """The ids of the caller's jobs in that queue and state, as the job list pages them, after
    checking that its total says as many."""
    jobs, total = await service.jobs.list(caller, JobFilter(queue=queue, state=state), 50, 0)
    assert total == len(jobs)
    return sorted(job.id for job in jobs)


async def enqueue(service: Service, caller: Caller, queue: str, count: int) -> list[str]:
    options = {"queue": queue}
    bodies = [{"type": "plain.kind", "args": [n], "options": options} for n in range(count)]
    jobs = await service.jobs.enqueue_batch(caller, job_requests({"jobs": bodies}))
    return [job.id for job in jobs]


async def test_jobs_are_listed_and_counted_by_queue_and_state(service: Service) -> None:
    dead = await kill(service, 3, "billing")
    waiting = await enqueue(service, CALLER, "billing", 2)
    elsewhere = await enqueue(service, CALLER, "mail", 1)
    theirs = await enqueue(service, OTHER_TENANT, "billing", 4)
    assert await listed(service, CALLER, "billing", "available") == sorted(waiting)
    assert await listed(service, CALLER, "billing", "discarded") == sorted(dead)
    assert await listed(service, CALLER, "mail", "available") == elsewhere
    assert await listed(service, OTHER_TENANT, "billing", "available") == sorted(theirs)
    assert await listed(service, OTHER_TENANT, "billing", "discarded") == []
    billing = await service.queues.get(CALLER, "billing")
    assert (billing.counts["available"], billing.counts["discarded"]) == (2, 3)

    request = BulkRequest(by_queue("billing"), confirm=True)
    assert (await service.dead_letters.bulk_retry(CALLER, request)).succeeded == 3
    assert await listed(service, CALLER, "billing", "available") == sorted([*waiting, *dead])
    assert await listed(service, CALLER, "billing", "discarded") == []
    assert await listed(service, OTHER_TENANT, "billing", "available") == sorted(theirs)
    billing = await service.queues.get(CALLER, "billing")
    assert (billing.counts["available"], billing.counts["discarded"]) == (5, 0)
    assert (await service.queues.get(OTHER_TENANT, "billing")).counts["available"] == 4


async def counts_of(service: Service, tenant: str | None, queue: str | None) -> dict[str, int]:
    """What the queue pages and the metrics count (count_jobs), by state, over the queues."""
    async with service.runtime.store.transaction(SYSTEM) as transaction:
        counted = await transaction.count_jobs(tenant, queue)
    totals: dict[str, int] = {}
    for (_, state), count in counted.items():
        totals[state] = totals.get(state, 0) + count
    return totals


async def test_available_active_and_finished_jobs_are_counted_by_tenant_and_queue(
    service: Service,
) -> None:
    dead = await kill(service, 2, "billing")
    await enqueue(service, CALLER, "billing", 5)
    await enqueue(service, CALLER, "mail", 3)
    await enqueue(service, OTHER_TENANT, "billing", 4)
    request = fetch_request({"queues": ["billing"], "count": 3, "worker_id": "w"})
    claimed = await service.workers.fetch(CALLER, request)
    assert len(claimed) == 3
    acks = [{"job_id": job.id, "lease_token": job.lease_token} for job in claimed[:2]]
    await service.workers.ack_many(
        CALLER, each_parsed(batch_items({"acks": acks}, "acks"), ack_request)
    )
    assert await counts_of(service, CALLER.tenant_id, "billing") == {
        "available": 2, "active": 1, "completed": 2, "discarded": len(dead),
    }  # fmt: skip
    assert await counts_of(service, CALLER.tenant_id, None) == {
        "available": 5, "active": 1, "completed": 2, "discarded": 2,
    }  # fmt: skip
    assert await counts_of(service, OTHER_TENANT.tenant_id, None) == {"available": 4}
    assert await counts_of(service, None, "billing") == {
        "available": 6, "active": 1, "completed": 2, "discarded": 2,
    }  # fmt: skip
    billing = await service.queues.get(CALLER, "billing")
    assert (billing.counts["available"], billing.counts["active"]) == (2, 1)
    assert await counts_of(service, None, "nowhere") == {}


BEFORE_NARROW_TENANT_INDEX = "0046_redrive_pins_in_blocks"
# Schema 46's jobs: two tenants, every state the count reads apart (available, active, finished).
OLD_JOBS = (
    "INSERT INTO jobs (id, tenant_id, queue, type, state, max_attempts, envelope, "
    "visibility_timeout_ms, created_at) VALUES "
    "('j1', '_default', 'mail', 'mail.job', 'available', 1, '{}', 1000, 1), "
    "('j2', '_default', 'mail', 'mail.job', 'available', 1, '{}', 1000, 1), "
    "('j3', '_default', 'mail', 'mail.job', 'active', 1, '{}', 1000, 1), "
    "('j4', '_default', 'mail', 'mail.job', 'completed', 1, '{}', 1000, 1), "
    "('j5', '_default', 'billing', 'billing.job', 'discarded', 1, '{}', 1000, 1), "
    "('j6', 'tenant-b', 'mail', 'mail.job', 'active', 1, '{}', 1000, 1)"
)


async def test_migration_0047_keeps_every_count(backend: str, empty_database: str) -> None:
    """SQLite's jobs_tenant leaves available and active jobs out from 0047 (PostgreSQL's file
    changes nothing): the jobs there before count as they did, on both stores."""
    store = await open_store(backend, empty_database)
    try:
        await store.migrate(until=BEFORE_NARROW_TENANT_INDEX)
        if backend == "sqlite":
            with sqlite3.connect(empty_database) as connection:
                connection.execute(OLD_JOBS)
            connection.close()
        else:
            with psycopg.connect(empty_database) as postgres:
                postgres.execute(OLD_JOBS)
        await store.migrate()
        async with store.transaction(SYSTEM) as transaction:
            everyone = await transaction.count_jobs(None, None)
            ours = await transaction.count_jobs(DEFAULT_TENANT, "mail")
    finally:
        await store.close()
    assert everyone == {
        ("mail", "available"): 2, ("mail", "active"): 2, ("mail", "completed"): 1,
        ("billing", "discarded"): 1,
    }  # fmt: skip
    assert ours == {("mail", "available"): 2, ("mail", "active"): 1, ("mail", "completed"): 1}
