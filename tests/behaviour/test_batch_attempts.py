"""Batch ack and nack over HTTP: per-entry outcomes in request order, one transaction per batch.

Also the single /ack and /nack they share their code with, and enqueue batches (atomic, FIFO).
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import anyio
import httpx
import pytest

from redrive.api.app import create_app
from redrive.domain.durations import format_timestamp
from redrive.service.facade import Service
from tests.behaviour.ojs_http import (
    COUNT_EVENTS,
    OJS_MEDIA_TYPE,
    ack,
    assert_error,
    client_job_id,
    count_rows,
    enqueue,
    fetch,
    fetch_one,
    forbid_server_errors,
    get_job,
    kill_job,
    nack,
    retry_policy,
    state_of,
)
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio

ACK_BATCH = "/ojs/v1/workers/ack/batch"
NACK_BATCH = "/ojs/v1/workers/nack/batch"
LEASE_MS = 3_000


@pytest.fixture(autouse=True)
def no_server_errors(client: httpx.AsyncClient) -> None:
    forbid_server_errors(client)


# --- helpers ------------------------------------------------------------------------------------


async def leased(
    client: httpx.AsyncClient, queue: str, count: int, worker_id: str = "w1", **options: Any
) -> list[dict[str, Any]]:
    """Enqueue `count` jobs in `queue`, fetch them all as `worker_id`, return them as fetched."""
    ids = [(await enqueue(client, "batch.job", [index], queue=queue, **options))["id"]
           for index in range(count)]  # fmt: skip
    fetched = await fetch(client, [queue], count=count, worker_id=worker_id)
    assert [job["id"] for job in fetched] == ids
    assert all(job["state"] == "active" for job in fetched)
    return fetched


async def post_batch(client: httpx.AsyncClient, path: str, body: object) -> dict[str, Any]:
    """POST a batch that must be accepted as a whole; returns the body after checking its shape."""
    response = await client.post(path, json=body)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == OJS_MEDIA_TYPE
    document: dict[str, Any] = response.json()
    results = document["results"]
    succeeded = sum(1 for result in results if result["ok"] is True)
    assert document["succeeded"] == succeeded
    assert document["failed"] == len(results) - succeeded
    return document


def entry_error(result: dict[str, Any], status: int, code: str) -> dict[str, Any]:
    """A refused entry of a batch: ok false, the status it would have had, an OJS error."""
    assert result["ok"] is False, result
    assert result["status"] == status, result
    error = result["error"]
    assert error["code"] == code, error
    assert isinstance(error["message"], str)
    assert error["message"]
    assert isinstance(error["retryable"], bool)
    assert error["hint"]
    assert error["docs_url"]
    assert "job" not in result
    assert "acknowledged" not in result
    return dict(error)


def entry_ok(result: dict[str, Any], job_id: str, state: str) -> dict[str, Any]:
    assert result["ok"] is True, result
    assert result["job_id"] == job_id
    assert result["id"] == job_id
    assert result["state"] == state
    assert "job" not in result  # batch answers stay small: no job document per entry
    return result


async def all_events(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    response = await client.get("/ojs/v1/events?limit=1000")
    assert response.status_code == 200, response.text
    events: list[dict[str, Any]] = response.json()["events"]
    assert len(events) < 1000
    return events


async def event_types_of(client: httpx.AsyncClient, job_id: str) -> list[str]:
    """The types of the events about one job, oldest first."""
    return [event["type"] for event in await all_events(client) if event.get("subject") == job_id]


async def metric(client: httpx.AsyncClient, name: str, queue: str, job_type: str) -> float:
    """One labelled sample of /metrics (0 when absent)."""
    response = await client.get("/metrics")
    assert response.status_code == 200, response.text
    wanted = f'{name}{{queue="{queue}",type="{job_type}"}} '
    for line in response.text.splitlines():
        if line.startswith(wanted):
            return float(line.removeprefix(wanted))
    return 0.0


async def dead_letter_ids(client: httpx.AsyncClient) -> list[str]:
    response = await client.get("/ojs/v1/dead-letter?limit=100")
    assert response.status_code == 200, response.text
    return [job["id"] for job in response.json()["jobs"]]


# --- ack batch ----------------------------------------------------------------------------------


async def test_ack_batch_completes_every_job_and_stores_each_result(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    jobs = await leased(client, "acks", 4, visibility_timeout_ms=60_000)
    clock.advance(250)
    results: list[Any] = [{"sum": 1}, [1, 2, 3], "done", None]
    acks = []
    for job, result in zip(reversed(jobs), results, strict=True):
        entry: dict[str, Any] = {
            "job_id": job["id"], "lease_token": job["lease_token"], "worker_id": "w1",
        }  # fmt: skip
        if result is not None:
            entry["result"] = result
        acks.append(entry)

    body = await post_batch(client, ACK_BATCH, {"acks": acks})

    assert (body["succeeded"], body["failed"]) == (4, 0)
    assert [result["job_id"] for result in body["results"]] == [a["job_id"] for a in acks]
    completed_at = format_timestamp(clock.now_ms())
    for entry, result in zip(acks, body["results"], strict=True):
        entry_ok(result, entry["job_id"], "completed")
        assert result["acknowledged"] is True
        assert result["attempt"] == 1
        assert result["completed_at"] == completed_at
        stored = await get_job(client, entry["job_id"])
        assert stored["state"] == "completed"
        assert stored["completed_at"] == completed_at
        assert stored.get("result") == entry.get("result")
        assert "lease_token" not in stored
        assert "worker_id" not in stored
    assert await fetch(client, ["acks"], count=10) == []
    for job in jobs:
        assert await event_types_of(client, job["id"]) == [
            "job.enqueued", "job.started", "job.completed",
        ]  # fmt: skip
    completed = [e for e in await all_events(client) if e["type"] == "job.completed"]
    assert [event["subject"] for event in completed] == [entry["job_id"] for entry in acks]
    by_subject = {event["subject"]: event for event in completed}
    assert by_subject[jobs[3]["id"]]["data"]["result"] == {"sum": 1}
    assert by_subject[jobs[3]["id"]]["data"]["duration_ms"] == 250


async def test_ack_batch_accepts_a_bare_array(client: httpx.AsyncClient) -> None:
    jobs = await leased(client, "bare", 2)
    body = await post_batch(client, ACK_BATCH, [{"job_id": job["id"]} for job in jobs])
    assert (body["succeeded"], body["failed"]) == (2, 0)
    for job in jobs:
        assert await state_of(client, job["id"]) == "completed"


async def test_mixed_ack_batch_lands_the_good_entries_and_changes_nothing_else(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    good, wrong_token, twice = await leased(client, "mixed", 3)
    waiting = await enqueue(client, queue="mixed-idle")
    finished = (await leased(client, "mixed-done", 1))[0]
    assert (await ack(client, finished["id"], result="first")).status_code == 200
    unknown = client_job_id(clock.now_ms())
    events_before = Counter(event["type"] for event in await all_events(client))
    assert await metric(client, "ojs_job_completed_total", "mixed", "batch.job") == 0

    acks: list[Any] = [
        {"job_id": unknown, "result": "ghost"},
        {"job_id": good["id"], "lease_token": good["lease_token"], "result": "good"},
        {"job_id": wrong_token["id"], "lease_token": "not-the-token", "result": "stolen"},
        {"job_id": twice["id"], "result": "once"},
        {"job_id": twice["id"], "result": "twice"},
        {"lease_token": good["lease_token"], "result": "no id"},
        {"job_id": waiting["id"], "result": "too early"},
        {"job_id": finished["id"], "result": "again"},
        42,
        {"job_id": 7},
    ]
    body = await post_batch(client, ACK_BATCH, {"acks": acks})
    results = body["results"]
    assert len(results) == len(acks)
    assert (body["succeeded"], body["failed"]) == (2, 8)

    missing = entry_error(results[0], 404, "not_found")
    assert missing["details"]["resource_id"] == unknown
    entry_ok(results[1], good["id"], "completed")
    assert results[1]["acknowledged"] is True
    replaced = entry_error(results[2], 409, "conflict")
    assert replaced["details"]["job_id"] == wrong_token["id"]
    entry_ok(results[3], twice["id"], "completed")
    repeated = entry_error(results[4], 400, "invalid_request")
    assert repeated["details"] == {"job_id": twice["id"], "index": 4}
    no_id = entry_error(results[5], 400, "invalid_request")
    assert no_id["details"]["index"] == 5
    idle = entry_error(results[6], 409, "conflict")
    assert idle["details"]["state"] == "available"
    done = entry_error(results[7], 409, "conflict")
    assert done["details"]["state"] == "completed"
    assert entry_error(results[8], 400, "invalid_request")["details"]["index"] == 8
    assert entry_error(results[9], 400, "invalid_request")["details"]["index"] == 9

    assert (await get_job(client, good["id"]))["result"] == "good"
    assert (await get_job(client, twice["id"]))["result"] == "once"
    untouched = await get_job(client, wrong_token["id"])
    assert untouched["state"] == "active"
    assert untouched["lease_token"] == wrong_token["lease_token"]
    assert "result" not in untouched
    assert "completed_at" not in untouched
    idle_job = await get_job(client, waiting["id"])
    assert idle_job["state"] == "available"
    assert "result" not in idle_job
    assert (await get_job(client, finished["id"]))["result"] == "first"
    assert_error(await client.get(f"/ojs/v1/jobs/{unknown}"), 404, "not_found")

    events_after = Counter(event["type"] for event in await all_events(client))
    assert events_after - events_before == Counter({"job.completed": 2})
    assert await metric(client, "ojs_job_completed_total", "mixed", "batch.job") == 2
    assert await count_rows(service, "SELECT COUNT(*) FROM jobs WHERE state = 'completed'") == 3
    # The refused lease still works afterwards: the batch did not touch it.
    later = await ack(client, wrong_token["id"], lease_token=wrong_token["lease_token"])
    assert later.status_code == 200, later.text


async def test_ack_batch_from_another_worker_is_refused_per_entry(
    client: httpx.AsyncClient,
) -> None:
    mine, theirs = await leased(client, "owners", 2, worker_id="w1")
    acks = [{"job_id": mine["id"], "worker_id": "w1"}, {"job_id": theirs["id"], "worker_id": "w2"}]
    body = await post_batch(client, ACK_BATCH, {"acks": acks})
    entry_ok(body["results"][0], mine["id"], "completed")
    error = entry_error(body["results"][1], 409, "conflict")
    assert error["details"]["reason"] == "worker_mismatch"
    assert await state_of(client, theirs["id"]) == "active"


async def test_batch_results_follow_request_order(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    jobs = await leased(client, "order", 8)
    unknown = [client_job_id(clock.now_ms()) for _ in range(3)]
    ids = [job["id"] for job in jobs] + unknown
    random.Random(11).shuffle(ids)
    assert sorted(ids) != ids
    body = await post_batch(client, ACK_BATCH, {"acks": [{"job_id": i} for i in ids]})
    assert (body["succeeded"], body["failed"]) == (8, 3)
    for job_id, result in zip(ids, body["results"], strict=True):
        if job_id in unknown:
            assert entry_error(result, 404, "not_found")["details"]["resource_id"] == job_id
        else:
            entry_ok(result, job_id, "completed")

    more = await leased(client, "order-nack", 6, retry=retry_policy(3))
    order = [more[index]["id"] for index in (4, 0, 5, 2, 1, 3)]
    nacks = [{"job_id": i, "error": {"message": "x"}} for i in order]
    body = await post_batch(client, NACK_BATCH, {"nacks": nacks})
    assert [result["job_id"] for result in body["results"]] == order
    assert all(result["state"] == "retryable" for result in body["results"])


async def test_ack_batch_after_the_lease_expired_is_refused_for_that_entry(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    short = (await leased(client, "expiry-short", 1, visibility_timeout_ms=LEASE_MS))[0]
    long = (await leased(client, "expiry-long", 1, visibility_timeout_ms=10 * LEASE_MS))[0]
    clock.advance(LEASE_MS)
    acks = [
        {"job_id": short["id"], "lease_token": short["lease_token"], "result": "late"},
        {"job_id": long["id"], "lease_token": long["lease_token"], "result": "in time"},
    ]
    body = await post_batch(client, ACK_BATCH, {"acks": acks})
    expired = entry_error(body["results"][0], 409, "conflict")
    assert expired["details"] == {"job_id": short["id"], "reason": "lease_expired"}
    entry_ok(body["results"][1], long["id"], "completed")
    assert "result" not in await get_job(client, short["id"])

    await service.sweeper.sweep()
    reaped = await get_job(client, short["id"])
    assert reaped["state"] == "available"
    assert [error["type"] for error in reaped["errors"]] == ["visibility_timeout"]
    again = await post_batch(client, ACK_BATCH, {"acks": acks[:1]})
    assert entry_error(again["results"][0], 409, "conflict")["details"]["state"] == "available"
    nack_late = {"nacks": [{"job_id": short["id"], "error": {"message": "late"}}]}
    nacked = await post_batch(client, NACK_BATCH, nack_late)
    entry_error(nacked["results"][0], 409, "conflict")
    assert await state_of(client, short["id"]) == "available"
    assert [job["id"] for job in await fetch(client, ["expiry-short"])] == [short["id"]]


async def test_ack_batch_only_reaches_jobs_of_the_callers_tenant(
    client: httpx.AsyncClient,
) -> None:
    acme = {"X-OJS-Tenant": "acme"}
    globex = {"X-OJS-Tenant": "globex"}
    theirs = await enqueue(client, queue="tenanted", headers=acme)
    mine = await enqueue(client, queue="tenanted", headers=globex)
    assert [j["id"] for j in await fetch(client, ["tenanted"], headers=acme)] == [theirs["id"]]
    assert [j["id"] for j in await fetch(client, ["tenanted"], headers=globex)] == [mine["id"]]
    acks = [{"job_id": theirs["id"]}, {"job_id": mine["id"]}]
    response = await client.post(ACK_BATCH, json={"acks": acks}, headers=globex)
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert entry_error(results[0], 404, "not_found")["details"]["resource_id"] == theirs["id"]
    entry_ok(results[1], mine["id"], "completed")
    assert await state_of(client, theirs["id"], acme) == "active"
    nacks = [{"job_id": theirs["id"], "error": {"message": "not yours"}}]
    nacked = await client.post(NACK_BATCH, json={"nacks": nacks}, headers=globex)
    entry_error(nacked.json()["results"][0], 404, "not_found")
    assert (await get_job(client, theirs["id"], acme))["errors"] == []


async def test_odd_job_ids_are_echoed_in_their_refusals(client: httpx.AsyncClient) -> None:
    odd = ['it\'s "quoted"', "naïve ✓ 🚀", "a,b", "%s", "x" * 300, " "]
    body = await post_batch(client, ACK_BATCH, {"acks": [{"job_id": i} for i in odd]})
    echoed = [entry_error(r, 404, "not_found")["details"]["resource_id"] for r in body["results"]]
    assert echoed == odd


async def test_overlapping_batches_at_once_ack_each_job_exactly_once(
    client: httpx.AsyncClient, service: Service
) -> None:
    jobs = await leased(client, "overlap", 24, retry=retry_policy(1, "dead_letter"))
    ids = [job["id"] for job in jobs]
    forwards = {"acks": [{"job_id": job_id, "result": "fwd"} for job_id in ids]}
    backwards = {"acks": [{"job_id": job_id, "result": "back"} for job_id in reversed(ids)]}
    killing = {"nacks": [{"job_id": job_id, "error": {"type": "Kill"}} for job_id in ids[::2]]}
    async with anyio.create_task_group() as group:
        outcomes: dict[str, dict[str, Any]] = {}

        async def send(name: str, path: str, body: object) -> None:
            outcomes[name] = await post_batch(client, path, body)

        group.start_soon(send, "forwards", ACK_BATCH, forwards)
        group.start_soon(send, "backwards", ACK_BATCH, backwards)
        group.start_soon(send, "killing", NACK_BATCH, killing)

    winners: Counter[str] = Counter()
    for name, body in outcomes.items():
        for result in body["results"]:
            if result["ok"]:
                winners[result["job_id"]] += 1
            else:
                assert result["status"] == 409, (name, result)
    assert winners == Counter(ids)
    killed = {r["job_id"] for r in outcomes["killing"]["results"] if r["ok"]}
    for job_id in ids:
        job = await get_job(client, job_id)
        if job_id in killed:
            assert job["state"] == "discarded"
            assert "result" not in job
        else:
            assert job["state"] == "completed"
            assert job["result"] in ("fwd", "back")
    types = Counter(e["type"] for e in await all_events(client))
    assert types["job.completed"] == len(ids) - len(killed)
    assert types["dead_letter.added"] == len(killed)
    assert (await client.get("/ojs/v1/dead-letter/stats")).json()["total"] == len(killed)
    assert await count_rows(service, "SELECT COUNT(*) FROM dead_letters") == len(killed)


async def test_a_heartbeat_keeps_the_lease_for_a_later_batch_ack(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    kept, dropped = await leased(client, "beat", 2, visibility_timeout_ms=LEASE_MS)
    clock.advance(LEASE_MS - 1_000)
    beat = await client.post(
        "/ojs/v1/workers/heartbeat",
        json={"worker_id": "w1", "active_jobs": [kept["id"]], "visibility_timeout_ms": LEASE_MS},
    )
    assert beat.status_code == 200, beat.text
    assert beat.json()["jobs_extended"] == [kept["id"]]
    clock.advance(LEASE_MS - 1)
    acks = [
        {"job_id": dropped["id"], "lease_token": dropped["lease_token"]},
        {"job_id": kept["id"], "lease_token": kept["lease_token"]},
    ]
    body = await post_batch(client, ACK_BATCH, {"acks": acks})
    assert entry_error(body["results"][0], 409, "conflict")["details"]["reason"] == "lease_expired"
    entry_ok(body["results"][1], kept["id"], "completed")


async def test_the_reaper_dead_letters_many_lost_leases_once_each(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    dying = await leased(
        client, "reap", 6, visibility_timeout_ms=LEASE_MS, retry=retry_policy(1, "dead_letter")
    )
    surviving = await leased(client, "reap-again", 3, visibility_timeout_ms=LEASE_MS)
    clock.advance(LEASE_MS)
    await service.sweeper.sweep()
    await service.sweeper.sweep()
    assert sorted(await dead_letter_ids(client)) == sorted(job["id"] for job in dying)
    stats = (await client.get("/ojs/v1/dead-letter/stats")).json()
    assert (stats["total"], stats["by_error_type"]) == (6, {"visibility_timeout": 6})
    for job in surviving:
        after = await get_job(client, job["id"])
        assert after["state"] == "available"
        assert [error["type"] for error in after["errors"]] == ["visibility_timeout"]
    late = await post_batch(client, ACK_BATCH, {"acks": [{"job_id": j["id"]} for j in dying]})
    assert late["failed"] == 6
    assert await count_rows(service, "SELECT COUNT(*) FROM dead_letters") == 6
    types = Counter(e["type"] for e in await all_events(client))
    assert types["dead_letter.added"] == 6
    assert types["job.failed"] == 9


# --- nack batch ---------------------------------------------------------------------------------


async def test_nack_batch_retries_dead_letters_and_requeues(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    policy = retry_policy(3, initial_interval="PT1S", backoff_coefficient=2.0, jitter=False)
    retry = (await leased(client, "nack-retry", 1, retry=policy))[0]
    dies = (await leased(client, "nack-dead", 1, retry=retry_policy(1, "dead_letter")))[0]
    requeued = (await leased(client, "nack-requeue", 1, retry=retry_policy(3)))[0]
    unknown = client_job_id(clock.now_ms())
    clock.advance(100)
    now = clock.now_ms()

    nacks: list[Any] = [
        {"job_id": retry["id"], "lease_token": retry["lease_token"],
         "error": {"code": "handler_error", "message": "try later", "type": "Flaky"}},
        {"job_id": dies["id"], "worker_id": "w1",
         "error": {"code": "handler_error", "message": "poison", "type": "Poison"}},
        {"job_id": requeued["id"], "requeue": True,
         "error": {"code": "shutdown", "message": "worker stopping"}},
        {"job_id": unknown, "error": {"message": "nobody"}},
        {"job_id": retry["id"], "error": {"message": "second time"}},
        {"job_id": requeued["id"], "requeue": "yes"},
    ]  # fmt: skip
    body = await post_batch(client, NACK_BATCH, {"nacks": nacks})
    results = body["results"]
    assert (body["succeeded"], body["failed"]) == (3, 3)

    retried = entry_ok(results[0], retry["id"], "retryable")
    assert "acknowledged" not in retried
    assert retried["attempt"] == 1
    assert retried["max_attempts"] == 3
    assert retried["retry_delay_ms"] == 1_000
    assert retried["next_attempt_at"] == format_timestamp(now + 1_000)
    dead = entry_ok(results[1], dies["id"], "discarded")
    assert dead["dead_letter"] is True
    assert dead["attempt"] == 1
    assert dead["discarded_at"] == format_timestamp(now)
    back = entry_ok(results[2], requeued["id"], "available")
    assert "next_attempt_at" not in back
    entry_error(results[3], 404, "not_found")
    assert entry_error(results[4], 400, "invalid_request")["details"]["index"] == 4
    assert entry_error(results[5], 400, "invalid_request")["details"]["index"] == 5

    stored = await get_job(client, retry["id"])
    assert stored["state"] == "retryable"
    assert stored["error"]["message"] == "try later"
    assert [(e["attempt"], e["message"]) for e in stored["errors"]] == [(1, "try later")]
    assert stored["next_attempt_at"] == format_timestamp(now + 1_000)

    assert await dead_letter_ids(client) == [dies["id"]]
    listed = (await client.get("/ojs/v1/dead-letter")).json()["jobs"][0]
    assert listed["error_type"] == "Poison"
    assert listed["error"]["message"] == "poison"
    detail = (await client.get(f"/ojs/v1/dead-letter/{dies['id']}")).json()["job"]
    assert detail["errors"][-1]["message"] == "poison"
    assert len(detail["episodes"]) == 1
    stats = (await client.get("/ojs/v1/dead-letter/stats")).json()
    assert stats["total"] == 1
    assert stats["by_queue"] == {"nack-dead": 1}
    assert stats["by_error_type"] == {"Poison": 1}
    assert await count_rows(service, "SELECT COUNT(*) FROM dead_letters") == 1
    assert (await get_job(client, dies["id"]))["state"] == "discarded"
    assert await metric(client, "ojs_dead_letter_added_total", "nack-dead", "batch.job") == 1
    assert await metric(client, "ojs_job_failed_total", "nack-dead", "batch.job") == 1
    assert await metric(client, "ojs_job_failed_total", "nack-retry", "batch.job") == 1

    again = await get_job(client, requeued["id"])
    assert again["state"] == "available"
    assert "lease_token" not in again
    assert again["error"]["message"] == "worker stopping"
    refetched = await fetch_one(client, "nack-requeue")
    assert refetched["id"] == requeued["id"]

    assert await event_types_of(client, retry["id"]) == [
        "job.enqueued", "job.started", "job.failed", "job.retrying",
    ]  # fmt: skip
    assert await event_types_of(client, dies["id"]) == [
        "job.enqueued", "job.started", "job.failed", "job.discarded", "dead_letter.added",
    ]  # fmt: skip
    assert await event_types_of(client, requeued["id"]) == [
        "job.enqueued", "job.started", "job.failed", "job.started",
    ]  # fmt: skip

    clock.advance(1_000)
    await service.sweeper.sweep()
    assert [job["id"] for job in await fetch(client, ["nack-retry"])] == [retry["id"]]


async def test_nack_batch_killing_several_jobs_counts_each_dead_letter_once(
    client: httpx.AsyncClient, service: Service
) -> None:
    jobs = await leased(client, "mass-grave", 5, retry=retry_policy(1, "dead_letter"))
    nacks = [{"job_id": job["id"], "error": {"type": "Boom", "message": "x"}} for job in jobs]
    body = await post_batch(client, NACK_BATCH, {"nacks": nacks})
    assert (body["succeeded"], body["failed"]) == (5, 0)
    assert sorted(await dead_letter_ids(client)) == sorted(job["id"] for job in jobs)
    stats = (await client.get("/ojs/v1/dead-letter/stats")).json()
    assert (stats["total"], stats["by_queue"], stats["by_error_type"]) == (
        5, {"mass-grave": 5}, {"Boom": 5},
    )  # fmt: skip
    added = [e for e in await all_events(client) if e["type"] == "dead_letter.added"]
    assert sorted(event["subject"] for event in added) == sorted(job["id"] for job in jobs)
    # A second batch over the same, now dead, jobs is refused entry by entry and adds nothing.
    repeat = await post_batch(client, NACK_BATCH, {"nacks": nacks})
    assert (repeat["succeeded"], repeat["failed"]) == (0, 5)
    for result in repeat["results"]:
        assert entry_error(result, 409, "conflict")["details"]["state"] == "discarded"
    assert (await client.get("/ojs/v1/dead-letter/stats")).json()["total"] == 5
    assert await count_rows(service, "SELECT COUNT(*) FROM dead_letters") == 5


async def test_a_job_that_dies_again_by_batch_is_one_dead_letter_with_two_episodes(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    job = (await leased(client, "twice-dead", 1, retry=retry_policy(1, "dead_letter")))[0]
    nack_body = {"nacks": [{"job_id": job["id"], "error": {"type": "Boom", "message": "1st"}}]}
    assert (await post_batch(client, NACK_BATCH, nack_body))["succeeded"] == 1
    retried = await client.post(f"/ojs/v1/dead-letter/{job['id']}/retry")
    assert retried.status_code == 200, retried.text
    assert (await client.get("/ojs/v1/dead-letter/stats")).json()["total"] == 0
    clock.advance(1_000)
    assert (await fetch_one(client, "twice-dead"))["id"] == job["id"]
    nack_body["nacks"][0]["error"]["message"] = "2nd"
    assert (await post_batch(client, NACK_BATCH, nack_body))["succeeded"] == 1

    assert await dead_letter_ids(client) == [job["id"]]
    stats = (await client.get("/ojs/v1/dead-letter/stats")).json()
    assert (stats["total"], stats["by_queue"]) == (1, {"twice-dead": 1})
    detail = (await client.get(f"/ojs/v1/dead-letter/{job['id']}")).json()["job"]
    assert detail["error"]["message"] == "2nd"
    assert [episode["status"] for episode in detail["episodes"]] == ["retried", "dead"]
    dead_rows = "SELECT COUNT(*) FROM dead_letters WHERE status = 'dead'"
    assert await count_rows(service, dead_rows) == 1


async def test_a_full_batch_of_a_thousand_acks_and_a_thousand_dead_nacks(
    client: httpx.AsyncClient, service: Service
) -> None:
    # 1,000 nacks with their errors need more than the 64 kB body the `client` fixture allows.
    app = create_app(service, max_body_bytes=1_000_000)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://redrive.test") as wide:
        forbid_server_errors(wide)
        await full_batches(wide, service)


async def full_batches(client: httpx.AsyncClient, service: Service) -> None:
    plain = {"type": "big.job", "args": [], "options": {"queue": "big"}}
    dying = {"type": "big.job", "args": [], "options": {"queue": "big-dead", "retry": {
        "max_attempts": 1, "on_exhaustion": "dead_letter"}}}  # fmt: skip
    for body in ([plain] * 1_000, [dying] * 500, [dying] * 500):
        response = await client.post("/ojs/v1/jobs/batch", json={"jobs": body})
        assert response.status_code == 201, response.text
    done = [job["id"] for job in await fetch(client, ["big"], count=1_000)]
    dead = [job["id"] for job in await fetch(client, ["big-dead"], count=1_000)]
    assert (len(done), len(dead)) == (1_000, 1_000)

    acked = await post_batch(client, ACK_BATCH, {"acks": [{"job_id": i} for i in done]})
    assert (acked["succeeded"], acked["failed"]) == (1_000, 0)
    nacks = [{"job_id": i, "error": {"type": "Boom", "message": "x"}} for i in dead]
    nacked = await post_batch(client, NACK_BATCH, {"nacks": nacks})
    assert (nacked["succeeded"], nacked["failed"]) == (1_000, 0)
    assert {result["state"] for result in nacked["results"]} == {"discarded"}

    completed = "SELECT COUNT(*) FROM jobs WHERE queue = 'big' AND state = 'completed'"
    assert await count_rows(service, completed) == 1_000
    assert await count_rows(service, "SELECT COUNT(*) FROM dead_letters") == 1_000
    stats = (await client.get("/ojs/v1/dead-letter/stats")).json()
    assert (stats["total"], stats["by_queue"]) == (1_000, {"big-dead": 1_000})
    assert stats["by_error_type"] == {"Boom": 1_000}
    events = COUNT_EVENTS + " WHERE type = '{}'"
    assert await count_rows(service, events.format("job.completed")) == 1_000
    assert await count_rows(service, events.format("dead_letter.added")) == 1_000


async def test_concurrent_enqueue_batches_sharing_an_id_insert_exactly_one_of_them(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    shared = client_job_id(clock.now_ms())
    batches = []
    for name in ("a", "b", "c"):
        ids = [client_job_id(clock.now_ms()) for _ in range(20)] + [shared]
        queue = {"queue": f"race-{name}"}
        batches.append([{"id": i, "type": "race.job", "args": [], "options": queue} for i in ids])
    statuses: list[int] = []

    async def send(batch: list[dict[str, Any]]) -> None:
        response = await client.post("/ojs/v1/jobs/batch", json={"jobs": batch})
        if response.status_code != 201:
            assert_error(response, 409, "duplicate")
        statuses.append(response.status_code)

    async with anyio.create_task_group() as group:
        for batch in batches:
            group.start_soon(send, batch)
    assert sorted(statuses) == [201, 409, 409]
    assert await count_rows(service, "SELECT COUNT(*) FROM jobs") == 21
    winner = (await get_job(client, shared))["queue"]
    assert await count_rows(service, f"SELECT COUNT(*) FROM jobs WHERE queue = '{winner}'") == 21
    enqueued = [e for e in await all_events(client) if e["type"] == "job.enqueued"]
    assert len(enqueued) == 21


async def test_cancel_racing_an_ack_batch_ends_each_job_one_way(
    client: httpx.AsyncClient,
) -> None:
    jobs = await leased(client, "cancel-race", 16)
    ids = [job["id"] for job in jobs]
    cancels: dict[str, int] = {}
    batch: dict[str, Any] = {}

    async def cancel(job_id: str) -> None:
        cancels[job_id] = (await client.delete(f"/ojs/v1/jobs/{job_id}")).status_code

    async def ack_all() -> None:
        batch.update(await post_batch(client, ACK_BATCH, {"acks": [{"job_id": i} for i in ids]}))

    async with anyio.create_task_group() as group:
        for job_id in ids[::2]:
            group.start_soon(cancel, job_id)
        group.start_soon(ack_all)
        for job_id in ids[1::2]:
            group.start_soon(cancel, job_id)

    acked = {result["job_id"] for result in batch["results"] if result["ok"]}
    for job_id, result in zip(ids, batch["results"], strict=True):
        state = await state_of(client, job_id)
        if job_id in acked:
            assert cancels[job_id] == 409
            assert state == "completed"
        else:
            assert entry_error(result, 409, "conflict")["details"]["state"] == "cancelled"
            assert cancels[job_id] == 200
            assert state == "cancelled"
    ends = Counter(e["type"] for e in await all_events(client))
    assert ends["job.completed"] == len(acked)
    assert ends["job.cancelled"] == len(ids) - len(acked)


@pytest.mark.parametrize("path", ["/ojs/v1/workers/nack", NACK_BATCH])
async def test_a_requeued_attempt_does_not_use_up_the_retry_budget(
    client: httpx.AsyncClient, path: str
) -> None:
    """openapi.yaml, NackRequest.requeue: "If true, immediately requeue the job without counting
    as a retry attempt". A job allowed two attempts, released once by a requeue and then failing
    once, has failed one counted attempt: it must be retryable, not discarded."""
    job = (await leased(client, "budget", 1, retry=retry_policy(2, jitter=False)))[0]

    async def send(entry: dict[str, Any]) -> dict[str, Any]:
        if path == NACK_BATCH:
            result: dict[str, Any] = (await post_batch(client, path, {"nacks": [entry]}))[
                "results"
            ][0]
            return result
        response = await client.post(path, json=entry)
        assert response.status_code == 200, response.text
        return dict(response.json())

    released = await send({"job_id": job["id"], "requeue": True, "error": {"code": "shutdown"}})
    assert released["state"] == "available"
    again = await fetch_one(client, "budget")
    assert again["id"] == job["id"]
    failed = await send({"job_id": job["id"], "error": {"message": "first real failure"}})
    assert failed["state"] == "retryable", failed
    assert (await get_job(client, job["id"]))["state"] == "retryable"


# --- batch-level refusals -----------------------------------------------------------------------


@pytest.mark.parametrize(("path", "field"), [(ACK_BATCH, "acks"), (NACK_BATCH, "nacks")])
@pytest.mark.parametrize(
    "shape", ["empty", "bare_empty", "object", "string", "missing", "null", "number", "too_many"]
)
async def test_malformed_batch_is_400_and_changes_nothing(
    client: httpx.AsyncClient, path: str, field: str, shape: str
) -> None:
    job = (await leased(client, "whole", 1))[0]
    error = {"error": {"message": "x"}} if field == "nacks" else {}
    first = {"job_id": job["id"], **error}
    bodies: dict[str, object] = {
        "empty": {field: []},
        "bare_empty": [],
        "object": {field: first},
        "string": {field: "x"},
        "missing": {"entries": [first]},
        "null": {field: None},
        "number": 5,
        "too_many": {field: [first] + [{"job_id": f"m-{n:04}", **error} for n in range(1_000)]},
    }
    error = assert_error(await client.post(path, json=bodies[shape]), 400, "invalid_request")
    assert error["details"]["field"] == field
    after = await get_job(client, job["id"])
    assert after["state"] == "active"
    assert after["errors"] == []


@pytest.mark.parametrize("path", [ACK_BATCH, NACK_BATCH])
@pytest.mark.parametrize("raw", [b"{not json", b"", b"[{]", b"NaN"])
async def test_non_json_batch_is_400(client: httpx.AsyncClient, path: str, raw: bytes) -> None:
    response = await client.post(path, content=raw, headers={"content-type": OJS_MEDIA_TYPE})
    assert_error(response, 400, "invalid_payload")


@pytest.mark.parametrize(("path", "field"), [(ACK_BATCH, "acks"), (NACK_BATCH, "nacks")])
async def test_a_batch_of_exactly_the_limit_is_accepted(
    client: httpx.AsyncClient, path: str, field: str
) -> None:
    job = (await leased(client, "limit", 1, retry=retry_policy(3)))[0]
    error = {"error": {"message": "x"}} if field == "nacks" else {}
    ids = [job["id"]] + [f"m-{n:04}" for n in range(999)]
    entries = [{"job_id": job_id, **error} for job_id in ids]
    body = await post_batch(client, path, {field: entries})
    assert len(body["results"]) == 1_000
    assert (body["succeeded"], body["failed"]) == (1, 999)
    assert body["results"][0]["ok"] is True
    assert body["results"][0]["state"] == ("completed" if field == "acks" else "retryable")
    assert [r["error"]["details"]["resource_id"] for r in body["results"][1:]] == [
        f"m-{n:04}" for n in range(999)
    ]
    assert all(result["status"] == 404 for result in body["results"][1:])


# --- the single endpoints -----------------------------------------------------------------------


async def test_single_ack_still_answers_as_before(client: httpx.AsyncClient) -> None:
    job = (await leased(client, "single", 1))[0]
    done = await ack(client, job["id"], lease_token=job["lease_token"], result={"ok": 1})
    assert done.status_code == 200, done.text
    body = done.json()
    assert body["acknowledged"] is True
    assert (body["job_id"], body["state"], body["attempt"]) == (job["id"], "completed", 1)
    assert "results" not in body
    assert (await get_job(client, job["id"]))["result"] == {"ok": 1}
    assert_error(await ack(client, job["id"]), 409, "conflict")
    assert_error(await ack(client, "0190aaaa-0000-7000-8000-000000000000"), 404, "not_found")
    assert_error(await client.post("/ojs/v1/workers/ack", json={}), 400, "invalid_request")
    assert_error(
        await client.post("/ojs/v1/workers/ack", json=[{"job_id": job["id"]}]),
        400, "invalid_request",
    )  # fmt: skip


async def test_single_nack_still_answers_as_before(client: httpx.AsyncClient) -> None:
    job = (await leased(client, "single-nack", 1, retry=retry_policy(2, jitter=False)))[0]
    assert_error(await nack(client, job["id"], lease_token="wrong"), 409, "conflict")
    response = await nack(client, job["id"], message="nope")
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["state"], body["attempt"], body["retry_delay_ms"]) == ("retryable", 1, 1_000)
    assert "acknowledged" not in body
    assert_error(await nack(client, job["id"]), 409, "conflict")
    assert_error(
        await client.post("/ojs/v1/workers/nack", json={"job_id": job["id"], "error": "x"}),
        400, "invalid_request",
    )  # fmt: skip
    dead = await kill_job(client, queue="single-dlq")
    assert await dead_letter_ids(client) == [dead]
    assert (await client.get("/ojs/v1/dead-letter/stats")).json()["total"] == 1


# --- enqueue batch ------------------------------------------------------------------------------


async def test_enqueue_batch_reusing_an_existing_id_inserts_nothing(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    existing = client_job_id(clock.now_ms())
    first = await client.post(
        "/ojs/v1/jobs",
        json={"id": existing, "type": "old.job", "args": ["old"], "options": {"queue": "old"}},
    )
    assert first.status_code == 201, first.text
    fresh = [client_job_id(clock.now_ms()) for _ in range(5)]
    batch = [{"id": job_id, "type": "new.job", "args": [index], "options": {"queue": "brand-new"}}
             for index, job_id in enumerate(fresh)]  # fmt: skip
    batch.append({"id": existing, "type": "new.job", "args": ["clash"], "options": {"queue": "x"}})
    events_before = await all_events(client)

    error = assert_error(
        await client.post("/ojs/v1/jobs/batch", json={"jobs": batch}), 409, "duplicate"
    )
    assert error["details"]["job_id"] == existing

    for job_id in fresh:
        assert_error(await client.get(f"/ojs/v1/jobs/{job_id}"), 404, "not_found")
    kept = await get_job(client, existing)
    assert (kept["type"], kept["args"], kept["queue"]) == ("old.job", ["old"], "old")
    assert await count_rows(service, "SELECT COUNT(*) FROM jobs") == 1
    assert await all_events(client) == events_before
    queues = (await client.get("/ojs/v1/queues")).json()["queues"]
    assert [queue["name"] for queue in queues] == ["old"]
    assert await fetch(client, ["brand-new", "x"], count=10) == []
    # The same batch without the clash goes in whole.
    accepted = await client.post("/ojs/v1/jobs/batch", json={"jobs": batch[:-1]})
    assert accepted.status_code == 201, accepted.text
    assert [job["id"] for job in accepted.json()["jobs"]] == fresh


async def test_enqueue_batch_keeps_fifo_order_for_equal_priority(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    ids = [client_job_id(clock.now_ms() + offset) for offset in range(350)]
    random.Random(5).shuffle(ids)
    assert sorted(ids) != ids
    jobs = [{"id": job_id, "type": "f", "args": [], "options": {"queue": "fifo"}} for job_id in ids]
    response = await client.post("/ojs/v1/jobs/batch", json={"jobs": jobs[:300]})
    assert response.status_code == 201, response.text
    assert [job["id"] for job in response.json()["jobs"]] == ids[:300]
    later = await client.post("/ojs/v1/jobs/batch", json={"jobs": jobs[300:]})
    assert later.status_code == 201, later.text

    enqueued = [e["subject"] for e in await all_events(client) if e["type"] == "job.enqueued"]
    assert enqueued == ids
    fetched = [job["id"] for job in await fetch(client, ["fifo"], count=7)]
    fetched += [(await fetch_one(client, "fifo"))["id"] for _ in range(3)]
    fetched += [job["id"] for job in await fetch(client, ["fifo"], count=500)]
    assert fetched == ids


async def test_enqueue_batch_fetches_by_priority_then_in_enqueue_order(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    priorities = [0, 5, -3, 5, 0, 100, -3, -100, 5, 0, 1]
    ids = [client_job_id(clock.now_ms() + offset) for offset in range(len(priorities))]
    random.Random(9).shuffle(ids)
    jobs = [
        {"id": job_id, "type": "prio.job", "args": [], "options": {"queue": "prio", "priority": p}}
        for job_id, p in zip(ids, priorities, strict=True)
    ]
    response = await client.post("/ojs/v1/jobs/batch", json={"jobs": jobs})
    assert response.status_code == 201, response.text
    expected = [ids[i] for i in sorted(range(len(ids)), key=lambda i: (-priorities[i], i))]
    fetched = [job["id"] for job in await fetch(client, ["prio"], count=4)]
    fetched += [job["id"] for job in await fetch(client, ["prio"], count=20)]
    assert fetched == expected
    priority_of = dict(zip(ids, priorities, strict=True))
    assert [priority_of[job_id] for job_id in fetched] == sorted(priorities, reverse=True)


async def test_nack_batch_writes_each_jobs_null_columns_as_null_and_the_others_as_given(
    client: httpx.AsyncClient, service: Service
) -> None:
    """The columns a batch's jobs or episodes leave null (SQLite writes a field no element of the
    batch holds into its statement as NULL) are NULL, and a field only some hold is each one's:
    a retried job's next attempt beside dead ones', an aggregate key beside none."""
    dead = retry_policy(1, "dead_letter")
    keyed = [(await enqueue(client, "batch.job", [index], meta={"aggregate_id": "order-7"},
                            queue="nulls", retry=dead))["id"] for index in range(2)]  # fmt: skip
    plain = (await enqueue(client, "batch.job", [2], queue="nulls", retry=dead))["id"]
    retried = (await enqueue(client, "batch.job", [3], queue="nulls", retry=retry_policy(3)))["id"]
    fetched = await fetch(client, ["nulls"], count=4, worker_id="w1")
    assert sorted(job["id"] for job in fetched) == sorted([*keyed, plain, retried])
    nacks = [{"job_id": job["id"], "error": {"type": "Boom", "message": "x"}} for job in fetched]
    body = await post_batch(client, NACK_BATCH, {"nacks": nacks})
    assert (body["succeeded"], body["failed"]) == (4, 0)

    def where(sql: str) -> str:
        return f"SELECT COUNT(*) FROM {sql}"

    null_lease = (
        "worker_id = 'w1' AND lease_token IS NULL AND lease_expires_at IS NULL AND timeout_at "
        "IS NULL AND result IS NULL AND cancelled_at IS NULL AND expired_at IS NULL"
    )
    dead_ids = ", ".join(f"'{job_id}'" for job_id in [*keyed, plain])
    assert await count_rows(service, where(
        f"jobs WHERE id IN ({dead_ids}) AND state = 'discarded' AND {null_lease} "
        "AND next_attempt_at IS NULL AND discarded_at IS NOT NULL AND errors IS NOT NULL"
    )) == 3  # fmt: skip
    assert await count_rows(service, where(
        f"jobs WHERE id = '{retried}' AND state = 'retryable' AND {null_lease} "
        "AND next_attempt_at IS NOT NULL AND discarded_at IS NULL AND errors IS NOT NULL"
    )) == 1  # fmt: skip
    episodes = "dead_letters WHERE moved_at IS NULL AND moved_by IS NULL AND status = 'dead'"
    assert await count_rows(service, where(
        f"{episodes} AND aggregate_key = 'order-7' AND job_id IN ('{keyed[0]}', '{keyed[1]}')"
    )) == 2  # fmt: skip
    plain_episode = where(f"{episodes} AND aggregate_key IS NULL AND job_id = '{plain}'")
    assert await count_rows(service, plain_episode) == 1
    assert await count_rows(service, where(
        "dead_letter_snapshots WHERE aggregate_key = 'order-7' AND incident_id IS NOT NULL"
    )) == 2  # fmt: skip
    unkeyed = where("dead_letter_snapshots WHERE aggregate_key IS NULL")
    assert await count_rows(service, unkeyed) == 1
