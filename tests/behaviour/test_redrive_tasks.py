"""Paced redrive tasks on both stores: the rate in simulated time, pause and resume across a
restart, no double moves, one task per queue, bulk retry past a burst, and verification."""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace

import pytest

from redrive.api.routes_jobs import job_requests
from redrive.api.worker_requests import batch_items, each_parsed, fetch_request, nack_request
from redrive.domain import redrive
from redrive.domain.caller import Caller, Role
from redrive.domain.dead_letter_filter import DeadLetterFilter
from redrive.domain.errors import (
    Conflict,
    Forbidden,
    InvalidRequest,
    OjsError,
    RootCauseRequired,
)
from redrive.domain.incident import REGRESSED, RESOLVED, Transition, parse_incident_query
from redrive.domain.job import DEFAULT_TENANT
from redrive.domain.redrive import RedriveRequest, RedriveTask
from redrive.ports import Page, Store
from redrive.service.attempts import AckRequest
from redrive.service.dead_letters import BulkRequest, BulkResult
from redrive.service.facade import Service
from redrive.service.runtime import Runtime
from tests.behaviour.ojs_http import explain_all
from tests.support.callers import CALLER
from tests.support.clock import ManualClock
from tests.support.options import service_options

pytestmark = pytest.mark.anyio
OPERATOR = Caller.for_tenant(DEFAULT_TENANT, "olga", Role.OPERATOR)
POLICY = {"max_attempts": 1, "on_exhaustion": "dead_letter"}
ERROR = {"type": "StripeTimeout", "message": "stripe API timed out after 30s"}


async def kill(
    service: Service, count: int, queue: str = "billing", explained: bool = True
) -> list[str]:
    """Enqueue `count` jobs on `queue` that die at their first failure; their ids. Unless told
    otherwise, their incident then gets a root cause with a fix reference (the redrive policy
    asks it of every task)."""
    ids: list[str] = []
    while len(ids) < count:
        size = min(500, count - len(ids))
        bodies = [
            {"type": "billing.charge", "args": [{"n": n}],
             "options": {"queue": queue, "retry": POLICY}}
            for n in range(size)
        ]  # fmt: skip
        jobs = await service.jobs.enqueue_batch(CALLER, job_requests({"jobs": bodies}))
        fetched = await service.workers.fetch(
            CALLER, fetch_request({"queues": [queue], "count": size})
        )
        nacks = [
            {"job_id": job.id, "lease_token": job.lease_token, "error": ERROR} for job in fetched
        ]
        await service.workers.nack_many(
            CALLER, each_parsed(batch_items({"nacks": nacks}, "nacks"), nack_request)
        )
        ids += [job.id for job in jobs]
    if explained:
        await explain_all(service, CALLER)
    return ids


async def test_a_task_is_refused_while_an_incident_it_touches_has_no_root_cause(
    service: Service,
) -> None:
    ids = await kill(service, 150, explained=False)
    incident_id = (await service.dead_letters.get(CALLER, ids[0]))[0].incident_id
    with pytest.raises(RootCauseRequired) as refused:
        await service.redrives.start(OPERATOR, RedriveRequest(by_queue("billing")))
    assert [item["id"] for item in refused.value.details["incidents"]] == [incident_id]
    assert await service.redrives.search(CALLER) == []
    assert await dead_count(service, "billing") == 150
    with pytest.raises(InvalidRequest):  # no filter at all: refused whatever else is said
        await service.redrives.start(OPERATOR, RedriveRequest(DeadLetterFilter()))


def by_queue(queue: str) -> DeadLetterFilter:
    return DeadLetterFilter(queue=queue)


async def tick(service: Service, clock: ManualClock, seconds: int) -> None:
    """`seconds` maintenance ticks, one a second of simulated time."""
    for _ in range(seconds):
        clock.advance(1000)
        await service.redrives.advance()


async def dead_count(service: Service, queue: str) -> int:
    return (await service.dead_letters.preview(CALLER, by_queue(queue))).matched


async def test_a_task_at_100_a_minute_moves_200_in_about_two_minutes(
    service: Service, clock: ManualClock
) -> None:
    await kill(service, 200)
    task = await service.redrives.start(OPERATOR, RedriveRequest(by_queue("billing")))
    assert (task.state, task.to_move, task.rate_per_minute) == (redrive.RUNNING, 200, 100)
    assert task.queues == ("billing",)
    await service.redrives.advance()
    assert (await service.redrives.get(CALLER, task.id)).moved == 0  # no burst at the start
    await tick(service, clock, 60)
    after_minute = await service.redrives.get(CALLER, task.id)
    assert 98 <= after_minute.moved <= 100
    assert await dead_count(service, "billing") == 200 - after_minute.moved
    seconds = 60
    while (await service.redrives.get(CALLER, task.id)).state == redrive.RUNNING:
        await tick(service, clock, 1)
        seconds += 1
        assert seconds < 200
    done = await service.redrives.get(CALLER, task.id)
    assert 119 <= seconds <= 122
    assert (done.state, done.moved, done.skipped) == (redrive.COMPLETED, 200, 0)
    assert done.finished_at == clock.now_ms()
    assert await dead_count(service, "billing") == 0
    assert service.runtime.metrics.redrive_moved[task.id] == 200


async def test_pause_holds_and_resume_continues_after_a_restart(
    service: Service, store: Store, clock: ManualClock
) -> None:
    ids = await kill(service, 200)
    task = await service.redrives.start(OPERATOR, RedriveRequest(by_queue("billing")))
    await tick(service, clock, 30)
    paused = await service.redrives.pause(OPERATOR, task.id)
    assert paused.state == redrive.PAUSED
    held = paused.moved
    assert 48 <= held <= 50
    await tick(service, clock, 120)
    assert (await service.redrives.get(CALLER, task.id)).moved == held
    assert await dead_count(service, "billing") == 200 - held
    with pytest.raises(Conflict):
        await service.redrives.pause(OPERATOR, task.id)

    # A new server on the same database: the task is where it stopped.
    restarted = Service(Runtime(store, clock=clock, options=service_options()))
    resumed = await restarted.redrives.resume(OPERATOR, task.id)
    assert (resumed.state, resumed.moved) == (redrive.RUNNING, held)
    await restarted.redrives.advance()
    assert (await restarted.redrives.get(CALLER, task.id)).moved == held  # no credit from pause
    await tick(restarted, clock, 100)
    done = await restarted.redrives.get(CALLER, task.id)
    assert (done.state, done.moved) == (redrive.COMPLETED, 200)
    episodes = [await restarted.dead_letters.episodes(CALLER, job_id) for job_id in ids]
    assert all(len(history) == 1 and history[0].status == "retried" for history in episodes)


async def test_a_second_task_on_a_busy_queue_is_refused_with_the_running_tasks_id(
    service: Service, clock: ManualClock
) -> None:
    await kill(service, 30, "billing")
    await kill(service, 10, "emails")
    first = await service.redrives.start(OPERATOR, RedriveRequest(by_queue("billing"), limit=10))
    with pytest.raises(Conflict) as refused:
        await service.redrives.start(
            OPERATOR, RedriveRequest(DeadLetterFilter(type="billing.charge"))
        )
    assert refused.value.details["task_id"] == first.id
    assert first.id in refused.value.message
    # The refused task left nothing behind: the other queue is free and nothing else is pinned.
    assert [task.id for task in await service.redrives.search(CALLER)] == [first.id]
    other = await service.redrives.start(OPERATOR, RedriveRequest(by_queue("emails")))
    assert other.to_move == 10
    cancelled = await service.redrives.cancel(OPERATOR, first.id)
    assert cancelled.state == redrive.CANCELLED
    # It let go of all it pinned (its counts left them pending: the unpin read its items).
    assert await service.redrives.items(CALLER, first.id, "pending") == []
    assert len(await service.redrives.items(CALLER, first.id, "skipped")) == 10
    await tick(service, clock, 30)
    assert (await service.redrives.get(CALLER, first.id)).moved == 0
    again = await service.redrives.start(OPERATOR, RedriveRequest(by_queue("billing")))
    assert again.to_move == 30


async def test_a_task_over_several_queues_holds_each_queue_it_pinned(
    service: Service,
) -> None:
    await kill(service, 5, "billing")
    await kill(service, 3, "emails")
    first = await service.redrives.start(
        OPERATOR, RedriveRequest(DeadLetterFilter(type="billing.charge"))
    )
    assert (first.to_move, first.queues) == (8, ("billing", "emails"))
    for queue in ("billing", "emails"):
        with pytest.raises(Conflict) as refused:
            await service.redrives.start(OPERATOR, RedriveRequest(by_queue(queue)))
        assert refused.value.details == {"task_id": first.id, "queue": queue}
    await service.redrives.cancel(OPERATOR, first.id)
    assert (await service.redrives.start(OPERATOR, RedriveRequest(by_queue("emails")))).to_move == 3


async def test_two_tick_loops_at_once_never_move_a_dead_letter_twice(
    service: Service, store: Store, clock: ManualClock
) -> None:
    await kill(service, 150, "billing")
    await kill(service, 150, "emails")
    critical = RedriveRequest(by_queue("billing"), 1000, critical=True, reason="outage over")
    first = await service.redrives.start(CALLER, critical)
    second = await service.redrives.start(CALLER, replace(critical, filters=by_queue("emails")))
    other = Service(Runtime(store, clock=clock, options=service_options(), rng=random.Random(3)))
    for _ in range(20):
        clock.advance(1000)
        await asyncio.gather(service.redrives.advance(), other.redrives.advance())
    for task_id in (first.id, second.id):
        done = await service.redrives.get(CALLER, task_id)
        assert (done.state, done.moved, done.skipped) == (redrive.COMPLETED, 150, 0)
    retried = DeadLetterFilter(status="retried")
    moved, total = await service.dead_letters.search(CALLER, retried, Page(limit=1000))
    assert total == 300 and len({dead.job_id for dead in moved}) == 300


async def test_bulk_retry_completes_within_the_request_up_to_a_burst_and_paces_beyond(
    service: Service,
) -> None:
    await kill(service, 100, "billing")
    await kill(service, 101, "emails")
    small = await service.redrives.bulk_retry(
        OPERATOR, BulkRequest(by_queue("billing"), confirm=True)
    )
    assert isinstance(small, BulkResult) and small.succeeded == 100
    large = await service.redrives.bulk_retry(
        OPERATOR, BulkRequest(by_queue("emails"), confirm=True)
    )
    assert isinstance(large, RedriveTask) and large.to_move == 101 and large.moved == 0
    assert await dead_count(service, "emails") == 101


async def test_rates_above_the_default_are_critical_for_admins_with_a_reason(
    service: Service,
) -> None:
    await kill(service, 5)
    fast = RedriveRequest(by_queue("billing"), 500, critical=True, reason="backlog")
    with pytest.raises(Forbidden):
        await service.redrives.start(OPERATOR, fast)
    with pytest.raises(InvalidRequest):
        await service.redrives.start(CALLER, replace(fast, reason=None))
    with pytest.raises(InvalidRequest):
        await service.redrives.start(CALLER, replace(fast, critical=False))
    with pytest.raises(InvalidRequest):
        await service.redrives.start(CALLER, replace(fast, rate_per_minute=1001))
    with pytest.raises(InvalidRequest):
        await service.redrives.start(CALLER, RedriveRequest(DeadLetterFilter()))
    task = await service.redrives.start(CALLER, fast)
    assert (task.rate_per_minute, task.critical, task.reason) == (500, True, "backlog")


async def redrive_incident(service: Service, clock: ManualClock, count: int) -> tuple[str, str]:
    ids = await kill(service, count)
    incident_id = (await service.dead_letters.get(CALLER, ids[0]))[0].incident_id
    assert incident_id is not None
    dead_now = (await service.incidents.get(CALLER, incident_id))[0].dead_count
    task = await service.redrives.start(
        OPERATOR, RedriveRequest(DeadLetterFilter(incident_id=incident_id))
    )
    assert task.incident_id == incident_id and task.to_move == dead_now >= count
    await tick(service, clock, 10)
    assert (await service.redrives.get(CALLER, task.id)).state == redrive.COMPLETED
    return task.id, incident_id


async def test_verification_counts_successes_and_dead_again_and_regresses_the_incident(
    service: Service, clock: ManualClock
) -> None:
    await kill(service, 1)
    first = (await service.incidents.search(CALLER, parse_incident_query({})))[0]
    await service.incidents.change(CALLER, first.id, Transition.ACKNOWLEDGE)
    task_id, incident_id = await redrive_incident(service, clock, 4)
    assert incident_id == first.id
    fetched = await service.workers.fetch(
        CALLER, fetch_request({"queues": ["billing"], "count": 10})
    )
    assert len(fetched) == 5
    acks: list[AckRequest | OjsError] = [
        AckRequest(job.id, None, job.lease_token, {"ok": True}) for job in fetched[:3]
    ]
    await service.workers.ack_many(CALLER, acks)
    nacks = [
        {"job_id": job.id, "lease_token": job.lease_token, "error": ERROR} for job in fetched[3:]
    ]
    await service.workers.nack_many(
        CALLER, each_parsed(batch_items({"nacks": nacks}, "nacks"), nack_request)
    )
    task = await service.redrives.get(CALLER, task_id)
    assert (task.succeeded, task.dead_again, task.verified) == (3, 2, 5)
    assert task.success_rate == pytest.approx(0.6)
    died = await service.redrives.items(CALLER, task_id, redrive.DEAD_AGAIN)
    assert len(died) == 2 and {item["died_incident_id"] for item in died} == {incident_id}
    assert all(item["died_fingerprint"] for item in died)
    incident, _ = await service.incidents.get(CALLER, incident_id)
    assert incident.state == REGRESSED
    assert service.runtime.metrics.redrive_succeeded[task_id] == 3
    assert service.runtime.metrics.redrive_dead_again[task_id] == 2


async def test_an_incident_whose_redriven_jobs_all_succeeded_closes_when_configured(
    store: Store, clock: ManualClock
) -> None:
    options = replace(service_options(), redrive_auto_close=True)
    service = Service(Runtime(store, clock=clock, options=options))
    task_id, incident_id = await redrive_incident(service, clock, 3)
    fetched = await service.workers.fetch(
        CALLER, fetch_request({"queues": ["billing"], "count": 10})
    )
    await service.workers.ack_many(
        CALLER, [AckRequest(job.id, None, job.lease_token, None) for job in fetched[:2]]
    )
    assert (await service.incidents.get(CALLER, incident_id))[0].state != RESOLVED
    await service.workers.ack_many(
        CALLER, [AckRequest(job.id, None, job.lease_token, None) for job in fetched[2:]]
    )
    incident, _ = await service.incidents.get(CALLER, incident_id)
    assert incident.state == RESOLVED and task_id in (incident.fix_reference or "")


async def test_jobs_a_task_requeues_in_place_or_from_the_snapshot_count_for_the_task(
    service: Service, clock: ManualClock
) -> None:
    ids = await kill(service, 4)
    async with service.runtime.store.transaction(CALLER) as transaction:
        await transaction.delete_dead_jobs(ids[:2])  # their job rows pruned: from the snapshot
    task = await service.redrives.start(OPERATOR, RedriveRequest(by_queue("billing")))
    await tick(service, clock, 10)
    fetched = await service.workers.fetch(
        CALLER, fetch_request({"queues": ["billing"], "count": 10})
    )
    assert sorted(job.id for job in fetched) == sorted(ids)
    acks: list[AckRequest | OjsError] = [
        AckRequest(job.id, None, job.lease_token, {"ok": True}) for job in fetched
    ]
    await service.workers.ack_many(CALLER, acks)
    done = await service.redrives.get(CALLER, task.id)
    assert (done.state, done.moved, done.succeeded, done.dead_again) == (
        redrive.COMPLETED, 4, 4, 0,
    )  # fmt: skip
