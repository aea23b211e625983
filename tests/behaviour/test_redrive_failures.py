"""Redrive tasks meeting upcasters that fail, on both stores: a payload an upcaster refuses fails
its item alone; a missing step or an unexpected error fails the task (its batch undone, its
queues released) while other tasks keep moving; a start that would meet them is refused."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import replace

import httpx
import pytest

from redrive.api.app import create_app
from redrive.api.routes_jobs import job_requests
from redrive.api.worker_requests import batch_items, each_parsed, fetch_request, nack_request
from redrive.domain import redrive
from redrive.domain.caller import Caller, Role
from redrive.domain.dead_letter_filter import DeadLetterFilter
from redrive.domain.incident import IncidentQuery
from redrive.domain.job import DEFAULT_TENANT
from redrive.domain.redrive import RedriveRequest
from redrive.domain.upcasting import MissingUpcaster, Payload, Upcasters, UpcastFailed
from redrive.ports import Store
from redrive.service.dead_letters import BulkRequest
from redrive.service.facade import Service
from redrive.service.runtime import Runtime
from tests.behaviour.ojs_http import assert_error, explain_all, forbid_server_errors
from tests.support.callers import CALLER
from tests.support.clock import ManualClock
from tests.support.options import service_options

pytestmark = pytest.mark.anyio
OPERATOR = Caller.for_tenant(DEFAULT_TENANT, "olga", Role.OPERATOR)
POLICY = {"max_attempts": 1, "on_exhaustion": "dead_letter"}
ERROR = {"type": "StripeTimeout", "message": "stripe API timed out after 30s"}
BROKEN = 3  # the payload (args[0].n) PICKY refuses

# billing.charge v1 -> v2 adds a currency, but refuses the payload whose n is BROKEN.
PICKY = Upcasters()


@PICKY.step("billing.charge", 1)
def add_currency(payload: Payload) -> Payload:
    if payload.args[0]["n"] == BROKEN:
        raise KeyError("legacy_amount")
    payload.args[0]["currency"] = "USD"
    return payload


# billing.charge is at v3 with only the v2 -> v3 step: a v1 dead letter has no way up.
GAPPY = Upcasters()


@GAPPY.step("billing.charge", 2)
def keep(payload: Payload) -> Payload:
    return payload


# A step whose result cannot be stored (a set in meta): the batch fails after its moves.
UNSTORABLE = Upcasters()


@UNSTORABLE.step("billing.charge", 1)
def tag(payload: Payload) -> Payload:
    return Payload(payload.args, {**payload.meta, "tags": {"a", "b"}})


def restarted(store: Store, clock: ManualClock, upcasters: Upcasters) -> Service:
    """A server on the same database started with other upcasters."""
    options = replace(service_options(), upcasters=upcasters)
    return Service(Runtime(store, clock=clock, options=options))


async def kill(
    service: Service, count: int, queue: str = "billing", job_type: str = "billing.charge"
) -> list[str]:
    """`count` v1 jobs (args [{"n": 0..}]) dead at their first failure, their incidents
    explained (the redrive policy); their ids in order of n."""
    bodies = [
        {"type": job_type, "args": [{"n": n}], "options": {"queue": queue, "retry": POLICY}}
        for n in range(count)
    ]
    jobs = await service.jobs.enqueue_batch(CALLER, job_requests({"jobs": bodies}))
    fetched = await service.workers.fetch(
        CALLER, fetch_request({"queues": [queue], "count": count})
    )
    nacks = [{"job_id": job.id, "lease_token": job.lease_token, "error": ERROR} for job in fetched]
    await service.workers.nack_many(
        CALLER, each_parsed(batch_items({"nacks": nacks}, "nacks"), nack_request)
    )
    await explain_all(service, CALLER)
    return [job.id for job in jobs]


def by_queue(queue: str) -> DeadLetterFilter:
    return DeadLetterFilter(queue=queue)


async def tick(service: Service, clock: ManualClock, seconds: int) -> None:
    """`seconds` maintenance ticks, one a second of simulated time."""
    for _ in range(seconds):
        clock.advance(1000)
        assert await service.redrives.advance() >= 0


async def dead_count(service: Service, queue: str) -> int:
    return (await service.dead_letters.preview(CALLER, by_queue(queue))).matched


async def events_of(service: Service, kind: str) -> list[dict[str, object]]:
    found = await service.events.list(CALLER, kind, None, None, None, 100)
    return [stored.event.data for stored in found]


@pytest.fixture
async def picky_http(store: Store, clock: ManualClock) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(restarted(store, clock, PICKY)))
    async with httpx.AsyncClient(transport=transport, base_url="http://redrive.test") as client:
        forbid_server_errors(client)
        yield client


async def test_a_payload_an_upcaster_refuses_fails_its_item_and_the_rest_moves(
    service: Service, store: Store, clock: ManualClock, picky_http: httpx.AsyncClient
) -> None:
    ids = await kill(service, 150)
    task = await service.redrives.start(OPERATOR, RedriveRequest(by_queue("billing")))
    picky = restarted(store, clock, PICKY)  # the upcasters changed after the start
    await tick(picky, clock, 60)
    first_minute = await picky.redrives.get(CALLER, task.id)
    assert first_minute.state == redrive.RUNNING
    assert 98 <= first_minute.moved + first_minute.failed <= 100
    seconds = 60
    while (await picky.redrives.get(CALLER, task.id)).state == redrive.RUNNING:
        await tick(picky, clock, 1)
        seconds += 1
        assert seconds < 200
    done = await picky.redrives.get(CALLER, task.id)
    assert (done.state, done.moved, done.failed, done.skipped) == (redrive.COMPLETED, 149, 1, 0)
    assert done.pending == 0 and done.failure is None

    broken = ids[BROKEN]
    (item,) = await picky.redrives.items(CALLER, task.id, redrive.ITEM_FAILED)
    assert (item["job_id"], item["error_code"]) == (broken, "upcast_failed")
    assert "billing.charge v1->v2" in item["error_message"]
    assert "KeyError" in item["error_message"]
    kept, _ = await picky.dead_letters.get(CALLER, broken)
    assert (kept.status, kept.job.args) == ("dead", [{"n": BROKEN}])
    assert await dead_count(picky, "billing") == 1
    moved = await picky.jobs.get(CALLER, ids[0])
    assert (moved.state, moved.args, moved.extra["version"]) == (
        "available", [{"n": 0, "currency": "USD"}], 2,
    )  # fmt: skip

    # Never tried again by that task: later ticks leave it as it is.
    await tick(picky, clock, 120)
    again = await picky.redrives.get(CALLER, task.id)
    assert (again.state, again.moved, again.failed) == (redrive.COMPLETED, 149, 1)
    assert picky.runtime.metrics.redrive_failed_items[task.id] == 1
    assert await dead_count(picky, "billing") == 1
    (completed,) = await events_of(picky, "redrive.completed")
    assert (completed["task_id"], completed["failed"]) == (task.id, 1)

    document = (await picky_http.get(f"/ojs/v1/dead-letter/redrives/{task.id}")).json()["task"]
    assert (document["counts"]["failed"], document["counts"]["pending"]) == (1, 0)
    assert document["failure"] is None
    response = await picky_http.get(f"/ojs/v1/dead-letter/redrives/{task.id}/items?state=failed")
    assert response.status_code == 200, response.text
    (listed,) = response.json()["items"]
    assert (listed["job_id"], listed["state"], listed["error"]["code"]) == (
        broken, "failed", "upcast_failed",
    )  # fmt: skip
    assert "KeyError" in listed["error"]["message"]
    everything = await picky_http.get(f"/ojs/v1/dead-letter/redrives/{task.id}/items")
    assert len(everything.json()["items"]) == 100  # the first page
    for query in ("state=lost", "status=failed"):
        refused = await picky_http.get(f"/ojs/v1/dead-letter/redrives/{task.id}/items?{query}")
        assert_error(refused, 400, "invalid_request")
    missing = await picky_http.get("/ojs/v1/dead-letter/redrives/rdt_nope/items")
    assert_error(missing, 404, "not_found")


async def test_a_missing_step_after_the_start_fails_the_task_and_frees_its_queues(
    service: Service, store: Store, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    ids = await kill(service, 150)
    task = await service.redrives.start(OPERATOR, RedriveRequest(by_queue("billing")))
    gappy = restarted(store, clock, GAPPY)
    with caplog.at_level(logging.ERROR, logger="redrive.redrives"):
        await tick(gappy, clock, 30)
    failed = await gappy.redrives.get(CALLER, task.id)
    assert (failed.state, failed.moved, failed.failed) == (redrive.FAILED, 0, 0)
    assert failed.finished_at is not None and failed.finished_at <= clock.now_ms()
    assert failed.failure is not None
    assert failed.failure.code == "missing_upcaster"
    assert failed.failure.job_id in ids
    assert f"job {failed.failure.job_id}: no upcaster for billing.charge v1->v2" in (
        failed.failure.message
    )
    assert await dead_count(gappy, "billing") == 150  # the failing batch moved nothing

    (event,) = await events_of(gappy, "redrive.failed")
    assert (event["task_id"], event["state"]) == (task.id, "failed")
    assert event["failure"] == {
        "code": "missing_upcaster", "message": failed.failure.message,
        "job_id": failed.failure.job_id,
    }  # fmt: skip
    assert gappy.runtime.metrics.redrive_tasks_failed["missing_upcaster"] == 1
    (record,) = [r for r in caplog.records if r.name == "redrive.redrives"]
    assert task.id in record.getMessage() and "missing_upcaster" in record.getMessage()
    assert vars(record)["redrive_task"]["job_id"] == failed.failure.job_id

    # Ended: later ticks leave it, and nothing pins its dead letters or holds its queue.
    await tick(gappy, clock, 30)
    assert (await gappy.redrives.get(CALLER, task.id)).state == redrive.FAILED
    assert len(await events_of(gappy, "redrive.failed")) == 1
    assert await gappy.redrives.items(CALLER, task.id, redrive.PENDING) == []
    with pytest.raises(MissingUpcaster):  # with the same configuration, refused at the start
        await gappy.redrives.start(OPERATOR, RedriveRequest(by_queue("billing")))
    fixed = await service.redrives.start(OPERATOR, RedriveRequest(by_queue("billing")))
    assert (fixed.to_move, fixed.queues) == (150, ("billing",))
    await tick(service, clock, 100)
    assert (await service.redrives.get(CALLER, fixed.id)).moved == 150


async def test_an_unexpected_error_after_the_moves_undoes_the_batch(
    service: Service, store: Store, clock: ManualClock
) -> None:
    ids = await kill(service, 20)
    task = await service.redrives.start(OPERATOR, RedriveRequest(by_queue("billing")))
    unstorable = restarted(store, clock, UNSTORABLE)
    await tick(unstorable, clock, 30)
    failed = await unstorable.redrives.get(CALLER, task.id)
    assert (failed.state, failed.moved) == (redrive.FAILED, 0)
    assert failed.failure is not None
    assert failed.failure.code == "internal_error"
    assert "TypeError" in failed.failure.message
    assert failed.failure.job_id in ids  # the next one it would have moved
    assert await dead_count(unstorable, "billing") == 20
    stats = await unstorable.dead_letters.stats(CALLER)  # the tallies and incident counts too
    assert (stats.total, stats.by_queue) == (20, {"billing": 20})
    (incident,) = await unstorable.incidents.search(CALLER, IncidentQuery(limit=10))
    assert incident.dead_count == 20
    for job_id in ids:
        (episode,) = await unstorable.dead_letters.episodes(CALLER, job_id)
        assert episode.status == "dead"
        assert (await unstorable.jobs.get(CALLER, job_id)).state == "discarded"
    assert unstorable.runtime.metrics.redrive_moved[task.id] == 0
    assert unstorable.runtime.metrics.redrive_tasks_failed["internal_error"] == 1


async def test_one_task_failing_never_stops_another(
    service: Service, store: Store, clock: ManualClock
) -> None:
    await kill(service, 150, "billing")
    await kill(service, 150, "emails", "email.send")  # a type with no upcasters
    billing = await service.redrives.start(OPERATOR, RedriveRequest(by_queue("billing")))
    emails = await service.redrives.start(OPERATOR, RedriveRequest(by_queue("emails")))
    gappy = restarted(store, clock, GAPPY)
    await tick(gappy, clock, 60)
    assert (await gappy.redrives.get(CALLER, billing.id)).state == redrive.FAILED
    moving = await gappy.redrives.get(CALLER, emails.id)
    assert moving.state == redrive.RUNNING and 98 <= moving.moved <= 100
    await tick(gappy, clock, 60)
    done = await gappy.redrives.get(CALLER, emails.id)
    assert (done.state, done.moved, done.failure) == (redrive.COMPLETED, 150, None)
    assert await dead_count(gappy, "emails") == 0
    assert await dead_count(gappy, "billing") == 150


async def test_a_start_that_would_meet_a_failing_upcast_is_refused_with_422(
    service: Service, store: Store, clock: ManualClock, picky_http: httpx.AsyncClient
) -> None:
    ids = await kill(service, 150)
    body = {"filter": {"queue": "billing"}}
    error = assert_error(
        await picky_http.post("/ojs/v1/dead-letter/redrives", json=body), 422, "upcast_failed"
    )
    assert error["details"]["job_id"] == ids[BROKEN]
    assert "KeyError" in error["message"]
    assert await service.redrives.search(CALLER) == []  # nothing started, nothing pinned
    gappy = restarted(store, clock, GAPPY)
    with pytest.raises(MissingUpcaster) as missing:
        await gappy.redrives.start(OPERATOR, RedriveRequest(by_queue("billing")))
    assert missing.value.details["job_id"] in ids
    # A bulk retry past a burst becomes a task: refused the same way.
    bulk = {"filter": {"queue": "billing"}, "confirm": True}
    refused = await picky_http.post("/ojs/v1/dead-letter/retry", json=bulk)
    assert_error(refused, 422, "upcast_failed")
    with pytest.raises(UpcastFailed) as bulk_missing:  # a missing step says so in a bulk retry too
        await gappy.dead_letters.bulk_retry(
            OPERATOR, BulkRequest(by_queue("billing"), confirm=True)
        )
    assert bulk_missing.value.code == "missing_upcaster"
    assert await service.redrives.search(CALLER) == []
    assert await dead_count(service, "billing") == 150
    started = await service.redrives.start(OPERATOR, RedriveRequest(by_queue("billing")))
    assert started.to_move == 150  # the refusals left nothing pinned
