"""Jobs listed and counted by queue and state, on both stores: every state, available jobs too,
which PostgreSQL's jobs_tenant leaves out since migration 0045 (their reads go through jobs_claim
or the table), before and after a bulk retry puts dead jobs back in their queue."""

from __future__ import annotations

import pytest

from redrive.api.routes_jobs import job_requests
from redrive.domain.caller import Caller, Role
from redrive.ports import JobFilter
from redrive.service.dead_letters import BulkRequest
from redrive.service.facade import Service
from tests.behaviour.test_redrive_failures import by_queue, kill
from tests.support.callers import CALLER

pytestmark = pytest.mark.anyio
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
