"""Redrive tasks over HTTP on both stores: start by filter or incident, the 409 naming the
running task, list, read, pause/resume/cancel, strict bodies, and bulk retry's 202 past a burst."""

from __future__ import annotations

import httpx
import pytest

from redrive.api.worker_requests import batch_items, each_parsed, fetch_request, nack_request
from redrive.service.facade import Service
from tests.behaviour.ojs_http import assert_error
from tests.behaviour.test_redrive_tasks import ERROR, kill, redrive_incident, tick
from tests.support.callers import CALLER
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio
REDRIVES = "/ojs/v1/dead-letter/redrives"


async def test_a_task_over_http_from_start_to_end(
    client: httpx.AsyncClient, service: Service, clock: ManualClock
) -> None:
    ids = await kill(service, 12)
    incident = (await client.get(f"/ojs/v1/dead-letter/{ids[0]}")).json()["job"]["incident_id"]
    started = await client.post(REDRIVES, json={"incident": incident, "limit": 10})
    assert started.status_code == 201, started.text
    task = started.json()["task"]
    assert started.headers["location"] == f"{REDRIVES}/{task['id']}" == task["href"]
    assert (task["state"], task["incident_id"], task["rate_per_minute"]) == (
        "running",
        incident,
        100,
    )
    assert task["counts"] == {"to_move": 10, "moved": 0, "skipped": 0, "pending": 10,
                              "succeeded": 0, "dead_again": 0, "failed": 0}  # fmt: skip
    assert task["failure"] is None
    busy = await client.post(REDRIVES, json={"filter": {"queue": "billing"}})
    error = assert_error(busy, 409, "conflict")
    assert error["details"]["task_id"] == task["id"] and task["id"] in error["message"]

    paused = await client.post(f"{REDRIVES}/{task['id']}/pause")
    assert paused.json()["task"]["state"] == "paused"
    assert_error(await client.post(f"{REDRIVES}/{task['id']}/pause"), 409, "conflict")
    await tick(service, clock, 30)
    assert (await client.get(f"{REDRIVES}/{task['id']}")).json()["task"]["counts"]["moved"] == 0
    assert (await client.post(f"{REDRIVES}/{task['id']}/resume")).status_code == 200
    await tick(service, clock, 7)
    shown = (await client.get(f"{REDRIVES}/{task['id']}")).json()
    assert (shown["task"]["state"], shown["task"]["counts"]["moved"]) == ("completed", 10)
    assert shown["dead_again"] == [] and shown["task"]["success_rate"] is None
    assert_error(await client.post(f"{REDRIVES}/{task['id']}/cancel"), 409, "conflict")

    listed = (await client.get(REDRIVES, params={"state": "completed"})).json()["tasks"]
    assert [item["id"] for item in listed] == [task["id"]]
    assert (await client.get(REDRIVES, params={"state": "running"})).json()["tasks"] == []
    again = await client.post(REDRIVES, json={"filter": {"queue": "billing"}})
    assert again.status_code == 201 and again.json()["task"]["counts"]["to_move"] == 2
    cancelled = await client.post(f"{REDRIVES}/{again.json()['task']['id']}/cancel")
    assert cancelled.json()["task"]["state"] == "cancelled"


async def test_reading_a_task_names_the_redriven_jobs_that_died_again(
    client: httpx.AsyncClient, service: Service, clock: ManualClock
) -> None:
    task_id, incident_id = await redrive_incident(service, clock, 3)
    fetched = await service.workers.fetch(
        CALLER, fetch_request({"queues": ["billing"], "count": 10})
    )
    assert len(fetched) == 3  # each job the task requeued in place carries its id
    nacks = [
        {"job_id": job.id, "lease_token": job.lease_token, "error": ERROR} for job in fetched[:2]
    ]
    await service.workers.nack_many(
        CALLER, each_parsed(batch_items({"nacks": nacks}, "nacks"), nack_request)
    )
    shown = (await client.get(f"{REDRIVES}/{task_id}")).json()
    assert shown["task"]["counts"]["dead_again"] == 2
    assert sorted(item["job_id"] for item in shown["dead_again"]) == sorted(
        job.id for job in fetched[:2]
    )
    assert {item["died_incident_id"] for item in shown["dead_again"]} == {incident_id}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"filter": {"queue": "billing"}, "rate": 5}, "rate"),
        ({"filter": {"queue": 7}}, "queue"),
        ({"filter": {"queue": "billing"}, "rate_per_minute": "fast"}, "rate_per_minute"),
        ({"filter": {"queue": "billing"}, "rate_per_minute": 500}, "critical"),
        ({"filter": {"queue": "billing"}, "critical": 1}, "critical"),
        ({"incident": "nope"}, "incident"),
        ({}, "filter"),
    ],
)
async def test_bad_bodies_are_refused_and_start_nothing(
    client: httpx.AsyncClient, service: Service, body: object, field: str
) -> None:
    await kill(service, 3)
    error = assert_error(await client.post(REDRIVES, json=body), 400, "invalid_request")
    assert str(error["details"]["field"]).endswith(field)
    assert (await client.get(REDRIVES)).json()["tasks"] == []


async def test_unknown_and_foreign_tasks_are_not_found(client: httpx.AsyncClient) -> None:
    assert_error(await client.get(f"{REDRIVES}/rdt_nope"), 404, "not_found")
    assert_error(await client.post(f"{REDRIVES}/rdt_nope/cancel"), 404, "not_found")
    assert_error(await client.get(REDRIVES, params={"state": "lost"}), 400, "invalid_request")


@pytest.mark.parametrize("path", ["/ojs/v1/dead-letter/retry", "/ojs/v1/admin/jobs/bulk/retry"])
async def test_bulk_retry_past_a_burst_answers_202_with_the_task(
    client: httpx.AsyncClient, service: Service, path: str
) -> None:
    await kill(service, 101)
    body = {"filter": {"queue": "billing"}, "confirm": True}
    accepted = await client.post(path, json=body)
    assert accepted.status_code == 202, accepted.text
    document = accepted.json()
    assert (document["paced"], document["matched"], document["retried"]) == (True, 101, 0)
    assert document["follow"] == f"{REDRIVES}/{document['task']['id']}"
    assert accepted.headers["location"] == document["follow"]
    shown = (await client.get(document["follow"])).json()["task"]
    assert (shown["state"], shown["counts"]["to_move"]) == ("running", 101)
    # Up to a burst moves within the request, as always (the task skips what it finds moved).
    small = await client.post("/ojs/v1/admin/dead-letter/retry", json={**body, "limit": 100})
    assert small.status_code == 200 and small.json()["retried"] == 100
