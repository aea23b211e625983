"""Alerts on both stores, on the manual clock: each rule fires once per condition and resolves
when it clears; a burst after a quiet day fires one spike alert, not one per dead letter; the
aggregate rule fires on the third dead letter of one key; thresholds per tenant; tenants kept
apart; acknowledging over HTTP (audited, announced, 409 twice); the events in the stream, and a
webhook subscribed to `alert.*` receives the fire."""

from __future__ import annotations

import json
import logging
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import httpx
import pytest

from redrive.api.app import create_app
from redrive.domain.alerts import BASELINE_MS, SPIKE_WINDOW_MS, Alert, AlertQuery, parse_thresholds
from redrive.domain.audit import Action, AuditQuery
from redrive.domain.caller import Caller, Role
from redrive.domain.webhooks import SubscriptionRequest
from redrive.maintenance.webhooks import DeliveryLoop
from redrive.ports import Store
from redrive.service.facade import Service
from redrive.service.runtime import Runtime
from tests.behaviour.ojs_http import assert_error, forbid_server_errors, retry_policy
from tests.support.callers import ACROSS_TENANTS
from tests.support.clock import ManualClock
from tests.support.options import service_options
from tests.support.receiver import Receiver

pytestmark = pytest.mark.anyio

ALERTS = "/ojs/v1/admin/alerts"
ACME = {"X-OJS-Tenant": "acme"}
GLOBEX = {"X-OJS-Tenant": "globex"}
MINUTE = 60_000


@pytest.fixture(autouse=True)
def no_server_errors(client: httpx.AsyncClient) -> None:
    forbid_server_errors(client)


async def die(
    client: httpx.AsyncClient,
    count: int = 1,
    job_type: str = "charge.card",
    queue: str = "billing",
    headers: dict[str, str] | None = None,
    meta: dict[str, Any] | None = None,
) -> list[str]:
    """`count` one-attempt jobs that each die once; their ids."""
    job: dict[str, Any] = {
        "type": job_type, "args": [1],
        "options": {"queue": queue, "retry": retry_policy(1, "dead_letter")},
    }  # fmt: skip
    if meta is not None:
        job["meta"] = meta
    made = await client.post("/ojs/v1/jobs/batch", json={"jobs": [job] * count}, headers=headers)
    assert made.status_code in (200, 201), made.text
    fetched = await client.post(
        "/ojs/v1/workers/fetch", json={"queues": [queue], "count": count}, headers=headers
    )
    ids = [found["id"] for found in fetched.json()["jobs"]]
    assert len(ids) == count, fetched.text
    error = {"code": "handler_error", "message": "card declined", "type": "Declined"}
    nacks = [{"job_id": job_id, "error": error} for job_id in ids]
    nacked = await client.post("/ojs/v1/workers/nack/batch", json={"nacks": nacks}, headers=headers)
    assert nacked.status_code == 200, nacked.text
    return ids


@asynccontextmanager
async def configured(
    store: Store, clock: ManualClock, thresholds: dict[str, Any]
) -> AsyncIterator[tuple[Service, httpx.AsyncClient]]:
    """A service with these alert thresholds, and a client of its app."""
    options = replace(service_options(), alerts=parse_thresholds(thresholds))
    service = Service(Runtime(store, clock=clock, options=options, rng=random.Random(3)))
    transport = httpx.ASGITransport(app=create_app(service))
    async with httpx.AsyncClient(transport=transport, base_url="http://redrive.test") as client:
        forbid_server_errors(client)
        yield service, client


async def evaluate(service: Service) -> None:
    assert await service.sweeper.evaluate_alerts() is not None


async def alerts(service: Service, rule: str | None = None) -> list[Alert]:
    found = await service.alerts.search(ACROSS_TENANTS, AlertQuery(limit=500))
    return [alert for alert in found if rule is None or alert.rule == rule]


async def event_types(
    client: httpx.AsyncClient, headers: dict[str, str] | None = None
) -> list[tuple[str, str]]:
    response = await client.get(
        "/ojs/v1/events", params={"types": "alert.fired,alert.acknowledged,alert.resolved"},
        headers=headers,
    )  # fmt: skip
    assert response.status_code == 200, response.text
    return [(event["type"], event["data"]["rule"]) for event in response.json()["events"]]


async def test_a_new_dead_letter_fires_one_info_alert_that_resolves_after_a_quiet_period(
    client: httpx.AsyncClient, service: Service, clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    caplog.set_level(logging.INFO, logger="redrive.alerts")
    await evaluate(service)
    assert await alerts(service) == []
    await die(client)
    await evaluate(service)
    [fired] = await alerts(service, "new_dead_letter")
    assert (fired.severity, fired.state, fired.queue, fired.key, fired.count) == (
        "info", "firing", "billing", "billing", 1
    )  # fmt: skip
    clock.advance(MINUTE)
    await die(client)
    await evaluate(service)
    [still] = await alerts(service, "new_dead_letter")
    assert (still.id, still.state, still.count) == (fired.id, "firing", 2)
    assert still.last_fired_at == clock.now_ms()
    clock.advance(14 * MINUTE)
    await evaluate(service)
    assert (await alerts(service, "new_dead_letter"))[0].state == "firing"
    clock.advance(2 * MINUTE)  # 15 minutes without a new dead letter
    await evaluate(service)
    [resolved] = await alerts(service, "new_dead_letter")
    assert (resolved.id, resolved.state, resolved.resolved_at) == (
        fired.id, "resolved", clock.now_ms()
    )  # fmt: skip
    assert await event_types(client) == [
        ("alert.fired", "new_dead_letter"), ("alert.resolved", "new_dead_letter")
    ]  # fmt: skip
    logged = [(r.alert["event"], r.alert["id"]) for r in caplog.records if hasattr(r, "alert")]
    assert logged == [("fired", fired.id), ("resolved", fired.id)]
    await die(client)  # a new condition: a new alert
    await evaluate(service)
    states = sorted(alert.state for alert in await alerts(service, "new_dead_letter"))
    assert states == ["firing", "resolved"]


async def test_the_type_count_rule_fires_at_n_plus_one_and_resolves_under_it(
    client: httpx.AsyncClient, service: Service
) -> None:
    ids = await die(client, 10)
    await die(client, 10, job_type="other.type")
    await evaluate(service)
    assert await alerts(service, "type_count") == []
    await die(client)
    await evaluate(service)
    [fired] = await alerts(service, "type_count")
    assert (fired.severity, fired.key, fired.queue, fired.count) == (
        "warning", "charge.card", "billing", 11
    )  # fmt: skip
    await evaluate(service)
    assert len(await alerts(service, "type_count")) == 1
    retried = await client.post(f"/ojs/v1/dead-letter/{ids[0]}/retry")
    assert retried.status_code == 200, retried.text
    await evaluate(service)
    [resolved] = await alerts(service, "type_count")
    assert (resolved.id, resolved.state) == (fired.id, "resolved")


async def test_a_burst_after_a_quiet_day_fires_one_critical_spike_alert(
    client: httpx.AsyncClient, service: Service, clock: ManualClock
) -> None:
    await die(client, queue="orders")  # one dead letter in the previous day
    clock.advance(BASELINE_MS)
    await die(client)  # one dead letter after a quiet night is no spike
    await evaluate(service)
    assert await alerts(service, "spike") == []
    for _ in range(10):  # 200 dead letters within a minute, evaluated as they come
        await die(client, 20, job_type="mail.send")
        clock.advance(5_000)
        await evaluate(service)
    [spike] = await alerts(service, "spike")
    assert (spike.severity, spike.state, spike.queue, spike.key) == (
        "critical", "firing", "billing", "billing"
    )  # fmt: skip
    assert spike.count == 201
    assert len(await alerts(service, "new_dead_letter")) == 1
    clock.advance(SPIKE_WINDOW_MS)  # the window passes
    await evaluate(service)
    [resolved] = await alerts(service, "spike")
    assert (resolved.id, resolved.state) == (spike.id, "resolved")
    fired = [kind for kind in await event_types(client) if kind == ("alert.fired", "spike")]
    assert fired == [("alert.fired", "spike")]


async def test_a_steady_rate_is_no_spike(store: Store, clock: ManualClock) -> None:
    """A queue that had as many in every window of the day before has no spike (a low minimum,
    so that the day before holds few rows)."""
    per_window, windows = 3, BASELINE_MS // SPIKE_WINDOW_MS
    async with configured(store, clock, {"spike_minimum": 2}) as (service, client):
        await die(client, per_window * windows // 2)
        clock.advance(BASELINE_MS // 2)
        await die(client, per_window * windows // 2)
        clock.advance(BASELINE_MS // 2)
        await die(client, per_window)
        await evaluate(service)
        assert await alerts(service, "spike") == []
        await die(client, per_window * 10)  # 33 in the window: more than 10 times 3
        await evaluate(service)
        assert len(await alerts(service, "spike")) == 1


async def test_the_aggregate_rule_fires_on_the_third_dead_letter_of_one_key(
    client: httpx.AsyncClient, service: Service
) -> None:
    order = {"aggregate_id": "order-42"}
    first = await die(client, meta=order)
    await die(client, meta={"aggregate_id": "order-7"})
    await die(client, meta=order)
    await evaluate(service)
    assert await alerts(service, "aggregate") == []
    await die(client, meta=order)
    await evaluate(service)
    await evaluate(service)
    [fired] = await alerts(service, "aggregate")
    assert (fired.severity, fired.key, fired.count, fired.state) == (
        "critical", "order-42", 3, "firing"
    )  # fmt: skip
    assert "meta.aggregate_id" in fired.message
    deleted = await client.delete(f"/ojs/v1/dead-letter/{first[0]}")
    assert deleted.status_code in (200, 204), deleted.text
    await evaluate(service)
    [resolved] = await alerts(service, "aggregate")
    assert resolved.state == "resolved"


async def test_thresholds_are_per_tenant_and_alerts_stay_in_their_tenant(
    store: Store, clock: ManualClock
) -> None:
    async with configured(store, clock, {"tenants": {"acme": {"type_count": 2}}}) as (
        service, client,
    ):  # fmt: skip
        await die(client, 3, headers=ACME)
        await die(client, 3, headers=GLOBEX)
        await evaluate(service)
        [acme] = await alerts(service, "type_count")
        assert (acme.tenant_id, acme.count) == ("acme", 3)
        listed = await client.get(ALERTS, headers=GLOBEX)
        assert {alert["rule"] for alert in listed.json()["alerts"]} == {"new_dead_letter"}
        assert {alert["tenant_id"] for alert in listed.json()["alerts"]} == {"globex"}
        other = await client.get(f"{ALERTS}/{acme.id}", headers=GLOBEX)
        assert_error(other, 404, "not_found")
        refused = await client.post(f"{ALERTS}/{acme.id}/acknowledge", headers=GLOBEX)
        assert_error(refused, 404, "not_found")
        assert (await service.alerts.get(ACROSS_TENANTS, acme.id)).state == "firing"


async def gauges(client: httpx.AsyncClient) -> list[str]:
    """The alert gauges' non-zero samples of /metrics."""
    text = (await client.get("/metrics")).text
    return [line for line in text.splitlines()
            if line.startswith("redrive_alerts_") and not line.endswith(" 0")]  # fmt: skip


async def test_acknowledging_over_http(client: httpx.AsyncClient, service: Service) -> None:
    await die(client)
    assert await gauges(client) == []
    await evaluate(service)
    [fired] = await alerts(service)
    assert await gauges(client) == [
        'redrive_alerts_firing{rule="new_dead_letter",severity="info"} 1'
    ]
    listed = await client.get(ALERTS, params={"state": "firing"})
    assert [alert["id"] for alert in listed.json()["alerts"]] == [fired.id]
    one = await client.get(f"{ALERTS}/{fired.id}")
    assert one.json()["alert"]["message"] == "1 new dead letter(s) in queue billing"
    acknowledged = await client.post(f"{ALERTS}/{fired.id}/acknowledge")
    assert acknowledged.status_code == 200, acknowledged.text
    assert acknowledged.json()["alert"]["state"] == "acknowledged"
    assert acknowledged.json()["alert"]["acknowledged_by"] is not None
    assert_error(await client.post(f"{ALERTS}/{fired.id}/acknowledge"), 409, "conflict")
    assert (await client.get(ALERTS, params={"state": "firing"})).json()["alerts"] == []
    opened = await client.get(ALERTS, params={"state": "open"})
    assert [alert["state"] for alert in opened.json()["alerts"]] == ["acknowledged"]
    await evaluate(service)  # still holding: stays acknowledged, not fired again
    assert [alert.state for alert in await alerts(service)] == ["acknowledged"]
    query = AuditQuery(action=Action.ALERT_ACKNOWLEDGE)
    records = await service.audit.list(ACROSS_TENANTS, query)
    assert [record.target_value()["alert_id"] for record in records] == [fired.id]
    assert ("alert.acknowledged", "new_dead_letter") in await event_types(client)
    assert await gauges(client) == [
        'redrive_alerts_acknowledged{rule="new_dead_letter",severity="info"} 1'
    ]


@pytest.mark.parametrize(
    "query", ["?state=bogus", "?limit=0", "?limit=x", "?colour=red", "?state=firing&state=resolved"]
)
async def test_bad_alert_queries_are_refused(client: httpx.AsyncClient, query: str) -> None:
    assert_error(await client.get(f"{ALERTS}{query}"), 400, "invalid_request")


async def test_an_acknowledgement_takes_no_fields(
    client: httpx.AsyncClient, service: Service
) -> None:
    await die(client)
    await evaluate(service)
    [fired] = await alerts(service)
    refused = await client.post(f"{ALERTS}/{fired.id}/acknowledge", json={"note": "x"})
    assert_error(refused, 400, "invalid_request")
    assert (await service.alerts.get(ACROSS_TENANTS, fired.id)).state == "firing"
    assert_error(await client.post(f"{ALERTS}/alr_missing/acknowledge"), 404, "not_found")


@pytest.fixture
async def delivery_loop(service: Service) -> AsyncIterator[DeliveryLoop]:
    loop = DeliveryLoop(service.webhooks)
    yield loop
    await loop.stop()


async def test_a_webhook_subscribed_to_alerts_receives_the_fire(
    client: httpx.AsyncClient, service: Service, delivery_loop: DeliveryLoop
) -> None:
    acme = Caller.for_tenant("acme", "test", Role.ADMIN)
    with Receiver() as receiver:
        await service.webhooks.create(acme, SubscriptionRequest(receiver.url, ("alert.*",), None))
        await die(client, headers=ACME)
        assert await delivery_loop.deliver_due() == []  # the dead letter itself: not wanted
        await evaluate(service)
        [record] = await delivery_loop.deliver_due()
        [got] = receiver.received
    assert record is not None and record.response_status == 200
    event = json.loads(got.body)
    assert (event["type"], event["data"]["rule"], event["data"]["severity"]) == (
        "alert.fired", "new_dead_letter", "info"
    )  # fmt: skip
    assert event["data"]["queue"] == "billing"
