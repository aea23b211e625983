"""The job lifecycle over HTTP: retries, schedules, TTLs, queues, tenants, events, metrics, cron."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from redrive.domain.durations import format_timestamp
from redrive.service.facade import Service
from tests.behaviour.ojs_http import (
    OJS_MEDIA_TYPE,
    ack,
    assert_error,
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

MINUTE_MS = 60_000


@pytest.fixture(autouse=True)
def no_server_errors(client: httpx.AsyncClient) -> None:
    forbid_server_errors(client)


async def sweep_after(clock: ManualClock, service: Service, milliseconds: int) -> None:
    clock.advance(milliseconds)
    await service.sweeper.sweep()


# --- retries ------------------------------------------------------------------------------------


async def test_nack_schedules_a_retry_with_backoff(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    policy = retry_policy(3, initial_interval="PT1S", backoff_coefficient=2.0, jitter=False)
    job = await enqueue(client, "flaky.job", queue="retry", retry=policy)
    await fetch_one(client, "retry")
    failed_at = clock.now_ms()
    response = await nack(client, job["id"], message="try later")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["state"] == "retryable"
    assert body["attempt"] == 1
    assert body["max_attempts"] == 3
    assert body["retry_delay_ms"] == 1_000
    assert body["next_attempt_at"] == format_timestamp(failed_at + 1_000)
    assert "completed_at" not in body

    await sweep_after(clock, service, 999)
    assert await state_of(client, job["id"]) == "retryable"
    assert await fetch(client, ["retry"]) == []

    await sweep_after(clock, service, 1)
    assert await state_of(client, job["id"]) == "available"
    again = await fetch_one(client, "retry")
    assert again["id"] == job["id"]
    assert again["attempt"] == 2
    assert again["error"]["message"] == "try later"

    second = (await nack(client, job["id"])).json()
    assert second["retry_delay_ms"] == 2_000
    assert second["next_attempt_at"] == format_timestamp(clock.now_ms() + 2_000)
    await sweep_after(clock, service, 2_000)
    third = await fetch_one(client, "retry")
    assert third["attempt"] == 3
    final = (await nack(client, job["id"])).json()
    assert final["state"] == "discarded"
    assert final["attempt"] == 3
    stored = await get_job(client, job["id"])
    assert [error["attempt"] for error in stored["errors"]] == [1, 2, 3]
    assert "completed_at" in stored
    assert "discarded_at" in stored


async def test_jittered_delay_stays_within_bounds(client: httpx.AsyncClient) -> None:
    for index in range(8):
        job = await enqueue(client, queue=f"jitter-{index}", retry=retry_policy(3))
        await fetch_one(client, f"jitter-{index}")
        delay = (await nack(client, job["id"])).json()["retry_delay_ms"]
        assert 500 <= delay <= 1_500


async def test_linear_and_capped_backoff(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    policy = retry_policy(
        4, initial_interval="PT1S", backoff_strategy="linear", max_interval="PT2.5S", jitter=False
    )
    job = await enqueue(client, queue="linear", retry=policy)
    delays = []
    for _ in range(3):
        await fetch_one(client, "linear")
        delay = (await nack(client, job["id"])).json()["retry_delay_ms"]
        delays.append(delay)
        await sweep_after(clock, service, delay)
    assert delays == [1_000, 2_000, 2_500]


async def test_non_retryable_error_ends_the_job_at_once(client: httpx.AsyncClient) -> None:
    job = await enqueue(
        client, queue="fatal", retry=retry_policy(5, non_retryable_errors=["Auth.*"])
    )
    await fetch_one(client, "fatal")
    outcome = (await nack(client, job["id"], type="Auth.TokenExpired")).json()
    assert outcome["state"] == "discarded"
    assert outcome["attempt"] == 1


# --- scheduling, TTL, pending -------------------------------------------------------------------


async def test_scheduled_job_is_promoted_on_time(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    job = await enqueue(client, queue="later", scheduled_at="+PT5S")
    assert job["state"] == "scheduled"
    assert job["scheduled_at"] == format_timestamp(clock.now_ms() + 5_000)
    assert "enqueued_at" not in job
    assert await fetch(client, ["later"]) == []

    await sweep_after(clock, service, 4_999)
    assert await state_of(client, job["id"]) == "scheduled"
    await sweep_after(clock, service, 1)
    promoted = await get_job(client, job["id"])
    assert promoted["state"] == "available"
    assert promoted["enqueued_at"] == format_timestamp(clock.now_ms())
    fetched = await fetch_one(client, "later")
    assert fetched["attempt"] == 1


async def test_absolute_schedule_is_echoed_byte_for_byte(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    due = format_timestamp(clock.now_ms() + 10_000).replace(".000Z", "+00:00")
    job = await enqueue(client, queue="later", delay_until=due)
    assert job["state"] == "scheduled"
    assert job["scheduled_at"] == due
    await sweep_after(clock, service, 10_000)
    assert await state_of(client, job["id"]) == "available"


async def test_past_schedule_is_available_at_once(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, queue="past", scheduled_at="2020-01-01T00:00:00Z")
    assert job["state"] == "available"
    assert (await fetch_one(client, "past"))["id"] == job["id"]


async def test_expired_job_is_discarded_without_completed_at_and_not_dead(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    job = await enqueue(
        client, queue="ttl", expires_at="+PT2S", retry=retry_policy(3, "dead_letter")
    )
    assert job["state"] == "available"
    clock.advance(2_000)
    assert await fetch(client, ["ttl"]) == []
    await service.sweeper.sweep()
    expired = await get_job(client, job["id"])
    assert expired["state"] == "discarded"
    assert "completed_at" not in expired
    assert "expired_at" in expired
    assert (await client.get("/ojs/v1/dead-letter")).json()["jobs"] == []
    assert_error(await client.get(f"/ojs/v1/dead-letter/{job['id']}"), 404, "not_found")
    events = (await client.get("/ojs/v1/events?types=job.expired")).json()["events"]
    assert [event["subject"] for event in events] == [job["id"]]


async def test_a_sweep_expires_the_first_jobs_to_expire_first(
    client: httpx.AsyncClient,
    clock: ManualClock,
    service: Service,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """More expired jobs than a sweep's batch: the earliest expiries go first (the statement
    walks the expiry index in its order, which also keeps an idle sweep from reading the
    table)."""
    monkeypatch.setattr("redrive.service.sweeper.BATCH", 2)
    jobs = [
        await enqueue(client, queue="ttl", expires_at=f"+PT{seconds}S") for seconds in (3, 1, 2)
    ]
    clock.advance(5_000)
    await service.sweeper.sweep()
    states = [await state_of(client, job["id"]) for job in jobs]
    assert states == ["available", "discarded", "discarded"]
    await service.sweeper.sweep()
    assert await state_of(client, jobs[0]["id"]) == "discarded"


async def test_unexpired_job_runs_normally(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    job = await enqueue(client, queue="ttl", expires_at="2099-12-31T23:59:59Z")
    assert job["expires_at"] == "2099-12-31T23:59:59Z"
    await sweep_after(clock, service, MINUTE_MS)
    await fetch_one(client, "ttl")
    assert (await ack(client, job["id"])).status_code == 200


async def test_scheduled_job_that_expires_first_never_runs(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    job = await enqueue(client, queue="ttl", scheduled_at="+PT10S", expires_at="+PT5S")
    await sweep_after(clock, service, 10_000)
    assert await state_of(client, job["id"]) == "discarded"
    assert await fetch(client, ["ttl"]) == []


async def test_pending_job_waits_for_activation(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, queue="gate", pending=True)
    assert job["state"] == "pending"
    assert await fetch(client, ["gate"]) == []
    activated = await client.post(f"/ojs/v1/jobs/{job['id']}/activate")
    assert activated.status_code == 200, activated.text
    assert activated.json()["job"]["state"] == "available"
    assert (await fetch_one(client, "gate"))["id"] == job["id"]
    assert_error(await client.post(f"/ojs/v1/jobs/{job['id']}/activate"), 409, "conflict")


async def test_pending_job_can_be_cancelled(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, queue="gate", pending=True)
    cancelled = await client.delete(f"/ojs/v1/jobs/{job['id']}")
    assert cancelled.json()["job"]["state"] == "cancelled"
    assert_error(await client.post(f"/ojs/v1/jobs/{job['id']}/activate"), 409, "conflict")


# --- cancel -------------------------------------------------------------------------------------


async def test_cancel_an_active_job(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, queue="work")
    fetched = await fetch_one(client, "work", worker_id="w1")
    response = await client.delete(f"/ojs/v1/jobs/{job['id']}")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == OJS_MEDIA_TYPE
    cancelled = response.json()["job"]
    assert cancelled["state"] == "cancelled"
    assert cancelled["previous_state"] == "active"
    assert "cancelled_at" in cancelled
    assert "completed_at" not in cancelled
    assert cancelled["attempt"] == 1
    assert cancelled["started_at"] == fetched["started_at"]
    assert_error(await ack(client, job["id"], lease_token=fetched["lease_token"]), 409, "conflict")
    assert_error(await nack(client, job["id"]), 409, "conflict")
    assert (await get_job(client, job["id"]))["state"] == "cancelled"


async def test_cancel_a_retryable_job_stops_its_retries(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    job = await enqueue(client, queue="work", retry=retry_policy(3, jitter=False))
    await fetch_one(client, "work")
    await nack(client, job["id"])
    cancelled = (await client.delete(f"/ojs/v1/jobs/{job['id']}")).json()["job"]
    assert cancelled["previous_state"] == "retryable"
    await sweep_after(clock, service, MINUTE_MS)
    assert await state_of(client, job["id"]) == "cancelled"
    assert await fetch(client, ["work"]) == []


# --- queues and ordering ------------------------------------------------------------------------


async def test_paused_queue_hands_out_nothing_until_resumed(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, queue="mail")
    paused = await client.post("/ojs/v1/queues/mail/pause")
    assert paused.status_code == 200, paused.text
    assert paused.json()["queue"]["paused"] is True
    assert await fetch(client, ["mail"]) == []
    assert await state_of(client, job["id"]) == "available"
    late = await enqueue(client, queue="mail")
    assert late["state"] == "available"
    detail = (await client.get("/ojs/v1/queues/mail")).json()["queue"]
    assert detail["paused"] is True
    assert detail["available"] == 2

    resumed = await client.post("/ojs/v1/queues/mail/resume")
    assert resumed.json()["queue"]["paused"] is False
    fetched = await fetch(client, ["mail"], count=5)
    assert [item["id"] for item in fetched] == [job["id"], late["id"]]


async def test_pausing_one_queue_leaves_the_others_alone(client: httpx.AsyncClient) -> None:
    await enqueue(client, queue="first")
    second = await enqueue(client, queue="second")
    admin = await client.post("/ojs/v1/admin/queues/first/pause")
    assert admin.json()["paused"] is True
    fetched = await fetch(client, ["first", "second"], count=5)
    assert [item["id"] for item in fetched] == [second["id"]]
    assert (await client.post("/ojs/v1/admin/queues/first/resume")).json()["paused"] is False
    assert len(await fetch(client, ["first", "second"], count=5)) == 1


async def test_queue_order_in_the_fetch_beats_age(client: httpx.AsyncClient) -> None:
    old_low = await enqueue(client, queue="low")
    new_high = await enqueue(client, queue="high")
    assert (await fetch_one(client, "high"))["id"] == new_high["id"]
    await enqueue(client, queue="high")
    jobs = await fetch(client, ["high", "low"])
    assert [job["queue"] for job in jobs] == ["high"]
    jobs = await fetch(client, ["high", "low"])
    assert [job["id"] for job in jobs] == [old_low["id"]]
    assert await fetch(client, ["high", "low"]) == []


async def test_multi_queue_batch_fetch_fills_from_queues_in_order(
    client: httpx.AsyncClient,
) -> None:
    low = [await enqueue(client, queue="low") for _ in range(3)]
    high = [await enqueue(client, queue="high") for _ in range(2)]
    fetched = await fetch(client, ["high", "low"], count=4)
    assert [job["id"] for job in fetched] == [job["id"] for job in high + low[:2]]


async def test_higher_priority_first_and_fifo_within_a_priority(
    client: httpx.AsyncClient,
) -> None:
    made: dict[str, dict[str, Any]] = {}
    for name, priority in (("a", 0), ("b", 10), ("c", 0), ("d", 10), ("e", -5), ("f", 100)):
        made[name] = await enqueue(client, args=[name], queue="prio", priority=priority)
    order = [(await fetch_one(client, "prio"))["args"][0] for _ in range(6)]
    assert order == ["f", "b", "d", "a", "c", "e"]


async def test_priority_order_within_one_batch_fetch(client: httpx.AsyncClient) -> None:
    for name, priority in (("a", 0), ("b", 5), ("c", 0), ("d", 5)):
        await enqueue(client, args=[name], queue="prio", priority=priority)
    fetched = await fetch(client, ["prio"], count=10)
    assert [job["args"][0] for job in fetched] == ["b", "d", "a", "c"]


async def test_batch_fetch_claims_up_to_count(client: httpx.AsyncClient) -> None:
    created = [await enqueue(client, args=[index], queue="bulk") for index in range(7)]
    first = await fetch(client, ["bulk"], count=5, worker_id="w1")
    assert [job["id"] for job in first] == [job["id"] for job in created[:5]]
    assert all(job["state"] == "active" and job["attempt"] == 1 for job in first)
    rest = await fetch(client, ["bulk"], count=5, worker_id="w2")
    assert [job["id"] for job in rest] == [job["id"] for job in created[5:]]
    assert await fetch(client, ["bulk"], count=5) == []
    for job in first:
        assert (await ack(client, job["id"], lease_token=job["lease_token"])).status_code == 200


async def test_fetch_defaults_to_one_job(client: httpx.AsyncClient) -> None:
    for _ in range(3):
        await enqueue(client, queue="one")
    assert len(await fetch(client, ["one"])) == 1


async def test_batch_enqueue_is_fetchable_in_order(client: httpx.AsyncClient) -> None:
    jobs = [
        {"type": "batch.item", "args": [index], "options": {"queue": "b"}} for index in range(4)
    ]
    response = await client.post("/ojs/v1/jobs/batch", json={"jobs": jobs})
    assert response.status_code == 201, response.text
    assert response.json()["count"] == 4
    fetched = await fetch(client, ["b"], count=10)
    assert [job["args"] for job in fetched] == [[0], [1], [2], [3]]


async def test_batch_enqueue_answers_minimal_documents_when_preferred(
    client: httpx.AsyncClient,
) -> None:
    jobs = [
        {"type": "batch.min", "args": [1], "meta": {"k": "v"}, "options": {"priority": 3}},
        {"type": "batch.min", "args": [2], "options": {"queue": "m", "retry": {"max_attempts": 2}}},
        {"type": "batch.min", "args": [3], "options": {"delay_until": "2099-01-01T00:00:00Z"}},
    ]
    headers = {"Prefer": 'respond-async, RETURN="minimal"; x=1', "X-OJS-Tenant": "acme"}
    response = await client.post("/ojs/v1/jobs/batch", json={"jobs": jobs}, headers=headers)
    assert response.status_code == 201, response.text
    assert response.headers["preference-applied"] == "return=minimal"
    body = response.json()
    assert body["count"] == 3
    for summary in body["jobs"]:
        full = (await client.get(f"/ojs/v1/jobs/{summary['id']}", headers=headers)).json()["job"]
        assert summary == {key: full[key] for key in summary}
        assert {"options", "retry", "tags", "visibility_timeout_ms"}.isdisjoint(summary)
    first, second, third = body["jobs"]
    assert (first["meta"], first["priority"]) == ({"k": "v", "tenant_id": "acme"}, 3)
    assert (second["queue"], second["max_attempts"], second["state"]) == ("m", 2, "available")
    assert third["state"] == "scheduled" and "enqueued_at" not in third

    plain = await client.post("/ojs/v1/jobs/batch", json={"jobs": jobs[:1]})
    assert "preference-applied" not in plain.headers
    assert plain.json()["jobs"][0]["retry"]["max_attempts"] == 3


# --- tenants ------------------------------------------------------------------------------------


async def test_tenants_cannot_see_each_others_jobs(client: httpx.AsyncClient) -> None:
    tenant_a = {"X-OJS-Tenant": "tenant-a"}
    tenant_b = {"X-OJS-Tenant": "tenant-b"}
    job = await enqueue(client, args=["a"], queue="shared", headers=tenant_a)
    assert job["meta"]["tenant_id"] == "tenant-a"

    assert_error(await client.get(f"/ojs/v1/jobs/{job['id']}", headers=tenant_b), 404, "not_found")
    cancel = await client.delete(f"/ojs/v1/jobs/{job['id']}", headers=tenant_b)
    assert_error(cancel, 404, "not_found")
    await client.post(f"/ojs/v1/jobs/{job['id']}/cancel", headers=tenant_b)
    assert await fetch(client, ["shared"], headers=tenant_b) == []

    mine = await client.get(f"/ojs/v1/jobs/{job['id']}", headers=tenant_a)
    assert mine.json()["job"]["state"] == "available"
    # No tenant header means the default tenant, never "every tenant".
    assert_error(await client.get(f"/ojs/v1/jobs/{job['id']}"), 404, "not_found")
    assert await fetch(client, ["shared"]) == []

    fetched = await fetch(client, ["shared"], headers=tenant_a)
    assert [item["id"] for item in fetched] == [job["id"]]
    foreign_ack = await client.post(
        "/ojs/v1/workers/ack", json={"job_id": job["id"]}, headers=tenant_b
    )
    assert_error(foreign_ack, 404, "not_found")
    done = await client.post("/ojs/v1/workers/ack", json={"job_id": job["id"]}, headers=tenant_a)
    assert done.status_code == 200, done.text


async def test_tenant_fetch_only_takes_its_own_jobs(client: httpx.AsyncClient) -> None:
    a_job = await enqueue(client, args=["a"], queue="shared", headers={"X-OJS-Tenant": "a"})
    b_job = await enqueue(client, args=["b"], queue="shared", headers={"X-OJS-Tenant": "b"})
    plain = await enqueue(client, args=["none"], queue="shared")
    fetched_b = await fetch(client, ["shared"], count=10, headers={"X-OJS-Tenant": "b"})
    assert [job["id"] for job in fetched_b] == [b_job["id"]]
    fetched_plain = await fetch(client, ["shared"], count=10)
    assert [job["id"] for job in fetched_plain] == [plain["id"]], "no header: default tenant only"
    fetched_a = await fetch(client, ["shared"], count=10, headers={"X-OJS-Tenant": "a"})
    assert [job["id"] for job in fetched_a] == [a_job["id"]]


async def test_batch_enqueue_tags_every_job_with_the_tenant(client: httpx.AsyncClient) -> None:
    jobs = [{"type": "a.b", "args": [index]} for index in range(3)]
    response = await client.post(
        "/ojs/v1/jobs/batch", json={"jobs": jobs}, headers={"X-OJS-Tenant": "acme"}
    )
    assert response.status_code == 201
    assert {job["meta"]["tenant_id"] for job in response.json()["jobs"]} == {"acme"}
    stats = (await client.get("/ojs/v1/admin/tenants/acme/stats")).json()
    assert stats["tenant_id"] == "acme"
    assert stats["total_jobs"] == 3


async def test_tenant_dead_letters_are_scoped(client: httpx.AsyncClient) -> None:
    job_id = await kill_job(client, headers={"X-OJS-Tenant": "a"})
    other = {"X-OJS-Tenant": "b"}
    assert (await client.get("/ojs/v1/dead-letter", headers=other)).json()["jobs"] == []
    assert_error(await client.get(f"/ojs/v1/dead-letter/{job_id}", headers=other), 404, "not_found")
    retry = await client.post(f"/ojs/v1/dead-letter/{job_id}/retry", headers=other)
    assert_error(retry, 404, "not_found")
    assert (await get_job(client, job_id, {"X-OJS-Tenant": "a"}))["state"] == "discarded"
    assert (await client.get("/ojs/v1/dead-letter")).json()["jobs"] == [], "default tenant"
    own = (await client.get("/ojs/v1/dead-letter", headers={"X-OJS-Tenant": "a"})).json()
    assert [item["id"] for item in own["jobs"]] == [job_id]


# --- events and metrics -------------------------------------------------------------------------


async def test_completion_events_carry_duration(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    job = await enqueue(client, "echo.job", queue="events")
    await fetch_one(client, "events")
    clock.advance(250)
    assert (await ack(client, job["id"], result={"n": 1})).status_code == 200
    other = await enqueue(client, "echo.job", queue="events")
    await fetch_one(client, "events")
    await nack(client, other["id"])

    response = await client.get("/ojs/v1/events?types=job.completed")
    assert response.status_code == 200
    assert response.headers["content-type"] == OJS_MEDIA_TYPE
    events = response.json()["events"]
    assert [event["type"] for event in events] == ["job.completed"]
    event = events[0]
    assert event["subject"] == job["id"]
    assert event["data"]["duration_ms"] == 250
    assert event["data"]["attempt"] == 1
    assert event["data"]["job_type"] == "echo.job"
    assert event["data"]["queue"] == "events"
    assert event["data"]["result"] == {"n": 1}


async def test_events_filter_by_queue_and_page_with_after(client: httpx.AsyncClient) -> None:
    for queue in ("q1", "q2", "q1"):
        await enqueue(client, queue=queue)
    first = (await client.get("/ojs/v1/events?types=job.enqueued&queues=q1&limit=1")).json()
    assert [event["data"]["queue"] for event in first["events"]] == ["q1"]
    after = first["cursor"]
    rest = (await client.get(f"/ojs/v1/events?types=job.enqueued&queues=q1&after={after}")).json()
    assert [event["data"]["queue"] for event in rest["events"]] == ["q1"]
    assert rest["events"][0]["id"] != first["events"][0]["id"]


async def test_metrics_are_plain_text_with_dead_letter_gauge(client: httpx.AsyncClient) -> None:
    await kill_job(client, queue="metered")
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/plain"
    text = response.text
    assert "ojs_dead_letter_total" in text
    assert 'ojs_dead_letter_total{queue="metered"} 1' in text
    assert 'ojs_job_enqueued_total{queue="metered",type="test.dead"} 1' in text


# --- cron ---------------------------------------------------------------------------------------


def cron_body(name: str, queue: str, **more: Any) -> dict[str, Any]:
    return {
        "name": name,
        "expression": "* * * * *",
        "job_template": {"type": "cron.tick", "args": [name], "options": {"queue": queue}},
        **more,
    }


async def test_cron_fires_once_a_minute_into_the_templates_queue(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    registered = await client.post("/ojs/v1/cron", json=cron_body("ticker", "cron-q"))
    assert registered.status_code == 201, registered.text
    cron = registered.json()["cron"]
    assert cron["enabled"] is True
    assert cron["overlap_policy"] == "skip"
    next_run = cron["next_run_at"]
    await service.sweeper.sweep()
    assert await fetch(client, ["cron-q"], count=10) == []

    await sweep_after(clock, service, MINUTE_MS)
    jobs = await fetch(client, ["cron-q"], count=10)
    assert len(jobs) == 1
    assert (jobs[0]["type"], jobs[0]["args"], jobs[0]["queue"]) == (
        "cron.tick",
        ["ticker"],
        "cron-q",
    )
    assert await fetch(client, ["default"], count=10) == []
    listed = (await client.get("/ojs/v1/cron")).json()["crons"]
    assert [entry["name"] for entry in listed] == ["ticker"]
    assert listed[0]["run_count"] == 1
    assert listed[0]["last_job_id"] == jobs[0]["id"]
    assert listed[0]["next_run_at"] > next_run


async def test_cron_overlap_skip_waits_for_the_previous_job(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    assert (
        await client.post("/ojs/v1/cron", json=cron_body("nightly", "skip-q"))
    ).status_code == 201
    await sweep_after(clock, service, MINUTE_MS)
    await sweep_after(clock, service, MINUTE_MS)
    first = await fetch(client, ["skip-q"], count=10)
    assert len(first) == 1
    await sweep_after(clock, service, MINUTE_MS)
    assert await fetch(client, ["skip-q"], count=10) == []
    skipped = (await client.get("/ojs/v1/events?types=cron.skipped")).json()["events"]
    assert len(skipped) == 2

    assert (await ack(client, first[0]["id"])).status_code == 200
    await sweep_after(clock, service, MINUTE_MS)
    second = await fetch(client, ["skip-q"], count=10)
    assert len(second) == 1
    assert second[0]["id"] != first[0]["id"]


async def test_cron_overlap_allow_enqueues_every_run(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    body = cron_body("eager", "allow-q", overlap_policy="allow")
    assert (await client.post("/ojs/v1/cron", json=body)).status_code == 201
    await sweep_after(clock, service, MINUTE_MS)
    await sweep_after(clock, service, MINUTE_MS)
    assert len(await fetch(client, ["allow-q"], count=10)) == 2


async def test_deleted_or_disabled_cron_stops_firing(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    await client.post("/ojs/v1/cron", json=cron_body("gone", "off-q"))
    await client.post("/ojs/v1/cron", json=cron_body("paused", "off-q", enabled=False))
    deleted = await client.delete("/ojs/v1/cron/gone")
    assert deleted.json()["cron"]["name"] == "gone"
    await sweep_after(clock, service, 5 * MINUTE_MS)
    assert await fetch(client, ["off-q"], count=10) == []
    assert [cron["name"] for cron in (await client.get("/ojs/v1/cron")).json()["crons"]] == [
        "paused"
    ]
