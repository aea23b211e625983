"""Webhook deliveries on both stores, to a real HTTP receiver on loopback: signed in the Standard
Webhooks form (checked by an independent implementation, and by the `standardwebhooks` package),
retried with backoff on 5xx, 408, 429, timeouts and refused connections, not retried on other
4xx, dead-lettered into redrive's own dead-letter queue when they give up, and sent again (the
same message) when that dead letter is redriven; two signatures while a secret rotates."""

from __future__ import annotations

import json
import logging
import random
from collections.abc import AsyncIterator
from dataclasses import replace

import httpx
import pytest
from standardwebhooks import Webhook

from redrive.api.app import create_app
from redrive.domain.caller import SYSTEM, Caller, Role
from redrive.domain.dead_letter import RetryOverride
from redrive.domain.envelope import read_envelope
from redrive.domain.listeners import WEBHOOK_QUEUE
from redrive.domain.webhook_delivery import (
    BACKOFF_COEFFICIENT,
    DeliveryQuery,
    DeliveryRecord,
    DeliveryStatus,
)
from redrive.domain.webhooks import SubscriptionChanges, SubscriptionRequest
from redrive.maintenance.webhooks import DeliveryLoop
from redrive.ports import Store
from redrive.service.facade import Service
from redrive.service.runtime import Runtime
from redrive.service.webhooks import CreatedSubscription
from tests.support.clock import ManualClock
from tests.support.options import TEST_DELIVERIES, service_options
from tests.support.receiver import STALL, Receiver, closed_port_url, signatures_of, verifies

pytestmark = pytest.mark.anyio

ACME = Caller.for_tenant("acme", "test", Role.ADMIN)
GLOBEX = Caller.for_tenant("globex", "test", Role.ADMIN)
HEADERS = {"X-OJS-Tenant": "acme"}
FIRST_RETRY_MS = TEST_DELIVERIES.first_retry_ms


@pytest.fixture
async def loop(service: Service) -> AsyncIterator[DeliveryLoop]:
    delivery_loop = DeliveryLoop(service.webhooks)
    yield delivery_loop
    await delivery_loop.stop()


async def subscribe(
    service: Service, url: str, events: tuple[str, ...] = ("job.enqueued",),
    secret: str | None = None, caller: Caller = ACME,
) -> CreatedSubscription:  # fmt: skip
    return await service.webhooks.create(caller, SubscriptionRequest(url, events, secret))


async def enqueue(client: httpx.AsyncClient, headers: dict[str, str] = HEADERS) -> str:
    made = await client.post(
        "/ojs/v1/jobs", json={"type": "mail.send", "args": [1]}, headers=headers
    )
    assert made.status_code == 201, made.text
    job_id: str = made.json()["job"]["id"]
    return job_id


async def log_of(service: Service, subscription_id: str) -> list[tuple[int, str, int | None]]:
    """(attempt, status, response status) of each logged attempt, oldest first."""
    query = DeliveryQuery(subscription_id=subscription_id, limit=100)
    records = await service.webhooks.deliveries(ACME, query)
    return [(r.attempt, r.status.value, r.response_status) for r in reversed(records)]


async def test_a_delivery_is_signed_and_carries_the_event(
    client: httpx.AsyncClient, service: Service, loop: DeliveryLoop, clock: ManualClock
) -> None:
    with Receiver() as receiver:
        made = await subscribe(service, receiver.url)
        job_id = await enqueue(client)
        [record] = await loop.deliver_due()
        [got] = receiver.received
    assert verifies(made.secret, got)
    assert not verifies("whsec_" + "A" * 44, got)
    assert got.headers["content-type"] == "application/json"
    assert got.headers["user-agent"].startswith("redrive-webhooks/")
    assert got.headers["webhook-timestamp"] == str(clock.now_ms() // 1000)
    assert got.headers["x-ojs-event-type"] == "job.enqueued"
    assert got.headers["x-ojs-subscription-id"] == made.subscription.id
    event = json.loads(got.body)
    assert (event["type"], event["subject"], event["specversion"]) == (
        "job.enqueued", job_id, "1.0"
    )  # fmt: skip
    assert event["id"].startswith("evt_") and event["data"]["queue"] == "default"
    assert record is not None
    assert (record.status, record.response_status, record.attempt) == (
        DeliveryStatus.DELIVERED, 200, 1
    )  # fmt: skip
    assert record.job_id == got.headers["webhook-id"] and record.event_id == event["id"]
    delivery = await service.jobs.get(ACME, record.job_id)
    assert (delivery.queue, delivery.state) == (WEBHOOK_QUEUE, "completed")
    assert await loop.deliver_due() == []  # delivered once, and its own events start nothing


async def test_the_standardwebhooks_package_verifies_a_delivery(store: Store) -> None:
    """On the real clock, so the package's five-minute window holds."""
    service = Service(Runtime(store, options=service_options(), rng=random.Random(5)))
    app = create_app(service)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://redrive.test"
    ) as client:
        with Receiver() as receiver:
            made = await subscribe(service, receiver.url)
            await enqueue(client)
            delivery_loop = DeliveryLoop(service.webhooks)
            await delivery_loop.deliver_due()
            await delivery_loop.stop()
            [got] = receiver.received
    payload = Webhook(made.secret).verify(got.body, got.headers)
    assert payload["type"] == "job.enqueued"


async def test_a_secret_not_in_whsec_form_signs_with_its_bytes(
    client: httpx.AsyncClient, service: Service, loop: DeliveryLoop
) -> None:
    with Receiver() as receiver:
        made = await subscribe(service, receiver.url, secret="whk_test_secret_001")
        await enqueue(client)
        await loop.deliver_due()
        [got] = receiver.received
    assert made.secret == "whk_test_secret_001"
    assert verifies("whk_test_secret_001", got)


async def test_5xx_408_429_and_timeouts_are_retried_with_growing_waits(
    clock: ManualClock, store: Store
) -> None:
    webhooks = replace(TEST_DELIVERIES, timeout_ms=500, max_attempts=5)
    options = replace(service_options(), webhooks=webhooks)
    patient = Service(Runtime(store, clock=clock, options=options, rng=random.Random(3)))
    loop = DeliveryLoop(patient.webhooks)
    with Receiver() as receiver:
        made = await subscribe(patient, receiver.url)
        receiver.answer(503, 408, 429, STALL)
        await patient.jobs.enqueue(ACME, read_envelope({"type": "mail.send", "args": []}))
        waits = []
        for _ in range(4):
            [record] = await loop.deliver_due()
            assert record is not None and record.status is DeliveryStatus.FAILED
            job = await patient.jobs.get(ACME, record.job_id)
            assert job.state == "retryable" and job.next_attempt_at is not None
            waits.append(job.next_attempt_at - clock.now_ms())
            assert await loop.deliver_due() == []  # not before its time
            clock.advance(waits[-1])
        [record] = await loop.deliver_due()
        await loop.stop()
        assert len(receiver.received) == 5
    assert record is not None and record.status is DeliveryStatus.DELIVERED
    assert len({got.headers["webhook-id"] for got in receiver.received}) == 1
    for attempt, wait in enumerate(waits, start=1):  # exponential, with jitter in [0.5, 1.5)
        base = FIRST_RETRY_MS * BACKOFF_COEFFICIENT ** (attempt - 1)
        assert 0.5 * base <= wait < 1.5 * base, (attempt, wait)
    log = await log_of(patient, made.subscription.id)
    assert log == [
        (1, "failed", 503), (2, "failed", 408), (3, "failed", 429), (4, "failed", None),
        (5, "delivered", 200),
    ]  # fmt: skip
    records = await patient.webhooks.deliveries(ACME, DeliveryQuery(limit=10))
    assert "no answer within 0.5 s" in (records[1].error or "")


@pytest.mark.parametrize("status", [400, 404, 410, 301])
async def test_a_4xx_or_a_redirect_is_not_retried_and_lands_in_the_dead_letter_queue(
    client: httpx.AsyncClient, service: Service, loop: DeliveryLoop, status: int
) -> None:
    with Receiver() as receiver:
        made = await subscribe(service, receiver.url)
        receiver.answer(status)
        await enqueue(client)
        [record] = await loop.deliver_due()
    assert record is not None and record.status is DeliveryStatus.DEAD
    dead, _ = await service.dead_letters.get(ACME, record.job_id)
    assert (dead.job.queue, dead.job.type, dead.error_type) == (
        WEBHOOK_QUEUE, "webhook.deliver", f"webhook.http_{status}"
    )  # fmt: skip
    assert dead.job.errors[-1]["retryable"] is False
    assert await log_of(service, made.subscription.id) == [(1, "dead", status)]


async def test_a_receiver_down_past_the_retries_makes_a_dead_letter_that_redrives(
    client: httpx.AsyncClient, service: Service, loop: DeliveryLoop, clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    caplog.set_level(logging.DEBUG)
    made = await subscribe(service, closed_port_url())
    await enqueue(client)
    for _ in range(TEST_DELIVERIES.max_attempts):
        [record] = await loop.deliver_due()
        clock.advance(86_400_000)
    assert record is not None and record.status is DeliveryStatus.DEAD
    dead, _ = await service.dead_letters.get(ACME, record.job_id)
    assert dead.error_type == "webhook.connection" and dead.reason == "max_attempts_exceeded"
    assert [entry[1] for entry in await log_of(service, made.subscription.id)] == [
        "failed", "failed", "dead"
    ]  # fmt: skip
    with Receiver() as receiver:  # the receiver is back: point the subscription at it, redrive
        await service.webhooks.update(
            ACME, made.subscription.id, SubscriptionChanges(url=receiver.url)
        )
        await service.dead_letters.retry(ACME, record.job_id, RetryOverride())
        [again] = await loop.deliver_due()
        [got] = receiver.received
    assert again is not None and again.status is DeliveryStatus.DELIVERED
    assert got.headers["webhook-id"] == record.job_id and verifies(made.secret, got)
    assert made.secret not in caplog.text
    own = "\n".join(
        record.getMessage() for record in caplog.records if record.name.startswith("redrive")
    )
    assert "failed" in own and "127.0.0.1" not in own  # redrive logs no URL (it may hold a token)


async def test_a_dead_delivery_is_redriven_only_as_it_was(
    client: httpx.AsyncClient, service: Service, loop: DeliveryLoop
) -> None:
    with Receiver() as receiver:
        await subscribe(service, receiver.url)
        receiver.answer(400)
        await enqueue(client)
        [record] = await loop.deliver_due()
    assert record is not None
    answered = await client.post(
        f"/ojs/v1/dead-letter/{record.job_id}/retry",
        json={"args": [{"subscription_id": "x", "event": {}}]},
        headers=HEADERS,
    )
    assert answered.status_code == 400, answered.text
    moved = await client.post(
        f"/ojs/v1/dead-letter/{record.job_id}/retry", json={"queue": "default"}, headers=HEADERS
    )
    assert moved.status_code == 400, moved.text
    dead, _ = await service.dead_letters.get(ACME, record.job_id)
    assert dead.status == "dead"


async def test_during_a_rotation_both_secrets_sign_until_the_overlap_ends(
    client: httpx.AsyncClient, service: Service, loop: DeliveryLoop, clock: ManualClock
) -> None:
    with Receiver() as receiver:
        made = await subscribe(service, receiver.url)
        rotated = await service.webhooks.rotate_secret(ACME, made.subscription.id, None)
        await enqueue(client)
        await loop.deliver_due()
        clock.advance(86_400_000)
        await enqueue(client)
        await loop.deliver_due()
        during, after = receiver.received
    assert len(signatures_of(during)) == 2
    assert verifies(made.secret, during) and verifies(rotated.secret, during)
    assert signatures_of(after) == signatures_of(after)[:1]
    assert verifies(rotated.secret, after) and not verifies(made.secret, after)


async def test_only_wanted_events_of_the_subscriptions_own_tenant_are_delivered(
    client: httpx.AsyncClient, service: Service, loop: DeliveryLoop
) -> None:
    with Receiver() as acme, Receiver() as globex, Receiver() as everything:
        await subscribe(service, acme.url, ("job.*",))
        await subscribe(service, globex.url, ("job.enqueued",), caller=GLOBEX)
        await subscribe(service, everything.url, ("*",))
        await subscribe(service, acme.url, ("dead_letter.added",))
        await enqueue(client)
        for _ in range(3):  # the deliveries' own lifecycle events start no more deliveries
            await loop.deliver_due()
    assert [json.loads(got.body)["type"] for got in acme.received] == ["job.enqueued"]
    assert [json.loads(got.body)["type"] for got in everything.received] == ["job.enqueued"]
    assert globex.received == []


async def test_an_inactive_or_deleted_subscription_gets_nothing(
    client: httpx.AsyncClient, service: Service, loop: DeliveryLoop
) -> None:
    with Receiver() as receiver:
        paused = await subscribe(service, receiver.url)
        gone = await subscribe(service, receiver.url)
        await enqueue(client)  # queued for both ...
        await service.webhooks.update(
            ACME, paused.subscription.id, SubscriptionChanges(active=False)
        )
        await service.webhooks.delete(ACME, gone.subscription.id)
        records = await loop.deliver_due()  # ... and sent to neither
        await enqueue(client)  # an inactive subscription is not even queued for
        assert await loop.deliver_due() == []
    assert receiver.received == []
    assert sorted(record.status.value for record in records if record is not None) == ["skipped"]
    assert await log_of(service, paused.subscription.id) == [(1, "skipped", None)]


async def test_the_delivery_log_pages_and_filters(
    client: httpx.AsyncClient, service: Service, loop: DeliveryLoop
) -> None:
    with Receiver() as receiver:
        made = await subscribe(service, receiver.url)
        receiver.answer(500, 200, 200)
        for _ in range(3):
            await enqueue(client)
        await loop.deliver_due()
    path = "/ojs/v1/webhooks/deliveries"
    first = (await client.get(path, params={"limit": "2"}, headers=HEADERS)).json()
    assert len(first["deliveries"]) == 2 and first["pagination"]["has_more"] is True
    rest = await client.get(
        path, params={"limit": "2", "cursor": first["pagination"]["next_cursor"]}, headers=HEADERS
    )
    seen = first["deliveries"] + rest.json()["deliveries"]
    assert len({item["id"] for item in seen}) == 3
    failed = await client.get(
        path, params={"status": "failed", "subscription_id": made.subscription.id}, headers=HEADERS
    )
    [only] = failed.json()["deliveries"]
    assert (only["response_status"], only["attempt"], only["error"]) == (
        500, 1, "the receiver answered HTTP 500"
    )  # fmt: skip
    other = await client.get(path, headers={"X-OJS-Tenant": "globex"})
    assert other.json()["deliveries"] == []


async def test_the_log_trim_takes_records_before_its_cut_off_up_to_its_limit(
    store: Store,
) -> None:
    """A trim deletes at most its limit of the records before its cut-off, oldest first, and
    never one at or after it."""
    times = [50, 10, 40, 20, 30]
    async with store.transaction(SYSTEM) as transaction:
        for index, time in enumerate(times):
            await transaction.add_delivery_record(
                DeliveryRecord(f"wd_{index}", "acme", "sub", f"job_{index}", f"evt_{index}",
                               "job.completed", 1, DeliveryStatus.DELIVERED, 200, 5, None, time)
            )  # fmt: skip
        assert await transaction.delete_delivery_records_before(45, 2) == 2
        left = await transaction.list_delivery_records(DeliveryQuery(limit=10))
        assert sorted(record.time for record in left) == [30, 40, 50]
        assert await transaction.delete_delivery_records_before(45, 10) == 2
        left = await transaction.list_delivery_records(DeliveryQuery(limit=10))
        assert [record.time for record in left] == [50]
