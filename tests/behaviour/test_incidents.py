"""Incidents on both stores: dead letters grouped by fingerprint, the counts kept as dead letters
come and go, state changes and regressions, their events and audit records, tenants, keyset
pages, bad input, custom fingerprints, the backfill of older dead letters, and concurrent
entries into one incident on PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import psycopg
import pytest

from redrive.api.app import create_app
from redrive.api.worker_requests import fetch_request, nack_request
from redrive.domain.audit import AuditQuery
from redrive.domain.fingerprint import Fingerprinter, parse_custom_keys
from redrive.domain.incident import Transition
from redrive.ports import Store
from redrive.service.facade import Service
from redrive.service.runtime import Runtime, ServiceOptions
from redrive.store.archive import FileArchive
from redrive.store.postgres.store import PostgresStore
from redrive.store.sqlite.store import SqliteStore
from tests.behaviour.ojs_http import (
    COUNT_EVENTS,
    assert_error,
    count_rows,
    enqueue,
    explain_incidents,
    fetch,
    fetch_one,
    forbid_server_errors,
    nack,
    retry_policy,
)
from tests.behaviour.test_dead_letter_concurrency import table
from tests.support.callers import ACROSS_TENANTS, CALLER
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio

INCIDENTS = "/ojs/v1/admin/incidents"
TIMEOUT = "stripe API timed out after 30s (POST /v1/charges)"
BACKTRACE = [
    "Traceback (most recent call last):",
    '  File "/srv/app/billing/tasks.py", line 42, in charge',
    "    client.charge(card)",
    '  File "/srv/app/billing/stripe.py", line 10, in charge',
    "    return self.post(body)",
    '  File "/usr/lib/python3.11/site-packages/httpx/_client.py", line 900, in post',
    "    raise TimeoutError",
    "TimeoutError: stripe API timed out after 30s",
]


@pytest.fixture(autouse=True)
def no_server_errors(client: httpx.AsyncClient) -> None:
    forbid_server_errors(client)


async def die(
    client: httpx.AsyncClient,
    message: str = TIMEOUT,
    error_type: str = "TimeoutError",
    job_type: str = "charge.card",
    queue: str = "billing",
    headers: dict[str, str] | None = None,
    **more: Any,
) -> str:
    """A one-attempt job of `job_type` that dies once with this error; its id."""
    job = await enqueue(
        client, job_type, [1], headers=headers, queue=queue,
        retry=retry_policy(1, "dead_letter"), meta=more.pop("meta", None),
    )  # fmt: skip
    await fetch_one(client, queue, headers=headers)
    failed = await nack(
        client, job["id"], type=error_type, message=message, headers=headers, **more
    )
    assert failed.json()["state"] == "discarded", failed.text
    return str(job["id"])


async def listed(
    client: httpx.AsyncClient, query: str = "", headers: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    response = await client.get(f"{INCIDENTS}{query}", headers=headers)
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["incidents"]
    return found


async def one(client: httpx.AsyncClient, incident_id: str) -> dict[str, Any]:
    response = await client.get(f"{INCIDENTS}/{incident_id}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def incident_of(client: httpx.AsyncClient, job_id: str) -> str:
    response = await client.get(f"/ojs/v1/dead-letter/{job_id}")
    assert response.status_code == 200, response.text
    return str(response.json()["job"]["incident_id"])


async def counts(client: httpx.AsyncClient, incident_id: str) -> tuple[int, int]:
    found = (await one(client, incident_id))["incident"]
    return found["dead_count"], found["total_count"]


async def change(
    client: httpx.AsyncClient, incident_id: str, action: str, body: Any = None
) -> httpx.Response:
    return await client.post(f"{INCIDENTS}/{incident_id}/{action}", json=body)


async def event_types(client: httpx.AsyncClient) -> list[str]:
    response = await client.get("/ojs/v1/events", params={"types": "incident.opened,"
                                "incident.regressed,incident.resolved"})  # fmt: skip
    assert response.status_code == 200, response.text
    return [event["type"] for event in response.json()["events"]]


# --- grouping -----------------------------------------------------------------------------------


async def test_timeouts_of_varying_duration_group_and_other_errors_do_not(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    first = await die(client, TIMEOUT, details={"backtrace": BACKTRACE})
    clock.advance(1_000)
    second = await die(client, TIMEOUT.replace("30s", "31s"), details={"backtrace": BACKTRACE})
    clock.advance(1_000)
    third = await die(client, TIMEOUT.replace("30s", "45s"), queue="billing-slow",
                      details={"backtrace": BACKTRACE})  # fmt: skip
    declined = await die(client, "card_declined", "CardError")
    relay = await die(client, "relay refused", "CardError")
    clock.advance(1_000)
    other_type = await die(client, TIMEOUT, job_type="charge.refund")

    timeout = await incident_of(client, first)
    assert await incident_of(client, second) == timeout
    assert await incident_of(client, third) == timeout
    others = {await incident_of(client, job) for job in (declined, relay, other_type)}
    assert len(others) == 3 and timeout not in others

    body = await one(client, timeout)
    found = body["incident"]
    assert found["type"] == "charge.card"
    assert found["error_type"] == "TimeoutError"
    assert found["message"] == "stripe API timed out after <duration> (POST /v1/charges)"
    assert (found["dead_count"], found["total_count"], found["state"]) == (3, 3, "open")
    assert found["queues"] == ["billing", "billing-slow"]
    assert found["fingerprint_version"] == 1
    assert found["last_seen_at"] > found["first_seen_at"]
    dead = body["dead_letters"]
    assert [item["id"] for item in dead] == [third, second, first]  # newest first
    assert found["sample_dead_letter_id"] == dead[0]["dead_letter_id"]
    assert {item["fingerprint"] for item in dead} == {found["fingerprint"]}
    assert {item["incident_id"] for item in dead} == {timeout}

    by_count = await listed(client, "?sort=count")
    assert [item["dead_count"] for item in by_count] == [3, 1, 1, 1]
    assert by_count[0]["id"] == timeout
    newest = (await listed(client))[0]
    assert newest["id"] == await incident_of(client, other_type)


async def test_the_dead_letter_filter_finds_an_incidents_and_a_fingerprints_dead_letters(
    client: httpx.AsyncClient,
) -> None:
    card = await die(client)
    refund = await die(client, job_type="charge.refund")
    await die(client, "card_declined", "CardError")
    incident = await incident_of(client, card)
    response = await client.get("/ojs/v1/dead-letter", params={"incident": incident})
    assert [job["id"] for job in response.json()["jobs"]] == [card]
    fingerprint = (await one(client, incident))["incident"]["fingerprint"]
    response = await client.get("/ojs/v1/admin/dead-letter", params={"fingerprint": fingerprint})
    assert sorted(job["id"] for job in response.json()["items"]) == sorted([card, refund])
    history = (await client.get(f"/ojs/v1/dead-letter/{card}")).json()["job"]["episodes"]
    assert [(episode["incident_id"], episode["fingerprint"]) for episode in history] == [
        (incident, fingerprint)
    ]
    for query, field in (({"incident": "inc_nothex"}, "incident"),
                         ({"fingerprint": "abc"}, "fingerprint")):  # fmt: skip
        error = assert_error(await client.get("/ojs/v1/dead-letter", params=query), 400,
                             "invalid_request")  # fmt: skip
        assert error["details"]["field"] == field


async def test_a_bulk_retry_by_incident_moves_only_its_dead_letters(
    client: httpx.AsyncClient,
) -> None:
    timeouts = [await die(client) for _ in range(3)]
    declined = await die(client, "card_declined", "CardError")
    incident = await incident_of(client, timeouts[0])
    body = {"filter": {"incident": incident}, "confirm": True}
    refused = await client.post("/ojs/v1/dead-letter/retry", json=body)
    named = assert_error(refused, 409, "root_cause_required")["details"]["incidents"]
    assert [item["id"] for item in named] == [incident]
    assert await counts(client, incident) == (3, 3)
    await explain_incidents(client)
    result = (await client.post("/ojs/v1/dead-letter/retry", json=body)).json()
    assert result["succeeded"] == 3
    assert await counts(client, incident) == (0, 3)
    assert await counts(client, await incident_of(client, declined)) == (1, 1)


# --- counts as dead letters come and go ---------------------------------------------------------


async def test_now_dead_follows_retry_delete_bulk_retry_and_purge_while_total_stays(
    client: httpx.AsyncClient, service: Service
) -> None:
    jobs = [await die(client) for _ in range(6)]
    incident = await incident_of(client, jobs[0])
    assert await counts(client, incident) == (6, 6)

    assert (await client.post(f"/ojs/v1/dead-letter/{jobs[0]}/retry")).status_code == 200
    assert await counts(client, incident) == (5, 6)
    assert (await client.delete(f"/ojs/v1/dead-letter/{jobs[1]}")).status_code == 200
    assert await counts(client, incident) == (4, 6)
    assert (await service.dead_letters.retry_selected(CALLER, [jobs[2]])).moved == [jobs[2]]
    assert await counts(client, incident) == (3, 6)
    await explain_incidents(client)
    retried = await client.post(
        "/ojs/v1/dead-letter/retry",
        json={"filter": {"queue": "billing"}, "confirm": True, "limit": 1},
    )
    assert retried.json()["succeeded"] == 1
    assert await counts(client, incident) == (2, 6)
    purged = await client.request(
        "DELETE", "/ojs/v1/dead-letter", json={"filter": {"queue": "billing"}, "confirm": True}
    )
    assert purged.json()["purged"] == 2
    assert await counts(client, incident) == (0, 6)

    # The retried job dies again the same way: back in the incident, counted as a new episode.
    await fetch(client, ["billing"], count=10)
    again = await nack(client, jobs[0], type="TimeoutError", message=TIMEOUT)
    assert again.json()["state"] == "discarded"
    assert await counts(client, incident) == (1, 7)
    stored = f"SELECT dead_count, total_count FROM incidents WHERE id = '{incident}'"
    assert await table(service, stored) == [(1, 7)]


async def test_a_replay_rule_by_incident_takes_its_dead_letters_off_the_count(
    client: httpx.AsyncClient, service: Service
) -> None:
    incident = await incident_of(client, await die(client))
    await die(client)
    other = await incident_of(client, await die(client, "card_declined", "CardError"))
    rule = {"name": "timeouts", "filter": {"incident": incident}, "delay": "PT0S"}
    assert (await client.post("/ojs/v1/dead-letter/rules", json=rule)).status_code == 201
    assert (await service.sweeper.sweep())["replay"] == 2
    assert await counts(client, incident) == (0, 2)
    assert await counts(client, other) == (1, 1)


@pytest.fixture
def archiving_service(store: Store, clock: ManualClock, tmp_path: Path) -> Service:
    runtime = Runtime(
        store,
        clock=clock,
        options=ServiceOptions(test_hooks=True),
        rng=random.Random(8),
        archive=FileArchive(str(tmp_path / "archive")),
    )
    return Service(runtime)


async def test_pruning_takes_dead_letters_off_and_restoring_an_archive_puts_them_back(
    archiving_service: Service, clock: ManualClock
) -> None:
    transport = httpx.ASGITransport(app=create_app(archiving_service, max_body_bytes=64_000))
    async with httpx.AsyncClient(transport=transport, base_url="http://prune.test") as client:
        forbid_server_errors(client)
        jobs = [await die(client) for _ in range(3)]
        incident = await incident_of(client, jobs[0])
        policy = {"max_count": 1, "pruning_policy": "archive"}
        assert (await client.put("/ojs/v1/dead-letter/retention", json=policy)).status_code == 200
        report = (await client.post("/ojs/v1/dead-letter/prune", json={"confirm": True})).json()
        assert report["archived"] == 2
        assert await counts(client, incident) == (1, 3)

        restored = await client.post(
            f"/ojs/v1/dead-letter/archives/{report['archives'][0]}/restore"
        )
        assert restored.json()["restored"] == 2
        assert await counts(client, incident) == (3, 3)
        assert {await incident_of(client, job) for job in jobs} == {incident}

        policy = {"max_count": 10, "max_age": "P1D", "pruning_policy": "delete", "min_age": "P0D"}
        assert (await client.put("/ojs/v1/dead-letter/retention", json=policy)).status_code == 200
        clock.advance(2 * 86_400_000)
        report = (await client.post("/ojs/v1/dead-letter/prune", json={"confirm": True})).json()
        assert report["deleted"] == 3
        assert await counts(client, incident) == (0, 3)


# --- states, regressions and events -------------------------------------------------------------


async def test_resolve_then_a_new_dead_letter_regresses_the_incident_once(
    client: httpx.AsyncClient, service: Service, clock: ManualClock
) -> None:
    incident = await incident_of(client, await die(client))
    assert await event_types(client) == ["incident.opened"]
    await die(client)
    assert await event_types(client) == ["incident.opened"]

    acknowledged = (await change(client, incident, "acknowledge")).json()["incident"]
    assert (acknowledged["state"], acknowledged["state_changed_by"]) == ("acknowledged", "api")
    clock.advance(1_000)
    resolved = await change(client, incident, "resolve", {"fix_reference": " PR #123 "})
    assert resolved.status_code == 200, resolved.text
    found = resolved.json()["incident"]
    assert (found["state"], found["fix_reference"]) == ("resolved", "PR #123")
    assert await event_types(client) == ["incident.opened", "incident.resolved"]

    clock.advance(1_000)
    again = await die(client)
    found = (await one(client, incident))["incident"]
    episode = (await client.get(f"/ojs/v1/dead-letter/{again}")).json()["job"]["dead_letter_id"]
    assert found["state"] == "regressed"
    assert found["state_changed_by"] == f"dead_letter:{episode}"
    assert found["fix_reference"] == "PR #123"  # the fix that did not hold
    assert (found["dead_count"], found["total_count"]) == (3, 3)
    await die(client)
    types = ["incident.opened", "incident.resolved", "incident.regressed"]
    assert await event_types(client) == types
    events = (await client.get("/ojs/v1/events", params={"types": "incident.regressed"})).json()
    [regressed] = events["events"]
    assert regressed["subject"] == incident
    assert regressed["data"]["incident_id"] == incident
    assert regressed["data"]["fix_reference"] == "PR #123"

    records = await service.audit.list(CALLER, AuditQuery())
    actions = [record.action for record in records if record.action.startswith("incident.")]
    assert actions == ["incident.resolve", "incident.acknowledge"]


async def test_each_change_starts_only_from_the_states_it_names(
    client: httpx.AsyncClient,
) -> None:
    incident = await incident_of(client, await die(client))
    steps = [
        ("reopen", None, 409, "open"),
        ("ignore", None, 200, "ignored"),
        ("acknowledge", None, 409, "ignored"),
        ("resolve", {"fix_reference": "deploy 42"}, 409, "ignored"),
        ("reopen", None, 200, "open"),
        ("resolve", {"fix_reference": "deploy 42"}, 200, "resolved"),
        ("resolve", {"fix_reference": "deploy 43"}, 409, "resolved"),
        ("acknowledge", None, 409, "resolved"),
        ("reopen", {}, 200, "open"),
        ("acknowledge", {}, 200, "acknowledged"),
        ("acknowledge", None, 409, "acknowledged"),
        ("reopen", None, 200, "open"),
    ]
    for action, body, status, state in steps:
        response = await change(client, incident, action, body)
        assert response.status_code == status, (action, response.text)
        if status == 409:
            assert_error(response, 409, "conflict")
        assert (await one(client, incident))["incident"]["state"] == state, action


@pytest.mark.parametrize(
    ("action", "body", "field"),
    [
        ("resolve", None, "fix_reference"),
        ("resolve", {}, "fix_reference"),
        ("resolve", {"fix_reference": ""}, "fix_reference"),
        ("resolve", {"fix_reference": "   "}, "fix_reference"),
        ("resolve", {"fix_reference": 123}, "fix_reference"),
        ("resolve", {"fix_reference": "x" * 501}, "fix_reference"),
        ("resolve", {"fix_reference": "PR 1", "note": "x"}, "note"),
        ("resolve", ["PR 1"], "body"),
        ("acknowledge", {"fix_reference": "PR 1"}, "fix_reference"),
        ("ignore", "yes", "body"),
    ],
)
async def test_bad_state_change_bodies_are_refused_and_change_nothing(
    client: httpx.AsyncClient, action: str, body: Any, field: str
) -> None:
    incident = await incident_of(client, await die(client))
    error = assert_error(await change(client, incident, action, body), 400, "invalid_request")
    assert error["details"]["field"] == field
    assert (await one(client, incident))["incident"]["state"] == "open"
    assert await event_types(client) == ["incident.opened"]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("?state=closed", "state"),
        ("?state=open,shut", "state"),
        ("?sort=oldest", "sort"),
        ("?limit=0", "limit"),
        ("?limit=501", "limit"),
        ("?limit=ten", "limit"),
        ("?cursor=bm90IGEgY3Vyc29y", "cursor"),
        ("?colour=red", "colour"),
        ("?state=open&state=resolved", "state"),
        ("?type=" + "x" * 300, "type"),
    ],
)
async def test_bad_list_queries_are_refused(
    client: httpx.AsyncClient, query: str, field: str
) -> None:
    error = assert_error(await client.get(f"{INCIDENTS}{query}"), 400, "invalid_request")
    assert error["details"]["field"] == field


async def test_an_unknown_incident_is_not_found(client: httpx.AsyncClient) -> None:
    missing = "inc_" + "0" * 24
    assert_error(await client.get(f"{INCIDENTS}/{missing}"), 404, "not_found")
    assert_error(await change(client, missing, "acknowledge"), 404, "not_found")
    assert_error(await client.get(f"{INCIDENTS}/not-an-id"), 404, "not_found")


# --- lists --------------------------------------------------------------------------------------


async def test_filters_and_keyset_pages_in_both_orders(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    made: dict[str, str] = {}
    for index in range(5):
        clock.advance(1_000)
        job_type = f"report.part{index}"
        for _ in range(index + 1):
            made[job_type] = await die(client, job_type=job_type, queue=f"q{index % 2}")
    ids = {job_type: await incident_of(client, job) for job_type, job in made.items()}
    await change(client, ids["report.part0"], "resolve", {"fix_reference": "PR 9"})

    recent = [ids[f"report.part{index}"] for index in (4, 3, 2, 1, 0)]
    for sort, expected in (("recent", recent), ("count", recent)):
        pages, cursor = [], None
        while True:
            query = f"?sort={sort}&limit=2" + (f"&cursor={cursor}" if cursor else "")
            response = (await client.get(f"{INCIDENTS}{query}")).json()
            pages.append([item["id"] for item in response["incidents"]])
            cursor = response["pagination"].get("next_cursor")
            if not cursor:
                break
        assert [item for page in pages for item in page] == expected
        assert [len(page) for page in pages] == [2, 2, 1]

    assert [i["id"] for i in await listed(client, "?queue=q0")] == [recent[0], recent[2], recent[4]]
    assert [i["id"] for i in await listed(client, "?state=resolved")] == [ids["report.part0"]]
    assert len(await listed(client, "?state=open,resolved")) == 5
    assert [i["id"] for i in await listed(client, "?type=report.part3")] == [ids["report.part3"]]
    assert len(await listed(client, "?type=report.*")) == 5
    assert await listed(client, "?error_type=Nope") == []
    cursor = (await client.get(f"{INCIDENTS}?sort=count&limit=1")).json()["pagination"]
    error = assert_error(
        await client.get(f"{INCIDENTS}?sort=recent&cursor={cursor['next_cursor']}"), 400,
        "invalid_request",
    )  # fmt: skip
    assert error["details"]["field"] == "cursor"


# --- tenants ------------------------------------------------------------------------------------


async def test_another_tenants_incident_is_not_found_and_not_listed(
    client: httpx.AsyncClient,
) -> None:
    acme, globex = {"X-OJS-Tenant": "acme"}, {"X-OJS-Tenant": "globex"}
    ours = await incident_of_tenant(client, await die(client, headers=acme), acme)
    theirs = await incident_of_tenant(client, await die(client, headers=globex), globex)
    assert ours != theirs  # the same error in two tenants: two incidents
    assert [item["id"] for item in await listed(client, headers=acme)] == [ours]
    assert_error(await client.get(f"{INCIDENTS}/{theirs}", headers=acme), 404, "not_found")
    for action in ("acknowledge", "ignore", "reopen"):
        response = await client.post(f"{INCIDENTS}/{theirs}/{action}", headers=acme)
        assert_error(response, 404, "not_found")
    body = {"fix_reference": "PR 1"}
    response = await client.post(f"{INCIDENTS}/{theirs}/resolve", json=body, headers=acme)
    assert_error(response, 404, "not_found")
    theirs_now = (await client.get(f"{INCIDENTS}/{theirs}", headers=globex)).json()["incident"]
    assert theirs_now["state"] == "open"


async def test_a_change_across_tenants_is_audited_in_the_incidents_tenant(
    client: httpx.AsyncClient, service: Service
) -> None:
    globex = {"X-OJS-Tenant": "globex"}
    incident = await incident_of_tenant(client, await die(client, headers=globex), globex)
    changed = await service.incidents.change(ACROSS_TENANTS, incident, Transition.ACKNOWLEDGE)
    assert (changed.tenant_id, changed.state) == ("globex", "acknowledged")
    [record] = [
        record
        for record in await service.audit.list(ACROSS_TENANTS, AuditQuery())
        if record.action == "incident.acknowledge"
    ]
    assert (record.tenant_id, record.target_value()["incident_id"]) == ("globex", incident)


async def incident_of_tenant(
    client: httpx.AsyncClient, job_id: str, headers: dict[str, str]
) -> str:
    response = await client.get(f"/ojs/v1/dead-letter/{job_id}", headers=headers)
    return str(response.json()["job"]["incident_id"])


# --- custom fingerprints ------------------------------------------------------------------------


async def test_a_configured_key_groups_a_types_dead_letters_whatever_their_error(
    store: Store, clock: ManualClock
) -> None:
    keys = parse_custom_keys({"charge.card": "meta.aggregate_id"})
    options = ServiceOptions(test_hooks=True, fingerprinter=Fingerprinter(keys))
    service = Service(Runtime(store, clock=clock, options=options, rng=random.Random(5)))
    transport = httpx.ASGITransport(app=create_app(service, max_body_bytes=64_000))
    async with httpx.AsyncClient(transport=transport, base_url="http://keys.test") as client:
        forbid_server_errors(client)
        first = await die(client, "card_declined", "CardError", meta={"aggregate_id": "order-7"})
        second = await die(client, "relay refused", "SmtpError", meta={"aggregate_id": "order-7"})
        other = await die(client, "card_declined", "CardError", meta={"aggregate_id": "order-8"})
        unkeyed = await die(client, "card_declined", "CardError")
        unkeyed_again = await die(client, "card_declined", "CardError", meta={"aggregate_id": None})
        assert await incident_of(client, first) == await incident_of(client, second)
        assert await incident_of(client, other) != await incident_of(client, first)
        assert await incident_of(client, unkeyed) == await incident_of(client, unkeyed_again)
        assert await incident_of(client, unkeyed) not in {
            await incident_of(client, first),
            await incident_of(client, other),
        }
        # Another type fingerprints by its error: its own incident, as every type has.
        refund = await die(client, "card_declined", "CardError", job_type="charge.refund",
                           meta={"aggregate_id": "order-7"})  # fmt: skip
        refund_incident = (await one(client, await incident_of(client, refund)))["incident"]
        unkeyed_incident = (await one(client, await incident_of(client, unkeyed)))["incident"]
        assert refund_incident["fingerprint"] == unkeyed_incident["fingerprint"]
        assert refund_incident["id"] != unkeyed_incident["id"]


# --- the backfill of dead letters from before incidents -----------------------------------------


async def owner_run(service: Service, sql: str) -> None:
    """Change rows behind the service's back, as the tables' owner."""
    store = service.runtime.store
    if isinstance(store, SqliteStore):
        await store.call(lambda: store.connection.execute(sql))
        return
    assert isinstance(store, PostgresStore)
    async with await psycopg.AsyncConnection.connect(store.url, autocommit=True) as connection:
        await connection.execute(sql)


async def forget_incidents(service: Service, where: str = "true") -> None:
    """Make dead letters look as they did before migration 0009, with no incident (their
    snapshots, which carry the arrival indexes since migration 0028, too)."""
    await owner_run(service, "UPDATE dead_letter_snapshots SET incident_id = NULL WHERE id IN "
                    f"(SELECT id FROM dead_letters WHERE {where})")  # fmt: skip
    await owner_run(service, "UPDATE dead_letters SET fingerprint = NULL, "
                    f"fingerprint_version = NULL, incident_id = NULL WHERE {where}")  # fmt: skip
    await owner_run(service, "DELETE FROM incidents")


async def test_the_backfill_files_older_dead_letters_into_incidents_a_batch_at_a_time(
    client: httpx.AsyncClient, service: Service, clock: ManualClock
) -> None:
    jobs = [await die(client) for _ in range(5)]
    declined = await die(client, "card_declined", "CardError")
    assert (await client.post(f"/ojs/v1/dead-letter/{jobs[0]}/retry")).status_code == 200
    before = {job: await incident_of(client, job) for job in [*jobs[1:], declined]}
    timeout = before[jobs[1]]
    expected = {item["id"]: item for item in await listed(client)}
    await forget_incidents(service)
    assert await listed(client) == []
    events_before = await count_rows(service, COUNT_EVENTS)

    assert await service.incidents.backfill(limit=2) == 6
    assert await service.incidents.backfill(limit=2) == 0
    after = {job: await incident_of(client, job) for job in before}
    assert after == before
    found = {item["id"]: item for item in await listed(client)}
    assert set(found) == set(expected)
    assert (found[timeout]["dead_count"], found[timeout]["total_count"]) == (4, 5)
    for key in ("fingerprint", "message", "error_type", "queues", "first_seen_at", "last_seen_at"):
        assert found[timeout][key] == expected[timeout][key], key
    assert await count_rows(service, COUNT_EVENTS) == events_before


async def test_backfilled_dead_letters_count_in_their_incidents_trend(
    client: httpx.AsyncClient, service: Service
) -> None:
    """The trend counts arrivals on the snapshots' index (migration 0028): the backfill names
    the incident on the snapshot as well as on the dead letter."""
    jobs = [await die(client) for _ in range(3)]
    incident = await incident_of(client, jobs[0])
    await forget_incidents(service)
    assert await service.incidents.backfill() == 3
    response = await client.get(f"{INCIDENTS}/{incident}", params={"trend": "24h"})
    assert response.status_code == 200, response.text
    assert response.json()["incident"]["trend"]["total"] == 3


async def test_the_backfill_never_regresses_a_resolved_incident(
    client: httpx.AsyncClient, service: Service, clock: ManualClock
) -> None:
    old = await die(client)
    await forget_incidents(service, f"job_id = '{old}'")
    clock.advance(1_000)
    incident = await incident_of(client, await die(client))
    assert (await change(client, incident, "resolve", {"fix_reference": "PR 5"})).status_code == 200
    assert await service.incidents.backfill() == 1
    found = (await one(client, incident))["incident"]
    assert (found["state"], found["dead_count"], found["total_count"]) == ("resolved", 2, 2)


async def test_the_sweeper_backfills_until_none_is_left(
    client: httpx.AsyncClient, service: Service
) -> None:
    job = await die(client)
    await forget_incidents(service)
    assert (await service.sweeper.sweep())["backfill"] == 1
    assert "backfill" not in await service.sweeper.sweep()  # next look after the interval
    assert (await incident_of(client, job)).startswith("inc_")


# --- concurrency --------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_concurrent_entries_into_one_incident_lose_no_count_and_make_one_incident(
    service: Service, client: httpx.AsyncClient
) -> None:
    count = 40
    for index in range(count):
        await enqueue(client, "charge.card", [index], queue="crowd",
                      retry=retry_policy(1, "dead_letter"))  # fmt: skip
    claimed = await service.workers.fetch(
        CALLER, fetch_request({"queues": ["crowd"], "count": count})
    )
    error = {"type": "TimeoutError", "message": TIMEOUT}
    await asyncio.gather(
        *(service.workers.nack(CALLER, nack_request({"job_id": job.id, "error": error}))
          for job in claimed)
    )  # fmt: skip
    [incident] = await listed(client)
    assert (incident["dead_count"], incident["total_count"]) == (count, count)
    assert await count_rows(service, "SELECT COUNT(*) FROM incidents") == 1
    opened = COUNT_EVENTS + " WHERE type = 'incident.opened'"
    assert await count_rows(service, opened) == 1

    # Two operators retry half each at once: every dead letter leaves the count once.
    await explain_incidents(client)
    retry = {"filter": {"incident": incident["id"]}, "confirm": True, "limit": count // 2}
    results = await asyncio.gather(
        client.post("/ojs/v1/dead-letter/retry", json=retry),
        client.post("/ojs/v1/dead-letter/retry", json=retry),
    )
    moved = sum(result.json()["succeeded"] for result in results)
    assert moved == count
    assert await counts(client, incident["id"]) == (0, count)


# --- plans --------------------------------------------------------------------------------------

LIST_PARAMETERS = {
    "tenant_id": "_default", "states": None, "type": None, "type_prefix": None, "queue": None,
    "error_type": None, "cursor_value": None, "cursor_id": None, "limit": 50,
}  # fmt: skip


@pytest.mark.parametrize("name", ["select_incidents_recent", "select_incidents_by_count"])
async def test_listing_incidents_reads_the_incidents_table_alone(
    client: httpx.AsyncClient, service: Service, name: str
) -> None:
    """Counts live on the incident row: a list never reads the dead letters, however many."""
    await die(client)
    store = service.runtime.store
    if isinstance(store, SqliteStore):
        sql = store.statements[name]
        plan = await store.call(
            lambda: [str(row[3]) for row in store.connection.execute(
                "EXPLAIN QUERY PLAN " + sql, LIST_PARAMETERS)]
        )  # fmt: skip
        assert any("incidents" in line for line in plan), plan
        assert not any("dead_letters" in line for line in plan), plan
        return
    assert isinstance(store, PostgresStore)
    (statement,) = store.scripts[name]
    connection = await asyncpg.connect(store.url)
    try:
        plan = await connection.fetchval(
            "EXPLAIN (FORMAT JSON) " + statement.sql, *statement.arguments(LIST_PARAMETERS)
        )
    finally:
        await connection.close()
    relations = set()
    pending: list[Any] = [json.loads(plan)]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            if "Relation Name" in node:
                relations.add(node["Relation Name"])
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    assert relations == {"incidents"}
