"""The ack statement (complete_jobs) writes what the domain decides: the same job and the same
`job.completed` event as `lifecycle.acknowledge` and `completed_event` make, on both stores."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from redrive.domain import lifecycle
from redrive.domain.caller import SYSTEM
from redrive.domain.events import completed_event
from redrive.domain.job import Job
from redrive.ports import EventQuery
from redrive.service.attempts import AckRequest
from redrive.service.facade import Service
from tests.behaviour.ojs_http import enqueue, fetch
from tests.support.callers import CALLER
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio

QUEUE = "ack-statement"
RESULTS: list[Any] = [None, {"sum": 1, "nested": {"none": None}}, "text", 0, False, [1, "two"]]


async def jobs_now(service: Service, ids: list[str]) -> dict[str, Job]:
    async with service.runtime.store.transaction(SYSTEM) as transaction:
        return await transaction.lock_jobs(ids, None)


async def test_an_ack_writes_the_job_and_event_the_domain_makes(
    client: httpx.AsyncClient, service: Service, clock: ManualClock
) -> None:
    for index in range(len(RESULTS)):
        await enqueue(client, "ack.job", [index], queue=QUEUE)
    fetched = await fetch(client, [QUEUE], count=len(RESULTS), worker_id="w1")
    ids = [job["id"] for job in fetched]
    before = await jobs_now(service, ids)
    clock.advance(250)
    now = clock.now_ms()
    requests = [
        # Half name their worker and lease, half name neither (the HTTP edge allows both).
        AckRequest(job_id, "w1" if index % 2 else None,
                   before[job_id].lease_token if index % 2 else None, result)
        for index, (job_id, result) in enumerate(zip(ids, RESULTS, strict=True))
    ]  # fmt: skip
    outcomes = await service.workers.ack_many(CALLER, list(requests))

    after = await jobs_now(service, ids)
    expected = {
        request.job_id: lifecycle.acknowledge(before[request.job_id], now, request.result)
        for request in requests
    }
    assert after == expected
    assert outcomes == [
        lifecycle.Completed(job_id, 1, expected[job_id].max_attempts, now) for job_id in ids
    ]
    async with service.runtime.store.transaction(SYSTEM) as transaction:
        stored = await transaction.list_events(
            EventQuery(None, None, ["job.completed"], [QUEUE], None, 100)
        )
    assert [event.event for event in stored] == [completed_event(expected[i]) for i in ids]
    assert {event.time for event in stored} == {now}
