"""Legal holds (seed 003 §7.2): a dead letter held directly, through its incident or through a
filter survives prune, purge, delete and a retention change, shows its holds wherever it is read,
and is pruned normally once the hold is released."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from redrive.domain.audit import AuditQuery
from redrive.domain.caller import SYSTEM
from redrive.service.facade import Service
from tests.behaviour.ojs_http import assert_error, forbid_server_errors
from tests.behaviour.test_dead_letter_retention import (
    DAY,
    kill_labelled,
    labels,
    prune_now,
    put_policy,
)
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio
HOLDS = "/ojs/v1/admin/legal-holds"
DEAD_LETTERS = "/ojs/v1/dead-letter"


@pytest.fixture(autouse=True)
async def no_floor(client: httpx.AsyncClient) -> None:
    """Holds alone keep dead letters here: the retention floor is off, the count is 1."""
    forbid_server_errors(client)
    await put_policy(client, {"min_age": "P0D", "max_count": 1})


async def place(client: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    response = await client.post(HOLDS, json={"reason": "case 2026-17", **body})
    assert response.status_code == 201, response.text
    hold: dict[str, Any] = response.json()["legal_hold"]
    return hold


async def release(client: httpx.AsyncClient, hold_id: str) -> dict[str, Any]:
    response = await client.post(f"{HOLDS}/{hold_id}/release")
    assert response.status_code == 200, response.text
    hold: dict[str, Any] = response.json()["legal_hold"]
    return hold


async def survives_everything(
    client: httpx.AsyncClient, job_id: str, hold_id: str, held: int = 1
) -> None:
    """Prune by count and by age, a retention change, a purge and a delete all leave it (and
    the `held` dead letters the hold keeps in all)."""
    await prune_now(client)
    await put_policy(client, {"max_age": "PT1S", "max_count": 1})  # a retention change
    report = await prune_now(client)
    assert report["floor_holding"] == ({"*": held - 1} if held > 1 else {})
    purge = await client.request("DELETE", DEAD_LETTERS, params={"confirm": "true"})
    assert purge.status_code == 200, purge.text
    assert purge.json()["held"] == held
    deleted = await client.delete(f"{DEAD_LETTERS}/{job_id}")
    assert_error(deleted, 409, "legal_hold")
    assert deleted.json()["error"]["details"]["legal_holds"] == [hold_id]
    detail = (await client.get(f"{DEAD_LETTERS}/{job_id}")).json()
    document = detail.get("job", detail)
    assert (document["held"], document["legal_holds"]) == (True, [hold_id])


async def test_a_dead_letter_held_directly_survives_until_released_then_is_pruned(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    held = await kill_labelled(client, clock, "legal", "held")
    await kill_labelled(client, clock, "legal", "free")
    hold = await place(client, {"job_id": held})
    assert (hold["scope"], hold["job_id"], hold["created_by"], hold["active"]) == (
        "job", held, "api", True,
    )  # fmt: skip
    clock.advance(DAY)
    await survives_everything(client, held, hold["id"])
    assert await labels(client) == {"held"}  # the purge took the free one

    released = await release(client, hold["id"])
    assert (released["active"], released["released_by"]) == (False, "api")
    assert (await prune_now(client))["deleted"] == 1
    assert await labels(client) == set()
    assert_error(await client.post(f"{HOLDS}/{hold['id']}/release"), 404, "not_found")


async def test_an_incident_hold_keeps_its_dead_letters_and_those_entering_it_later(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    first = await kill_labelled(client, clock, "billing", "first", "CardDeclined")
    incident = (await client.get(f"{DEAD_LETTERS}/{first}")).json()
    incident_id = incident.get("job", incident)["incident_id"]
    hold = await place(client, {"incident_id": incident_id})
    later = await kill_labelled(client, clock, "billing", "later", "CardDeclined")
    await kill_labelled(client, clock, "billing", "other", "Timeout")  # another incident
    page = (await client.get(f"/ojs/v1/admin/incidents/{incident_id}")).json()
    assert {dead["id"]: dead["legal_holds"] for dead in page["dead_letters"]} == {
        first: [hold["id"]], later: [hold["id"]],
    }  # fmt: skip
    clock.advance(DAY)
    await prune_now(client)
    assert await labels(client) == {"first", "later"}
    assert_error(await client.delete(f"{DEAD_LETTERS}/{later}"), 409, "legal_hold")

    await release(client, hold["id"])
    assert (await prune_now(client))["deleted"] == 1  # max_count 1: the older one goes
    assert await labels(client) == {"later"}


async def test_a_filter_hold_keeps_matching_dead_letters_present_and_to_come(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    await kill_labelled(client, clock, "audit", "before")
    hold = await place(client, {"filter": {"queue": "audit", "error_type": "Boom"}})
    assert hold["filter"] == {"queue": "audit", "error_type": "Boom"}
    after = await kill_labelled(client, clock, "audit", "after")
    await kill_labelled(client, clock, "audit", "other-error", "Timeout")
    await kill_labelled(client, clock, "mail", "elsewhere")
    listed = (await client.get(f"{DEAD_LETTERS}?queue=audit")).json()["jobs"]
    assert {job["args"][0]: job["held"] for job in listed} == {
        "before": True, "after": True, "other-error": False,
    }  # fmt: skip
    clock.advance(DAY)
    await survives_everything(client, after, hold["id"], held=2)
    assert await labels(client) == {"before", "after"}

    await release(client, hold["id"])
    purge = await client.request("DELETE", DEAD_LETTERS, params={"confirm": "true"})
    assert (purge.json()["purged"], purge.json()["held"]) == (2, 0)


async def test_holds_are_listed_audited_and_released_ones_listed_on_request(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    job_id = await kill_labelled(client, clock, "legal", "one")
    kept = await place(client, {"job_id": job_id})
    gone = await place(client, {"filter": {"type": "legal.job"}})
    await release(client, gone["id"])
    active = (await client.get(HOLDS)).json()["legal_holds"]
    assert [hold["id"] for hold in active] == [kept["id"]]
    every = (await client.get(f"{HOLDS}?include_released=true")).json()["legal_holds"]
    assert {hold["id"] for hold in every} == {kept["id"], gone["id"]}
    assert (await client.get(f"{HOLDS}/{kept['id']}")).json()["legal_hold"] == kept
    records = await service.audit.list(SYSTEM, AuditQuery(limit=100))
    actions = [(record.action, json.loads(record.target)["id"]) for record in records
               if record.action.startswith("legal_hold.")]  # fmt: skip
    assert sorted(actions) == sorted([
        ("legal_hold.place", kept["id"]), ("legal_hold.place", gone["id"]),
        ("legal_hold.release", gone["id"]),
    ])  # fmt: skip


BAD_HOLDS = [
    pytest.param({"job_id": "x"}, "reason", id="no-reason"),
    pytest.param({"job_id": "x", "reason": " "}, "reason", id="blank-reason"),
    pytest.param({"reason": "r"}, "job_id", id="no-target"),
    pytest.param(
        {"job_id": "x", "incident_id": "inc_" + "0" * 24, "reason": "r"},
        "incident_id",
        id="two-targets",
    ),
    pytest.param({"incident_id": "inc_1", "reason": "r"}, "incident_id", id="bad-incident"),
    pytest.param({"filter": {}, "reason": "r"}, "filter", id="empty-filter"),
    pytest.param({"filter": {"since": "-PT1H"}, "reason": "r"}, "filter.since", id="filter-key"),
    pytest.param({"filter": {"queue": 5}, "reason": "r"}, "filter.queue", id="filter-type"),
    pytest.param(
        {"job_id": "x", "reason": "r", "created_by": "me"}, "created_by", id="author-is-never-input"
    ),
]


@pytest.mark.parametrize(("body", "field"), BAD_HOLDS)
async def test_a_bad_hold_request_is_refused_naming_the_field_and_places_nothing(
    client: httpx.AsyncClient, body: dict[str, Any], field: str
) -> None:
    response = await client.post(HOLDS, json=body)
    assert_error(response, 400, "invalid_request")
    assert response.json()["error"]["details"]["field"] == field
    assert (await client.get(f"{HOLDS}?include_released=true")).json()["legal_holds"] == []


async def test_holding_what_is_not_there_is_404(client: httpx.AsyncClient) -> None:
    assert_error(await client.post(HOLDS, json={"job_id": "nope", "reason": "r"}), 404, "not_found")
    missing = {"incident_id": "inc_" + "a" * 24, "reason": "r"}
    assert_error(await client.post(HOLDS, json=missing), 404, "not_found")
    assert_error(await client.get(f"{HOLDS}/hold_nope"), 404, "not_found")
    assert_error(await client.get(f"{HOLDS}?include_released=maybe"), 400, "invalid_request")
    assert (await client.get(HOLDS)).json()["legal_holds"] == []
