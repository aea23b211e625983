"""A claim reads back only the columns it did not set (codec.claimed_jobs makes the others as
its UPDATE writes them): each job it answers is its row as stored after the claim, field by
field and in the same field order (a dead letter's snapshot keeps that order), on both stores,
and the HTTP fetch answers the document GET answers."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from redrive.domain import lifecycle
from redrive.domain.caller import SYSTEM
from redrive.domain.job import Job
from redrive.domain.webhooks import SubscriptionRequest
from redrive.service.attempts import NackRequest
from redrive.service.facade import Service
from redrive.service.workers import FetchRequest
from tests.behaviour.ojs_http import enqueue, fetch, get_job
from tests.support.callers import CALLER
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio

QUEUE = "claimed-columns"


async def stored(service: Service, job_id: str) -> Job:
    async with service.runtime.store.transaction(SYSTEM) as transaction:
        job = await transaction.get_job(job_id, None)
    assert job is not None
    return job


async def assert_as_stored(service: Service, claimed: list[Job]) -> None:
    for job in claimed:
        row = await stored(service, job.id)
        assert job == row
        assert list(vars(job)) == list(vars(row))
        assert vars(job) == vars(row)


async def retried(client: httpx.AsyncClient, service: Service, clock: ManualClock) -> str:
    """A job that failed its first attempt (error, errors and retry delay set) and is due."""
    job = await enqueue(client, "claimed.retried", ["again"], queue=QUEUE, priority=1,
                        retry={"max_attempts": 5}, timeout_ms=9_000)  # fmt: skip
    (claimed,) = await service.workers.fetch(CALLER, FetchRequest([QUEUE], 1, "w0"))
    failure = lifecycle.parse_failure({"type": "Boom", "message": "once", "details": {"n": 1}})
    nack = NackRequest(claimed.id, "w0", claimed.lease_token, failure, False, claimed)
    (failed,) = await service.workers.nack_many(CALLER, [nack])
    assert isinstance(failed, Job) and failed.state == "retryable"
    clock.advance(3_600_000)
    return str(job["id"])


@pytest.mark.parametrize("visibility_timeout_ms", [None, 4_321])
@pytest.mark.parametrize("worker_id", ["w1", None])
async def test_a_claimed_job_is_its_row_as_the_claim_left_it(
    client: httpx.AsyncClient,
    service: Service,
    clock: ManualClock,
    worker_id: str | None,
    visibility_timeout_ms: int | None,
) -> None:
    again = await retried(client, service, clock)
    plain = await enqueue(client, "claimed.plain", [1, "two", None], queue=QUEUE)
    rich = await enqueue(
        client, "claimed.rich", [2**70, 1.5, {"nested": ["ü", "\u2028"]}],
        meta={"trace": "abc", "n": 12345678901234567890}, queue=QUEUE, priority=5,
        timeout_ms=60_000, visibility_timeout_ms=90_000, tags=["a"],
        expires_at="2099-01-02T03:04:05.678Z", retry={"max_attempts": 7, "backoff_coefficient": 3},
    )  # fmt: skip
    request = FetchRequest([QUEUE], 10, worker_id, visibility_timeout_ms)
    claimed = await service.workers.fetch(CALLER, request)
    # By priority (highest first), then age.
    assert [job.id for job in claimed] == [rich["id"], again, plain["id"]]
    assert [job.attempt for job in claimed] == [1, 2, 1]
    assert claimed[1].errors and claimed[1].error is not None and claimed[1].retry_delay_ms
    assert claimed[0].args[0] == 2**70 and claimed[0].meta["n"] == 12345678901234567890
    now = clock.now_ms()
    for job in claimed:
        assert job.state == "active" and job.started_at == now and job.worker_id == worker_id
        lease = job.visibility_timeout_ms if visibility_timeout_ms is None else 4_321
        assert job.lease_expires_at == now + lease
    assert [job.timeout_at for job in claimed] == [now + 60_000, now + 9_000, None]
    await assert_as_stored(service, claimed)


@pytest.mark.parametrize("subscribed", [False, True])
async def test_a_subscribed_tenant_s_claimed_jobs_are_unannounced(
    client: httpx.AsyncClient, service: Service, subscribed: bool
) -> None:
    """The claim names the jobs whose events the service emits (an active subscription)."""
    if subscribed:
        hook = SubscriptionRequest("https://example.test/hook", ("job.started",), None)
        await service.webhooks.create(CALLER, hook)
    for index in range(3):
        await enqueue(client, "claimed.hooked", [index], queue=QUEUE)
    runtime = service.runtime
    now = runtime.now()
    from redrive.ports.attempts import Claim

    async with runtime.store.transaction(CALLER) as transaction:
        claim = Claim(QUEUE, 5, "w1", runtime.new_token(), None, CALLER.tenant_scope)
        taken = await transaction.claim_jobs(claim, now, runtime.block_head_parts(5, now))
    assert [job.args for job in taken.jobs] == [[0], [1], [2]]
    assert taken.unannounced == (taken.jobs if subscribed else [])
    await assert_as_stored(service, taken.jobs)


async def test_the_http_fetch_answers_the_document_get_answers(
    client: httpx.AsyncClient, service: Service, clock: ManualClock
) -> None:
    again = await retried(client, service, clock)
    await enqueue(client, "claimed.rich", [2**70], meta={"m": 1}, queue=QUEUE, priority=3,
                  timeout_ms=5_000, scheduled_at="2000-01-01T00:00:00Z")  # fmt: skip
    fetched: list[dict[str, Any]] = await fetch(client, [QUEUE], count=5, worker_id="w9")
    assert len(fetched) == 2 and fetched[1]["id"] == again
    for document in fetched:
        assert document == await get_job(client, document["id"])
        assert document["state"] == "active" and document["worker_id"] == "w9"
        assert isinstance(document["lease_token"], str)
