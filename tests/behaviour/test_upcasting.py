"""Upcasters on redrive: a dead letter's payload brought up to its type's current schema version
(declarative and Python steps, in order), the original kept, dry runs, failures moving nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import httpx
import pytest

from redrive.api.app import create_app
from redrive.domain.upcasting import Payload, Upcasters, parse_declared
from redrive.ports import Store
from redrive.service.facade import Service
from redrive.service.runtime import Runtime
from tests.behaviour.ojs_http import (
    assert_error,
    explain_incidents,
    fetch,
    forbid_server_errors,
    nack,
    retry_policy,
)
from tests.support.callers import CALLER
from tests.support.clock import ManualClock
from tests.support.options import service_options

pytestmark = pytest.mark.anyio

# charge.card: v1 -> v2 renames meta.customer and gives args.0 a currency (configuration);
# v2 -> v3 nests the customer id the first step named (Python): it fails on a v1 payload, so
# the order shows.
DECLARED = parse_declared(
    {
        "upcasters": [
            {
                "type": "charge.card",
                "from": 1,
                "to": 2,
                "renames": {"meta.customer": "meta.customer_id"},
                "defaults": {"args.0.currency": "USD"},
            },
            {"type": "gappy.job", "from": 2, "to": 3, "defaults": {"meta.seen": True}},
        ]
    }
)
PYTHON = Upcasters()


@PYTHON.step("charge.card", 2)
def nest_customer(payload: Payload) -> Payload:
    meta = dict(payload.meta)
    meta["customer"] = {"id": meta.pop("customer_id")}
    payload.args[0]["amount_cents"] = payload.args[0].pop("amount") * 100
    return Payload(payload.args, meta)


@PYTHON.step("broken.job", 1)
def refuse(payload: Payload) -> Payload:
    raise KeyError("legacy_field")


UPCASTERS = DECLARED.merged(PYTHON)
V1_ARGS = [{"amount": 12}]
V1_META = {"customer": "cus_1"}


@pytest.fixture
def upcasting(store: Store, clock: ManualClock) -> Service:
    options = replace(service_options(), upcasters=UPCASTERS)
    return Service(Runtime(store, clock=clock, options=options))


@pytest.fixture
async def http(upcasting: Service) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(upcasting))
    async with httpx.AsyncClient(transport=transport, base_url="http://redrive.test") as client:
        forbid_server_errors(client)
        yield client


async def kill(
    client: httpx.AsyncClient,
    job_type: str = "charge.card",
    version: int | None = 1,
    args: list[Any] | None = None,
    meta: dict[str, Any] | None = None,
    queue: str = "pay",
) -> str:
    """A job of this version enqueued, fetched and failed once into the dead-letter queue."""
    body: dict[str, Any] = {
        "type": job_type,
        "args": V1_ARGS if args is None else args,
        "meta": V1_META if meta is None else meta,
        "options": {"queue": queue, "retry": retry_policy(1, "dead_letter")},
    }
    if version is not None:
        body["version"] = version
    response = await client.post("/ojs/v1/jobs", json=body)
    assert response.status_code == 201, response.text
    job_id = str(response.json()["job"]["id"])
    assert [job["id"] for job in await fetch(client, [queue])] == [job_id]
    assert (await nack(client, job_id, type="Boom")).json()["state"] == "discarded"
    return job_id


async def dead_ids(client: httpx.AsyncClient) -> list[str]:
    response = await client.get("/ojs/v1/dead-letter")
    return sorted(job["id"] for job in response.json()["jobs"])


async def original(service: Service, job_id: str) -> tuple[list[Any], dict[str, Any], object]:
    """The payload the job's (one) dead-letter episode keeps."""
    (episode,) = await service.dead_letters.episodes(CALLER, job_id)
    return episode.job.args, episode.job.meta, episode.job.extra.get("version")


V3_ARGS = [{"amount_cents": 1200, "currency": "USD"}]
V3_META = {"customer": {"id": "cus_1"}, "ojs.upcast_from_version": 1, "ojs.upcast_to_version": 3}


async def test_single_retry_applies_every_step_in_order_and_keeps_the_original(
    http: httpx.AsyncClient, upcasting: Service
) -> None:
    job_id = await kill(http)
    response = await http.post(f"/ojs/v1/dead-letter/{job_id}/retry")
    assert response.status_code == 200, response.text
    job = response.json()["job"]
    assert (job["version"], job["args"], job["meta"]) == (3, V3_ARGS, V3_META)
    stored = (await http.get(f"/ojs/v1/jobs/{job_id}")).json()["job"]
    assert (stored["state"], stored["version"], stored["args"]) == ("available", 3, V3_ARGS)
    assert await original(upcasting, job_id) == (V1_ARGS, V1_META, 1)


async def test_a_job_part_way_up_gets_only_the_steps_after_its_version(
    http: httpx.AsyncClient,
) -> None:
    job_id = await kill(http, version=2, args=[{"amount": 3}], meta={"customer_id": "cus_2"})
    job = (await http.post(f"/ojs/v1/dead-letter/{job_id}/retry")).json()["job"]
    assert (job["version"], job["args"]) == (3, [{"amount_cents": 300}])
    assert job["meta"]["customer"] == {"id": "cus_2"}
    assert job["meta"]["ojs.upcast_from_version"] == 2
    current = await kill(http, version=3, args=[{"x": 1}], meta={}, queue="later")
    job = (await http.post(f"/ojs/v1/dead-letter/{current}/retry")).json()["job"]
    assert (job["version"], job["args"], job["meta"]) == (3, [{"x": 1}], {})


async def test_a_job_without_a_version_is_version_one(http: httpx.AsyncClient) -> None:
    job_id = await kill(http, version=None)
    job = (await http.post(f"/ojs/v1/dead-letter/{job_id}/retry")).json()["job"]
    assert (job["version"], job["args"]) == (3, V3_ARGS)


async def test_single_retry_dry_run_shows_the_difference_and_moves_nothing(
    http: httpx.AsyncClient, upcasting: Service
) -> None:
    job_id = await kill(http)
    response = await http.post(f"/ojs/v1/dead-letter/{job_id}/retry?dry_run=true")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["dry_run"] is True
    assert body["job"]["version"] == 3
    upcast = body["upcast"]
    assert (upcast["from_version"], upcast["to_version"]) == (1, 3)
    assert upcast["upcasters"] == [
        "upcasters[0] (charge.card v1)",
        "tests.behaviour.test_upcasting.nest_customer",
    ]
    assert upcast["changes"] == [
        {"path": "args.0.amount", "before": 12},
        {"path": "args.0.amount_cents", "after": 1200},
        {"path": "args.0.currency", "after": "USD"},
        {"path": "meta.customer", "before": "cus_1"},
        {"path": "meta.customer.id", "after": "cus_1"},
        {"path": "meta.ojs.upcast_from_version", "after": 1},
        {"path": "meta.ojs.upcast_to_version", "after": 3},
        {"path": "version", "before": 1, "after": 3},
    ]
    assert await dead_ids(http) == [job_id]
    assert await original(upcasting, job_id) == (V1_ARGS, V1_META, 1)
    refused = await http.post(f"/ojs/v1/dead-letter/{job_id}/retry?dry=1")
    assert_error(refused, 400, "invalid_request")


async def test_bulk_retry_dry_run_then_retry_upcasts_every_match(
    http: httpx.AsyncClient, upcasting: Service
) -> None:
    first, second = await kill(http), await kill(http, version=3, args=[{"y": 2}], meta={})
    bulk = {"filter": {"type": "charge.card"}, "confirm": True}
    dry = (await http.post("/ojs/v1/dead-letter/retry", json={**bulk, "dry_run": True})).json()
    assert dry["matched"] == 2
    assert dry["errors"] == []
    # Only the job an upcast changes is listed.
    assert [(item["job_id"], item["to_version"]) for item in dry["upcasts"]] == [(first, 3)]
    assert {"path": "version", "before": 1, "after": 3} in dry["upcasts"][0]["changes"]
    assert await dead_ids(http) == sorted([first, second])

    refused = await http.post("/ojs/v1/dead-letter/retry", json=bulk)
    assert refused.status_code == 409, refused.text  # the redrive policy, checked after upcasts
    await explain_incidents(http)
    response = await http.post("/ojs/v1/dead-letter/retry", json=bulk)
    assert response.status_code == 200, response.text
    assert response.json()["retried"] == 2
    moved = (await http.get(f"/ojs/v1/jobs/{first}")).json()["job"]
    assert (moved["state"], moved["version"], moved["args"]) == ("available", 3, V3_ARGS)
    untouched = (await http.get(f"/ojs/v1/jobs/{second}")).json()["job"]
    assert (untouched["version"], untouched["args"], untouched["meta"]) == (3, [{"y": 2}], {})
    assert await original(upcasting, first) == (V1_ARGS, V1_META, 1)


async def test_a_failing_upcaster_moves_nothing_and_names_the_step(
    http: httpx.AsyncClient, upcasting: Service
) -> None:
    broken, fine = await kill(http, "broken.job"), await kill(http, "charge.card")
    error = assert_error(
        await http.post(f"/ojs/v1/dead-letter/{broken}/retry"), 422, "upcast_failed"
    )
    assert "broken.job v1->v2" in error["message"]
    assert "KeyError" in error["message"]
    assert error["details"]["job_id"] == broken

    bulk = {"filter": {"queue": "pay"}, "confirm": True}
    dry = (await http.post("/ojs/v1/dead-letter/retry", json={**bulk, "dry_run": True})).json()
    assert [(item["job_id"], item["code"]) for item in dry["errors"]] == [(broken, "upcast_failed")]
    assert_error(await http.post("/ojs/v1/dead-letter/retry", json=bulk), 422, "upcast_failed")
    assert await dead_ids(http) == sorted([broken, fine])
    assert (await http.get(f"/ojs/v1/jobs/{fine}")).json()["job"]["state"] == "discarded"
    assert await original(upcasting, broken) == (V1_ARGS, V1_META, 1)


async def test_a_missing_step_is_refused_naming_it(http: httpx.AsyncClient) -> None:
    job_id = await kill(http, "gappy.job")
    error = assert_error(
        await http.post(f"/ojs/v1/dead-letter/{job_id}/retry?dry_run=true"),
        422,
        "missing_upcaster",
    )
    assert "no upcaster for gappy.job v1->v2" in error["message"]
    assert error["details"] == {
        "job_id": job_id, "type": "gappy.job", "from_version": 1, "to_version": 2,
    }  # fmt: skip
    assert_error(await http.post(f"/ojs/v1/dead-letter/{job_id}/retry"), 422, "missing_upcaster")
    assert await dead_ids(http) == [job_id]
    at_two = await kill(http, "gappy.job", version=2, meta={}, queue="later")
    job = (await http.post(f"/ojs/v1/dead-letter/{at_two}/retry")).json()["job"]
    assert (job["version"], job["meta"]["seen"]) == (3, True)


async def test_replay_rules_upcast_and_leave_failing_upcasts_dead(
    http: httpx.AsyncClient, upcasting: Service, clock: ManualClock
) -> None:
    good, broken = await kill(http), await kill(http, "broken.job")
    rule = {"name": "pay-again", "filter": {"queue": "pay"}, "delay": "PT1S", "max_replays": 3}
    response = await http.post("/ojs/v1/dead-letter/rules", json=rule)
    assert response.status_code in (200, 201), response.text
    clock.advance(2_000)
    assert await upcasting.replay.replay_due() == {"pay-again": 1}
    replayed = (await http.get(f"/ojs/v1/jobs/{good}")).json()["job"]
    assert (replayed["version"], replayed["args"]) == (3, V3_ARGS)
    assert await dead_ids(http) == [broken]


async def test_the_version_is_checked_at_enqueue(http: httpx.AsyncClient) -> None:
    for version in (0, -1, "2", True, 1.5, 2**31):
        body: dict[str, Any] = {"type": "charge.card", "args": [], "version": version}
        error = assert_error(await http.post("/ojs/v1/jobs", json=body), 400, "invalid_request")
        assert error["details"]["field"] == "version"
