"""The JobSource port holds the same contract over HTTP and in-process, on both stores: claims
carry lease tokens, stale leases are refused per job (not for the whole batch), requeue hands a
job back, heartbeats extend or report lost, and the worker runs end to end over each adapter."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from redrive.api.app import create_app
from redrive.api.routes_jobs import job_requests
from redrive.client import Client
from redrive.service.facade import Service
from redrive.worker import JobContext, Worker
from redrive.worker.embedded_source import EmbeddedJobSource
from redrive.worker.http_source import HttpJobSource
from redrive.worker.source import Completion, Failure, JobSource
from tests.support.callers import CALLER
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio
WORKER_ID = "worker-under-test"


@pytest.fixture(params=["embedded", "http"])
async def source(request: pytest.FixtureRequest, service: Service) -> AsyncIterator[JobSource]:
    if request.param == "embedded":
        yield EmbeddedJobSource(service)
        return
    transport = httpx.ASGITransport(app=create_app(service, max_body_bytes=1_000_000))
    yield HttpJobSource(Client("http://redrive.test", transport=transport))


async def enqueue(service: Service, count: int, **options: Any) -> list[str]:
    jobs = await service.jobs.enqueue_batch(
        CALLER,
        job_requests(
            {"jobs": [{"type": "noop", "args": [n], "options": options} for n in range(count)]}
        ),
    )
    return [job.id for job in jobs]


async def state_of(service: Service, job_id: str) -> str:
    return (await service.jobs.get(CALLER, job_id)).state


async def test_batches_are_answered_job_by_job(service: Service, source: JobSource) -> None:
    ids = await enqueue(service, 4)
    claimed = await source.fetch(["default"], 3, 0, WORKER_ID)
    assert [payload["id"] for payload in claimed] == ids[:3]
    assert all(payload["lease_token"] for payload in claimed)
    first, second, third = claimed

    acked = await source.ack(
        [Completion(first["id"], first["lease_token"], {"ok": True}),
         Completion(second["id"], "not-the-lease", None)],
        WORKER_ID,
    )  # fmt: skip
    assert [(outcome.state, outcome.problem) for outcome in acked] == [
        ("completed", None), (None, "conflict")
    ]  # fmt: skip
    assert (await service.jobs.get(CALLER, first["id"])).result == {"ok": True}

    error = {"code": "handler_error", "type": "SmtpError", "message": "refused"}
    nacked = await source.nack(
        [Failure(second["id"], second["lease_token"], error, requeue=True),
         Failure(third["id"], third["lease_token"], error)],
        WORKER_ID,
    )  # fmt: skip
    assert [outcome.state for outcome in nacked] == ["available", "retryable"]
    assert all(outcome.accepted for outcome in nacked)

    beat = await source.heartbeat([second["id"], ids[3]], WORKER_ID)
    assert beat.directive == ""
    assert sorted(beat.lost) == sorted([second["id"], ids[3]])
    await source.close()


async def test_heartbeat_extends_held_leases(service: Service, source: JobSource) -> None:
    [job_id] = await enqueue(service, 1, visibility_timeout_ms=5000)
    [claimed] = await source.fetch(["default"], 1, 0, WORKER_ID)
    beat = await source.heartbeat([job_id], WORKER_ID)
    assert (beat.extended, beat.lost) == ([job_id], [])
    assert claimed["visibility_timeout_ms"] == 5000
    await source.close()


async def test_an_empty_long_poll_returns_once_interrupted(
    service: Service, source: JobSource
) -> None:
    waiting = asyncio.create_task(source.fetch(["default"], 5, 20_000, WORKER_ID))
    await asyncio.sleep(0)
    source.interrupt()
    assert await asyncio.wait_for(waiting, 5) == []
    await source.close()


async def test_a_worker_runs_jobs_through_the_adapter(service: Service, source: JobSource) -> None:
    ids = await enqueue(service, 25)
    worker = Worker(concurrency=5, wait_ms=100)

    @worker.handler("noop")
    async def noop(job: JobContext) -> int:
        return int(job.args[0]) * 2

    running = asyncio.create_task(worker.run(source))
    deadline = asyncio.get_running_loop().time() + 30
    while [await state_of(service, job_id) for job_id in ids] != ["completed"] * len(ids):
        assert asyncio.get_running_loop().time() < deadline, "jobs did not complete in time"
        await asyncio.sleep(0.02)
    worker.stop()
    await asyncio.wait_for(running, 10)
    assert (await service.jobs.get(CALLER, ids[7])).result == 14


DEAD_ON_FAILURE = {"retry": {"max_attempts": 1, "on_exhaustion": "dead_letter"}}
ERROR = {"code": "handler_error", "type": "SmtpError", "message": "refused"}


async def test_a_nack_for_a_job_cancelled_under_its_lease_is_refused(
    service: Service, source: JobSource
) -> None:
    """The lease has not expired by the clock, but the job is no longer the claim's: the nack
    must not resurrect it nor write a dead letter (an embedded worker decides from the job it
    holds; the guarded write still refuses)."""
    [job_id] = await enqueue(service, 1, visibility_timeout_ms=60_000, **DEAD_ON_FAILURE)
    [claimed] = await source.fetch(["default"], 1, 0, WORKER_ID)
    await service.jobs.cancel(CALLER, job_id)
    [outcome] = await source.nack([Failure(job_id, claimed["lease_token"], ERROR)], WORKER_ID)
    assert (outcome.state, outcome.problem) == (None, "conflict")
    assert await state_of(service, job_id) == "cancelled"
    await source.close()


async def test_a_nack_after_a_heartbeat_outlived_the_claims_lease_lands(
    service: Service, source: JobSource, clock: ManualClock
) -> None:
    """Past the expiry the claim set, but within the one a heartbeat extended to: the nack is
    the current lease's and dead-letters the job with its error and attempt."""
    [job_id] = await enqueue(service, 1, visibility_timeout_ms=5_000, **DEAD_ON_FAILURE)
    [claimed] = await source.fetch(["default"], 1, 0, WORKER_ID)
    clock.advance(4_000)
    assert (await source.heartbeat([job_id], WORKER_ID)).extended == [job_id]
    clock.advance(2_000)
    [outcome] = await source.nack([Failure(job_id, claimed["lease_token"], ERROR)], WORKER_ID)
    assert outcome.accepted, outcome.problem
    dead, _ = await service.dead_letters.get(CALLER, job_id)
    assert dead.job.attempt == 1
    assert [error["message"] for error in dead.job.errors] == ["refused"]
    await source.close()


async def test_a_nack_after_the_lease_was_reaped_is_refused(
    service: Service, source: JobSource, clock: ManualClock
) -> None:
    """The reaper dead-lettered the job once its lease expired: the late nack changes nothing."""
    [job_id] = await enqueue(service, 1, visibility_timeout_ms=1_000, **DEAD_ON_FAILURE)
    [claimed] = await source.fetch(["default"], 1, 0, WORKER_ID)
    clock.advance(1_001)
    await service.sweeper.sweep()
    reaped = await service.dead_letters.get(CALLER, job_id)
    [outcome] = await source.nack([Failure(job_id, claimed["lease_token"], ERROR)], WORKER_ID)
    assert (outcome.state, outcome.problem) == (None, "conflict")
    assert await service.dead_letters.get(CALLER, job_id) == reaped
    await source.close()


async def test_nacks_sharing_one_error_document_are_each_recorded(service: Service) -> None:
    """An embedded worker's jobs that failed alike share one error document (parsed once a
    batch): each job still records the failure as its own; a document the server would refuse
    refuses every nack that carries it, and only those."""
    source = EmbeddedJobSource(service)
    await enqueue(service, 4)
    claimed = await source.fetch(["default"], 4, 0, WORKER_ID)
    broken: dict[str, Any] = {"code": "handler_error", "type": "SmtpError", "message": [1]}
    errors: list[dict[str, Any]] = [ERROR, broken, ERROR, broken]
    failures = [
        Failure(job["id"], job["lease_token"], error)
        for job, error in zip(claimed, errors, strict=True)
    ]
    nacked = await source.nack(failures, WORKER_ID)
    assert [outcome.state for outcome in nacked] == ["retryable", None, "retryable", None]
    assert [outcome.problem for outcome in nacked] == [None, "invalid_request"] * 2
    for job in (claimed[0], claimed[2]):
        recorded = await service.jobs.get(CALLER, job["id"])
        assert recorded.state == "retryable"
        assert [(e["type"], e["message"], e["attempt"]) for e in recorded.errors] == [
            ("SmtpError", "refused", 1)
        ]
    for job in (claimed[1], claimed[3]):
        assert await state_of(service, job["id"]) == "active"
    await source.close()
