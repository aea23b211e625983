"""Leases: only the current lease may ack or nack; expired leases are reaped and counted."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from redrive.service.facade import Service
from tests.behaviour.ojs_http import (
    ack,
    assert_error,
    enqueue,
    fetch,
    fetch_one,
    forbid_server_errors,
    get_job,
    nack,
    retry_policy,
    state_of,
)
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio

QUEUE = "leases"
LEASE_MS = 3_000


@pytest.fixture(autouse=True)
def no_server_errors(client: httpx.AsyncClient) -> None:
    forbid_server_errors(client)


async def leased_job(
    client: httpx.AsyncClient, worker_id: str = "w1", **options: Any
) -> dict[str, Any]:
    """Enqueue one job with a 3 s visibility timeout and fetch it as `worker_id`."""
    job = await enqueue(client, queue=QUEUE, visibility_timeout_ms=LEASE_MS, **options)
    fetched = await fetch_one(client, QUEUE, worker_id=worker_id)
    assert fetched["id"] == job["id"]
    assert fetched["state"] == "active"
    assert fetched["worker_id"] == worker_id
    assert isinstance(fetched["lease_token"], str)
    return fetched


async def lose_lease(
    clock: ManualClock, service: Service, milliseconds: int = LEASE_MS + 1
) -> None:
    clock.advance(milliseconds)
    await service.sweeper.sweep()


async def test_ack_with_a_wrong_lease_token_is_refused(client: httpx.AsyncClient) -> None:
    job = await leased_job(client)
    response = await ack(client, job["id"], lease_token="not-the-token", result="stolen")
    assert_error(response, 409, "conflict")
    after = await get_job(client, job["id"])
    assert after["state"] == "active"
    assert after["lease_token"] == job["lease_token"]
    assert "result" not in after
    assert "completed_at" not in after


async def test_nack_with_a_wrong_lease_token_is_refused(client: httpx.AsyncClient) -> None:
    job = await leased_job(client)
    assert_error(await nack(client, job["id"], lease_token="nope"), 409, "conflict")
    after = await get_job(client, job["id"])
    assert after["state"] == "active"
    assert after["errors"] == []


async def test_ack_from_another_worker_id_is_refused(client: httpx.AsyncClient) -> None:
    job = await leased_job(client, "w1")
    assert_error(await ack(client, job["id"], worker_id="w2"), 409, "conflict")
    assert await state_of(client, job["id"]) == "active"
    done = await ack(client, job["id"], worker_id="w1", lease_token=job["lease_token"])
    assert done.status_code == 200, done.text
    assert done.json()["state"] == "completed"


async def test_ack_with_the_right_lease_token_completes(client: httpx.AsyncClient) -> None:
    job = await leased_job(client)
    done = await ack(client, job["id"], lease_token=job["lease_token"], result=[1])
    assert done.status_code == 200, done.text
    after = await get_job(client, job["id"])
    assert after["state"] == "completed"
    assert after["result"] == [1]
    assert "lease_token" not in after


async def test_expired_lease_makes_the_job_available_again(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    job = await leased_job(client)
    clock.advance(LEASE_MS - 1)
    await service.sweeper.sweep()
    assert await state_of(client, job["id"]) == "active"
    await lose_lease(clock, service, 1)
    after = await get_job(client, job["id"])
    assert after["state"] == "available"
    assert after["attempt"] == 1
    assert "worker_id" not in after
    assert [error["type"] for error in after["errors"]] == ["visibility_timeout"]
    assert after["errors"][0]["attempt"] == 1


async def test_late_ack_after_expiry_but_before_the_sweep_is_refused(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    job = await leased_job(client)
    clock.advance(LEASE_MS)
    response = await ack(client, job["id"], lease_token=job["lease_token"])
    assert_error(response, 409, "conflict")
    await service.sweeper.sweep()
    assert await state_of(client, job["id"]) == "available"


async def test_late_ack_with_the_old_token_is_refused_while_the_job_waits(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    job = await leased_job(client)
    await lose_lease(clock, service)
    before = await get_job(client, job["id"])
    response = await ack(client, job["id"], lease_token=job["lease_token"], worker_id="w1")
    assert_error(response, 409, "conflict")
    assert_error(await nack(client, job["id"], lease_token=job["lease_token"]), 409, "conflict")
    assert await get_job(client, job["id"]) == before


async def test_late_worker_cannot_touch_the_new_lease(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    first = await leased_job(client, "w1")
    await lose_lease(clock, service)
    second = await fetch_one(client, QUEUE, worker_id="w2")
    assert second["id"] == first["id"]
    assert second["attempt"] == 2
    assert second["lease_token"] != first["lease_token"]
    held = await get_job(client, first["id"])

    by_token = await ack(client, first["id"], lease_token=first["lease_token"], result="late")
    assert_error(by_token, 409, "conflict")
    by_worker = await ack(client, first["id"], worker_id="w1", result="late")
    assert_error(by_worker, 409, "conflict")
    assert_error(await nack(client, first["id"], worker_id="w1"), 409, "conflict")
    assert_error(await nack(client, first["id"], lease_token=first["lease_token"]), 409, "conflict")
    assert await get_job(client, first["id"]) == held

    done = await ack(
        client, first["id"], worker_id="w2", lease_token=second["lease_token"], result="ok"
    )
    assert done.status_code == 200, done.text
    after = await get_job(client, first["id"])
    assert after["state"] == "completed"
    assert after["result"] == "ok"
    assert after["attempt"] == 2


async def test_heartbeat_extends_the_lease(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    job = await leased_job(client, "w1")
    clock.advance(2_000)
    beat = await client.post(
        "/ojs/v1/workers/heartbeat", json={"worker_id": "w1", "active_jobs": [job["id"]]}
    )
    assert beat.status_code == 200, beat.text
    assert beat.json()["state"] == "running"
    assert beat.json()["jobs_extended"] == [job["id"]]
    clock.advance(2_000)
    assert (await service.sweeper.sweep())["reap"] == 0
    assert await state_of(client, job["id"]) == "active"
    clock.advance(LEASE_MS - 2_000)
    await service.sweeper.sweep()
    assert await state_of(client, job["id"]) == "available"


async def test_heartbeats_keep_a_long_job_alive(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    job = await leased_job(client, "w1")
    for _ in range(5):
        clock.advance(LEASE_MS - 500)
        beat = await client.post(
            "/ojs/v1/workers/heartbeat", json={"worker_id": "w1", "active_jobs": [job["id"]]}
        )
        assert beat.json()["jobs_extended"] == [job["id"]]
        await service.sweeper.sweep()
        assert await state_of(client, job["id"]) == "active"
    done = await ack(client, job["id"], lease_token=job["lease_token"])
    assert done.status_code == 200, done.text
    assert (await get_job(client, job["id"]))["attempt"] == 1


async def test_heartbeat_with_its_own_visibility_timeout(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    job = await leased_job(client, "w1")
    beat = await client.post(
        "/ojs/v1/workers/heartbeat",
        json={"worker_id": "w1", "active_jobs": [job["id"]], "visibility_timeout_ms": 60_000},
    )
    assert beat.json()["jobs_extended"] == [job["id"]]
    await lose_lease(clock, service, 59_999)
    assert await state_of(client, job["id"]) == "active"
    await lose_lease(clock, service, 1)
    assert await state_of(client, job["id"]) == "available"


async def test_heartbeat_from_another_worker_does_not_extend(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    job = await leased_job(client, "w1")
    beat = await client.post(
        "/ojs/v1/workers/heartbeat", json={"worker_id": "w2", "active_jobs": [job["id"]]}
    )
    assert beat.status_code == 200
    assert beat.json()["jobs_extended"] == []
    await lose_lease(clock, service)
    assert await state_of(client, job["id"]) == "available"


async def test_heartbeat_after_the_lease_expired_does_not_revive_it(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    job = await leased_job(client, "w1")
    clock.advance(LEASE_MS + 1)
    beat = await client.post(
        "/ojs/v1/workers/heartbeat", json={"worker_id": "w1", "active_jobs": [job["id"]]}
    )
    assert beat.json()["jobs_extended"] == []
    await service.sweeper.sweep()
    assert await state_of(client, job["id"]) == "available"


async def die_repeatedly(
    client: httpx.AsyncClient, clock: ManualClock, service: Service, job_id: str, times: int
) -> None:
    """A worker fetches the job and vanishes, `times` times over."""
    for attempt in range(1, times + 1):
        fetched = await fetch_one(client, QUEUE, worker_id=f"crashy-{attempt}")
        assert fetched["id"] == job_id
        assert fetched["attempt"] == attempt
        await lose_lease(clock, service)


async def test_a_job_whose_worker_keeps_dying_ends_in_the_dead_letter_queue(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    job = await enqueue(
        client, "crash.loop", queue=QUEUE, visibility_timeout_ms=LEASE_MS,
        retry=retry_policy(3, "dead_letter"),
    )  # fmt: skip
    await die_repeatedly(client, clock, service, job["id"], 3)
    after = await get_job(client, job["id"])
    assert after["state"] == "discarded"
    assert after["attempt"] == 3
    assert "discarded_at" in after
    assert await fetch(client, [QUEUE]) == []
    await lose_lease(clock, service, 60_000)
    assert await fetch(client, [QUEUE]) == []

    listed = (await client.get("/ojs/v1/dead-letter")).json()["jobs"]
    assert [item["id"] for item in listed] == [job["id"]]
    errors = listed[0]["errors"]
    assert [error["type"] for error in errors] == ["visibility_timeout"] * 3
    assert [error["attempt"] for error in errors] == [1, 2, 3]
    stats = (await client.get("/ojs/v1/dead-letter/stats")).json()
    assert stats["total"] == 1
    assert stats["by_error_type"] == {"visibility_timeout": 1}


async def test_a_crash_looping_job_with_discard_policy_is_discarded_not_dead(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    job = await enqueue(
        client, "crash.loop", queue=QUEUE, visibility_timeout_ms=LEASE_MS, retry=retry_policy(2)
    )
    await die_repeatedly(client, clock, service, job["id"], 2)
    after = await get_job(client, job["id"])
    assert after["state"] == "discarded"
    assert len(after["errors"]) == 2
    assert (await client.get("/ojs/v1/dead-letter")).json()["jobs"] == []


async def test_reaping_before_exhaustion_keeps_the_job_running(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    job = await enqueue(
        client, queue=QUEUE, visibility_timeout_ms=LEASE_MS, retry=retry_policy(3, "dead_letter")
    )
    await die_repeatedly(client, clock, service, job["id"], 2)
    third = await fetch_one(client, QUEUE, worker_id="steady")
    assert third["attempt"] == 3
    done = await ack(client, job["id"], lease_token=third["lease_token"])
    assert done.status_code == 200, done.text
    after = await get_job(client, job["id"])
    assert after["state"] == "completed"
    assert len(after["errors"]) == 2
    assert "error" not in after
    assert (await client.get("/ojs/v1/dead-letter")).json()["jobs"] == []


async def test_fetch_visibility_timeout_overrides_the_jobs_own(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    job = await enqueue(client, queue=QUEUE)
    await fetch(client, [QUEUE], worker_id="w1", visibility_timeout_ms=1_000)
    await lose_lease(clock, service, 999)
    assert await state_of(client, job["id"]) == "active"
    await lose_lease(clock, service, 1)
    assert await state_of(client, job["id"]) == "available"


async def test_execution_timeout_takes_the_retry_path(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    job = await enqueue(
        client, "slow.job", queue=QUEUE, timeout_ms=2_000,
        retry=retry_policy(3, initial_interval="PT1S", jitter=False),
    )  # fmt: skip
    fetched = await fetch_one(client, QUEUE, worker_id="w1")
    clock.advance(1_999)
    await service.sweeper.sweep()
    assert await state_of(client, job["id"]) == "active"
    clock.advance(1)
    await service.sweeper.sweep()
    after = await get_job(client, job["id"])
    assert after["state"] == "retryable"
    assert after["error"]["code"] == "timeout"
    assert after["retry_delay_ms"] == 1_000
    assert len(after["errors"]) == 1
    assert_error(await ack(client, job["id"], lease_token=fetched["lease_token"]), 409, "conflict")
    assert await fetch(client, [QUEUE]) == []
    clock.advance(1_000)
    await service.sweeper.sweep()
    again = await fetch_one(client, QUEUE, worker_id="w2")
    assert again["id"] == job["id"]
    assert again["attempt"] == 2


async def test_heartbeat_does_not_extend_the_execution_timeout(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    job = await leased_job(client, "w1", timeout_ms=2_000, retry=retry_policy(3, jitter=False))
    clock.advance(1_500)
    beat = await client.post(
        "/ojs/v1/workers/heartbeat",
        json={"worker_id": "w1", "active_jobs": [job["id"]], "visibility_timeout_ms": 60_000},
    )
    assert beat.json()["jobs_extended"] == [job["id"]]
    await lose_lease(clock, service, 500)
    after = await get_job(client, job["id"])
    assert after["state"] == "retryable"
    assert after["error"]["code"] == "timeout"


async def test_execution_timeout_on_the_last_attempt_dead_letters(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    job = await enqueue(
        client, "slow.job", queue=QUEUE, timeout_ms=500, retry=retry_policy(1, "dead_letter")
    )
    await fetch_one(client, QUEUE)
    clock.advance(500)
    await service.sweeper.sweep()
    assert await state_of(client, job["id"]) == "discarded"
    dead = await client.get(f"/ojs/v1/dead-letter/{job['id']}")
    assert dead.status_code == 200, dead.text
    assert [error["code"] for error in dead.json()["job"]["errors"]] == ["timeout"]


async def test_nack_requeue_releases_the_lease(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    first = await leased_job(client, "w1")
    requeued = await nack(client, first["id"], requeue=True, worker_id="w1")
    assert requeued.status_code == 200, requeued.text
    assert requeued.json()["state"] == "available"
    second = await fetch_one(client, QUEUE, worker_id="w2")
    assert second["attempt"] == 1  # the handed-back delivery is not counted
    assert_error(await ack(client, first["id"], lease_token=first["lease_token"]), 409, "conflict")
    await lose_lease(clock, service, LEASE_MS - 1)
    assert await state_of(client, first["id"]) == "active"
